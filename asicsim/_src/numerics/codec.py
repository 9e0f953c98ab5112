"""``encode`` / ``decode``: values to and from the bit patterns the hardware stores.

Codes are the smallest unsigned dtype that holds the format (uint8 / uint16 / uint32), with the
format's bits in the low end (sign, exponent, mantissa from the top; two's complement for
integers). Block formats encode to ``(element_codes, scale_codes)``, with the element codes
grouped as ``(groups, block_size)`` and one scale code per group.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from .catalog import get_format
from .formats import BlockFormat, FloatFormat, Format, IntFormat
from .grid_rounding import decode_float_bits, mul_pow2
from .inputs import code_input, real_input
from .quantize import quantize
from .rounding import F32, Carrier, bit_length
from .scaling import _grouped, block_scales, resolve_scaling


def code_dtype(bits: float):
    for width, dtype in ((8, jnp.uint8), (16, jnp.uint16), (32, jnp.uint32)):
        if bits <= width:
            return dtype
    raise ValueError(f"no code dtype holds {bits} bits")


# --- floats -------------------------------------------------------------------------------------


def nan_code(spec: FloatFormat) -> int:
    """The code ``encode`` writes for a positive NaN (a negative one sets the sign bit where the
    format has two NaNs; see ``encode_float_bits``)."""
    e_all, m_bits = (1 << spec.exp_bits) - 1, spec.man_bits
    if spec.nan == "ieee":
        return (e_all << m_bits) | (1 << max(m_bits - 1, 0))
    if spec.nan == "ones":
        return (e_all << m_bits) | ((1 << m_bits) - 1)
    if spec.nan == "negzero":
        return 1 << (spec.bits - 1)
    return 1 << (spec.bits - 1)  # no NaN code: ml_dtypes writes -0 here, and so do we


def encode_float_bits(xp, c: Carrier, v, spec: FloatFormat):
    """Codes of carrier bits ``v`` that already hold representable values (or NaN/inf)."""
    u = v.dtype.type
    i = xp.int32 if c.width == 32 else xp.int64
    a = v & u(c.sign - 1)
    neg = (v >> u(c.width - 1)).astype(i)
    exp = (a >> u(c.man)).astype(i)
    frac = a & u((1 << c.man) - 1)
    sig = xp.where(exp > 0, frac | u(1 << c.man), frac)
    # A carrier subnormal may be a normal number of the format (e8m0's 2**-127, large biases):
    # its exponent and fraction come from its leading one, not from the carrier's fields.
    lead = bit_length(xp, frac, c) - 1
    unbiased = xp.where(exp > 0, exp - c.bias, lead - (c.bias - 1 + c.man))
    frac = xp.where(exp > 0, frac, (frac << xp.clip(c.man - lead, 0, c.width - 1).astype(v.dtype)))
    frac = frac & u((1 << c.man) - 1)
    normal = unbiased >= spec.emin
    e_field = xp.where(normal, unbiased + spec.bias, 0)
    shift = xp.clip(spec.emin - spec.man_bits + c.bias + c.man - xp.maximum(exp, 1), 0, c.width - 1)
    m_field = xp.where(normal, frac >> u(c.man - spec.man_bits), sig >> shift.astype(v.dtype))
    if not spec.subnormals:  # e8m0: every exponent field is a normal number
        e_field = xp.where(normal, e_field, 0)
    code = (e_field.astype(i) << spec.man_bits) | m_field.astype(i)
    if spec.signed:
        code = code | (neg << (spec.bits - 1))
    nan = nan_code(spec)
    if spec.signed and spec.nan in ("ieee", "ones"):  # two NaN codes: the value's sign picks one
        nan = nan | (neg << (spec.bits - 1))  # (as ml_dtypes does: -1000 -> 0xFF in e4m3fn)
    code = xp.where(a > u(c.inf), nan, code)
    if spec.has_inf:
        inf_code = ((1 << spec.exp_bits) - 1) << spec.man_bits
        code = xp.where(a == u(c.inf), inf_code | (neg << (spec.bits - 1)), code)
    if spec.nan == "negzero":
        code = xp.where(code == (1 << (spec.bits - 1)), 0, code)  # -0 does not exist
        code = xp.where(a > u(c.inf), nan_code(spec), code)
    return code


# --- integers -----------------------------------------------------------------------------------


def _encode_int(values: jax.Array, spec: IntFormat):
    k = jnp.round(values * np.float32(2.0**spec.frac_bits))  # exact: values are on the grid
    k = jnp.where(jnp.isnan(k), 0, k).astype(jnp.int32)
    return (k.astype(jnp.uint32) & np.uint32((1 << spec.bits) - 1)).astype(code_dtype(spec.bits))


def _decode_int(codes, spec: IntFormat) -> jax.Array:
    k = jnp.asarray(codes).astype(jnp.uint32) & np.uint32((1 << spec.bits) - 1)
    k = k.astype(jnp.int32)
    if spec.signed:
        k = jnp.where(k >= (1 << (spec.bits - 1)), k - (1 << spec.bits), k)
    return k.astype(jnp.float32) * np.float32(2.0**-spec.frac_bits)


# --- public -------------------------------------------------------------------------------------


def encode(x, fmt: str | Format, rounding="rne", *, key=None, saturate=None, axis=None):
    """Round ``x`` onto ``fmt`` and return the stored codes (see module doc).

    NaN: where the format has a NaN code for each sign (IEEE-like, ``fn`` 8-bit floats), a NaN
    result -- a NaN input or a non-saturating overflow -- keeps the input's sign, as ml_dtypes
    does (``-1000`` onto ``float8_e4m3fn`` is ``0xFF``). A format with no NaN code (integers,
    fixed point, fp6, fp4) cannot store one: ``quantize`` returns NaN there, and ``encode``
    refuses it with a ValueError rather than write a number that decodes to something else
    (under ``jit``, where the values cannot be inspected, it writes 0 for integers and ml_dtypes'
    -0 for fp6/fp4).
    """
    x = real_input(x, "encode")
    spec = get_format(fmt)
    if isinstance(spec, BlockFormat):
        _no_two_level_codes(spec, "encode to")
        return _encode_block(x, spec, rounding, key=key, saturate=saturate, axis=axis)
    values = quantize(x, spec, rounding, key=key, saturate=saturate)  # NaNs carry their sign
    if not (spec.kind == "float" and spec.has_nan):
        _refuse(jnp.isnan(values), spec.name, "NaN value(s)", "it has no NaN code")
    if spec.kind == "int":
        return _encode_int(values, spec)
    return _encode_float_jit(values, spec)


def _refuse(bad: jax.Array, name: str, what: str, why: str) -> None:
    """ValueError if any of ``bad`` is set: values the format has no code for."""
    try:
        count = int(jnp.sum(bad))
    except jax.errors.ConcretizationTypeError:  # under jit: no check possible
        return
    if count:
        raise ValueError(
            f"encode to {name!r}: the input holds {count} {what}, which this format cannot "
            f"store ({why}); quantize() returns NaN for them"
        )


def decode(codes, fmt: str | Format, *, scales=None, shape=None, axis=None) -> jax.Array:
    """float32 values of ``codes`` in ``fmt`` (block formats need ``scales`` from ``encode``),
    bit for bit as ml_dtypes decodes them, the sign of a NaN code included (payloads aside: a NaN
    is the quiet NaN of the code's sign). Codes lie in ``0 .. 2**bits - 1``: others are a
    ValueError (they used to wrap modulo ``2**bits``)."""
    spec = get_format(fmt)
    if isinstance(spec, BlockFormat):
        _no_two_level_codes(spec, "decoding")
        if scales is None:
            raise ValueError(f"decoding {spec.name!r} needs scales= (the second output of encode)")
        scales = code_input(scales, spec.scale.bits, spec.name, "scale codes")
        return _decode_block(code_input(codes, spec.element.bits, spec.name), scales, spec, shape, axis)
    codes = code_input(codes, spec.bits, spec.name)
    if spec.kind == "int":
        return _decode_int(codes, spec)
    return _decode_float_jit(codes, spec)


@functools.partial(jax.jit, static_argnums=1)
def _encode_float_jit(values: jax.Array, spec: FloatFormat) -> jax.Array:
    bits = jax.lax.bitcast_convert_type(values, jnp.uint32)
    return encode_float_bits(jnp, F32, bits, spec).astype(code_dtype(spec.bits))


@functools.partial(jax.jit, static_argnums=1)
def _decode_float_jit(codes: jax.Array, spec: FloatFormat) -> jax.Array:
    bits = decode_float_bits(jnp, F32, codes.astype(jnp.uint32), spec)
    return jax.lax.bitcast_convert_type(bits, jnp.float32)


def _no_two_level_codes(spec: BlockFormat, what: str) -> None:
    """Codes of a two-level block format need its tensor scale too: not written by ``encode``."""
    if spec.two_level:
        raise ValueError(f"{what} {spec.name!r}: a two-level block format (block scales in "
                         f"{spec.scale.name}{', a tensor scale' if spec.tensor_scale else ''}) has no encode/decode; "
                         "asicsim._src.numerics.two_level.two_level_parts(x, fmt) gives its element values, block "
                         "scales and tensor amax (encode each onto its own format)")


def _encode_block(x, spec: BlockFormat, rounding, *, key, saturate, axis):

    values = quantize(x, spec, rounding, key=key, saturate=saturate, axis=axis)
    exps = block_scales(x, spec, axis=axis)
    element, plan = resolve_scaling(spec, axis=axis)
    groups, _ = _grouped(values, plan)
    finite = exps != jnp.iinfo(jnp.int32).min
    if not spec.scale.has_nan:
        _refuse(~finite, spec.name, "block(s) with NaN or inf",
                f"such a block needs a NaN scale and its scale format {spec.scale.name!r} has no NaN code")
    e = jnp.where(finite, exps, 0)
    elems = jnp.where(finite[:, None], mul_pow2(groups, -e[:, None]), 0)  # exact, from the bits
    codes = encode(elems, element)
    scale_codes = encode(jnp.where(finite, pow2_f32(e), np.nan), spec.scale)
    return codes, scale_codes


def pow2_f32(e: jax.Array) -> jax.Array:
    """2.0**e as float32 built from bits (XLA:CPU would flush a subnormal result of exp2)."""
    e = jnp.clip(e, -149, 127)
    bits = jnp.where(
        e >= -126,
        (e + 127).astype(jnp.uint32) << np.uint32(23),
        np.uint32(1) << jnp.clip(e + 149, 0, 31).astype(jnp.uint32),
    )
    return jax.lax.bitcast_convert_type(bits, jnp.float32)


def _decode_block(codes, scales, spec: BlockFormat, shape, axis):
    elems = decode(codes, spec.element)
    scale = decode(scales, spec.scale)[:, None]
    # scale = 2**e (a pure-exponent format): shift the elements' exponents, never multiply, which
    # would flush subnormal products (scales down to 2**-127)
    scale_bits = jax.lax.bitcast_convert_type(scale, jnp.uint32)
    e = jnp.where(
        scale_bits >= np.uint32(1 << 23),
        (scale_bits >> np.uint32(23)).astype(jnp.int32) - 127,
        31 - jax.lax.clz(scale_bits).astype(jnp.int32) - 149,
    )
    values = jnp.where(jnp.isnan(scale), np.float32(np.nan), mul_pow2(elems, e))
    if shape is None:
        return values
    _, plan = resolve_scaling(spec, axis=axis)
    _, ungroup = _grouped(jnp.zeros(shape, jnp.float32), plan)
    return ungroup(values)
