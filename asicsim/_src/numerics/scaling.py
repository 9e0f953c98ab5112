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

import jax
import jax.numpy as jnp
import numpy as np

from . import random as _random
from .catalog import get_format
from .fp32_scale import fp32_scaled
from .grid_rounding import round_to_grid
from .inputs import real_input
from .mx_floor import BITS_MIN_SIZE as BITS_MIN_SIZE
from .mx_floor import floor_blocks_bits, floor_blocks_float
from .pow2_scales import (
    amax_bits,
    element_qmin,
    fast_layout,
    group_amax_bits,
    pow2_scale_exponent,
    pow2_scaled_flat,
)
from .rounding import F32, Rounding, parse_rounding
from .scaling_plan import Scaling as Scaling
from .scaling_plan import resolve_scaling as resolve_scaling
from .two_level_kernel import two_level_groups

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
        return _blocks_in_place_or_groups(x, words, element, plan, rnd, saturate)
    if plan.granularity == "block" and x.ndim >= 1:  # a block longer than its axis is one block,
        n = x.shape[plan.axis % x.ndim]  # not padded to its length (block_size=10**12: 24 TB)
        plan = dataclasses.replace(plan, block_size=min(plan.block_size, max(n, 1)))
    if plan.granularity == "block" and plan.scale_format != "fp32" and plan.rule in ("floor", "up") and x.ndim >= 1:
        fast = floor_blocks_bits(x, element, plan, rnd, saturate, words)
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
    return _blocks_in_place_or_groups(x, words, element, plan, rnd, saturate)


def _blocks_in_place_or_groups(x, words, element, plan: Scaling, rnd: Rounding, saturate: bool):
    """:func:`_blocks_in_place` where it applies, else the general path."""
    in_place = _blocks_in_place(x, words, element, plan, rnd, saturate)
    return _scaled_groups(x, words, element, plan, rnd, saturate) if in_place is None else in_place


def _block_view(x: jax.Array, plan: Scaling):
    """``(view, axes, order)``: ``x`` split into its blocks by a reshape that only splits axes (no
    copy), the view's axes each block spans, and ``order`` putting one value per block (the
    view reduced over ``axes``, kept or not) in ``_grouped``'s block order; None where blocks
    need padding or a transpose (2-D tiles of an array of more than two axes)."""
    axis = plan.axis % x.ndim
    n = x.shape[axis]
    b = min(plan.block_size, max(n, 1))
    if n % b:
        return None
    if plan.across == 1:  # _grouped: the block axis moved last, then (rest..., blocks)
        split = (*x.shape[:axis], n // b)
        return (x.reshape(*split, b, *x.shape[axis + 1:]), (axis + 1,),
                lambda v: jnp.moveaxis(v.reshape(*split, *x.shape[axis + 1:]), axis, -1).reshape(-1))
    lines = x.shape[1 - axis] if x.ndim == 2 else 0
    a = min(plan.across, max(lines, 1))
    if x.ndim != 2 or lines % a:
        return None
    (r, rb), (c, cb) = ((n // b, b), (lines // a, a)) if axis == 0 else ((lines // a, a), (n // b, b))
    # _tiles: (lines // a, n // b) tiles of the array with the block axis last
    return (x.reshape(r, rb, c, cb), (1, 3),
            lambda v: (v.reshape(r, c).T if axis == 0 else v.reshape(r, c)).reshape(-1))


def _view_words(words, x: jax.Array, plan: Scaling, shape) -> jax.Array:
    """The general path's random words (``hash_bits`` over its (groups, members) layout: the
    block axis moved last, then 2-D tiles gathered) of each element of ``x``'s block view of
    ``shape`` (:func:`_block_view`: no padding), as index arithmetic that fuses."""
    axis = plan.axis % x.ndim
    moved = (*x.shape[:axis], *x.shape[axis + 1:], x.shape[axis])
    if plan.across == 1:
        r = _random.hash_bits(words, moved)  # (groups, block) row-major is ``moved`` row-major
    else:
        (lines, n), b = moved, min(plan.block_size, max(moved[1], 1))
        a = min(plan.across, max(lines, 1))
        r = (_random.hash_bits(words, (lines // a * (n // b), a * b)).reshape(lines // a, n // b, a, b)
             .transpose(0, 2, 1, 3).reshape(lines, n))
    return jnp.moveaxis(r, -1, axis).reshape(shape)


def _blocks_in_place(x, words, element, plan: Scaling, rnd: Rounding, saturate: bool):
    """fp32-scaled and two-level (NVFP4) blocks, and 2-D tiles (DeepSeek-V3's 1x128 and
    128x128), on a view of ``x`` split in place (:func:`_block_view`): ``_scaled_groups``' values
    and scales (its words too, :func:`_view_words`) without its transposed copy of ``x`` and
    back (blocks along another axis than the last, every 2-D tile); None where that path must
    run (power-of-two scales, padding)."""
    fp32 = plan.scale_format == "fp32" and plan.block_scale is None
    if plan.granularity != "block" or not (fp32 or plan.block_scale is not None) or x.ndim == 0:
        return None
    view = _block_view(x, plan)
    if view is None:
        return None
    v, axes, order = view
    if not fp32:
        rand = _view_words(words, x, plan, v.shape) if rnd.stochastic else None
        values, _, scales, _ = two_level_groups(v, element, plan.block_scale, plan.tensor_scale, rnd, saturate,
                                                rand, axes)
        return values.reshape(x.shape), order(scales)
    amax = amax_bits(v, axes=axes, keepdims=True)
    finite = amax < np.uint32(0x7F800000)
    values, scale = fp32_scaled(v, amax, finite, element, plan.symmetric, rnd, saturate, words,
                                lambda q: q.reshape(x.shape), axes, lambda w: _view_words(w, x, plan, v.shape))
    return values, order(scale)


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
    (asicsim._src.emulate.export reads a weight's codes and scales from it)."""

    rnd = parse_rounding(rounding)
    if rnd.stochastic:
        raise ValueError(f"scaled_parts: rounding {rounding!r} is stochastic; its bits need seed words")
    sat = element.saturate if saturate is None else bool(saturate)
    x, _ = _as_scalable(jnp.asarray(x, jnp.float32), plan)
    return _scaled_jit(x, jnp.zeros(2, jnp.uint32), element, plan, rnd, sat)
