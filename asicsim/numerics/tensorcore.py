"""NVIDIA-style tensor-core block FMA, after Fasi, Higham, Mikaitis & Pranesh (PeerJ CS 2021).

``MacSpec(order="tensorcore:k", guard_bits=g, acc_rounding=...)`` computes a dot product in
blocks of ``k`` products; each block does ``d = c + a_1 b_1 + ... + a_k b_k`` as one multi-operand
addition:

1. products are exact;
2. the k products and the accumulator ``c`` are aligned to the largest exponent among them
   (``e_max``); each addend is truncated (toward zero, sign-magnitude) to a multiple of
   ``2**(e_max - p + 1 - g)``, ``p`` the accumulator's significand bits (24 for fp32): bits
   shifted beyond the significand plus ``g`` guard bits are lost;
3. the truncated addends are summed exactly, with no normalization inside the block; the
   adder's ``carry_bits`` (2 by default) of headroom are recorded for the cost model, and the
   model assumes no carry is ever lost;
4. the block sum is normalized and rounded once into the accumulator format with
   ``acc_rounding`` (``rtz`` on V100/A100: Fasi et al. found round-toward-zero);
5. the result becomes ``c`` for the next block (a last block may be shorter).

Presets (``MacSpec.parse("v100")``): V100 k=4, g=0; A100 k=8, g=1; H100-style k=16, g=3. An
exact-zero block sum is +0 unless every addend is -0.

The fast kernel runs in float64 (see ``exact64.py``): truncation is a mask on the float64 bits,
and the truncated addends are multiples of one quantum below ``2**53`` quanta, so their float64
sum is exact in any order. :func:`asicsim.numerics.mac_ref.tensorcore_block` is the scalar model.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from .exact64 import round64
from .mac import MacSpec

_U64 = np.uint64
_SIGN = _U64(1 << 63)


def block_fma(terms: list, acc_spec, guard_bits: int, rnd: str, sat) -> jax.Array:
    """One tensor-core block: ``terms`` are k+1 same-shape float64 arrays (c first); returns
    the rounded block sum. Written term by term so XLA fuses the block into one loop."""
    bits = [jax.lax.bitcast_convert_type(t, jnp.uint64) for t in terms]
    exps = [((x & ~_SIGN) >> _U64(52)).astype(jnp.int64) for x in bits]  # biased; 0 for zero
    finite = functools.reduce(jnp.logical_and, [e < 0x7FF for e in exps])
    emax = functools.reduce(jnp.maximum, [jnp.where(e < 0x7FF, e, 0) for e in exps])
    top = emax - (acc_spec.man_bits + guard_bits) + 52
    s = None
    for x, e in zip(bits, exps, strict=True):
        d = top - e  # low bits below the quantum 2**(e_max - p + 1 - g)
        mask = (_U64(1) << jnp.clip(d, 0, 63).astype(jnp.uint64)) - _U64(1)
        t = jax.lax.bitcast_convert_type(jnp.where(d >= 53, x & _SIGN, x & ~mask), jnp.float64)
        s = t if s is None else s + t  # exact: multiples of one quantum, below 2**53 quanta
    all_neg = functools.reduce(jnp.logical_and, [jnp.signbit(t) for t in terms])
    s = jnp.where(s == 0.0, jnp.where(all_neg, -0.0, 0.0), s)
    s = jnp.where(finite, s, functools.reduce(jnp.add, terms))  # inf/NaN as IEEE sums do
    return round64(s, acc_spec, rnd, sat)


def tensorcore_accumulate(at: jax.Array, bt: jax.Array, mac: MacSpec) -> jax.Array:
    """(K, M) x (K, N) float64 operands -> (M, N) float64 accumulator values, block by block."""
    k, acc_spec = mac.order_size, mac.spec("acc")
    size, m, n = at.shape[0], at.shape[1], bt.shape[1]

    def block(acc, a_blk, b_blk):
        products = [a_blk[j][:, None] * b_blk[j][None, :] for j in range(a_blk.shape[0])]
        return block_fma([acc, *products], acc_spec, mac.guard_bits, mac.acc_rounding, mac.saturate)

    def body(i, acc):
        a_blk = jax.lax.dynamic_slice_in_dim(at, i * k, k)
        b_blk = jax.lax.dynamic_slice_in_dim(bt, i * k, k)
        return block(acc, a_blk, b_blk)

    acc = jnp.zeros((m, n), jnp.float64)
    full = size // k
    if full:
        acc = jax.lax.fori_loop(0, full, body, acc)
    if size % k:
        acc = block(acc, at[full * k :], bt[full * k :])
    return acc
