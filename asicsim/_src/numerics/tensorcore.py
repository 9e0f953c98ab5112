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
That sum also carries the IEEE result of inf/NaN addends (and the sign of an exact zero, without
sticky bits): no second sum where the accumulator has IEEE inf/NaN. Powers of two come from bits.
:func:`asicsim._src.numerics.tc_ref.block_ref` is the scalar model.
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


def _field_exp(x):
    """floor(log2|x|) of normal float64 values, from the exponent field (-1023 for zeros)."""
    return ((_bits(x) & ~_SIGN) >> _U64(52)).astype(jnp.int32) - 1023


def _exp(x):
    """floor(log2|x|) of normal float64 values; ``_NONE`` for zeros."""
    return jnp.where(x == 0.0, _NONE, _field_exp(x))


def _from_field(field):
    """The float64 of uint64 bits ``field << 52``: ``2.0**(field - 1023)`` for a field in 1..2046."""
    return jax.lax.bitcast_convert_type(field << _U64(52), jnp.float64)


def _signed_zero(s, terms: list, mac: MacSpec):
    """The block sum ``s`` with an exact zero made +0 unless every addend is -0. Without sticky
    bits the float64 sum of the truncated addends (signs kept) already is, by IEEE addition."""
    if not mac.tc_sticky:
        return s
    all_neg = functools.reduce(jnp.logical_and, [jnp.signbit(t) for t in terms])
    return jnp.where(s == 0.0, jnp.where(all_neg, -0.0, 0.0), s)


def _finite_sums_stay_finite(mac: MacSpec) -> bool:
    """Whether c plus the block's products, all finite, cannot overflow float64 (so one
    ``isfinite`` of their sum tells whether every addend is finite)."""
    fa, fb = mac.spec("a_fmt"), mac.spec("b_fmt")
    c_max = max(float(mac.spec(name).max) for name in ("acc", "out"))
    return float(fa.max) * float(fb.max) * mac.order_size + c_max < 2.0**1000


def _finite(x):
    """isfinite from the exponent field (Pallas' Triton lowering of ``jnp.isfinite`` breaks
    where 64-bit types are off at lowering time)."""
    return (_bits(x) & ~_SIGN) < _U64(0x7FF << 52)


def _rint(y):
    """Round to nearest even of float64 ``|y| < 2**52``, exact: ``floor`` and exact differences
    (Pallas' Triton lowering has no ``round``); a zero keeps the sign of ``y`` as ``rint``.
    Costs the fp16-result presets ~12 % on XLA:CPU; ``(|y| + 2**52) - 2**52`` (tried) gave other
    bits there (benchmarks/tensorcore_bits.py: 813,360 of 4,116,200 elements differ)."""
    f = jnp.floor(y)
    d = y - f  # exact, in [0, 1)
    odd = f - 2.0 * jnp.floor(f * 0.5) != 0.0
    r = jnp.where((d > 0.5) | ((d == 0.5) & odd), f + 1.0, f)
    return jax.lax.bitcast_convert_type(_bits(r) | ((_bits(y) >> _U64(63)) << _U64(63)), jnp.float64)


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
    tests/numerics/test_tensorcore_model.py compares the two). The powers of two come from the
    exponent field of ``s``: ``2**-tq`` for the quantum exponent ``tq = max(e, emin) - man_bits``,
    ``2**tq`` from ``2046 - `` its field; zeros and float64 subnormals take ``tq = emin -
    man_bits``. ``rtz`` instead clears the bits of ``s`` below the quantum (no rounding
    operation: XLA has no truncation, ``jnp.trunc`` is a floor, a ceil and a select)."""
    mode = parse_rounding(rnd).mode
    sat = acc.saturate if sat is None else sat
    field = (_bits(s) & ~_SIGN) >> _U64(52)  # biased exponent of s (0 for zeros)
    if mode is RoundMode.RTZ:  # clear the bits below the quantum (all of them below 2**(emin - man_bits))
        top = 1075 - acc.man_bits + acc.emin  # bits cleared = top - field, at least 52 - man_bits
        shift = _U64(top) - jnp.minimum(field, _U64(top - 52 + acc.man_bits))
        b, sign = _bits(s), _U64(63)  # bits cleared by shifts: Triton takes no uint64 constant >= 2**63
        kept = jnp.where(field < _U64(top - 52), (b >> sign) << sign, (b >> shift) << shift)
        return jnp.clip(jax.lax.bitcast_convert_type(kept, jnp.float64), -acc.max, acc.max)
    inv_field = jnp.minimum(_U64(2046 + acc.man_bits) - field, _U64(1023 + acc.man_bits - acc.emin))
    y = s * _from_field(inv_field)  # s * 2**-tq: exact; |y| < 2**(man_bits + 1)
    q = _from_field(_U64(2046) - inv_field)  # 2**tq
    r = {RoundMode.RNE: _rint, RoundMode.RTZ: jnp.trunc, RoundMode.RUP: jnp.ceil,
         RoundMode.RDN: jnp.floor}[mode](y) * q  # exact
    if sat or mode is RoundMode.RTZ:  # overflow gives the largest finite value
        return jnp.clip(r, -acc.max, acc.max)
    neg = jnp.signbit(s)
    if mode is RoundMode.RNE:
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
    field = jnp.clip(width + 1023 - emax, 1, 2046).astype(jnp.uint64)
    scale = _from_field(field)  # 2**-(emax - width)
    s = None
    for t in terms:
        x = t * scale
        kept = jnp.trunc(x)
        if mac.tc_sticky:  # half a quantum where bits were lost
            kept = kept + jnp.where(kept != x, jnp.where(x < 0.0, -0.5, 0.5), 0.0)
        s = kept if s is None else s + kept  # exact: multiples of 1/2 below 2**53
    return s * _from_field(_U64(2046) - field)  # times its reciprocal


def block_fma(c, a_blk, b_blk, ea_blk, eb_blk, mac: MacSpec) -> jax.Array:
    """One tensor-core block on (M, N) float64 ``c`` and the block's operand rows ``a_blk`` (k, M),
    ``b_blk`` (k, N) with their alignment exponents ``ea_blk``/``eb_blk`` (operands model); each may
    also be a sequence of k rows (the Pallas kernel's loads, :mod:`.tc_kernel`).
    Written term by term so XLA fuses the block into one loop."""
    acc = mac.spec("acc")
    rnd, sat = mac.acc_rounding, mac.saturate
    products = [a[:, None] * b[None, :] for a, b in zip(a_blk, b_blk, strict=True)]
    if mac.tc_exponent == "operands":
        # a zero operand's _NONE keeps the sum below every real exponent: no test for zero products
        pexps = [ea[:, None] + eb[None, :] for ea, eb in zip(ea_blk, eb_blk, strict=True)]
        cexp = jnp.where(c == 0.0, _NONE, jnp.maximum(_field_exp(c), min(acc.emin, C_EMIN_FP32)))
    else:
        pexps = [_exp(p) for p in products]
        cexp = _exp(c)
    width = acc.man_bits + mac.guard_bits
    terms = [c, *products]
    ieee_special = not (sat or (sat is None and acc.saturate) or not acc.has_inf)
    if mac.tc_late_c is None:
        s = _signed_zero(_truncated_sum(terms, [cexp, *pexps], mac, width), terms, mac)
        d = round_ieee(s, acc, rnd, sat) if fast_rounding(acc, rnd, sat) else round64(s, acc, rnd, sat)
        if ieee_special:  # s is the addends' IEEE sum where one is not finite (scaled and
            # truncated, inf stays inf and NaN NaN), finite where all are: no second sum
            finite = _finite(s)
            return _special_checks(jnp.where(finite, d, s), finite, products, mac, acc)
    elif products:
        s = _signed_zero(_truncated_sum(products, pexps, mac, width), products, mac)
        d = add_round(round64(s, acc, mac.tc_late_c, sat), c, acc, rnd, sat)
    else:
        d = round64(c, acc, rnd, sat)
    special = functools.reduce(jnp.add, terms)  # +-inf or NaN where an addend is not finite
    if _finite_sums_stay_finite(mac):  # then the sum is finite exactly where every addend is
        finite = _finite(special)
    else:
        finite = functools.reduce(jnp.logical_and, [_finite(t) for t in terms])
    if not ieee_special:  # the format's own inf/NaN rule
        special = round64(special, acc, rnd, sat)
    return _special_checks(jnp.where(finite, d, special), finite, products, mac, acc)


def _special_checks(d, finite, products: list, mac: MacSpec, acc):
    """Steps 6 (products over the limit) and the flush of a subnormal result."""
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


def prepare(at, bt, mac: MacSpec, c):
    """(at, bt, ea, eb, c) as the blocks take them: operands flushed where ``tc_flush`` says, their
    alignment exponents (int32), the initial accumulator (+0 where ``c`` is None; flushed where
    ``tc_flush`` says). Elementwise: any leading batch dims. The Pallas kernel shares it."""
    fa, fb = mac.spec("a_fmt"), mac.spec("b_fmt")
    if mac.tc_flush in ("in", "both"):
        at, bt = _flush(at, fa.emin), _flush(bt, fb.emin)
    ea, eb = operand_exponents(at, fa), operand_exponents(bt, fb)
    acc = jnp.zeros((*at.shape[:-2], at.shape[-1], bt.shape[-1]), jnp.float64) if c is None else c
    if mac.tc_flush in ("out", "both"):
        acc = _flush(acc, mac.spec("acc").emin)
    return at, bt, ea, eb, acc


def _unroll(k: int, blocks: int) -> int:
    """Blocks per scan step: 16 products (see ``_TILE``'s note), but at most half the blocks, so
    that the loop keeps two or more trips. XLA removes a loop of one trip, and then fuses the
    elementwise ops that make the operands (the previous GEMM's blocks, the rounding of its
    output) into the slice of every block, once per block and operand: the tiny transformer's
    gradient under tensorcore_fp16 grew to 30 MB of optimised HLO and took 4x the compile time
    (benchmarks/RESULTS.md, issue 37). A loop's operands are computed once, in front of it."""
    return min(max(1, 16 // k), 4, max(1, blocks // 2))


def _accumulate(at, bt, mac: MacSpec, c):
    k = mac.order_size
    at, bt, ea, eb, acc = prepare(at, bt, mac, c)

    full = at.shape[0] // k * k

    def step(acc, blk):
        return block_fma(acc, *blk, mac), None

    if full:  # scan over (K / k, k, ...) views: the blocks in order
        blocks = [x[:full].reshape(full // k, k, x.shape[1]) for x in (at, bt, ea, eb)]
        acc, _ = jax.lax.scan(step, acc, blocks, unroll=_unroll(k, full // k))
    if full < at.shape[0]:  # a last, shorter block
        acc = block_fma(acc, at[full:], bt[full:], ea[full:], eb[full:], mac)
    return acc
