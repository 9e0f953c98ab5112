"""Static scaling: a tensor quantized onto a format by one float32 scale from a given (calibrated)
amax, with the rules of :mod:`asicsim._src.numerics.fp32_scale`; a block format (MX, BFP) brings its own
scales and is rounded as :func:`asicsim.numerics.quantize` rounds it, so this module stands above
both."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from .catalog import get_format
from .fp32_scale import fp32_scaled
from .quantize import quantize
from .rounding import F32, parse_rounding

_MAG = np.uint32(0x7FFFFFFF)


def quantize_static(x, amax, fmt, rounding="rne", *, saturate: bool | None = None, words=None) -> jax.Array:
    """``x`` (float32) quantized onto ``fmt`` by symmetric fp32 scaling from a given ``amax``
    (static scaling: a calibrated estimate; float32, a scalar or broadcastable against ``x``,
    its magnitude taken): ``s = amax / max`` (1 where amax is 0; NaN values where it is inf or
    NaN), the rules of the module docstring, ``q * s``. Elements beyond the amax overflow as
    ``saturate`` says (None: the format's convention). A block format (MX, BFP) brings its own
    scales: it is rounded as ``quantize`` rounds it, the amax unused (as before: its max, beyond
    float32, made the static scale 1). ``words``: stochastic rounding's seed
    words. The gradient passes straight through to ``x``.

    >>> import numpy as np
    >>> [round(float(v), 4) for v in quantize_static(np.float32([1, -2, np.inf, 3]), 4.0, "int8", saturate=True)]
    [1.0079, -2.0157, 4.0, 2.9921]
    """
    spec = get_format(fmt)
    rnd = parse_rounding(rounding)
    if saturate is not None and not isinstance(saturate, (bool, np.bool_)):
        raise ValueError(f"static scaling: saturate={saturate!r}; allowed: True, False or None")
    sat = (True if spec.kind == "block" else spec.saturate) if saturate is None else bool(saturate)
    if rnd.stochastic and words is None:
        raise ValueError(f"static scaling: rounding {rounding!r} is stochastic; pass words "
                         "(asicsim._src.numerics.random.key_words(key))")
    words = jnp.asarray(words, jnp.uint32) if rnd.stochastic else None
    x = jnp.asarray(x, jnp.float32)
    mag = jax.lax.bitcast_convert_type(jnp.asarray(amax, jnp.float32), jnp.uint32) & _MAG
    if mag.ndim > x.ndim or any(m not in (1, n) for m, n in zip(mag.shape[::-1], x.shape[::-1], strict=False)):
        raise ValueError(f"static scaling: an amax of shape {mag.shape} does not broadcast against x of shape {x.shape}")
    mag = mag.reshape((1,) * (x.ndim - mag.ndim) + mag.shape)
    return _static_ste(x, mag, words, spec, rnd, sat)


@functools.partial(jax.custom_jvp, nondiff_argnums=(3, 4, 5))
def _static_ste(x, amax, words, element, rnd, saturate):
    return _static_jit(x, amax, words, element, rnd, saturate)


@_static_ste.defjvp
def _static_ste_jvp(element, rnd, saturate, primals, tangents):
    return _static_ste(*primals, element, rnd, saturate), tangents[0]


@functools.partial(jax.jit, static_argnums=(3, 4, 5))
def _static_jit(x, amax, words, element, rnd, saturate):
    if x.size == 0:
        return x
    if element.kind == "block":  # a block format (MX, BFP) brings its own scales
        return quantize(x, element, rnd, saturate=saturate, words=words)
    return fp32_scaled(x, amax, amax < np.uint32(F32.inf), element, True, rnd, saturate, words, lambda v: v)[0]
