"""Per-group integer weight quantization as LLM post-training quantizers store weights: groups of
``group_size`` consecutive elements along one axis (a GEMM's contraction axis), an integer code
per element, one scale per group rounded to a *scale format*, and (asymmetric) an integer zero
point per group.

Conventions (cited, and followed exactly):

* Asymmetric, ``zero_point=True``, unsigned codes ``0 .. maxq = 2**bits - 1``: GPTQ's
  ``Quantizer.find_params``/``quantize`` (IST-DASLab/gptq ``quant.py``; AutoGPTQ's is the same):
  the group's range is widened to include zero (``xmin = min(min, 0)``, ``xmax = max(max, 0)``),
  ``scale = (xmax - xmin) / maxq``, ``zero = round(-xmin / scale)``,
  ``code = clamp(round(x / scale) + zero, 0, maxq)``, value ``scale * (code - zero)``.
* Symmetric, ``zero_point=False``, signed codes ``-2**(bits-1) .. 2**(bits-1) - 1``: AWQ's
  ``pseudo_quantize_tensor(zero_point=False)`` (mit-han-lab/llm-awq ``quantizer.py``):
  ``scale = amax / (2**(bits-1) - 1)``, ``code = clamp(round(x / scale), -2**(bits-1), 2**(bits-1)-1)``.
* Both clamp the range (``xmax - xmin``, or ``amax``) below at ``1e-5`` as AWQ does, so an
  all-zero group has a finite, non-zero scale (GPTQ widens such a group to [-1, 1] instead).
* ``round`` is round-half-to-even (``torch.round``), for codes and the zero point alike.
* The scale is rounded to its format *before* the zero point and the codes are computed from
  it, as AutoGPTQ's ``QuantLinear.pack`` recomputes the codes from the fp16 scales it stores;
  the zero point is then clamped to ``0 .. maxq`` (a rounded scale can move ``-xmin / scale``
  just past ``maxq``). Scale formats: ``fp32``, ``fp16``, ``bf16`` (round to nearest even,
  saturating) and ``e8m0`` (a power of two, rounded *up* so no element of the group is clipped,
  as Transformer Engine's MXFP8 cast rounds its E8M0 scale, ``cvt.rp.satfinite.ue8m0x2.f32``).

Why the arithmetic is integer: XLA:GPU's float32 division is not correctly rounded, so a code
``round(x / scale)`` computed by a float division can differ between CPU and GPU. Here the scale
is the exact quotient ``range / maxq`` rounded once (integer division of the significand: exact
on every device), and ``round(x / scale)`` is a float quotient corrected by exact comparisons of
``|x|`` with ``(n +- 1/2) * scale`` (products split so each part is exact, Dekker's splitting).
No result assumes a correctly rounded division. Exactness assumes normal float32 operands (the
1e-5 floor keeps scales normal; XLA:CPU flushes subnormal weights, which quantize to zero anyway).
The dequantized value ``scale * (code - zero)`` is one correctly rounded float32 product (exact
for fp16/bf16/e8m0 scales).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from asicsim._src.numerics.formats import BLOCK_SIZES, MAX_BLOCK_SIZE
from asicsim._src.numerics.grid_rounding import mul_pow2
from asicsim._src.numerics.group_codes import SCALE_FORMATS as SCALE_FORMATS
from asicsim._src.numerics.group_codes import code_range as code_range
from asicsim._src.numerics.inputs import real_input
from asicsim._src.numerics.quantize import quantize

#: AWQ's floor on a group's range: ``(max - min).clamp(min=1e-5)``
MIN_RANGE = np.float32(1e-5)
#: |x / scale| from here on needs no exact rounding (codes and zero points clamp to <= 8 bits);
#: below it ``n +- 1/2`` has at most 12 significant bits, as :func:`_split` needs
_BIG = np.float32(2.0**10)


class GroupCodes(NamedTuple):
    """Codes (int32, ``x``'s shape), scales (float32 values of the scale format) and zero points
    (int32; zeros when symmetric), both of ``x``'s shape with ``axis`` of length ceil(K / group)."""

    codes: jax.Array
    scales: jax.Array
    zeros: jax.Array


def _group_layout(shape: tuple[int, ...], group_size, axis) -> tuple[int, int]:
    """(axis in 0..ndim-1, group size) for an array of ``shape``, checked: a group longer than
    its axis is one group of the axis' length (not padded to ``group_size`` elements)."""
    if not (isinstance(group_size, int | np.integer) and not isinstance(group_size, bool)
            and 1 <= group_size <= MAX_BLOCK_SIZE):
        raise ValueError(f"group quantization: group_size={group_size!r}; allowed: {BLOCK_SIZES}")
    ndim = len(shape)
    if ndim == 0:
        raise ValueError("group quantization: a 0-d array has no axis to group along; pass at least 1-d")
    if not (isinstance(axis, int | np.integer) and not isinstance(axis, bool) and -ndim <= axis < ndim):
        raise ValueError(f"group quantization: axis={axis!r} for a {ndim}-d array of shape {shape}; "
                         f"allowed: an integer in {-ndim}..{ndim - 1}")
    axis = int(axis) % ndim
    return axis, int(min(group_size, max(shape[axis], 1)))


def _grouped(x: jax.Array, group_size: int, axis: int) -> tuple[jax.Array, int]:
    """``x`` with ``axis`` last, split into (..., groups, group_size); a ragged last group is
    padded with its own last element (the group's min and max are unchanged)."""
    x = jnp.moveaxis(x, axis, -1)
    k = x.shape[-1]
    n = -(-k // group_size)
    pad = n * group_size - k
    if pad:
        x = jnp.concatenate([x, jnp.repeat(x[..., -1:], pad, axis=-1)], axis=-1)
    return x.reshape(*x.shape[:-1], n, group_size), k


def scale_of(rng: jax.Array, maxq: int, scale_format: str) -> jax.Array:
    """``rng / maxq`` (rng > 0 normal float32, 1 <= maxq <= 255) rounded once to ``scale_format``,
    from the integer quotient of the significand (no float division; inf/NaN range: NaN)."""
    bits = lax.bitcast_convert_type(rng.astype(jnp.float32), jnp.uint32)
    e = ((bits >> 23) & 0xFF).astype(jnp.int32)
    n = ((bits & 0x7FFFFF) | 0x800000) << 8  # 2**31 <= n < 2**32, rng = n * 2**(e - 158)
    q, r = n // np.uint32(maxq), n % np.uint32(maxq)  # q >= 2**31 / 255 > 2**23: at least 24 bits
    sh = (8 - lax.clz(q)).astype(jnp.uint32)  # bits of q beyond 24
    top = q >> sh
    low = q & ((np.uint32(1) << sh) - np.uint32(1))
    inexact = (low != 0) | (r != 0)
    if scale_format == "fp32":  # round to nearest even at 24 bits
        half = jnp.where(sh > 0, np.uint32(1) << jnp.maximum(sh, 1) - 1, 0)
        gt = jnp.where(sh > 0, (low > half) | ((low == half) & (r > 0)), 2 * r > maxq)
        tie = jnp.where(sh > 0, (low == half) & (r == 0), 2 * r == maxq)
        top = top + (gt | (tie & ((top & 1) == 1))).astype(jnp.uint32)
    else:  # round to odd at 24 bits: rounding that again to <= 22 bits is correctly rounded
        top = top | inexact.astype(jnp.uint32)
    v = mul_pow2(top.astype(jnp.float32), sh.astype(jnp.int32) + e - 158)
    if scale_format in ("fp16", "bf16"):
        # a scale beyond the format's max is inf (its group dequantizes to NaN), as a torch
        # .half() of it is in GPTQ/AWQ storage: never a finite, silently clipped scale
        v = quantize(v, scale_format, "rne", saturate=False)
    elif scale_format == "e8m0":  # up to a power of two
        vb = lax.bitcast_convert_type(v, jnp.uint32)
        up = jnp.where((vb & 0x7FFFFF) != 0, (vb & 0x7F800000) + 0x800000, vb & 0x7F800000)
        v = lax.bitcast_convert_type(up.astype(jnp.uint32), jnp.float32)
    elif scale_format != "fp32":
        raise ValueError(f"scale format {scale_format!r}: one of {list(SCALE_FORMATS)}")
    return jnp.where(jnp.isfinite(rng), v, jnp.float32(jnp.nan))


def _split(s: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``s = hi + lo`` with ``hi`` the top 12 significand bits: ``m * hi`` and ``m * lo`` are
    exact float32 products for any ``m`` of at most 12 bits."""
    hi = lax.bitcast_convert_type(lax.bitcast_convert_type(s, jnp.uint32) & np.uint32(0xFFFFF000), jnp.float32)
    return hi, s - hi


def _above(a, m, s_hi, s_lo):
    """(a > m * s, a == m * s) exactly, for a >= 0, m > 0 of <= 12 bits (see the module doc)."""
    d = a - m * s_hi  # exact where a is within a factor 2 of m * s_hi (Sterbenz), else of the right sign
    p = m * s_lo
    return d > p, d == p


def round_div(x: jax.Array, s: jax.Array) -> jax.Array:
    """round-half-even(x / s) as int32 for scales ``s > 0`` (float32, broadcastable), exact:
    the float quotient's rounding corrected by exact comparisons (values beyond +-2**10 are
    only rounded as the float quotient says: every caller clamps them to <= 8-bit codes)."""
    a = jnp.abs(x)
    t = a / s
    n0 = jnp.round(jnp.minimum(t, _BIG))  # half-even; within 1 of the true rounding
    s_hi, s_lo = _split(s)
    hi_gt, hi_eq = _above(a, n0 + 0.5, s_hi, s_lo)
    lo_gt, lo_eq = _above(a, jnp.maximum(n0 - 0.5, 0.25), s_hi, s_lo)
    odd = jnp.mod(n0, 2) == 1
    up = hi_gt | (hi_eq & odd)
    down = (n0 >= 1) & ~lo_gt & ~(lo_eq & ~odd)
    n = jnp.where(t < _BIG, n0 + up.astype(jnp.float32) - down.astype(jnp.float32), n0)
    return (jnp.where(x < 0, -n, n)).astype(jnp.int32)


def group_quantize(x, *, fmt: str, group_size: int, axis: int = -1, zero_point: bool = False,
                   scale_format: str = "fp32") -> GroupCodes:
    """Codes, scales and zero points of ``x`` quantized in groups along ``axis`` (see the module doc)."""
    if not isinstance(zero_point, bool | np.bool_):  # 'no' is truthy: it took a zero point
        raise ValueError(f"group quantization: zero_point={zero_point!r}; allowed: True or False")
    lo, hi = code_range(fmt, zero_point)
    x = jnp.asarray(real_input(x, "group_quantize"), jnp.float32)
    axis, group_size = _group_layout(x.shape, group_size, axis)
    g, _ = _grouped(x, group_size, axis)
    if zero_point:
        xmin = jnp.minimum(jnp.min(g, axis=-1), 0.0)
        xmax = jnp.maximum(jnp.max(g, axis=-1), 0.0)
        s = scale_of(jnp.maximum(xmax - xmin, MIN_RANGE), hi, scale_format)
        z = jnp.clip(round_div(-xmin, s), 0, hi)
    else:
        amax = jnp.max(jnp.abs(g), axis=-1)
        s = scale_of(jnp.maximum(amax, MIN_RANGE), hi, scale_format)
        z = jnp.zeros(s.shape, jnp.int32)
    codes = jnp.clip(round_div(g, s[..., None]) + z[..., None], lo, hi)
    flat = codes.shape[-2] * codes.shape[-1]  # not -1: with no rows, -1 is undetermined
    codes = codes.reshape(*codes.shape[:-2], flat)[..., : x.shape[axis]]
    return GroupCodes(jnp.moveaxis(codes, -1, axis), jnp.moveaxis(s, -1, axis), jnp.moveaxis(z, -1, axis))


def group_dequantize(q: GroupCodes, *, group_size: int, axis: int = -1) -> jax.Array:
    """float32 ``scale * (code - zero)``, each group's scale and zero point repeated along ``axis``."""
    codes = jnp.asarray(q.codes)
    axis, group_size = _group_layout(codes.shape, group_size, axis)
    k = codes.shape[axis]

    def spread(v):
        return lax.slice_in_dim(jnp.repeat(jnp.asarray(v), group_size, axis=axis), 0, k, axis=axis)

    return spread(q.scales).astype(jnp.float32) * (codes - spread(q.zeros)).astype(jnp.float32)


def group_round(x, *, fmt: str, group_size: int, axis: int = -1, zero_point: bool = False,
                scale_format: str = "fp32") -> jax.Array:
    """``x`` fake-quantized (float32): :func:`group_dequantize` of :func:`group_quantize`."""
    q = group_quantize(x, fmt=fmt, group_size=group_size, axis=axis, zero_point=zero_point,
                       scale_format=scale_format)
    return group_dequantize(q, group_size=group_size, axis=axis)
