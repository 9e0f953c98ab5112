"""Correctly rounded arithmetic in any float format: ``add, sub, mul, div, sqrt, fma``.

Each op takes its operands *as given* (float values: normally values of ``fmt``, but any value
that float32 holds exactly is allowed), computes the exact real result and rounds it **once**
onto ``fmt`` in the requested mode, with the format's NaN/inf/overflow/saturation conventions
exactly as :func:`asicsim.quantize` applies them. That is what an IEEE-754 unit of that format
(or an ASIC datapath that is correctly rounded) produces.

How, on the host in numpy float64 (immune to XLA:CPU flushing float32 subnormals):

* operands have at most 24 significant bits and float32's range, so ``a * b`` is exact in
  float64, and every exact result lies between 2**-298 and 2**277 (never float64 overflow or
  subnormal);
* ``a + b`` and ``a * b + c`` are rounded to float64 and their error recovered exactly (TwoSum);
  ``a / b`` and ``sqrt(a)`` are computed on integer significands (quotient/root plus a remainder);
* the float64 value is then made *round-to-odd* (if inexact, the odd one of the two float64
  neighbours of the exact result). Round-to-odd to 53 bits followed by one rounding to at most
  24 bits is the correctly rounded result for every mode (Boldo & Melquiond, 2008), so the last
  step is the ordinary float64 path of ``quantize``.

Stochastic rounding (``sr``) draws from the 53-bit round-to-odd value: the probability of
rounding up is exact for that value, within ``2**-(52 - man_bits)`` of one ulp of the exact one.

IEEE special cases: ``inf - inf``, ``0 * inf``, ``0/0``, ``inf/inf``, ``sqrt(x < 0)`` and
``fma(0, inf, c)`` are NaN (every NaN result is the format's quiet NaN, positive but in fnuz
formats, whatever the operands' NaN signs: the same bits on every host); ``x/0`` is ±inf; ``sqrt(-0) = -0``; an exact zero sum is +0 except
in ``rdn`` where it is -0 (IEEE 754 §6.3), and ``-0 + -0 = -0`` in every mode. The format then
maps inf and out-of-range results as quantize does (NaN for ``fn`` formats, ``max`` when
saturating). The ops run on the host (numpy), so they cannot be traced under ``jax.jit``.

``scalar_op`` is the same specification written plainly: the exact result with
``fractions.Fraction`` (:mod:`asicsim._src.numerics.exact_ops`), rounded once by
:func:`asicsim._src.numerics.scalar.round_float`; the tests hold the vectorised ops to it.
"""

from __future__ import annotations

import jax
import numpy as np

from ..._jax_compat import is_floating
from .catalog import get_format
from .exact_ops import EXACT
from .formats import FloatFormat
from .quantize import quantize
from .rounding import Rounding, RoundMode, parse_rounding
from .scalar import round_float

__all__ = ["add", "div", "fma", "mul", "scalar_op", "sqrt", "sub"]

_F32_SIG = 24  # significant bits of a float32 operand
_DIV_EXTRA = 39  # quotient bits beyond the operands: Q in (2**38, 2**40), far more than 26
_SQRT_SHIFT = 36  # radicand scaled to < 2**61: root in [2**29.5, 2**30.5), fits int64 squared


# --- argument checking ------------------------------------------------------------------------


def _float_spec(fmt, op: str) -> FloatFormat:
    spec = get_format(fmt)  # unknown names raise FormatError (a ValueError) with suggestions
    if spec.kind != "float":
        raise ValueError(
            f"{op}: format {spec.name!r} is a{'n integer' if spec.kind == 'int' else ' block'} "
            "format; arithmetic ops round onto float formats only (fp32, tf32, fp16, bf16, "
            "float8/6/4 types, any e{E}m{M}[fn|fnuz|fnu]); for integer or block results, "
            "compute in a float format and quantize the result"
        )
    return spec


def _operand(x, op: str, name: str) -> np.ndarray:
    """float64 copy of one operand, checked to hold only values that float32 holds exactly."""
    if isinstance(x, jax.core.Tracer):
        raise TypeError(
            f"{op}: operand {name} is a traced JAX value; asicsim ops compute on the host "
            "(numpy float64, exactly), so call them outside jax.jit/vmap/grad"
        )
    if isinstance(x, bool) or (isinstance(x, np.ndarray | jax.Array) and x.dtype == bool):
        raise TypeError(f"{op}: operand {name} is boolean; pass float values")
    if isinstance(x, int):
        if abs(x) > 2**128 or float(x) != x:
            raise ValueError(f"{op}: operand {name}={x} is not exactly a float32 value")
        x = float(x)
    arr = np.asarray(x)
    if not is_floating(arr.dtype):
        raise TypeError(
            f"{op}: operand {name} has dtype {arr.dtype}; pass float values (convert integers "
            "explicitly, e.g. x.astype(np.float32), so nothing is rounded behind your back)"
        )
    with np.errstate(all="ignore"):
        x64 = arr.astype(np.float64)  # exact for every float type up to 64 bits
        if arr.dtype.itemsize > 4:
            back = x64.astype(np.float32).astype(np.float64)
            bad = (back != x64) & ~np.isnan(x64)
            if np.any(bad):
                example = x64[bad].flat[0]
                raise ValueError(
                    f"{op}: operand {name} holds values that float32 cannot hold exactly "
                    f"(e.g. {example!r}); the ops compute with format values (at most 24 "
                    "significant bits, float32 range): round the inputs first, e.g. "
                    "asicsim.quantize(x, fmt)"
                )
    return x64


def _prepare(op: str, fmt, rounding, operands: dict):
    spec = _float_spec(fmt, op)
    rnd = parse_rounding(rounding)
    arrays = np.broadcast_arrays(*(_operand(v, op, k) for k, v in operands.items()))
    return spec, rnd, [np.array(a) for a in arrays]  # writable, contiguous copies


# --- exact float64 building blocks ----------------------------------------------------------


def _two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """s = fl(a + b) and err with s + err == a + b exactly (Knuth; float64, no overflow here)."""
    s = a + b
    bb = s - a
    err = (a - (s - bb)) + (b - bb)
    return s, np.where(np.isfinite(s), err, 0.0)  # inf/NaN results carry no error term


def _round_to_odd(s: np.ndarray, err: np.ndarray) -> np.ndarray:
    """The round-to-odd float64 of the exact value ``s + err`` (``s`` its nearest float64)."""
    bits = s.view(np.uint64)
    fix = (err != 0) & ((bits & np.uint64(1)) == 0)
    # The exact value lies beyond s (away from zero) when err has s's sign: step the magnitude.
    away = (err > 0) == (s > 0)
    step = np.where(away, bits + np.uint64(1), bits - np.uint64(1))
    return np.where(fix, step, bits).view(np.float64)


def _significand(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """|x| = m * 2**e with integer m in [2**23, 2**24) (x finite, nonzero, float32-exact)."""
    f, e = np.frexp(np.abs(x))
    return np.ldexp(f, _F32_SIG).astype(np.int64), e.astype(np.int64) - _F32_SIG


def _exact_zero_sign(s, x, y, rnd: Rounding):
    """IEEE 754 §6.3: an exact zero sum is -0 in rdn unless both terms are +0."""
    if rnd.mode is not RoundMode.RDN:
        return s  # numpy (round to nearest) already gives +0, and -0 for (-0) + (-0)
    both_pos_zero = (x == 0) & ~np.signbit(x) & (y == 0) & ~np.signbit(y)
    return np.where((s == 0) & ~both_pos_zero, -0.0, s)


# --- the ops ------------------------------------------------------------------------------------


def add(a, b, fmt, rounding="rne", *, key=None, saturate=None) -> jax.Array:
    """``a + b`` rounded once onto ``fmt``.

    Args:
      a, b: float arrays (numpy, JAX or Python numbers; broadcast together) whose values float32
        holds exactly, normally values of ``fmt``. They are used as given, not rounded first.
      fmt: a float format (name, alias, grammar name or spec).
      rounding: ``rne`` (default), ``rna``, ``rtz``, ``rup``, ``rdn``, ``sr`` or ``sr{N}``.
      key: ``jax.random`` key, required by stochastic rounding.
      saturate: clamp overflow to ``max``; ``None`` uses the format's convention.

    Returns:
      float32 JAX array of the broadcast shape, values of ``fmt`` (as ``quantize`` returns).
    """
    spec, rnd, (x, y) = _prepare("add", fmt, rounding, {"a": a, "b": b})
    return _add(x, y, spec, rnd, key, saturate)


def sub(a, b, fmt, rounding="rne", *, key=None, saturate=None) -> jax.Array:
    """``a - b`` rounded once onto ``fmt`` (``a + (-b)``; arguments as :func:`add`)."""
    spec, rnd, (x, y) = _prepare("sub", fmt, rounding, {"a": a, "b": b})
    return _add(x, -y, spec, rnd, key, saturate)


def _add(x, y, spec, rnd, key, saturate):
    with np.errstate(all="ignore"):  # inf - inf is NaN on purpose
        s, err = _two_sum(x, y)
        s = _exact_zero_sign(s, x, y, rnd)
        return _finish(_round_to_odd(s, err), spec, rnd, key, saturate)


def mul(a, b, fmt, rounding="rne", *, key=None, saturate=None) -> jax.Array:
    """``a * b`` rounded once onto ``fmt`` (arguments as :func:`add`)."""
    spec, rnd, (x, y) = _prepare("mul", fmt, rounding, {"a": a, "b": b})
    with np.errstate(all="ignore"):  # 0 * inf is NaN on purpose
        return _finish(x * y, spec, rnd, key, saturate)  # 24 x 24 bits: exact in float64


def fma(a, b, c, fmt, rounding="rne", *, key=None, saturate=None) -> jax.Array:
    """``a * b + c`` with a single rounding onto ``fmt`` (arguments as :func:`add`)."""
    spec, rnd, (x, y, z) = _prepare("fma", fmt, rounding, {"a": a, "b": b, "c": c})
    with np.errstate(all="ignore"):
        p = x * y  # exact; a zero product keeps IEEE's sign (xor of the signs)
        s, err = _two_sum(p, z)  # p is a float64, so TwoSum recovers ab + c exactly
        s = _exact_zero_sign(s, p, z, rnd)
        return _finish(_round_to_odd(s, err), spec, rnd, key, saturate)


def div(a, b, fmt, rounding="rne", *, key=None, saturate=None) -> jax.Array:
    """``a / b`` rounded once onto ``fmt`` (arguments as :func:`add`); ``x/0`` is ±inf."""
    spec, rnd, (x, y) = _prepare("div", fmt, rounding, {"a": a, "b": b})
    with np.errstate(all="ignore"):
        special = x / y  # NaN, inf and zero results, signs included, are exact here
        regular = np.isfinite(x) & np.isfinite(y) & (x != 0) & (y != 0)
        ma, ea = _significand(np.where(regular, x, 1.0))
        mb, eb = _significand(np.where(regular, y, 1.0))
        # Integer quotient of the significands plus a sticky bit: round-to-odd at >= 39 bits.
        num = ma << _DIV_EXTRA
        q = num // mb
        q |= (num - q * mb != 0).astype(np.int64)
        mag = np.ldexp(q.astype(np.float64), ea - eb - _DIV_EXTRA)  # q < 2**40: exact
        value = np.where(regular, np.copysign(mag, special), special)
        return _finish(value, spec, rnd, key, saturate)


def sqrt(a, fmt, rounding="rne", *, key=None, saturate=None) -> jax.Array:
    """``sqrt(a)`` rounded once onto ``fmt`` (arguments as :func:`add`); ``sqrt(-0) = -0``."""
    spec, rnd, (x,) = _prepare("sqrt", fmt, rounding, {"a": a})
    with np.errstate(all="ignore"):
        special = np.sqrt(x)  # NaN for x < 0, ±0, +inf
        regular = np.isfinite(x) & (x > 0)
        m, e = _significand(np.where(regular, x, 1.0))
        odd = e & 1  # make the exponent even so it halves exactly
        m, e = m << odd, e - odd
        big = m << _SQRT_SHIFT  # < 2**61, and exact as a float64 (at most 25 significant bits)
        r = np.floor(np.sqrt(big.astype(np.float64))).astype(np.int64)
        # Guards (they keep the root exact by construction; for these radicands the correctly
        # rounded float64 root is never within a rounding error of a wrong integer).
        r -= (r * r > big).astype(np.int64)
        r += ((r + 1) * (r + 1) <= big).astype(np.int64)
        r |= (r * r != big).astype(np.int64)  # sticky: round-to-odd at >= 30 bits
        mag = np.ldexp(r.astype(np.float64), (e - _SQRT_SHIFT) // 2)
        return _finish(np.where(regular, mag, special), spec, rnd, key, saturate)


def _finish(value: np.ndarray, spec: FloatFormat, rnd: Rounding, key, saturate) -> jax.Array:
    """One rounding of the (round-to-odd) float64 values onto the format, as quantize does.

    A NaN result is made the positive quiet NaN first (the format then gives it its own sign:
    negative in fnuz formats): the sign of a NaN that x86 makes for ``inf - inf`` is negative,
    ARM's positive, and IEEE 754 leaves it unspecified, so it would otherwise depend on the host.
    """
    value = np.where(np.isnan(value), np.nan, np.asarray(value, np.float64))
    return quantize(value, spec, rnd, key=key, saturate=saturate)


# --- the plain reference ---------------------------------------------------------------------

_OPS = {"add": 2, "sub": 2, "mul": 2, "div": 2, "sqrt": 1, "fma": 3}


def scalar_op(op: str, *operands, fmt, rounding="rne", saturate=None, u=None) -> float:
    """One op on Python numbers, specified plainly: exact rational result, then ``round_float``.

    ``u`` is the uniform draw in [0, 1) for stochastic rounding. Returns a Python float.
    """
    if op not in _OPS:
        raise ValueError(f"unknown op {op!r}; allowed: {', '.join(_OPS)}")
    if len(operands) != _OPS[op]:
        raise ValueError(f"{op} takes {_OPS[op]} operands, got {len(operands)}")
    spec = _float_spec(fmt, op)
    rnd = parse_rounding(rounding)
    xs = [float(v) for v in operands]
    if op == "sub":
        op, xs = "add", [xs[0], -xs[1]]
    exact = EXACT[op](*xs, rdn=rnd.mode is RoundMode.RDN)
    return round_float(exact, spec, rnd, saturate=saturate, u=u)
