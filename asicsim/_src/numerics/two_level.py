"""Two-level block scaling (NVFP4: E2M1 elements, E4M3 block scales and a float32 tensor scale):
:func:`two_level_parts` gives a tensor's element values, block scales and tensor amax.

``quantize`` rounds onto these formats through :mod:`asicsim._src.numerics.scaling`; the arithmetic
(Transformer Engine's reference quantizer, with its source) is in
:mod:`asicsim._src.numerics.two_level_kernel`, below scaling.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from .catalog import get_format
from .rounding import Rounding, RoundMode
from .scaling import _grouped, resolve_scaling
from .two_level_kernel import two_level_dequantize as two_level_dequantize
from .two_level_kernel import two_level_groups


def two_level_parts(x, fmt, *, axis: int = -1, scaling=None):
    """(element values, block scales, tensor amax) of ``x`` quantized onto the two-level block
    format ``fmt`` (e.g. ``"nvfp4"``), blocks along ``axis``: the element values (``x``'s shape,
    values of the element format: NVFP4's E2M1 codes, decoded), the float32 block scales (one per
    block, in ``quantize``'s block order) and the float32 tensor amax; the dequantized value
    ``quantize`` returns is ``element * ((scale * amax) * (1 / (E * S)))`` (see
    :mod:`asicsim._src.numerics.two_level_kernel`).
    ``scaling``: a ``Scaling`` with a ``block_scale`` instead of a format (2-D tiles: ``across``)."""
    if scaling is None:
        element, plan = resolve_scaling(get_format(fmt), axis=axis)
    else:
        element, plan = get_format(fmt), scaling
    if plan.block_scale is None:
        raise ValueError(f"{getattr(fmt, 'name', fmt)!r}: not a two-level block format (its block scale is a "
                         "power of two and it has no tensor scale); use block_scales()")
    return _parts(jnp.asarray(x, jnp.float32), element, plan)


@functools.partial(jax.jit, static_argnums=(1, 2))
def _parts(x, element, plan):
    groups, ungroup = _grouped(x, plan)
    _, q, d, amax_t = two_level_groups(groups, element, plan.block_scale, plan.tensor_scale,
                                       Rounding(RoundMode.RNE), True, None)
    return ungroup(q), d, amax_t
