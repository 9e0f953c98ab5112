"""Scaled quantization: per-tensor, per-channel and per-block scales, and block formats (MX, BFP).

A scale is computed per group from the group's largest magnitude (amax, taken on the uint32
bits, so no float op can flush it). Power-of-two scales (``pow2``, ``e8m0``) never touch the
values: the element grid itself is shifted by the exponent, so the result is rounded exactly
once. ``fp32`` scales divide in float32 arithmetic, as a fake-quant unit would, and multiply
back (so outputs are ``q * s`` rounded to float32); a subnormal scale is rounded up and an
element is never carried past the format's max by its scale's rounding (``fp32_scale``).
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np

from . import random as _random
from .catalog import get_format
from .formats import BLOCK_SIZES, MAX_BLOCK_SIZE, BlockFormat, FloatFormat
from .fp32_scale import fp32_scaled
from .grid_rounding import round_to_grid
from .inputs import real_input
from .mx_floor import MAGIC_MIN_SIZE as MAGIC_MIN_SIZE
from .mx_floor import floor_blocks_float, floor_blocks_magic
from .pow2_scales import (
    amax_bits,
    element_qmin,
    fast_layout,
    group_amax_bits,
    pow2_scale_exponent,
    pow2_scaled_flat,
)
from .rounding import F32, Rounding, parse_rounding
from .two_level_kernel import two_level_groups


@dataclass(frozen=True, kw_only=True)
class Scaling:
    """How to scale a tensor before rounding it onto an element format.

    granularity: ``tensor`` (one scale), ``channel`` (one per index of ``axis``), ``block``
      (one per ``block_size`` consecutive elements along ``axis``; a short last block is its own).
    symmetric: scale from amax; ``False`` adds an integer zero point (integer formats, fp32 scale).
    scale_format: ``fp32`` (amax / max), ``pow2`` (a power of two, within float32) or ``e8m0``
      (a power of two in [2**-127, 2**127], stored as float8_e8m0fnu).
    rule: how a power-of-two scale is picked: ``floor`` (OCP MX: floor(log2 amax) - emax_elem),
      ``up`` (smallest scale with no saturation), ``nearest`` (log2(amax / max) rounded).
    across: block granularity over 2-D tiles: a block is ``block_size`` elements along ``axis``
      by ``across`` consecutive lines of the other axes (flattened in order), e.g. DeepSeek-V3's
      128x128 weight tiles; 1 (default) is a block along ``axis`` only.
    block_scale: the float format a block scale is rounded onto (E4M3, bf16, fp32) with
      ``tensor_scale`` (a per-tensor fp32 scale above the block scales) -- a two-level block
      format such as NVFP4, computed by :mod:`asicsim.numerics.two_level`; None: ``scale_format``.
    """

    granularity: Literal["tensor", "channel", "block"] = "tensor"
    axis: int = -1
    block_size: int | None = None
    symmetric: bool = True
    scale_format: Literal["fp32", "pow2", "e8m0"] = "fp32"
    rule: Literal["floor", "up", "nearest"] = "floor"
    exp_range: tuple[int, int] | None = None
    across: int = 1
    block_scale: FloatFormat | None = None
    tensor_scale: bool = False

    @property
    def exponent_range(self) -> tuple[int, int]:
        """Allowed scale exponents: ``exp_range``, else e8m0's [-127, 127] or float32's normal
        powers of two [-126, 127] for ``pow2``."""
        if self.exp_range is not None:
            lo, hi = self.exp_range
        else:
            lo, hi = (-127, 127) if self.scale_format == "e8m0" else (-126, 127)
        if self.scale_format == "e8m0":
            lo, hi = max(lo, -127), min(hi, 127)
        return lo, hi

    def __post_init__(self) -> None:
        checks = [
            (self.granularity in ("tensor", "channel", "block"), "granularity", "'tensor', 'channel', 'block'"),
            (self.scale_format in ("fp32", "pow2", "e8m0"), "scale_format", "'fp32', 'pow2', 'e8m0'"),
            (self.rule in ("floor", "up", "nearest"), "rule", "'floor', 'up', 'nearest'"),
            (
                self.granularity != "block" or 1 <= (self.block_size or 0) <= MAX_BLOCK_SIZE,
                "block_size",
                f"{BLOCK_SIZES} for block granularity",
            ),
            (self.symmetric or self.scale_format == "fp32", "symmetric", "True unless scale_format='fp32'"),
        ]
        if not (isinstance(self.axis, (int, np.integer)) and not isinstance(self.axis, bool)):
            raise ValueError(f"Scaling: axis={self.axis!r}; allowed: an integer")
        if not isinstance(self.symmetric, (bool, np.bool_)):  # 'no' is truthy: it was symmetric
            raise ValueError(f"Scaling: symmetric={self.symmetric!r}; allowed: True or False")
        if self.block_size is not None and not (
                isinstance(self.block_size, (int, np.integer)) and not isinstance(self.block_size, bool)):
            raise ValueError(f"Scaling: block_size={self.block_size!r}; allowed: {BLOCK_SIZES} or None")
        checks += [
            (isinstance(self.across, (int, np.integer)) and not isinstance(self.across, bool)
             and 1 <= self.across <= MAX_BLOCK_SIZE and (self.across == 1 or self.granularity == "block"),
             "across", f"{BLOCK_SIZES}, and above 1 only with block granularity"),
            (self.block_scale is None or isinstance(self.block_scale, FloatFormat), "block_scale",
             "a float format (e.g. float8_e4m3fn) or None"),
            (isinstance(self.tensor_scale, (bool, np.bool_)) and (not self.tensor_scale or self.block_scale is not None),
             "tensor_scale", "True (with a block_scale) or False"),
            (self.block_scale is None or self.symmetric, "symmetric", "True with a block_scale"),
        ]
        for ok, name, allowed in checks:
            if not ok:
                raise ValueError(f"Scaling: {name}={getattr(self, name)!r}; allowed: {allowed}")


def resolve_scaling(spec, *, axis=None, block_size=None, scaling=None):
    """(element format, Scaling) for a scaled quantization, or None for plain rounding."""
    if isinstance(spec, BlockFormat):
        if scaling is not None:
            raise ValueError(f"{spec.name!r} brings its own block scaling; do not pass scaling=")
        if spec.two_level:
            return spec.element, Scaling(
                granularity="tensor" if spec.block_size is None else "block",
                axis=-1 if axis is None else axis,
                block_size=spec.block_size if block_size is None else block_size,
                block_scale=spec.scale, tensor_scale=spec.tensor_scale is not None,
            )
        lo, hi = spec.scale.emin, spec.scale.emax
        plan = Scaling(
            granularity="tensor" if spec.block_size is None else "block",
            axis=-1 if axis is None else axis,
            block_size=spec.block_size if block_size is None else block_size,
            scale_format="e8m0" if spec.scale.name == "float8_e8m0fnu" else "pow2",
            rule=spec.scale_rule,
            exp_range=(lo, hi),
        )
        return spec.element, plan
    if isinstance(scaling, str):
        scaling = {
            "tensor": Scaling(),
            "channel": Scaling(granularity="channel", axis=-1 if axis is None else axis),
        }.get(scaling) or _bad_scaling(scaling)
    if scaling is None and (axis is not None or block_size is not None):
        if block_size is not None:
            scaling = Scaling(granularity="block", axis=-1 if axis is None else axis, block_size=block_size)
        else:
            scaling = Scaling(granularity="channel", axis=axis)
    if scaling is None:
        return None
    if not scaling.symmetric and spec.kind != "int":
        raise ValueError(f"asymmetric scaling needs an integer format, got {spec.name!r}")
    return spec, scaling


def _bad_scaling(name):
    raise ValueError(f"scaling={name!r}; allowed: 'tensor', 'channel', or a Scaling(...)")


# --- grouping -----------------------------------------------------------------------------------


def _grouped(x: jax.Array, plan: Scaling):
    """View ``x`` as (groups..., members) so a reduction over the last axis gives each scale (a
    0-d ``x`` as one element, as ``_as_scalable`` scales it)."""
    if x.ndim == 0:
        groups, ungroup = _grouped(x.reshape(1), plan)
        return groups, lambda g: ungroup(g).reshape(())
    if plan.granularity == "tensor":
        return x.reshape(1, -1), lambda g: g.reshape(x.shape)
    axis = plan.axis % x.ndim
    moved = jnp.moveaxis(x, axis, -1)
    if plan.granularity == "channel":
        flat = moved.reshape(-1, moved.shape[-1]).T  # (channels, members)
        return flat, lambda g: jnp.moveaxis(g.T.reshape(moved.shape), -1, axis)
    if plan.across > 1:
        return _tiles(moved, plan, axis)
    n, b = moved.shape[-1], min(plan.block_size, max(moved.shape[-1], 1))  # a longer block: one
    pad = (-n) % b
    padded = jnp.pad(moved, [(0, 0)] * (moved.ndim - 1) + [(0, pad)])
    blocks = padded.reshape(-1, b)

    def ungroup(g):
        back = g.reshape(padded.shape)[..., :n]
        return jnp.moveaxis(back, -1, axis)

    return blocks, ungroup


def _tiles(moved: jax.Array, plan: Scaling, axis: int):
    """``moved`` (the block axis last) as (tiles, members): ``block_size`` along the last axis by
    ``across`` lines of the others flattened, each tile a row (short edge tiles padded with +0,
    which no amax sees)."""
    n = moved.shape[-1]
    lines = int(np.prod(moved.shape[:-1], dtype=np.int64))
    b, a = min(plan.block_size, max(n, 1)), min(plan.across, max(lines, 1))
    flat = moved.reshape(lines, n)
    padded = jnp.pad(flat, [(0, (-lines) % a), (0, (-n) % b)])
    rows, cols = padded.shape
    tiles = padded.reshape(rows // a, a, cols // b, b).transpose(0, 2, 1, 3).reshape(-1, a * b)

    def ungroup(g):
        back = g.reshape(rows // a, cols // b, a, b).transpose(0, 2, 1, 3).reshape(rows, cols)
        return jnp.moveaxis(back[:lines, :n].reshape(moved.shape), -1, axis)

    return tiles, ungroup


def scaled_quantize(x, element, plan: Scaling, rnd: Rounding, saturate: bool, words):
    x, restore = _as_scalable(x, plan)
    if x.size == 0:
        return restore(x)  # no element, no scale: an empty result of the same shape
    return restore(_scaled_ste(x, words, element, plan, rnd, saturate))


def _as_scalable(x: jax.Array, plan: Scaling):
    """(x to scale, how to give the result x's shape). A 0-d array is scaled as a 1-element
    vector: one tensor, channel or block of one element (``axis`` may then be 0 or -1). An
    ``axis`` outside the array is an error (it used to wrap around: axis=5 of a 2-d array acted
    as axis 1)."""
    ndim = max(x.ndim, 1)
    if plan.granularity != "tensor" and not -ndim <= plan.axis < ndim:
        raise ValueError(f"axis={plan.axis} is out of range for a {x.ndim}-d array of shape {x.shape}; "
                         f"allowed: {-ndim}..{ndim - 1}")
    if x.ndim == 0:
        return x.reshape(1), lambda v: v.reshape(())
    return x, lambda v: v


@functools.partial(jax.custom_jvp, nondiff_argnums=(2, 3, 4, 5))
def _scaled_ste(x, words, element, plan, rnd, saturate):
    return _scaled_jit(x, words, element, plan, rnd, saturate)[0]


@_scaled_ste.defjvp
def _scaled_ste_jvp(element, plan, rnd, saturate, primals, tangents):
    return _scaled_ste(*primals, element, plan, rnd, saturate), tangents[0]


@functools.partial(jax.jit, static_argnums=(2, 3, 4, 5))
def _scaled_jit(x, words, element, plan: Scaling, rnd: Rounding, saturate: bool):
    """(values, per-group scale) -- the scale is an exponent (int32) or an fp32 factor."""
    if x.dtype != jnp.float32:
        raise TypeError(f"scaled quantization takes float32, got {x.dtype}")
    if plan.block_scale is not None or plan.across > 1:  # two-level scales, 2-D tiles: per group
        return _scaled_groups(x, words, element, plan, rnd, saturate)
    if plan.granularity == "block" and x.ndim >= 1:  # a block longer than its axis is one block,
        n = x.shape[plan.axis % x.ndim]  # not padded to its length (block_size=10**12: 24 TB)
        plan = dataclasses.replace(plan, block_size=min(plan.block_size, max(n, 1)))
    if plan.granularity == "block" and plan.scale_format != "fp32" and plan.rule in ("floor", "up") and x.ndim >= 1:
        fast = floor_blocks_magic(x, element, plan, rnd, saturate)
        if fast is None:
            fast = floor_blocks_float(x, element, plan, rnd, saturate)
        if fast is not None:
            return fast
    return _scaled_exact(x, words, element, plan, rnd, saturate)


def _scaled_exact(x, words, element, plan: Scaling, rnd: Rounding, saturate: bool):
    """:func:`_scaled_jit` on the uint32 bits: every layout, rule and rounding mode."""

    if plan.scale_format != "fp32" and fast_layout(x.shape, plan) and element_qmin(element) >= -124:
        return pow2_scaled_flat(x, words, element, plan, rnd, saturate)
    if (plan.scale_format != "fp32" and plan.granularity == "block" and x.ndim >= 1 and not rnd.stochastic
            and element_qmin(element) >= -124):
        # Blocks along another axis, or a length the block size does not divide (a GEMM's K of
        # 75 or 25): the same groups as ``_grouped`` makes (the axis moved last, padded with +0,
        # which no amax sees), rounded by the fast path instead of the per-element shifted grid
        # (which XLA:CPU runs several times slower). Same values and scales; stochastic rounding
        # keeps the general path, whose random bits are drawn in the (groups, block) layout.
        axis = plan.axis % x.ndim
        moved = jnp.moveaxis(x, axis, -1)
        n = moved.shape[-1]
        padded = jnp.pad(moved, [(0, 0)] * (moved.ndim - 1) + [(0, (-n) % plan.block_size)])
        fast = dataclasses.replace(plan, axis=-1)
        values, scale = pow2_scaled_flat(padded, words, element, fast, rnd, saturate)
        return jnp.moveaxis(values[..., :n], -1, axis), scale
    if plan.scale_format == "fp32" and plan.granularity != "block" and x.ndim >= 1:
        keep = plan.axis % x.ndim if plan.granularity == "channel" else None
        axes = tuple(i for i in range(x.ndim) if i != keep)  # reduce in place: no transpose
        amax = amax_bits(x, axes=axes, keepdims=True)
        finite = amax < np.uint32(0x7F800000)
        return fp32_scaled(x, amax, finite, element, plan.symmetric, rnd, saturate, words, lambda v: v, axes)
    return _scaled_groups(x, words, element, plan, rnd, saturate)


def _scaled_groups(x, words, element, plan: Scaling, rnd: Rounding, saturate: bool):
    """The general path: ``x`` viewed as (groups, members) by ``_grouped``, one scale per group."""

    groups, ungroup = _grouped(x, plan)
    rand = _random.hash_bits(words, groups.shape) if rnd.stochastic else None
    if plan.block_scale is not None:
        values, _, scales, _ = two_level_groups(groups, element, plan.block_scale, plan.tensor_scale, rnd, saturate, rand)
        return ungroup(values), scales
    amax = group_amax_bits(groups)
    finite = amax < np.uint32(0x7F800000)
    if plan.scale_format == "fp32":
        return fp32_scaled(groups, amax, finite, element, plan.symmetric, rnd, saturate, words, ungroup)
    shift = pow2_scale_exponent(amax, element, plan)
    bits = jax.lax.bitcast_convert_type(groups, jnp.uint32)
    shift_b = jnp.broadcast_to(shift, groups.shape)
    out = round_to_grid(jnp, F32, bits, element, rnd, saturate, rand, shift=shift_b)
    out = jnp.where(finite, out, np.uint32(F32.nan))  # a NaN/inf anywhere: the scale is NaN
    values = jax.lax.bitcast_convert_type(out, jnp.float32)
    scale_exp = jnp.where(finite, shift, jnp.iinfo(jnp.int32).min)
    return ungroup(values), scale_exp[..., 0]


def block_scales(x, fmt, *, axis: int | None = None, scaling=None) -> jax.Array:
    """Scale of each group as ``quantize`` picks it: int32 exponents for power-of-two scales
    (``int32.min`` where the group holds NaN/inf), float32 factors for fp32 scales and for the
    block scales of two-level formats (NVFP4's E4M3 values; NaN for a NaN/inf group). ``axis``,
    ``scaling``: as for ``quantize``."""

    element, plan = resolve_scaling(get_format(fmt), axis=axis, scaling=scaling)
    words = jnp.zeros(2, jnp.uint32)
    x, _ = _as_scalable(jnp.asarray(real_input(x, "block_scales"), jnp.float32), plan)
    if x.size == 0:  # no group: no scale
        return jnp.zeros(0, jnp.float32 if plan.scale_format == "fp32" else jnp.int32)
    return _scaled_jit(x, words, element, plan, parse_rounding("rne"), True)[1]


def scaled_parts(x, element, plan: Scaling, rounding="rne", saturate: bool | None = None):
    """(values, scales) of float32 ``x`` rounded onto ``element`` (a scalar format) by ``plan``
    in one pass, as ``quantize(x, element, rounding, saturate=saturate, scaling=plan)`` rounds it:
    the values, and one scale per group in :func:`block_scales`' order and kind (int32
    exponents, or float32 factors and two-level block scales). Deterministic rounding only
    (asicsim.emulate.export reads a weight's codes and scales from it)."""

    rnd = parse_rounding(rounding)
    if rnd.stochastic:
        raise ValueError(f"scaled_parts: rounding {rounding!r} is stochastic; its bits need seed words")
    sat = element.saturate if saturate is None else bool(saturate)
    x, _ = _as_scalable(jnp.asarray(x, jnp.float32), plan)
    return _scaled_jit(x, jnp.zeros(2, jnp.uint32), element, plan, rnd, sat)
