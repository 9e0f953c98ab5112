"""Weights exported as codes and scales under any weight-rounding recipe (issue 34 item 6):
per tensor, per channel, per block or 2-D tile (fp32 scales), per group (GPTQ/AWQ integer
codes, zero points), OCP MX (E8M0 exponents), two-level NVFP4 (E4M3 block scales under an
fp32 tensor amax), and unscaled formats (fp8, bf16, int8, fixed point):

    codes = export_codes(params, "int8_ptq_channel")   # {leaf: WeightCodes or the float leaf}
    save_codes("model.npz", codes); flat = load_codes("model.npz")   # .export_io
    weights = dequantize_codes(codes)  # float32, bit for bit the weights the emulated GEMMs use

A weight is exported in its GEMM's view: its contraction axes ``axes`` (flattened in the order
given, as the emulated GEMM flattens a ``dot_general``'s contracting dimensions) form K, the
other axes in order form N, and the *canonical* matrix is (N, K). ``codes`` keep the weight's
own shape; ``scales`` is a 2-D grid over the canonical matrix: ``scales[i, j]`` scales element
(n, k) with ``i = n // tile[0]``, ``j = k // tile[1]`` (per tensor: one; per channel: (N, 1);
blocks of b along K: (N, ceil(K / b)); DeepSeek-V3's 128x128 tiles: (ceil(N/128), ceil(K/128))).

Codes: integer and fixed-point formats as integers ``k`` (value ``k * 2**-frac_bits``; int8
codes are int8, uint4 codes uint8, one per byte); float formats (fp8, fp6, fp4, bf16) as their
bit patterns (uint8 / uint16), as ml_dtypes stores them. Scales by ``scale_kind``: ``pow2``
int32 exponents (MX's E8M0: value ``q * 2**e``, exact), ``fp32`` float32 factors (value the
float32 product ``q * s``), ``two_level`` float32 E4M3 values with ``tensor_amax``
(:func:`asicsim._src.numerics.two_level.two_level_dequantize`), ``group`` scales in the scale format
with ``zeros`` (``s * (k - z)``), ``delayed`` Transformer Engine's ``scale_inv`` (value the
float32 product ``q * scale_inv``; fp8_hybrid's weights), ``none`` (the codes are the values).

Each export is checked at once: its dequantized weight must equal, bit for bit, what
:func:`asicsim.round_role` gives the GEMM (an error names the leaf otherwise). Not
exported (an error says so): stochastic weight rounding (its bits come from the run's key),
rotations, ``delayed``/``static`` weight scaling with a margin, ``[first_last]`` (it depends on
the GEMM order, not on the weight). ``delayed`` and ``static`` weights are scaled by their
current amax, as the emulated model scales them without a training state or a calibration
(an amax history or a calibrated weight scale is not taken).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from asicsim._src.emulate.codes_layout import (
    canonical,
    element_name,
    element_values,
    from_canonical,
    spread,
    to_codes,
)
from asicsim._src.emulate.layer_rules import gemm_policy, key_name, match_rule
from asicsim._src.emulate.lsq_export import lsq_parts
from asicsim._src.emulate.policy import RoleSpec
from asicsim._src.emulate.recipes import load_recipe
from asicsim._src.emulate.role_rounding import _amax, delayed_codes, round_role
from asicsim._src.numerics import get_format
from asicsim._src.numerics.exact_div import divide
from asicsim._src.numerics.fp32_exact import fp32_mul
from asicsim._src.numerics.grid_rounding import mul_pow2
from asicsim._src.numerics.group_quant import GroupCodes, group_dequantize, group_quantize
from asicsim._src.numerics.quantize import quantize
from asicsim._src.numerics.rounding import parse_rounding
from asicsim._src.numerics.scaling import Scaling, _grouped, resolve_scaling, scaled_parts
from asicsim._src.numerics.two_level_kernel import two_level_dequantize, two_level_groups


class WeightCodes(NamedTuple):
    """One exported tensor (see the module doc for every field's meaning and layout)."""

    codes: np.ndarray  # the tensor's shape: integers k, or float bit patterns
    element: str  # element format name (int8, float8_e4m3fn, float4_e2m1fn, ...)
    scale_kind: str  # none | fp32 | pow2 | two_level | group
    scales: np.ndarray | None  # 2-D grid over the canonical (N, K) matrix
    tile: tuple[int, int]  # (rows of N, elements of K) one scale covers
    axes: tuple[int, ...]  # contraction axes, in the GEMM's order
    zeros: np.ndarray | None = None  # group zero points (like scales), uint8
    tensor_amax: np.float32 | None = None  # two-level: the fp32 tensor amax
    scale_format: str = ""  # fp32, e8m0, float8_e4m3fn, fp16, ...
    dtype: str = "float32"  # the weight's dtype: the emulated GEMM reads its rounded values cast to it


def _axes(axis, ndim: int, what: str) -> tuple[int, ...]:
    axes = tuple(range(ndim - 1)) if axis is None else (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    if not axes or not all(isinstance(a, (int, np.integer)) and -ndim <= a < ndim for a in axes):
        raise ValueError(f"export: {what}: axis={axis!r} for a {ndim}-d weight; allowed: contraction "
                         f"axes in {-ndim}..{ndim - 1} (None: all but the last)")
    axes = tuple(int(a) % ndim for a in axes)
    if len(set(axes)) != len(axes) or len(axes) == ndim:
        raise ValueError(f"export: {what}: axis={axis!r} repeats an axis or leaves no output axis")
    return axes


def _refuse(spec: RoleSpec, what: str) -> None:
    why = ("stochastic rounding: its bits come from the run's key" if spec.stochastic else
           "a rotation: the codes would be of the rotated weight" if spec.rotation is not None else
           f"scaling = {str(spec.scaling)!r} with a margin" if spec.scaling in ("delayed", "static") and spec.margin
           else f"scaling = {str(spec.scaling)!r}: learned steps are training state (TrainState.lsq), not in "
                "the recipe (export_codes(..., lsq_steps=lsq_weight_steps(...)) takes them)"
           if spec.scaling in ("lsq", "lsq_channel")
           else None)
    if why:
        raise ValueError(f"export: {what}: the weight role ({spec.format}) has {why}; codes and scales "
                         "are exported for deterministic per-tensor, channel, block, tile, group, MX, "
                         "two-level and unscaled weight roles")


def _plan(spec: RoleSpec):
    """(element, Scaling or None, saturate) of a non-group role on the canonical (N, K) matrix."""
    fmt = spec.spec
    if fmt.kind == "block":
        element, plan = resolve_scaling(fmt, axis=-1)
        if spec.tile is not None:
            plan = dataclasses.replace(plan, granularity="block", block_size=spec.tile[0], across=spec.tile[1])
        return element, plan, True if spec.saturate is None else spec.saturate
    sat = fmt.saturate if spec.saturate is None else spec.saturate
    if spec.scaling == "block":
        size, across = (spec.block_size, 1) if spec.tile is None else spec.tile
        return fmt, Scaling(granularity="block", axis=-1, block_size=size, across=across), sat
    plans = {"none": None, "tensor": Scaling(), "static": Scaling(), "channel": Scaling(granularity="channel", axis=0)}
    return fmt, plans[str(spec.scaling)], sat


def _tile(plan: Scaling | None, nk: tuple[int, int]) -> tuple[int, int]:
    n, k = max(nk[0], 1), max(nk[1], 1)
    if plan is None or plan.granularity == "tensor":
        return n, k
    if plan.granularity == "channel":
        return 1, k
    return min(plan.across, n), min(plan.block_size, k)


def _grid(scales, tile, nk):
    rows, cols = -(-max(nk[0], 1) // tile[0]), -(-max(nk[1], 1) // tile[1])
    return np.asarray(scales).reshape(rows, cols)


def export_tensor(x, spec: RoleSpec, axes: Sequence[int], what: str = "tensor") -> WeightCodes:
    """``x`` rounded as role ``spec`` rounds a GEMM operand contracted along ``axes``, as codes
    and scales (checked: :func:`dequantize_tensor` of the result is ``round_role(x, spec,
    axis=axes)`` bit for bit)."""
    _refuse(spec, what)
    x = jnp.asarray(x)
    axes = tuple(int(a) % x.ndim for a in axes)
    c = canonical(x.astype(jnp.float32), axes)
    nk = tuple(c.shape)
    kind, tile, element, fmt_name = role_layout(spec, nk)
    q, scales, zeros, amax_t = (None if v is None else np.asarray(v) for v in role_parts(c, spec))
    out = WeightCodes(codes=np.asarray(from_canonical(jnp.asarray(to_codes(q, element)), x.shape, axes)),
                      element=element_name(element), scale_kind=kind,
                      scales=None if scales is None else _grid(scales, tile, nk), tile=tile, axes=axes,
                      zeros=None if zeros is None else _grid(zeros, tile, nk).astype(np.uint8),
                      tensor_amax=None if amax_t is None else np.float32(amax_t), scale_format=fmt_name,
                      dtype=str(x.dtype))
    want = np.asarray(_emulated(x, spec, axes).astype(jnp.float32)).view(np.uint32)
    got = np.asarray(dequantize_tensor(out).astype(jnp.float32)).view(np.uint32)
    if not np.array_equal(want, got):
        raise ValueError(f"export: {what}: {np.sum(want != got)} of {want.size} element(s) do not dequantize to "
                         f"the emulated weight bit for bit (format {spec.format}, scaling {spec.scaling}): a NaN/inf "
                         "or a subnormal-scaled weight; nothing is exported rather than a wrong number")
    return out


@functools.partial(jax.jit, static_argnums=(1, 2))
def _emulated(x, spec: RoleSpec, axes):
    """The weight as the emulated GEMM rounds it (delayed/static roles: by an estimate of 0, the
    interpreter's value without a training state or calibration: their current amax)."""
    return round_role(x, spec, axis=axes, amax=jnp.float32(0) if spec.scaling in ("delayed", "static") else None)


def role_layout(spec: RoleSpec, nk) -> tuple[str, tuple[int, int], object, str]:
    """(scale kind, tile, element format, scale format name) of role ``spec`` on an (N, K) matrix."""
    if spec.scaling == "group":
        return "group", (1, min(spec.group_size, max(nk[1], 1))), spec.spec, spec.scale_format
    if spec.scaling == "delayed":
        return "delayed", (max(nk[0], 1), max(nk[1], 1)), spec.spec, "fp32"
    element, plan, _ = _plan(spec)
    if plan is None:
        return "none", _tile(plan, nk), element, ""
    if plan.block_scale is not None:
        return "two_level", _tile(plan, nk), element, plan.block_scale.name
    return ("fp32" if plan.scale_format == "fp32" else "pow2"), _tile(plan, nk), element, plan.scale_format


@functools.partial(jax.jit, static_argnums=1)
def role_parts(c, spec: RoleSpec):
    """(element values, flat scales, flat zero points, tensor amax) of the (N, K) matrix ``c``."""
    nk = tuple(c.shape)
    kind, tile, element, _ = role_layout(spec, nk)
    if kind == "group":
        g = group_quantize(c, fmt=spec.format, group_size=spec.group_size, axis=-1, zero_point=spec.zero_point,
                           scale_format=spec.scale_format)
        return g.codes.astype(jnp.float32), g.scales, g.zeros if spec.zero_point else None, None
    if kind == "delayed":  # Transformer Engine's arithmetic, by the current amax
        q, scale_inv = delayed_codes(c, spec, _amax(c))
        return q, scale_inv.reshape(1), None, None
    _, plan, sat = _plan(spec)
    if kind == "none":
        return quantize(c, element, spec.rounding, saturate=sat), None, None, None
    if kind == "two_level":
        groups, ungroup = _grouped(c, plan)
        _, qg, d, amax_t = two_level_groups(groups, element, plan.block_scale, plan.tensor_scale,
                                             parse_rounding(spec.rounding), sat, None)
        return ungroup(qg), d, None, amax_t if plan.tensor_scale else None
    values, scales = scaled_parts(c, element, plan, spec.rounding, sat)
    s = spread(scales.reshape(-(-max(nk[0], 1) // tile[0]), -1), tile, nk)
    if kind == "fp32":  # the element value the float32 product q * s came from (checked by the caller)
        return quantize(divide(values, s), element, "rne", saturate=True), scales, None, None
    return mul_pow2(values, -s), scales, None, None


def dequantize_tensor(wc: WeightCodes, values=None) -> jax.Array:
    """The tensor ``wc`` holds (in its ``dtype``): bit for bit the emulated GEMM's rounded operand
    (``values``: its codes' element values, decoded elsewhere; default :func:`element_values`)."""
    if wc.scale_kind not in ("none", "fp32", "pow2", "two_level", "group", "delayed"):
        raise ValueError(f"dequantize: scale_kind={wc.scale_kind!r}; allowed: none, fp32, pow2, two_level, group, delayed")
    zeros = None if wc.zeros is None else jnp.asarray(wc.zeros.astype(np.int32))
    scales = None if wc.scales is None else jnp.asarray(np.asarray(wc.scales).astype(
        np.int32 if wc.scale_kind == "pow2" else np.float32))
    amax = None if wc.tensor_amax is None else jnp.float32(wc.tensor_amax)
    q = element_values(wc.codes, wc.element) if values is None else jnp.asarray(values, jnp.float32)
    return _dequantize(q, scales, zeros, amax, wc.scale_kind, wc.tile, tuple(wc.axes), wc.element, wc.scale_format,
                       wc.dtype)


@functools.partial(jax.jit, static_argnums=(4, 5, 6, 7, 8, 9))
def _dequantize(q, scales, zeros, amax, kind, tile, axes, element, scale_format, dtype):
    shape = q.shape
    q = canonical(q, axes)
    nk = tuple(q.shape)
    if kind == "none":
        c = q
    elif kind == "group":
        zeros = jnp.zeros(scales.shape, jnp.int32) if zeros is None else zeros
        c = group_dequantize(GroupCodes(q.astype(jnp.int32), scales, zeros), group_size=tile[1], axis=-1)
    else:
        s = spread(scales, tile, nk)
        if kind == "pow2":
            c = mul_pow2(q, s)
        elif kind == "delayed":  # the float32 product as the emulated GEMM computes it
            c = q * s
        elif kind == "fp32":
            c = fp32_mul(q, s)
        else:
            c = two_level_dequantize(q, s, amax, get_format(element), get_format(scale_format))
    return from_canonical(c, shape, axes).astype(dtype)


def is_weight_leaf(x) -> bool:
    """A float array of rank >= 2: a weight matrix or kernel (biases and norms stay float)."""
    return hasattr(x, "ndim") and x.ndim >= 2 and jnp.issubdtype(x.dtype, jnp.floating)


def export_codes(params, policy, *, axis: int | Sequence[int] | Callable | None = None,
                 where: Callable[[str], bool] | None = None, lsq_steps: dict | None = None):
    """``params`` with every weight leaf (float, rank >= 2; ``where(path)`` picks them, default
    all) a :class:`WeightCodes` under ``policy``'s ``weight`` role (a ``[[layers]]`` rule
    matching the leaf's path replaces it, as in :func:`asicsim.emulate`). ``axis``: the
    contraction axes of each weight, in the GEMM's order (None: all but the last, Flax/Haiku
    ``(..., in, out)`` kernels and HWIO convolutions; -1 for Equinox's ``(out, in)``), or a
    callable ``(path, leaf) -> axes``. ``lsq_steps``: ``{path: learned step}`` of a recipe with
    learned step sizes (:func:`asicsim._src.emulate.lsq_export.lsq_weight_steps`)."""
    pol = load_recipe(policy)
    if pol.first_last:
        raise ValueError(f"export: recipe {pol.name!r} has [first_last] roles, which follow the GEMM order, "
                         "not the weight; export under a recipe without them")
    flat, treedef = jax.tree_util.tree_flatten_with_path(params)
    out = []
    for keys, leaf in flat:
        path = "/".join(key_name(k) for k in keys)
        if not is_weight_leaf(leaf) or (where is not None and not where(path)):
            out.append(leaf)
            continue
        rule = match_rule(pol.layers, path) if pol.layers else None
        spec = gemm_policy(pol, rule, False).role("weight")
        if spec is None or spec.is_identity:
            out.append(leaf)
            continue
        ax = _axes(axis(path, leaf) if callable(axis) else axis, leaf.ndim, path)
        if lsq_steps is not None and path in lsq_steps and str(spec.scaling) in ("lsq", "lsq_channel"):
            out.append(_export_lsq(leaf, spec, ax, lsq_steps[path], path))
        else:
            out.append(export_tensor(leaf, spec, ax, what=path))
    return jax.tree_util.tree_unflatten(treedef, out)


def _export_lsq(x, spec: RoleSpec, axes, step, what: str) -> WeightCodes:
    """LSQ's codes with the learned ``step`` as fp32 scales (:mod:`.lsq_export`), checked."""
    codes, grid, tile, element, rounded = lsq_parts(x, spec, axes, step, what)
    out = WeightCodes(codes=codes, element=element, scale_kind="fp32", scales=grid, tile=tile, axes=tuple(axes),
                      scale_format="fp32", dtype=str(jnp.asarray(x).dtype))
    if not np.array_equal(np.asarray(rounded.astype(jnp.float32)).view(np.uint32),
                          np.asarray(dequantize_tensor(out).astype(jnp.float32)).view(np.uint32)):
        raise ValueError(f"export: {what}: the codes do not dequantize to the LSQ-rounded weight bit for bit (a "
                         "NaN/inf weight); nothing is exported")
    return out


def dequantize_codes(tree):
    """The inverse of :func:`export_codes`: each :class:`WeightCodes` back to float32."""
    return jax.tree_util.tree_map(lambda x: dequantize_tensor(x) if isinstance(x, WeightCodes) else x, tree,
                                  is_leaf=lambda x: isinstance(x, WeightCodes))

