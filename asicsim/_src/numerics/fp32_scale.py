"""fp32-scaled quantization: one float32 scale per tensor, channel or block, computed from the
group's amax (``scaling.Scaling(scale_format="fp32")``), or from a given amax estimate
(:func:`asicsim._src.numerics.static_scale.quantize_static`, static scaling by a calibrated amax).

Symmetric: ``s = amax / max``, ``y = x / s``, ``q`` = ``y`` rounded onto the element, ``q * s``,
each step rounded to float32 as a fake-quant unit computes it (``fp32_exact`` says where that
runs in float32 and where in float64; the divisions are correctly rounded on every backend:
:func:`.exact_div.divide`).
Two rules keep the scale's own rounding from pushing an element past
the format's max (issue 29 item 10: a tensor of amax 7.79e-43 onto fp8_e4m3 had its largest
element become NaN):

* **A subnormal scale is rounded up.** ``amax / max`` is rounded to nearest float32 where that
  is a normal number (relative error at most 2**-24); below 2**-126 the nearest float32 can be
  up to half of its few significant bits below the quotient (``amax / s`` up to twice ``max``),
  so there the scale is the float32 at or above the quotient, as MX and Transformer Engine round
  their scales up: ``amax / s <= max`` exactly.
* **An element within the amax saturates at max.** A normal scale rounded down still leaves
  ``amax / s`` up to 2**-24 above ``max``, which ``rup``/``rdn``/``sr`` rounding carried one step
  past it (NaN or inf in fp8, a wrapped integer without saturation). So ``|y|`` is capped at
  ``max`` wherever ``|x| <= amax``: the value an exact scale would give. An element beyond a
  given (static) amax is left as it is and overflows as ``saturate`` says.

Asymmetric (integer formats, a zero point): ``s = (hi - lo) / span``, rounded up where
subnormal, and ``x / s + zp`` is clamped to the format's range before rounding (every element
lies within ``[lo, hi]``), as PyTorch's fake quantization clamps its codes.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from . import random as _random
from .exact_div import divide
from .fast_rounding32 import fast_round_any32
from .fp32_exact import (
    code_times_scale,
    fp32_asymmetric_in_float64,
    scale_up_if_subnormal,
)
from .grid_rounding import round_to_grid
from .rounding import F32, Rounding

_MAG = np.uint32(0x7FFFFFFF)
_SIGN = np.uint32(0x80000000)


def round_bits(bits, element, rnd: Rounding, saturate: bool, rand):
    """``round_to_grid`` of float32 bits onto the element grid (a float fast path where one
    applies, with the same ``rand``: same bits, several times faster on XLA:CPU)."""
    fast = fast_round_any32(jax.lax.bitcast_convert_type(bits, jnp.float32), element, rnd, saturate, rand)
    if fast is not None:
        return jax.lax.bitcast_convert_type(fast, jnp.uint32)
    return round_to_grid(jnp, F32, bits, element, rnd, saturate, rand)


def _max_bits(element) -> np.uint32:
    """float32 bits of the largest float32 at or below the element's max."""
    m = np.float32(element.max)
    if float(m) > element.max:
        m = np.nextafter(m, np.float32(0))
    return np.float32(m).view(np.uint32)


def _within_max(ybits, xbits, amax, element):
    """``y`` (float32 bits) with ``|y|`` capped at the element max where ``|x| <= amax``."""
    top = _max_bits(element)
    cap = ((xbits & _MAG) <= amax) & ((ybits & _MAG) > top)  # a NaN or inf x is above any finite amax
    return jnp.where(cap, (ybits & _SIGN) | top, ybits)


def fp32_scaled(groups, amax, finite, element, symmetric, rnd, saturate, words, ungroup, axes=(-1,), words_of=None):
    """(values, scales) of fp32 scaling. ``amax``: uint32 magnitude bits, broadcastable against
    ``groups`` (symmetric only: asymmetric scaling takes its range from ``groups`` over ``axes``);
    ``finite``: where a group's amax is finite (elsewhere values and scales are NaN);
    ``words_of(words)``: stochastic rounding's random bits of each element (default: ``hash_bits``
    over ``groups``' shape)."""
    if words_of is None:
        def words_of(w):
            return _random.hash_bits(w, groups.shape)
    if symmetric:
        rand = words_of(words) if rnd.stochastic else None
        q, scale = _codes(groups, amax, element, rnd, saturate, rand)
        values = jnp.where(finite, saturate_to_float32(code_times_scale(q, scale, element), saturate), np.float32(np.nan))
    else:
        rand = words_of(words) if rnd.stochastic else None
        values, scale = fp32_asymmetric_in_float64(groups, axes, element, rnd, saturate, rand, round_bits)
        values = jnp.where(finite, saturate_to_float32(values, saturate), np.float32(np.nan))
    return ungroup(values), jnp.where(finite, scale, np.float32(np.nan)).reshape(-1)


def saturate_to_float32(values, saturate: bool):
    """A saturating format's values with float32's max in place of +-inf: a code times a scale
    rounded up from an amax near float32's max can round past it (int8 per tensor at an amax of
    3.4028235e38 gave +-inf; power-of-two scales by the ``up`` rule likewise, see
    ``pow2_scales.overflow_bits``). Not saturating, IEEE's overflow stands."""
    if not saturate:
        return values
    top = np.float32(np.finfo(np.float32).max)
    return jnp.where(jnp.abs(values) == np.float32(np.inf), jnp.copysign(top, values), values)


def _codes(groups, amax, element, rnd: Rounding, saturate: bool, rand):
    """(codes, scale) of symmetric fp32 scaling: ``s = amax / max`` (1 where amax is 0), the
    codes ``q`` = ``x / s`` rounded onto the element (``q * s`` is the value)."""
    amax_f = jax.lax.bitcast_convert_type(amax, jnp.float32)
    scale = jnp.where(amax == 0, np.float32(1), scale_up_if_subnormal(amax_f, element.max))
    y = jax.lax.bitcast_convert_type(divide(groups, scale), jnp.uint32)
    y = _within_max(y, jax.lax.bitcast_convert_type(groups, jnp.uint32), amax, element)
    return jax.lax.bitcast_convert_type(round_bits(y, element, rnd, saturate, rand), jnp.float32), scale


def static_codes(x, amax, element, rnd: Rounding, saturate: bool, words=None):
    """(codes, scale) of symmetric fp32 scaling of float32 ``x`` by one float32 ``amax`` (a
    scalar; its magnitude taken) onto a scalar ``element`` format: the codes :func:`quantize_static`
    (and ``quantize(..., scaling="tensor")`` with the tensor's own amax) multiplies by the scale,
    as a GEMM on the codes reads them (a tensor core computes on the fp8 codes; the library
    applies the scales to its result). NaN codes and scale where the amax is not finite."""
    x = jnp.asarray(x, jnp.float32)
    mag = jax.lax.bitcast_convert_type(jnp.asarray(amax, jnp.float32), jnp.uint32) & _MAG
    rand = _random.hash_bits(words, x.shape) if rnd.stochastic else None
    q, scale = _codes(x, mag, element, rnd, saturate, rand)
    finite = mag < np.uint32(F32.inf)
    return jnp.where(finite, q, np.float32(np.nan)), jnp.where(finite, scale, np.float32(np.nan))
