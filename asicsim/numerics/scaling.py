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
import math
from dataclasses import dataclass
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np

from . import random as _random
from .catalog import get_format
from .exact_div import divide
from .formats import BLOCK_SIZES, MAX_BLOCK_SIZE, BlockFormat, FloatFormat, emax_of
from .fp32_scale import fp32_scaled
from .fp32_scale import round_bits as _round_bits
from .grid_rounding import fast_round32, round_to_grid
from .inputs import real_input
from .rounding import F32, Rounding, RoundMode, parse_rounding
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


def group_amax_bits(groups: jax.Array) -> jax.Array:
    """Largest magnitude of each group, as uint32 bits (NaN/inf compare above every finite)."""
    a = jax.lax.bitcast_convert_type(groups, jnp.uint32) & np.uint32(0x7FFFFFFF)
    return jnp.max(a, axis=-1, keepdims=True)


def pow2_scale_exponent(amax_bits: jax.Array, element, plan: Scaling) -> jax.Array:
    """Shared exponent per group, by the plan's rule, clamped to the scale format's range."""
    e_field = (amax_bits >> np.uint32(23)).astype(jnp.int32)
    sub_lead = 31 - jax.lax.clz(amax_bits).astype(jnp.int32)  # subnormal amax
    log2_floor = jnp.where(e_field > 0, e_field - 127, sub_lead - 149)
    norm_man = jnp.where(
        e_field > 0,
        amax_bits & np.uint32(0x7FFFFF),
        (amax_bits << jnp.clip(23 - sub_lead, 0, 31).astype(jnp.uint32)) & np.uint32(0x7FFFFF),
    )
    emax = emax_of(element)
    elem_man = np.uint32(np.array(math.ldexp(element.max, -emax), np.float32).view(np.uint32) & 0x7FFFFF)
    e = log2_floor - emax
    if plan.rule == "up":
        e = e + (norm_man > elem_man).astype(jnp.int32)
    elif plan.rule == "nearest":
        ratio = divide(
            jax.lax.bitcast_convert_type(norm_man | np.uint32(0x3F800000), jnp.float32),
            math.ldexp(element.max, -emax),
        )
        e = e + (ratio >= np.float32(math.sqrt(2))).astype(jnp.int32)
        e = e - (ratio < np.float32(math.sqrt(0.5))).astype(jnp.int32)
    lo, hi = plan.exponent_range
    return jnp.clip(jnp.where(amax_bits == 0, lo, e), lo, hi)


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
        fast = _floor_blocks_magic(x, element, plan, rnd, saturate)
        if fast is None:
            fast = _floor_blocks_float(x, element, plan, rnd, saturate)
        if fast is not None:
            return fast
    return _scaled_exact(x, words, element, plan, rnd, saturate)


# Tensors below this many elements keep ``_floor_blocks_float`` (unpadded where the last block
# is short) and an integer block amax: the pad, the cond and the slice of ``_floor_blocks_magic``
# cost more than they save there. Measured in training, where a GRU's GEMMs run inside a scan:
# mxfp8 on hidden 16 (tensors of 1600-4800 elements) 1.69 -> 1.45x and hidden 32 (3200-9600)
# 1.58 -> 1.51x with 4096 -> 12288; hidden 64 (19200) is faster with the magic path.
MAGIC_MIN_SIZE = 12288


def _floor_blocks_float(x, element, plan: Scaling, rnd: Rounding, saturate: bool):
    """Power-of-two block scaling by the OCP MX ``floor`` rule in float ops, in ``x``'s own layout
    (the blocked axis split in two, no transpose): amax per block, ``x * 2**-s``, the float fast
    rounding, ``* 2**s``; the same bits as the integer path for every input. None where it does
    not apply (no float fast rounding for the element; element emax < 1 or qmin < -24). The
    block exponents: ``_floor_block_exponents``.

    The float products are exact except where XLA:CPU flushes subnormals: a product below
    2**-126 rounds to +-0 either way (below half the smallest quantum, 2**(qmin-1)), and only
    blocks with ``s < -100`` (amax below ~2**-92) can hold the two cases that differ: a
    subnormal input that scales to a nonzero element (taken as the integer ``mag`` converted
    exactly, times ``2**(-149 - s)``), and a result ``q * 2**s`` that is subnormal or needs
    ``2**-127`` (built from ``w = |q| * 2**(s + 149)``, an exact float: its integer value below
    2**23 is the subnormal's bits, above it ``w``'s exponent less 149).
    """

    if emax_of(element) < 1 or element_qmin(element) < -24:
        return None
    axis = plan.axis % x.ndim
    n, b = x.shape[axis], min(plan.block_size, x.shape[axis])
    # A small tensor with a short last block is not padded: its per-block values come from a
    # reduce_window and are read per element through a broadcast. Padding x and slicing the result
    # were two more XLA:CPU kernels, ~40 % of such a rounding (a GRU's dW operands, M = 100).
    window = n % b != 0 and x.size < MAGIC_MIN_SIZE
    padded, blocked, amax, shift = _floor_block_exponents(x, element, plan, window=window)
    if window:
        blocked = x
    bits = jax.lax.bitcast_convert_type(blocked, jnp.int32)
    mag = bits & np.int32(0x7FFFFFFF)
    finite = amax < np.int32(0x7F800000)
    tiny = shift < -100

    def pow2(e):  # 2**e for integer arrays e in [-126, 127]
        return jax.lax.bitcast_convert_type((e + 127) << 23, jnp.float32)

    # Per-block factors as one array behind a barrier: XLA:CPU reads them per block in the
    # elementwise pass (otherwise it recomputed them per element, unvectorised, at 2-4x the cost).
    factors = jnp.concatenate([
        pow2(-jnp.minimum(shift, 126)),  # 2**-s (s <= 126 as emax >= 1)
        jnp.where(tiny, pow2(-149 - jnp.clip(shift, -127, -23)), 0),  # subnormal inputs
        jnp.where(finite, pow2(jnp.clip(shift, -126, 127)), np.float32(np.nan)),  # 2**s
        jnp.where(tiny, pow2(jnp.clip(shift, -127, -100) + 149), 0),  # tiny outputs
    ], axis=axis + 1)
    factors = jax.lax.optimization_barrier(factors)
    down, down_sub, up, up_tiny = jnp.split(factors, 4, axis=axis + 1)
    if window:  # per element: each block's values repeated b times along the axis, cut to n
        down, down_sub, up, up_tiny = (_per_element(f, axis, b, n) for f in (down, down_sub, up, up_tiny))

    sign = bits & np.int32(-0x80000000)
    from_sub = jax.lax.bitcast_convert_type(mag.astype(jnp.float32) * down_sub, jnp.int32) | sign
    y = jnp.where(mag < np.int32(1 << 23), jax.lax.bitcast_convert_type(from_sub, jnp.float32), blocked * down)
    q = fast_round32(y, element, rnd, saturate)
    if q is None:
        return None
    w = jnp.abs(q) * up_tiny
    w_bits = jax.lax.bitcast_convert_type(w, jnp.int32)
    small = jnp.where(w < np.float32(2.0**23), w.astype(jnp.int32), w_bits - np.int32(149 << 23))
    small = jax.lax.bitcast_convert_type(small | (jax.lax.bitcast_convert_type(q, jnp.int32) & np.int32(-0x80000000)),
                                         jnp.float32)
    tiny_out = up_tiny > 0
    if not saturate:  # an overflow's inf/NaN is no tiny number: its bits are not w's (gave 7e-07)
        tiny_out = tiny_out & (jnp.abs(q) < np.float32(np.inf))
    values = jnp.where(tiny_out, small, q * up)
    if not window:
        values = jax.lax.slice_in_dim(values.reshape(padded.shape), 0, n, axis=axis)
    return values, _block_scale_exponents(finite, shift, axis)


def _per_element(block_values, axis: int, b: int, n: int) -> jax.Array:
    """(..., blocks, 1, ...) per-block values as (..., n, ...): each repeated along the axis for
    its block's ``b`` elements (a broadcast XLA fuses into the consumer as index arithmetic)."""
    shape = list(block_values.shape)
    blocks = shape[axis]
    shape[axis + 1] = b
    spread = jnp.broadcast_to(block_values, shape).reshape(*shape[:axis], blocks * b, *shape[axis + 2:])
    return jax.lax.slice_in_dim(spread, 0, n, axis=axis)


def _block_scale_exponents(finite, shift, axis: int) -> jax.Array:
    """The flat per-block scale exponents ``_floor_block_exponents``' keepdims ``shift`` gives
    (int32.min where a block holds NaN/inf), blocks ordered with ``axis`` last."""
    scale_exp = jnp.squeeze(jnp.where(finite, shift, jnp.iinfo(jnp.int32).min), axis + 1)
    return jnp.moveaxis(scale_exp, axis, -1).reshape(-1)


def _floor_block_exponents(x, element, plan: Scaling, *, window: bool = False):
    """(padded x, its (..., blocks, block, ...) view, int32 amax bits and OCP MX ``floor`` scale
    exponent per block, keepdims) for blocks along ``plan.axis``; a block axis no longer than the
    block size is one block, unpadded. ``window``: x is not padded (None, None for the first
    two); the amax is a ``reduce_window`` over x, which pads the short last block with zeros.

    Blocks along the last axis of a tensor of ``MAGIC_MIN_SIZE`` or more elements: the amax needs
    only its exponent, so it is reduced as floats (XLA:CPU hands a float max over a short inner
    axis to a vectorised library kernel) from the magnitude bits with their low 8 bits cleared
    (exactly representable, order kept; patterns below 2**24 kept whole): the exponent field of a
    normal amax, or the leading bit of a subnormal one, is exact. Blocks along another axis, and
    small tensors: an integer max of the magnitude bits, which XLA:CPU fuses with the pad and the
    bit masking into one kernel (measured faster there: (1900, 25) along 1900 61 -> 38 us)."""
    axis = plan.axis % x.ndim
    n, b = x.shape[axis], min(plan.block_size, x.shape[axis])
    pad = [(0, (-n) % b if i == axis else 0) for i in range(x.ndim)]
    if window:
        mag = jax.lax.bitcast_convert_type(x, jnp.int32) & np.int32(0x7FFFFFFF)
        size = [b if i == axis else 1 for i in range(x.ndim)]
        amax = jnp.expand_dims(jax.lax.reduce_window(mag, np.int32(0), jax.lax.max, size, size, pad), axis + 1)
        return None, None, amax, _floor_shift(amax, element, plan)
    padded = jnp.pad(x, pad) if pad[axis][1] else x
    blocked = padded.reshape(*padded.shape[:axis], -1, b, *padded.shape[axis + 1:])
    mag = jax.lax.bitcast_convert_type(blocked, jnp.int32) & np.int32(0x7FFFFFFF)
    if axis == x.ndim - 1 and x.size >= MAGIC_MIN_SIZE and plan.rule == "floor":  # "up" reads the mantissa
        coarse = jnp.where(mag >= np.int32(1 << 24), mag & np.int32(0x7FFFFF00), mag).astype(jnp.float32)
        amax_f = jnp.max(coarse, axis=axis + 1, keepdims=True)
        amax = amax_f.astype(jnp.int32)
        # floor(log2 amax): a normal amax's exponent field; a subnormal's from its exact float image
        sub_exp = (jax.lax.bitcast_convert_type(amax_f, jnp.int32) >> 23) - 127 - 149
    else:
        amax, sub_exp = jnp.max(mag, axis=axis + 1, keepdims=True), None
    return padded, blocked, amax, _floor_shift(amax, element, plan, sub_exp)


def _floor_shift(amax, element, plan: Scaling, sub_exp=None) -> jax.Array:
    """Block scale exponents from int32 amax bits by the plan's ``floor`` (OCP MX) or ``up`` rule
    (as :func:`pow2_scale_exponent`: one more where the amax's normalised mantissa exceeds the
    element max's), clamped to the scale format's range (an all-zero block: its lowest).
    ``sub_exp``: floor(log2) of a subnormal amax where the caller has it already (default: from
    the leading bit of ``amax``; the ``up`` rule always takes it from there)."""
    lead = 31 - jax.lax.clz(amax)
    if sub_exp is None or plan.rule == "up":
        sub_exp = lead - 149
    normal = amax >= np.int32(1 << 23)
    log2 = jnp.where(normal, (amax >> 23) - 127, sub_exp)
    e = log2 - emax_of(element)
    if plan.rule == "up":
        man = jnp.where(normal, amax, amax << jnp.clip(23 - lead, 0, 31)) & np.int32(0x7FFFFF)
        emax = emax_of(element)
        elem_man = int(np.array(math.ldexp(element.max, -emax), np.float32).view(np.int32)) & 0x7FFFFF
        e = e + (man > np.int32(elem_man)).astype(jnp.int32)
    lo, hi = plan.exponent_range
    return jnp.clip(jnp.where(amax == 0, lo, e), lo, hi)


def _floor_blocks_magic(x, element, plan: Scaling, rnd: Rounding, saturate: bool):
    """OCP MX ``floor`` block scaling with saturating RNE float elements, in about half the
    elementwise ops of ``_floor_blocks_float``: the same bits (None where it does not apply).

    No value is scaled: with ``s`` the block's scale exponent, an element at or above the
    format's smallest normal ``2**(s + emin)`` is ``reduce_precision(|x|)`` (exact on the bits)
    capped at ``max * 2**s``; one below it is rounded to a multiple of ``2**(s + qmin)`` by
    ``(|x| + c) - c`` with ``c = 1.5 * 2**(s + qmin + 23)`` (RNE in the float add: ``|x| + c``
    has that quantum as its ulp, and ``c`` is an even number of quanta); the sign goes back on
    the bits. That is exact while every constant, input that matters and result is a normal
    float32, i.e. ``s + qmin >= -125`` (a float32 subnormal input, which XLA:CPU may read as 0, is
    then at most half the quantum: it rounds to 0 anyway) and the constants stay below 2**128.
    A tensor with any nonzero finite block outside that range (amax below about 2**-110, or a
    huge fp4 block) goes to ``_floor_blocks_float`` by a ``lax.cond``, which also keeps the
    per-block exponents in memory for the elementwise pass (XLA:CPU recomputes fused per-block
    values per element)."""
    if not (element.kind == "float" and saturate and rnd.mode is RoundMode.RNE and x.size >= MAGIC_MIN_SIZE
            and element.signed and element.has_zero and element.subnormals and element.nan != "negzero"
            and element.exp_bits <= 8 and 1 <= element.man_bits <= 22
            and emax_of(element) >= 1 and element_qmin(element) >= -24):
        return None
    padded, s_field, need_general, scale_exp = _magic_plan(x, element, plan)
    n = x.shape[plan.axis % x.ndim]

    def general(padded, s_field):
        values = _floor_blocks_float(padded, element, plan, rnd, saturate)[0]
        return jax.lax.slice_in_dim(values, 0, n, axis=plan.axis % x.ndim)

    magic = functools.partial(_magic_round, element=element, plan=plan, n=n)
    return jax.lax.cond(need_general, general, magic, padded, s_field), scale_exp


def _magic_plan(x, element, plan: Scaling):
    """(padded x, per-block ``s << 23`` (0 for an all-zero block, int32.min for NaN/inf), whether
    some block needs the general path, scale exponents) for ``_floor_blocks_magic``."""
    axis = plan.axis % x.ndim
    padded, _, amax, shift = _floor_block_exponents(x, element, plan)
    emax, qmin = emax_of(element), element_qmin(element)
    finite = amax < np.int32(0x7F800000)
    live = finite & (amax > 0)
    exact = (shift + qmin >= -125) & (shift + qmin + 23 <= 127) & (shift + emax <= 127)
    s_field = jnp.where(finite, jnp.where(live, shift, 0) << 23, np.int32(-(2**31)))
    return padded, s_field, jnp.any(live & ~exact), _block_scale_exponents(finite, shift, axis)


def _magic_round(padded, s_field, *, element, plan: Scaling, n: int):
    """The elementwise pass of ``_floor_blocks_magic`` (exact where ``_magic_plan`` says so)."""
    axis = plan.axis % padded.ndim
    b = min(plan.block_size, padded.shape[axis])
    blocked = padded.reshape(*padded.shape[:axis], -1, b, *padded.shape[axis + 1:])
    bits = jax.lax.bitcast_convert_type(blocked, jnp.int32)

    def pow2(k, mantissa=0):  # 2**(s + k) * (1 + mantissa / 2**23)
        return jax.lax.bitcast_convert_type(s_field + np.int32(((k + 127) << 23) + mantissa), jnp.float32)

    qmin, m = element_qmin(element), element.man_bits
    max_man = int(np.array(element.max, np.float32).view(np.int32)) & 0x7FFFFF
    a = jax.lax.bitcast_convert_type(bits & np.int32(0x7FFFFFFF), jnp.float32)
    c = pow2(qmin + 23, 1 << 22)
    normal = jnp.minimum(jax.lax.reduce_precision(a, exponent_bits=8, mantissa_bits=m), pow2(emax_of(element), max_man))
    r = jnp.where(a < pow2(element.emin), (a + c) - c, normal)
    out = jax.lax.bitcast_convert_type(jax.lax.bitcast_convert_type(r, jnp.int32) | (bits & np.int32(-0x80000000)),
                                       jnp.float32)
    out = jnp.where(s_field == np.int32(-(2**31)), np.float32(np.nan), out)
    return jax.lax.slice_in_dim(out.reshape(padded.shape), 0, n, axis=axis)


def _scaled_exact(x, words, element, plan: Scaling, rnd: Rounding, saturate: bool):
    """:func:`_scaled_jit` on the uint32 bits: every layout, rule and rounding mode."""

    if plan.scale_format != "fp32" and _fast_layout(x.shape, plan) and element_qmin(element) >= -124:
        return _pow2_scaled_flat(x, words, element, plan, rnd, saturate)
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
        values, scale = _pow2_scaled_flat(padded, words, element, fast, rnd, saturate)
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


# --- fast path: power-of-two scales in the tensor's own layout ----------------------------------
#
# XLA:CPU vectorises poorly over a (groups, 32) view and over a per-element grid shift, so for
# the common layouts (one scale per tensor, per channel, or per block along a last axis that the
# block size divides) the values stay in their own layout: the exponent is reduced with keepdims
# (blocks: over a (..., n/b, b) view), repeated back to element shape, the values are divided by
# their scale on the bits, rounded by the unshifted kernel, and multiplied back on the bits.


def element_qmin(element) -> int:
    """Exponent of the element format's smallest nonzero magnitude."""
    return element.smallest_subnormal_exp if element.kind == "float" else -element.frac_bits


def _fast_layout(shape: tuple[int, ...], plan: Scaling) -> bool:
    if plan.granularity in ("tensor", "channel"):
        return len(shape) >= 1
    return len(shape) >= 1 and plan.axis % len(shape) == len(shape) - 1 and shape[-1] % plan.block_size == 0


def _pow2_scaled_flat(x, words, element, plan: Scaling, rnd: Rounding, saturate: bool):
    bits = jax.lax.bitcast_convert_type(x, jnp.uint32)
    if plan.granularity == "block":
        b = plan.block_size
        amax = amax_bits(x.reshape(*x.shape[:-1], -1, b), axes=(-1,), keepdims=False)
        # The barrier keeps XLA from recomputing the per-block exponent for every element.
        shift_groups, finite_groups = jax.lax.optimization_barrier(
            (pow2_scale_exponent(amax, element, plan), amax < np.uint32(0x7F800000))
        )
        shift = jnp.repeat(shift_groups, b, axis=-1)
        finite = jnp.repeat(finite_groups, b, axis=-1)
    else:
        keep = plan.axis % x.ndim if plan.granularity == "channel" else None
        axes = tuple(i for i in range(x.ndim) if i != keep)
        amax = amax_bits(x, axes=axes, keepdims=True)
        shift_groups, finite_groups = jax.lax.optimization_barrier(
            (pow2_scale_exponent(amax, element, plan), amax < np.uint32(0x7F800000))
        )
        shift, finite = shift_groups, finite_groups
    rand = _random.hash_bits(words, x.shape) if rnd.stochastic else None
    scaled = _divide_pow2_bits(bits, shift)
    out = _round_bits(scaled, element, rnd, saturate, rand)
    values = jax.lax.bitcast_convert_type(_multiply_pow2_bits(out, shift), jnp.float32)
    values = jnp.where(finite, values, np.float32(np.nan))  # a NaN/inf anywhere: the scale is NaN
    scale_exp = jnp.where(finite_groups, shift_groups, jnp.iinfo(jnp.int32).min)
    return values, scale_exp.reshape(-1)


def amax_bits(x: jax.Array, axes: tuple[int, ...], keepdims: bool) -> jax.Array:
    """Largest magnitude over ``axes`` as uint32 bits, NaN/inf above every finite value: an
    integer max of the magnitude bits, exact where float compares are not (XLA:CPU flushes
    subnormals, and its vectorised float max/min did not always propagate NaN). Measured
    (jax 0.10, 2 cores) no slower than a float max/min pair for per-tensor, per-channel and
    per-row reductions, and 2-5x faster than that pair with the ``lax.cond`` to an exact
    reduction it needed."""
    mag = jax.lax.bitcast_convert_type(x, jnp.uint32) & np.uint32(0x7FFFFFFF)
    return jnp.max(mag.astype(jnp.int32), axis=axes, keepdims=keepdims).astype(jnp.uint32)


def _divide_pow2_bits(bits: jax.Array, shift: jax.Array) -> jax.Array:
    """Bits of ``value * 2**-shift`` that round onto an element grid exactly as the true quotient.

    Normal results are exact. A quotient below 2**-126 is replaced by +-2**-126: on a grid whose
    smallest quantum is >= 2**-124 both lie below a quarter quantum, so every deterministic mode
    rounds them alike (stochastic rounding: both round up with probability < 2**-98). A float32
    subnormal input scaled up stays exact. No leading-zero count: AVX2 cannot vectorise it.
    """
    u = np.uint32
    a = bits & u(0x7FFFFFFF)
    exp = (a >> u(23)).astype(jnp.int32)
    out = jnp.where(
        exp - shift >= 1,
        bits - (shift << 23).astype(jnp.uint32),
        (bits & u(0x80000000)) | u(0x00800000),
    )
    # A subnormal input times 2**k: while below 2**-125 its bits are simply a << k (the carrier's
    # bit space is continuous across the subnormal/normal boundary); above, the integer a is
    # converted exactly and re-exponented.
    k = -shift
    up_small = a << jnp.clip(k, 0, 31).astype(jnp.uint32)
    fits = (k <= 24) & (a < (u(1 << 24) >> jnp.clip(k, 0, 24).astype(jnp.uint32)))
    as_float = jax.lax.bitcast_convert_type(a.astype(jnp.int32).astype(jnp.float32), jnp.uint32)
    up_big = as_float + ((k - 149) << 23).astype(jnp.uint32)
    scaled_up = (bits & u(0x80000000)) | jnp.where(fits, up_small, up_big)
    out = jnp.where((exp == 0) & (k > 0), scaled_up, out)
    return jnp.where((a == 0) | (exp == 255), bits, out)


def _multiply_pow2_bits(bits: jax.Array, shift: jax.Array) -> jax.Array:
    """Bits of ``value * 2**shift`` for element values (zero or float32 normals) whose product
    the float32 carrier holds exactly (the format range check guarantees it)."""
    u = np.uint32
    a = bits & u(0x7FFFFFFF)
    exp = (a >> u(23)).astype(jnp.int32)
    new_exp = exp + shift
    normal = bits + (shift << 23).astype(jnp.uint32)
    sig = (a & u(0x7FFFFF)) | u(1 << 23)
    sub = (bits & u(0x80000000)) | (sig >> jnp.clip(1 - new_exp, 0, 31).astype(jnp.uint32))
    overflow = (bits & u(0x80000000)) | u(0x7F800000)
    out = jnp.where(new_exp >= 1, jnp.where(new_exp > 254, overflow, normal), sub)
    return jnp.where((a == 0) | (exp == 255), bits, out)


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
