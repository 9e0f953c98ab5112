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
ones. The fast kernel runs in float64 (see ``exact64.py``): each addend is scaled by a power of two so
that the quantum is 1, truncated to an integer and summed: integers (halves with sticky bits)
below ``2**53`` (``W <= 43``), so the float64 sum is exact in any order; scaling back is exact.
:func:`asicsim.numerics.tc_ref.block_ref` is the scalar model.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from .exact64 import add_round, round64
from .mac import MacSpec
from .rounding import RoundMode, parse_rounding

_U64 = np.uint64
_SIGN = _U64(1 << 63)
_NONE = -100_000  # the alignment exponent of a zero addend (below every real one)
C_EMIN_FP32 = -126
_TILE = 1 << 16  # output elements per tile (see tensorcore_accumulate)
# Blocks per scan step: XLA:CPU ran 16 products per step 3-5x faster than 4 or 8 (k = 4, 8 at
# 256^3: 103 -> 22 ms, 61 -> 25 ms), and 32 or more (unrolled) slower again (benchmarks/RESULTS.md).


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


def fast_rounding(acc, rnd: str, sat) -> bool:
    """Whether :func:`round_ieee` applies: an IEEE-style format (signed, subnormals, inf) and a
    deterministic rounding other than round-half-away."""
    mode = parse_rounding(rnd).mode
    return (acc.kind == "float" and acc.signed and acc.subnormals and acc.has_inf and acc.nan == "ieee"
            and mode in (RoundMode.RNE, RoundMode.RTZ, RoundMode.RUP, RoundMode.RDN))


def round_ieee(s, acc, rnd: str, sat):
    """``round64(s, acc, rnd, sat)`` for finite float64 ``s`` where :func:`fast_rounding` holds:
    ``s`` scaled by a power of two onto its quantum (exact), rounded to an integer, scaled back
    (``round64`` handles every format and mode at several times the cost;
    tests/numerics/test_tensorcore_model.py compares the two)."""
    mode = parse_rounding(rnd).mode
    sat = acc.saturate if sat is None else sat
    tq = jnp.maximum(_exp(s), acc.emin) - acc.man_bits  # the result's quantum exponent
    y = s * _pow2(-tq)  # exact; |y| < 2**(man_bits + 1), or tiny
    r = {RoundMode.RNE: jnp.rint, RoundMode.RTZ: jnp.trunc, RoundMode.RUP: jnp.ceil,
         RoundMode.RDN: jnp.floor}[mode](y) * _pow2(tq)  # exact
    neg = jnp.signbit(s)
    if sat or mode is RoundMode.RTZ:
        big = acc.max
    elif mode is RoundMode.RNE:
        big = jnp.inf
    else:  # directed: overflow away from zero is inf, toward zero the largest finite
        big = jnp.where(neg == (mode is RoundMode.RDN), jnp.inf, acc.max)
    return jnp.where(jnp.abs(r) > acc.max, jnp.where(neg, -big, big), r)


def _truncated_sum(terms: list, exps: list, mac: MacSpec, width: int):
    """The exact sum of the addends, each truncated onto ``2**(e_max - width)`` (step 3): scaled
    by ``2**-(e_max - width)`` (exact: a power of two, no result near the float64 subnormals),
    truncated to integers below ``2**(width + 2)``, summed exactly and scaled back."""
    emax = functools.reduce(jnp.maximum, exps)
    if mac.tc_min_exp is not None:
        emax = jnp.maximum(emax, mac.tc_min_exp)
    qe = emax - width  # quantum exponent
    scale = _pow2(-qe)
    s = None
    for t in terms:
        x = t * scale
        kept = jnp.trunc(x)
        if mac.tc_sticky:  # half a quantum where bits were lost
            kept = kept + jnp.where(kept != x, jnp.where(x < 0.0, -0.5, 0.5), 0.0)
        s = kept if s is None else s + kept  # exact: multiples of 1/2 below 2**53
    return s * _pow2(qe)


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
        d = round_ieee(s, acc, rnd, sat) if fast_rounding(acc, rnd, sat) else round64(s, acc, rnd, sat)
    elif products:
        s = _truncated_sum(products, pexps, mac, width)
        p_neg = functools.reduce(jnp.logical_and, [jnp.signbit(p) for p in products])
        s = jnp.where(s == 0.0, jnp.where(p_neg, -0.0, 0.0), s)
        d = add_round(round64(s, acc, mac.tc_late_c, sat), c, acc, rnd, sat)
    else:
        d = round64(c, acc, rnd, sat)
    finite = functools.reduce(jnp.logical_and, [jnp.isfinite(t) for t in terms])
    special = functools.reduce(jnp.add, terms)  # +-inf or NaN where an addend is not finite
    if sat or (sat is None and acc.saturate) or not acc.has_inf:  # the format's own inf/NaN rule
        special = round64(special, acc, rnd, sat)
    d = jnp.where(finite, d, special)
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
    starting from ``c`` ((M, N) float64 on the accumulator's input format; +0 if None).

    Large outputs run in column tiles of about ``_TILE`` elements, one after another, so that a
    block's (M, N) temporaries stay in cache."""
    m, n = at.shape[1], bt.shape[1]
    nb = max(1, min(n, _TILE // max(1, m)))
    if nb >= n:
        return _accumulate(at, bt, mac, c)
    tiles = -(-n // nb)
    pad = lambda x: jnp.pad(x, ((0, 0), (0, tiles * nb - n)))  # noqa: E731
    bp = pad(bt).reshape(bt.shape[0], tiles, nb).transpose(1, 0, 2)
    if c is None:
        out = jax.lax.map(lambda b: _accumulate(at, b, mac, None), bp)
    else:
        cp = pad(c).reshape(m, tiles, nb).transpose(1, 0, 2)
        out = jax.lax.map(lambda bc: _accumulate(at, bc[0], mac, bc[1]), (bp, cp))
    return out.transpose(1, 0, 2).reshape(m, tiles * nb)[:, :n]


def _accumulate(at, bt, mac: MacSpec, c):
    k, fa, fb = mac.order_size, mac.spec("a_fmt"), mac.spec("b_fmt")
    m, n = at.shape[1], bt.shape[1]
    if mac.tc_flush in ("in", "both"):
        at, bt = _flush(at, fa.emin), _flush(bt, fb.emin)
    ea, eb = operand_exponents(at, fa), operand_exponents(bt, fb)
    acc = jnp.zeros((m, n), jnp.float64) if c is None else c
    if mac.tc_flush in ("out", "both"):
        acc = _flush(acc, mac.spec("acc").emin)

    full = at.shape[0] // k * k

    def step(acc, blk):
        return block_fma(acc, *blk, mac), None

    if full:  # scan over (K / k, k, ...) views: the blocks in order
        blocks = [x[:full].reshape(full // k, k, x.shape[1]) for x in (at, bt, ea, eb)]
        acc, _ = jax.lax.scan(step, acc, blocks, unroll=max(1, min(4, 16 // k)))
    if full < at.shape[0]:  # a last, shorter block
        acc = block_fma(acc, at[full:], bt[full:], ea[full:], eb[full:], mac)
    return acc
