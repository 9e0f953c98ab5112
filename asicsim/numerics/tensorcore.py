"""NVIDIA-style tensor-core block FMA (Fasi, Higham, Mikaitis & Pranesh, PeerJ CS 2021; Khattak &
Mikaitis, "Accurate models of NVIDIA tensor cores", 2025).

``MacSpec(order="tensorcore:k", ...)`` computes a dot product in blocks of ``k`` products; each
block does ``d = c + a_1 b_1 + ... + a_k b_k`` as one multi-operand addition:

1. products are exact; with ``tc_flush`` in ``in``/``both`` subnormal operands are zero first,
   with ``out``/``both`` a subnormal ``c`` is zero;
2. every nonzero addend has an alignment exponent: ``tc_exponent="product"`` (Fasi et al.) takes
   the exact value's ``floor(log2|t|)``; ``"operands"`` (Khattak & Mikaitis, ``denorm_prd = 1``)
   takes ``e_a + e_b`` for a product, each at least its format's ``emin`` (the product's
   significand then lies in [0, 4)), and for ``c`` its exponent read as an fp32 value (a subnormal
   ``c`` counts as ``2**-126``). ``e_max`` is the largest, raised to ``tc_min_exp`` if given;
3. each addend's magnitude is truncated to a multiple of ``2**(e_max - W)``, ``W = acc man_bits +
   guard_bits`` fraction bits (``guard_bits`` may be negative: Ada and Hopper fp8 keep 13);
   ``tc_sticky`` adds half a quantum to an addend that lost nonzero bits;
4. the truncated addends are summed exactly (no normalisation inside the block; ``carry_bits``
   are recorded for the cost model, no carry is ever lost) and the sum is rounded once onto the
   accumulator format with ``acc_rounding`` (``rtz`` on NVIDIA parts with an fp32 result);
   with ``tc_flush`` in ``out``/``both`` a subnormal result is zero;
5. ``tc_late_c`` (a rounding mode) leaves ``c`` out of steps 2-4: the products' sum is rounded
   onto the accumulator with that mode, then ``c`` is added with one ``acc_rounding`` rounding;
6. ``tc_product_limit``: a product of magnitude ``>= 2**(acc emax + 1)`` makes the block +-inf
   (NaN when both signs overflow), as ``prd_limit`` in the published model;
7. the result becomes ``c`` for the next block (a last block may be shorter).

An exact-zero block sum is +0 unless every addend is -0. Any inf/NaN addend gives the IEEE sum.
Presets per GPU and format: :mod:`.tc_presets`; ``MacSpec.parse("v100")`` etc. are the fp16
ones. The fast kernel runs in float64 (see ``exact64.py``): truncation is a mask on the float64
bits, and the addends are multiples of one quantum (half a quantum with sticky bits) below
``2**53`` of them (``W <= 43``), so their float64 sum is exact in any order.
:func:`asicsim.numerics.tc_ref.block_ref` is the scalar model.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from .exact64 import add_round, round64
from .mac import MacSpec

_U64 = np.uint64
_SIGN = _U64(1 << 63)
_NONE = -100_000  # the alignment exponent of a zero addend (below every real one)
C_EMIN_FP32 = -126


def _bits(x):
    return jax.lax.bitcast_convert_type(x, jnp.uint64)


def _exp(x):
    """floor(log2|x|) of normal float64 values; ``_NONE`` for zeros."""
    e = ((_bits(x) & ~_SIGN) >> _U64(52)).astype(jnp.int32)
    return jnp.where(x == 0.0, _NONE, e - 1023)


def _pow2(e):
    """2.0**e for int32 e in the normal float64 range, built from bits (exact)."""
    return jax.lax.bitcast_convert_type((jnp.clip(e, -1022, 1023) + 1023).astype(jnp.uint64) << _U64(52),
                                        jnp.float64)


def _flush(x, emin: int):
    return jnp.where(jnp.abs(x) < 2.0**emin, jnp.where(jnp.signbit(x), -0.0, 0.0), x)


def _truncated_sum(terms: list, exps: list, mac: MacSpec, width: int):
    """The exact sum of the addends, each truncated onto ``2**(e_max - width)`` (step 3)."""
    emax = functools.reduce(jnp.maximum, exps)
    if mac.tc_min_exp is not None:
        emax = jnp.maximum(emax, mac.tc_min_exp)
    qe = emax - width  # quantum exponent
    half = jnp.where(emax > _NONE // 2, _pow2(qe - 1), 0.0)
    s = None
    for t in terms:
        x = _bits(t)
        texp = ((x & ~_SIGN) >> _U64(52)).astype(jnp.int32)  # biased; 0 for zero
        d = qe + 1075 - texp  # low significand bits below the quantum
        mask = (_U64(1) << jnp.clip(d, 0, 63).astype(jnp.uint64)) - _U64(1)
        kept = jax.lax.bitcast_convert_type(jnp.where(d >= 53, x & _SIGN, x & ~mask), jnp.float64)
        if mac.tc_sticky:
            lost = jnp.where(d >= 53, t != 0.0, (d > 0) & ((x & mask) != _U64(0)))
            kept = kept + jnp.where(lost, jnp.where(t < 0.0, -half, half), 0.0)
        s = kept if s is None else s + kept  # exact: multiples of half a quantum below 2**53 of them
    return s


def block_fma(c, a_blk, b_blk, ea_blk, eb_blk, mac: MacSpec) -> jax.Array:
    """One tensor-core block on (M, N) float64 ``c`` and the block's operand rows ``a_blk`` (k, M),
    ``b_blk`` (k, N) with their alignment exponents ``ea_blk``/``eb_blk`` (operands model).
    Written term by term so XLA fuses the block into one loop."""
    acc = mac.spec("acc")
    rnd, sat = mac.acc_rounding, mac.saturate
    products = [a_blk[j][:, None] * b_blk[j][None, :] for j in range(a_blk.shape[0])]
    if mac.tc_exponent == "operands":
        pexps = [jnp.where(p == 0.0, _NONE, ea_blk[j][:, None] + eb_blk[j][None, :])
                 for j, p in enumerate(products)]
        cexp = jnp.where(c == 0.0, _NONE, jnp.maximum(_exp(c), min(acc.emin, C_EMIN_FP32)))
    else:
        pexps = [_exp(p) for p in products]
        cexp = _exp(c)
    width = acc.man_bits + mac.guard_bits
    terms = [c, *products]
    all_neg = functools.reduce(jnp.logical_and, [jnp.signbit(t) for t in terms])
    if mac.tc_late_c is None:
        s = _truncated_sum(terms, [cexp, *pexps], mac, width)
        s = jnp.where(s == 0.0, jnp.where(all_neg, -0.0, 0.0), s)
        d = round64(s, acc, rnd, sat)
    elif products:
        s = _truncated_sum(products, pexps, mac, width)
        p_neg = functools.reduce(jnp.logical_and, [jnp.signbit(p) for p in products])
        s = jnp.where(s == 0.0, jnp.where(p_neg, -0.0, 0.0), s)
        d = add_round(round64(s, acc, mac.tc_late_c, sat), c, acc, rnd, sat)
    else:
        d = round64(c, acc, rnd, sat)
    finite = functools.reduce(jnp.logical_and, [jnp.isfinite(t) for t in terms])
    d = jnp.where(finite, d, round64(functools.reduce(jnp.add, terms), acc, rnd, sat))  # IEEE specials
    if mac.tc_product_limit and products:
        limit = 2.0 ** (acc.emax + 1)
        pos = functools.reduce(jnp.logical_or, [p >= limit for p in products])
        neg = functools.reduce(jnp.logical_or, [p <= -limit for p in products])
        over = jnp.where(pos & neg, jnp.nan, jnp.where(pos, jnp.inf, -jnp.inf))
        d = jnp.where(finite & (pos | neg), over, d)
    if mac.tc_flush in ("out", "both"):
        d = _flush(d, acc.emin)
    return d


def operand_exponents(x, fmt):
    """max(floor(log2|x|), fmt.emin) per element; ``_NONE`` for zeros (the operands model)."""
    return jnp.where(x == 0.0, _NONE, jnp.maximum(_exp(x), fmt.emin))


def tensorcore_accumulate(at: jax.Array, bt: jax.Array, mac: MacSpec, c=None) -> jax.Array:
    """(K, M) x (K, N) float64 operands -> (M, N) float64 accumulator values, block by block,
    starting from ``c`` ((M, N) float64 on the accumulator's input format; +0 if None)."""
    k, fa, fb = mac.order_size, mac.spec("a_fmt"), mac.spec("b_fmt")
    m, n = at.shape[1], bt.shape[1]
    if mac.tc_flush in ("in", "both"):
        at, bt = _flush(at, fa.emin), _flush(bt, fb.emin)
    ea, eb = operand_exponents(at, fa), operand_exponents(bt, fb)
    acc = jnp.zeros((m, n), jnp.float64) if c is None else c
    if mac.tc_flush in ("out", "both"):
        acc = _flush(acc, mac.spec("acc").emin)

    def body(i, acc):
        sl = lambda x: jax.lax.dynamic_slice_in_dim(x, i * k, k)  # noqa: E731
        return block_fma(acc, sl(at), sl(bt), sl(ea), sl(eb), mac)

    full = at.shape[0] // k
    if full:
        acc = jax.lax.fori_loop(0, full, body, acc)
    if at.shape[0] % k:
        t = slice(full * k, None)
        acc = block_fma(acc, at[t], bt[t], ea[t], eb[t], mac)
    return acc
