"""Group-quantized weights (role scaling ``group``): the fake-quantized operand an emulated GEMM
uses (:func:`round_group`), and the same weights exported as integer codes plus scales and zero
points (:func:`export_weights`) with the :func:`dequantize` that reconstructs, bit for bit, what
the emulated GEMM multiplies by.

Groups run along the GEMM's contraction axis (several contraction axes: flattened in the order
the GEMM gives them), as GPTQ/AWQ group along a linear layer's input features. A stored weight
is exported along ``axis`` (default -2: the input axis of a Flax/Haiku ``(..., in, out)``
kernel; an Equinox ``Linear`` stores ``(out, in)``: pass ``axis=-1``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np

from asicsim._src.emulate.policy import RoleSpec
from asicsim._src.numerics.group_quant import GroupCodes, group_dequantize, group_quantize

#: the numpy dtype an exported scale is stored in (every scale is exactly representable in it)
SCALE_DTYPES = {"fp32": np.float32, "fp16": np.float16, "bf16": ml_dtypes.bfloat16,
                "e8m0": ml_dtypes.float8_e8m0fnu}


class QuantizedWeight(NamedTuple):
    """One exported weight. ``codes``: the weight's shape, int8 (signed formats) or uint8
    (unsigned, with a zero point), one code per element (int4 codes unpacked, one per byte);
    ``scales``: the weight's shape with ``axis`` of length ceil(K / group_size), in the scale
    format's dtype (:data:`SCALE_DTYPES`); ``zeros``: like ``scales``, uint8, or None when
    symmetric. The value of element k along ``axis`` is ``scales[k // group_size] * (codes[k] -
    zeros[k // group_size])`` computed in float32."""

    codes: np.ndarray
    scales: np.ndarray
    zeros: np.ndarray | None
    group_size: int
    axis: int
    format: str
    scale_format: str


def _kw(spec: RoleSpec) -> dict:
    return {"fmt": spec.format, "group_size": spec.group_size, "zero_point": spec.zero_point,
            "scale_format": spec.scale_format}


@jax.custom_jvp
def _ste(x, q):
    """``q``, differentiated as ``x`` (straight-through, as every other role rounding)."""
    return q


_ste.defjvp(lambda primals, tangents: (primals[1], tangents[0]))


def round_group(x: jax.Array, spec: RoleSpec, axis: int | Sequence[int] | None = None) -> jax.Array:
    """``x`` fake-quantized in groups along ``axis`` (default the last; several axes: flattened
    in the order given), keeping its dtype."""
    axes = (-1,) if axis is None else (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    axes = tuple(int(a) % x.ndim for a in axes)
    if not axes:  # nothing contracted (an outer product): every element its own group
        y = group_round_flat(x.reshape(-1, 1).astype(jnp.float32), spec)
        return _ste(x, y.reshape(x.shape).astype(x.dtype))
    keep = [i for i in range(x.ndim) if i not in axes]
    perm = [*keep, *axes]
    moved = jnp.transpose(x, perm)
    flat = moved.reshape(*moved.shape[:len(keep)], -1).astype(jnp.float32)
    y = group_round_flat(flat, spec).reshape(moved.shape)
    return _ste(x, jnp.transpose(y, np.argsort(perm)).astype(x.dtype))


def group_round_flat(x: jax.Array, spec: RoleSpec) -> jax.Array:
    """Groups along the last axis of ``x`` (float32 result)."""
    q = group_quantize(x, axis=-1, **_kw(spec))
    return group_dequantize(q, group_size=spec.group_size, axis=-1)


def export_weight(w, spec: RoleSpec, axis: int = -2) -> QuantizedWeight:
    """``w`` as integer codes, scales and zero points along ``axis`` (role spec with scaling ``group``)."""
    if spec.scaling != "group":
        raise ValueError(f"export_weight: the weight role has scaling = {str(spec.scaling)!r}; "
                         "integer codes are exported for scaling = 'group'")
    w = jnp.asarray(w)
    axis = int(axis) % w.ndim
    q = group_quantize(w.astype(jnp.float32), axis=axis, **_kw(spec))
    unsigned = spec.zero_point
    code_dtype = np.uint8 if unsigned else np.int8
    return QuantizedWeight(
        codes=np.asarray(q.codes).astype(code_dtype),
        scales=np.asarray(q.scales).astype(SCALE_DTYPES[spec.scale_format]),
        zeros=np.asarray(q.zeros).astype(np.uint8) if unsigned else None,
        group_size=int(spec.group_size), axis=axis, format=spec.format, scale_format=spec.scale_format)


def dequantize(qw: QuantizedWeight) -> jax.Array:
    """The float32 weight an exported :class:`QuantizedWeight` holds: bit-identical to what the
    emulated GEMM multiplies by (``round_role`` with the exporting role, grouped along ``axis``)."""
    zeros = np.zeros(qw.scales.shape, np.int32) if qw.zeros is None else qw.zeros.astype(np.int32)
    q = GroupCodes(jnp.asarray(qw.codes.astype(np.int32)), jnp.asarray(qw.scales.astype(np.float32)),
                   jnp.asarray(zeros))
    return group_dequantize(q, group_size=qw.group_size, axis=qw.axis)


def is_weight_leaf(x) -> bool:
    """A float array of rank >= 2: a weight matrix or kernel (biases and norms stay float)."""
    return hasattr(x, "ndim") and x.ndim >= 2 and jnp.issubdtype(x.dtype, jnp.floating)


def export_weights(params, spec: RoleSpec, axis: int = -2):
    """``params`` with every weight leaf (:func:`is_weight_leaf`) a :class:`QuantizedWeight`."""
    return jax.tree_util.tree_map(lambda x: export_weight(x, spec, axis) if is_weight_leaf(x) else x, params)


def dequantize_params(tree):
    """The inverse of :func:`export_weights`: each QuantizedWeight back to float32."""
    return jax.tree_util.tree_map(lambda x: dequantize(x) if isinstance(x, QuantizedWeight) else x, tree,
                                  is_leaf=lambda x: isinstance(x, QuantizedWeight))
