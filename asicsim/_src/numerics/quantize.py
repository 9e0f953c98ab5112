"""``quantize``: round any float array onto a format, exactly as hardware would.

float32 (and float16/bfloat16/float8 upcast bit-exactly) goes through a fused JAX kernel on the
uint32 view; float64 goes through the same kernel in numpy on the uint64 view, so a float64 input
is rounded once, never float64 -> float32 -> format. The result is always a float32 JAX array of
values the format represents (scaled formats: element value times its power-of-two scale).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from ..._jax_compat import is_floating
from . import random as _random
from .catalog import get_format
from .fast_rounding32 import fast_round_any32
from .formats import Format
from .grid_rounding import decode_float_bits, round_to_grid
from .inputs import check_flag, real_input
from .rounding import (
    F32,
    F64,
    Rounding,
    RoundMode,
    f64_bits_to_f32_odd,
    f64_to_f32,
    parse_rounding,
)
from .scaling import Scaling, resolve_scaling, scaled_quantize

# --- input handling ----------------------------------------------------------------------------


def _to_f32_bits(x) -> jax.Array:
    """uint32 bits of a JAX/numpy float array of at most 32 bits, without any float arithmetic."""
    dtype = np.dtype(x.dtype)
    if dtype == np.float32:
        return jax.lax.bitcast_convert_type(jnp.asarray(x), jnp.uint32)
    if dtype == jnp.bfloat16:
        b = jax.lax.bitcast_convert_type(jnp.asarray(x), jnp.uint16).astype(jnp.uint32)
        return b << np.uint32(16)
    spec = get_format(dtype.name)  # float16 and every ml_dtypes float8/6/4 type is in the catalog
    if not isinstance(x, jax.Array):  # numpy: view the codes on the host (XLA has no float6, and
        raw = jnp.asarray(np.asarray(x).view(np.dtype(f"uint{8 * dtype.itemsize}")))  # packs float4)
    elif spec.bits < 8:  # a JAX float4 array: its values are all normal float32 numbers
        return jax.lax.bitcast_convert_type(x.astype(jnp.float32), jnp.uint32)
    else:
        raw = jax.lax.bitcast_convert_type(x, _uint_of(dtype.itemsize))
    return decode_float_bits(jnp, F32, raw.astype(jnp.uint32), spec)


def _uint_of(itemsize: int):
    return {1: jnp.uint8, 2: jnp.uint16, 4: jnp.uint32}[itemsize]


def _is_float64(x) -> bool:
    return np.dtype(getattr(x, "dtype", np.float64)) == np.float64


# --- the public function ------------------------------------------------------------------------


def quantize(
    x,
    fmt: str | Format,
    rounding: str | RoundMode | Rounding = "rne",
    *,
    key=None,
    saturate: bool | None = None,
    axis: int | None = None,
    block_size: int | None = None,
    scaling: Scaling | str | None = None,
    words=None,
) -> jax.Array:
    """Round ``x`` onto ``fmt`` and return float32 values the format represents.

    Args:
      x: float array (numpy or JAX; float64, float32, float16, bfloat16 or an ml_dtypes float;
        either byte order), list or Python number. float64 is rounded directly, never through
        float32. Anything else (strings, None, booleans, complex) is a TypeError.
      fmt: a format name, alias, grammar name (``e4m3fn``, ``q7.8``), TOML path or spec.
      rounding: ``rne`` (default), ``rna``, ``rtz``, ``rup``, ``rdn``, ``sr`` or ``sr{N}``.
      key: a ``jax.random`` key; required by stochastic rounding (same key, same bits).
      saturate: ``True`` clamps overflow to the largest finite value, ``False`` does not
        (any other value is a TypeError). ``None`` uses the format's own
        convention (inf for IEEE-like, NaN for fn/fnuz, saturation for formats with neither,
        integers and MX elements, as OCP MX requires).
      axis, block_size, scaling: scale the tensor before rounding (see ``Scaling``): ``axis``
        alone is per-channel, ``axis`` + ``block_size`` per-block. Block formats (MX, BFP)
        bring their own block scaling.
      words: instead of ``key``, the uint32[2] seed words drawn from one
        (:func:`asicsim._src.numerics.random.key_words`, or :func:`~asicsim._src.numerics.random.derive`
        from such words): many streams from one key without a threefry call for each.

    Returns:
      float32 JAX array of ``x``'s shape. Differentiable: the gradient passes straight through.
      A NaN result is the quiet NaN with ml_dtypes' sign (see ``nan_with_sign``): -1000 onto
      ``float8_e4m3fn`` is -NaN, as ``np.float32(-1000).astype(float8_e4m3fn)`` is.
    """
    x = real_input(x, "quantize")
    check_flag(saturate, "quantize: saturate", "True, False or None (the format's own convention)")
    spec = get_format(fmt)
    rnd = parse_rounding(rounding)
    if rnd.stochastic and words is None:
        words = _random.key_words(key)
    elif not rnd.stochastic:
        words = None
    plan = resolve_scaling(spec, axis=axis, block_size=block_size, scaling=scaling)
    if plan is not None:
        element, plan = plan
        sat = True if saturate is None and spec.kind == "block" else saturate
        sat = element.saturate if sat is None else sat
        return scaled_quantize(_scalable_f32(x), element, plan, rnd, sat, words)
    if spec.kind == "int" and not spec.float32_exact:
        raise ValueError(
            f"quantize to {spec.name!r}: {spec.bits}-bit integers are not exact in the float32 "
            "result; use an integer format of at most 24 magnitude bits, or encode()"
        )
    sat = spec.saturate if saturate is None else saturate
    if _is_float64(x) and not isinstance(x, jax.Array):
        return jnp.asarray(_quantize_host64(np.asarray(x, np.float64), spec, rnd, sat, words))
    return _quantize_ste(_as_f32(x), words, spec, rnd, sat)


def _as_f32(x) -> jax.Array:
    """float32 values of array ``x``; a JAX float64 array (x64 mode) passes for the float64
    kernel (numpy float64, lists and Python numbers never get here: quantize rounds them on the
    host, the scaled path converts them first)."""
    if not is_floating(x.dtype):
        raise TypeError(
            f"quantize expects a floating-point array, got dtype {x.dtype}; convert integers "
            "explicitly (x.astype(np.float32)) so no rounding happens behind your back"
        )
    if _is_float64(x):
        return x  # x64 mode: handled by the float64 kernel below
    if np.dtype(x.dtype) == np.float32:
        return jnp.asarray(x)  # keep it differentiable: no bitcast on the way in
    return jax.lax.bitcast_convert_type(_to_f32_bits(x), jnp.float32)


def _scalable_f32(x) -> jax.Array:
    """float32 input for the scaled kernels. float64 (numpy, lists, Python floats, JAX x64) is
    rounded to odd at float32 precision (``f64_bits_to_f32_odd``), so a power-of-two scale then
    rounds it once onto the element grid, as if from float64; fp32 scales compute in float32
    from there, as a fake-quant unit would."""
    if isinstance(x, (int, float)) or not hasattr(x, "dtype"):
        x = np.asarray(x, np.float32 if isinstance(x, int) else np.float64)
    if not _is_float64(x):
        return _as_f32(x)
    if isinstance(x, jax.Array):
        return _odd_f32(x)
    bits = f64_bits_to_f32_odd(np, np.asarray(x, np.float64).view(np.uint64))  # (not ascontiguousarray:
    return jnp.asarray(bits.view(np.float32))  # it made a 0-d input, a Python float, 1-d)


@jax.custom_jvp
def _odd_f32(x: jax.Array) -> jax.Array:
    bits = f64_bits_to_f32_odd(jnp, jax.lax.bitcast_convert_type(x, jnp.uint64))
    return jax.lax.bitcast_convert_type(bits, jnp.float32)


@_odd_f32.defjvp
def _odd_f32_jvp(primals, tangents):
    return _odd_f32(primals[0]), tangents[0].astype(jnp.float32)  # straight through, as quantize


@functools.partial(jax.custom_jvp, nondiff_argnums=(2, 3, 4))
def _quantize_ste(x, words, spec, rnd, sat):
    return _quantize_jit(x, words, spec, rnd, sat)


@_quantize_ste.defjvp
def _quantize_ste_jvp(spec, rnd, sat, primals, tangents):
    x, words = primals
    return _quantize_ste(x, words, spec, rnd, sat), tangents[0]  # straight-through


@functools.partial(jax.jit, static_argnums=(2, 3, 4))
def _quantize_jit(x, words, spec, rnd: Rounding, sat: bool):
    if x.dtype == jnp.float64:
        c, udt = F64, jnp.uint64
    else:
        c, udt = F32, jnp.uint32
    if c is F32 and (fast := fast_round_any32(x, spec, rnd, sat)) is not None:
        return fast
    bits = jax.lax.bitcast_convert_type(x, udt)
    rand = None
    if rnd.stochastic:
        rand = _random.hash_bits(words, x.shape)
        if c is F32 and (fast := fast_round_any32(x, spec, rnd, sat, rand)) is not None:
            return fast
        if c is F64:
            hi = _random.hash_bits(words ^ np.uint32(0x9E3779B9), x.shape)
            rand = (hi.astype(udt) << np.uint64(32)) | rand.astype(udt)
    out = round_to_grid(jnp, c, bits, spec, rnd, sat, rand)
    out = jax.lax.bitcast_convert_type(out, x.dtype)
    return f64_to_f32(out) if c is F64 else out  # by bits: XLA's convert flushes below 2**-126


def _quantize_host64(x: np.ndarray, spec, rnd: Rounding, sat: bool, words) -> np.ndarray:
    """The float64 path, on the host: one rounding, straight from float64 to the format."""
    bits = x.view(np.uint64)
    rand = _random.host_bits64(np.asarray(words), x.shape) if rnd.stochastic else None
    with np.errstate(over="ignore"):
        out = round_to_grid(np, F64, bits, spec, rnd, sat, rand)
    return out.view(np.float64).astype(np.float32)  # exact: every format value fits float32
