"""The arithmetic of two-level block scaling (the public entry is :mod:`asicsim._src.numerics.two_level`,
which stands above :mod:`asicsim._src.numerics.scaling`; this kernel stands below it): a block scale that is a value of any float format (E4M3, bf16, fp32),
not only a power of two, and an optional per-tensor scale above the block scales (NVFP4).

The arithmetic is Transformer Engine's NVFP4 reference quantizer, generalised from (E2M1, E4M3)
to any (element, block scale) pair: ``_quantize_blockwise_reference`` in
``transformer_engine/pytorch/custom_recipes/reference_nvfp4.py`` and the dequantize kernel
``transformer_engine/common/cast/nvfp4/dequantize_nvfp4.cuh`` (NVIDIA/TransformerEngine at
d0067d0da6cb01811b8072a7d304f0e00344ce2b). With ``E`` the element max, ``S`` the block-scale
format's max and every operation rounded to float32:

* per-tensor (``tensor_scale``): ``g = min(S * E / amax_tensor, float32 max)`` (1 where that is
  0), ``g_dec = 1 / g``; without a tensor scale ``g = g_dec = 1``;
* per block: ``d = min(amax_block * (g * (1 / E)), S)`` rounded (nearest even) onto the scale
  format; ``enc = min(1 / (d * g_dec), float32 max)``;
* per element: ``q`` = ``clamp(x * enc, -E, E)`` rounded onto the element format;
* dequantized: ``q * ((d * amax_tensor) * (1 / (E * S)))`` with a tensor scale, ``q * d``
  without. Where ``d * amax_tensor`` overflows float32 (TE's kernel then returns inf and NaN),
  ``q * (d * (amax_tensor * (1 / (E * S))))``: a finite value within a few ulps.

Every float32 product and quotient is correctly rounded on every backend, subnormals kept
(:func:`.fp32_exact.fp32_mul`, :func:`.exact_div.divide`): XLA:CPU flushes float32 subnormals
and XLA:GPU's float32 division is not correctly rounded. A NaN or inf in a block makes its values
NaN; with a tensor scale, one anywhere in the tensor makes the whole tensor NaN.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .exact_div import divide
from .fp32_exact import fp32_mul
from .fp32_scale import round_bits
from .rounding import Rounding, RoundMode

_MAG = np.uint32(0x7FFFFFFF)
_SIGN = np.uint32(0x80000000)
_INF = np.uint32(0x7F800000)
_F32_MAX = np.float32(np.finfo(np.float32).max)


def _f32(bits):
    return jax.lax.bitcast_convert_type(bits, jnp.float32)


def _bits(v):
    return jax.lax.bitcast_convert_type(v, jnp.uint32)


def _cap(v, top: np.float32):
    """``min(v, top)`` for float32 ``v >= 0`` (inf included), on the bits: no float compare."""
    return _f32(jnp.minimum(_bits(v), np.float32(top).view(np.uint32)))


def constants(element, scale) -> dict[str, np.float32]:
    """The float32 constants of the arithmetic, rounded as Transformer Engine's float32 code
    rounds them (``S * E`` and ``1 / (E * S)`` may overflow or be inexact: they are float32
    operations in TE's code too)."""
    e, s = np.float32(element.max), np.float32(scale.max)
    with np.errstate(over="ignore"):
        es = np.float32(s * e)
        return {"E": e, "S": s, "SE": es, "inv_E": np.float32(1) / e, "inv_ES": np.float32(1) / np.float32(e * s)}


def two_level_groups(groups, element, scale, tensor_scale: bool, rnd: Rounding, saturate: bool, rand, axes=(-1,)):
    """(values, element values, block scales, tensor amax) of ``groups`` (float32, a block over
    ``axes``: by default one block per row): dequantized values and element values (values of
    ``element``) of ``groups``' shape, one float32 block scale per block (a value of ``scale``;
    ``groups`` reduced over ``axes``), the float32 tensor amax (0 without a tensor scale)."""
    c = constants(element, scale)
    amax_b = jnp.max((_bits(groups) & _MAG).astype(jnp.int32), axis=axes, keepdims=True).astype(jnp.uint32)
    finite = amax_b < _INF
    if tensor_scale:
        amax_t_bits = jnp.max(amax_b)
        finite = finite & (amax_t_bits < _INF)
        amax_t = _f32(amax_t_bits)
        g = _cap(divide(c["SE"], amax_t), _F32_MAX)  # amax 0: inf, capped
        g = jnp.where(_bits(g) == 0, np.float32(1), g)
        g_dec = divide(np.float32(1), g)
        mult = fp32_mul(g, c["inv_E"])
    else:
        amax_t = jnp.float32(0)
        g_dec = jnp.float32(1)
        mult = jnp.float32(c["inv_E"])
    d = _cap(fp32_mul(_f32(jnp.where(finite, amax_b, np.uint32(0))), mult), c["S"])  # NaN blocks: 0 here
    if scale.name != "float32":
        d = _f32(round_bits(_bits(d), scale, Rounding(RoundMode.RNE), True, None))
    enc = _cap(divide(np.float32(1), fp32_mul(d, g_dec)), _F32_MAX)
    y = fp32_mul(groups, enc)
    yb = _bits(y)
    y = _f32((yb & _SIGN) | jnp.minimum(yb & _MAG, c["E"].view(np.uint32)))
    q = _f32(round_bits(_bits(y), element, rnd, saturate, rand))
    values = jnp.where(finite, two_level_dequantize(q, d, amax_t if tensor_scale else None, element, scale),
                       np.float32(np.nan))
    return values, q, jnp.squeeze(jnp.where(finite, d, np.float32(np.nan)), axis=axes), amax_t


def two_level_dequantize(q, d, amax_t, element, scale) -> jax.Array:
    """float32 values of element values ``q`` under block scales ``d`` (broadcastable against
    ``q``) and tensor amax ``amax_t`` (None: no tensor scale), as the module says (TE's order;
    where ``d * amax`` overflows, amax > ~2**119 / S: ``d * (amax * (1 / (E * S)))``)."""
    if amax_t is None:
        return fp32_mul(q, d)
    inv_es = constants(element, scale)["inv_ES"]
    d_amax = fp32_mul(d, amax_t)
    final = jnp.where(_bits(d_amax) >= _INF, fp32_mul(d, fp32_mul(amax_t, inv_es)), fp32_mul(d_amax, inv_es))
    return fp32_mul(q, final)
