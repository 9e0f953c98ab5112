"""The float32 fast path of the exact MAC orders, taken only where it is provably exact.

The general kernel (``exact64.py``) works in float64. When the operand formats are narrow
(``man_a + man_b + 2 <= 24``, so every product is exact in float32) and the accumulator is
float32 itself or has at most 21 mantissa bits, the same arithmetic can run on float32 —
twice the SIMD lanes, half the memory — *provided no value ever falls below 2**-126* (XLA:CPU
flushes float32 subnormals) *or overflows float32*. Both are decided from the operands' bits:

* every product and every sum is an integer multiple of ``Q = min quantum(a) * min quantum(b)``
  (rounding onto the accumulator grid keeps that true), so ``Q >= 2**-126`` means every nonzero
  value met is a normal float32;
* ``|sum| <= K * max|a| * max|b| < 2**125`` keeps every value finite.

``matmul.py`` checks this at run time (``lax.cond``) and falls back to float64 otherwise, so
results are identical either way. The addition is TwoSum in float32: for a float32 accumulator
``s`` itself is the RNE sum and directed modes step one ulp by the sign of the error; narrower
accumulators round ``s`` to odd and then once onto their grid (24 >= p + 2); onto bf16-like
grids (float32's exponent range) with rne, the error only decides 24-bit ties.

Speed notes (XLA:CPU, 2 cores): the loop body is one fused pass over the accumulator. Plain
float32 RNE adds (an fp32 accumulator) are chained 16 steps per pass, ~4x faster; chaining the
rounding kernels of narrower accumulators made XLA's code several times slower, so they run one
step per pass.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from .grid_rounding import round_to_grid
from .mac import MacSpec
from .rounding import F32, RoundMode, parse_rounding

_U32 = np.uint32


def _sig_bits(fmt) -> int:
    return fmt.man_bits + 1 if fmt.kind == "float" else 24  # integers: conservative


def eligible(mac: MacSpec) -> bool:
    """Whether the float32 path can compute ``mac`` exactly (given the run-time check)."""
    if mac.integer or mac.order_kind in ("fast", "tensorcore"):
        return False
    a, b, acc = mac.spec("a_fmt"), mac.spec("b_fmt"), mac.spec("acc")
    if _sig_bits(a) + _sig_bits(b) > 24:
        return False
    if _is_fp32(acc):
        return mac.acc_rounding in ("rne", "rtz", "rup", "rdn")
    return acc.man_bits <= 21


def _is_fp32(fmt) -> bool:
    return (fmt.exp_bits, fmt.man_bits, fmt.bias, fmt.nan, fmt.signed, fmt.subnormals) == (
        8, 23, 127, "ieee", True, True
    )


def safe(a: jax.Array, b: jax.Array, mac: MacSpec) -> jax.Array:
    """Run-time check, on the bits (subnormal-proof): no value below 2**-126, none overflows."""
    k = a.shape[-1]

    def exps(x):
        mag = jax.lax.bitcast_convert_type(x, jnp.uint32) & _U32(0x7FFFFFFF)
        e = (mag >> _U32(23)).astype(jnp.int32)
        subnormal = jnp.any((e == 0) & (mag != _U32(0)))
        emin = jnp.min(jnp.where(mag == _U32(0), 254, e), initial=254)
        return subnormal, emin, jnp.max(e, initial=0)

    sa, mina, maxa = exps(a)
    sb, minb, maxb = exps(b)
    ma, mb = _sig_bits(mac.spec("a_fmt")) - 1, _sig_bits(mac.spec("b_fmt")) - 1
    low = (mina - 127 - ma) + (minb - 127 - mb) >= -126
    high = (maxa - 126) + (maxb - 126) + math.ceil(math.log2(k + 1)) <= 125
    return ~sa & ~sb & low & high


class F32Arith:
    """Float32 MAC arithmetic (same interface as ``matmul._Float``); exact under ``safe``."""

    def __init__(self, mac: MacSpec):
        self.mac, self.acc, self.prod_spec = mac, mac.spec("acc"), mac.spec("product")
        self.rnd = parse_rounding(mac.acc_rounding)
        self.sat = self.acc.saturate if mac.saturate is None else mac.saturate
        self.fp32 = _is_fp32(self.acc)
        # Plain float32 adds chain well: 16 steps per loop pass measured ~4x faster on XLA:CPU.
        self.chain = 16 if self.fp32 and self.rnd.mode is RoundMode.RNE else 1
        # Values stay in [2**-126, 2**125]: bf16/tf32-like grids need no subnormal/overflow logic.
        self.mask_round = (
            self.acc.smallest_normal <= 2.0**-126
            and self.acc.max >= 2.0**126
            and self.rnd.mode in (RoundMode.RNE, RoundMode.RTZ)
        )

    def zeros(self, shape):
        return jnp.zeros(shape, jnp.float32)

    def start(self, p, on_grid: bool = False):
        """``add(+0, p)`` spelled out: XLA folds ``0 + p`` to ``p``, wrong for p = -0."""
        r = p if self.fp32 or on_grid else self.to_acc(p)  # p: float32, in range (``safe``)
        zero = p if self.rnd.mode is RoundMode.RDN else np.float32(0.0)
        return jnp.where(p == 0.0, zero, r)

    def product(self, a, b):
        p = a * b  # exact: <= 24 significant bits, normal (checked by ``safe``)
        if self.prod_spec is not None:
            p = round32(p, self.prod_spec, self.mac.product_rnd, self.mac.saturate)
        return p

    def add(self, x, y):
        s = x + y  # the RNE sum; zero only when the exact sum is zero (no underflow here)
        mode = self.rnd.mode
        if mode is RoundMode.RDN:  # IEEE: an exact zero sum is -0 toward -inf (+0 otherwise)
            neg = jnp.signbit(x) | jnp.signbit(y)
            s = jnp.where(s == 0.0, jnp.where(neg, np.float32(-0.0), np.float32(0.0)), s)
        if self.fp32 and mode is RoundMode.RNE:
            return s
        bb = s - x
        err = (x - (s - bb)) + (y - bb)  # TwoSum: s + err == x + y exactly
        inexact = jnp.abs(err) > 0.0  # NaN when an addend is inf (acc overflowed): not inexact
        bits = jax.lax.bitcast_convert_type(s, jnp.uint32)
        pos = s > 0.0
        away = (err > 0.0) == pos  # exact sum farther from zero than s (when err != 0)
        if self.fp32:  # a directed mode may need s's neighbour
            if mode is RoundMode.RTZ:
                move, outward = inexact & ~away, False
            elif mode is RoundMode.RUP:
                move, outward = err > 0.0, pos
            else:  # RDN
                move, outward = err < 0.0, ~pos
            bits = jnp.where(move, jnp.where(outward, bits + _U32(1), bits - _U32(1)), bits)
            return jax.lax.bitcast_convert_type(bits, jnp.float32)
        if self.mask_round and mode is RoundMode.RNE:  # err only matters at a 24-bit tie
            d = 23 - self.acc.man_bits
            half, lsb = _U32(1 << (d - 1)), (bits >> _U32(d)) & _U32(1)
            tie = (bits & _U32((1 << d) - 1)) == half
            up = jnp.where(tie & inexact, away.astype(jnp.uint32), lsb)
            bits = (bits + (half - _U32(1)) + up) & ~_U32((1 << d) - 1)
            return jax.lax.bitcast_convert_type(bits, jnp.float32)
        odd = inexact & ((bits & _U32(1)) == _U32(0))  # round to odd at 24 bits
        bits = jnp.where(odd, jnp.where(away, bits + _U32(1), bits - _U32(1)), bits)
        return jax.lax.bitcast_convert_type(self._round_bits(bits), jnp.float32)

    def _round_bits(self, bits):
        if not self.mask_round:
            return round_to_grid(jnp, F32, bits, self.acc, self.rnd, self.sat)
        d = 23 - self.acc.man_bits
        mask = _U32((1 << d) - 1)
        if self.rnd.mode is RoundMode.RNE:
            bits = bits + (mask >> _U32(1)) + ((bits >> _U32(d)) & _U32(1))
        return bits & ~mask

    def to_acc(self, p):
        return round32(p, self.acc, self.mac.acc_rounding, self.mac.saturate)


def round32(x, spec, rnd: str, sat) -> jax.Array:
    """Round float32 values once onto ``spec`` (bits kernel; float32 result)."""
    sat = spec.saturate if sat is None else sat
    bits = jax.lax.bitcast_convert_type(x, jnp.uint32)
    out = round_to_grid(jnp, F32, bits, spec, parse_rounding(rnd), sat)
    return jax.lax.bitcast_convert_type(out, jnp.float32)
