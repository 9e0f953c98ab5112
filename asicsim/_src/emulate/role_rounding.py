"""Rounding a tensor as a recipe role says: scaling per tensor, channel or block, delayed and
static estimates, stochastic rounding's seed words (:func:`round_role`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from asicsim._src.emulate.group_weights import round_group
from asicsim._src.emulate.policy import RoleSpec
from asicsim._src.numerics import get_format, quantize
from asicsim._src.numerics.exact_div import divide
from asicsim._src.numerics.float_order import positive
from asicsim._src.numerics.fp32_scale import static_codes
from asicsim._src.numerics.grid_rounding import mul_pow2
from asicsim._src.numerics.random import key_words
from asicsim._src.numerics.rotation import hadamard_rotate
from asicsim._src.numerics.rounding import parse_rounding
from asicsim._src.numerics.scaling import Scaling, amax_bits, resolve_scaling
from asicsim._src.numerics.static_scale import quantize_static


def round_role(x: jax.Array, spec: RoleSpec | None, *, key=None, amax=None,
               axis: int | Sequence[int] | None = None, words=None) -> jax.Array:
    """Round ``x`` as role ``spec`` says (None or fp32/rne: unchanged), keeping its dtype.

    ``key`` (a ``jax.random`` key) or ``words`` (seed words already drawn from one, see
    ``random.derive``) feeds stochastic rounding.
    ``amax``: for ``delayed``/``static`` scaling, the amax estimate to scale by (a traced scalar;
    <= 0 or None: the current amax of ``x``). ``axis``: the axis of block scaling and of block
    formats (default the last), or several axes: blocks then run along them flattened in the
    order given (a GEMM passes its contraction axes, as OCP MX blocks along K). With ``channel``
    scaling the same ``axis`` names the contraction: one scale per index of the other axes (a
    weight's output channel whether it is stored (in, out) or (out, in)); without it, the last axis.
    ``group`` scaling groups along ``axis`` too (the contraction; without it, the last axis).
    ``head`` scaling (attention roles): one scale per index of the axes *not* in ``axis`` (an
    attention GEMM passes every axis but its batch axes: a scale per sequence and head).
    """
    if spec is None or spec.is_identity:
        return x
    if spec.scaling in ("lsq", "lsq_channel"):  # its step is state the interpreter holds, not a rule
        raise ValueError(f"scaling = {str(spec.scaling)!r} (a learned step size) rounds GEMM operands of an "
                         "emulated function only (asicsim._src.emulate.lsq_sites, with asicsim_lsq); here there is no "
                         "step: call asicsim._src.emulate.lsq.lsq_quantize with the learned step instead")
    if spec.rotation is not None:
        return _round_rotated(x, spec, axis, key=key, amax=amax, words=words)
    if spec.scaling == "group":  # integer codes per group along the contraction (GPTQ/AWQ weights)
        return round_group(x, spec, axis)
    if spec.scaling == "head":  # one scale per index of the axes outside ``axis`` (a GEMM's batch axes)
        every = tuple(range(x.ndim)) if axis is None else axis
        return _round_per_channel(x, dataclasses.replace(spec, scaling="channel"), every, key=key, amax=amax,
                                  words=words)
    if spec.scaling == "channel" and axis is not None:
        return _round_per_channel(x, spec, axis, key=key, amax=amax, words=words)
    if axis is not None and not isinstance(axis, (int, np.integer)):
        return _round_flat(x, spec, tuple(int(a) % x.ndim for a in axis), key=key, amax=amax, words=words)
    words = _sr_words(spec, key, words)
    kw = {}
    if spec.scaling in ("delayed", "static") and (amax is not None or spec.margin):
        return _round_scaled(x, spec, jnp.float32(0) if amax is None else _along(amax, x.ndim, axis), words)
    if spec.scaling in ("tensor", "delayed", "static"):  # no estimate given: the current amax
        kw["scaling"] = "tensor"
    elif spec.scaling == "channel":
        kw["scaling"] = "channel"
    elif spec.scaling == "block" and spec.tile is not None:  # 2-D tiles: along the axis x across it
        kw["scaling"] = Scaling(granularity="block", axis=-1 if axis is None else int(axis),
                                block_size=spec.tile[0], across=spec.tile[1])
    elif spec.scaling == "block":
        kw["block_size"] = spec.block_size
        kw["axis"] = -1 if axis is None else axis
    elif spec.spec.kind == "block" and spec.tile is not None:  # the format's blocks as 2-D tiles
        element, plan = resolve_scaling(spec.spec, axis=-1 if axis is None else int(axis))
        plan = dataclasses.replace(plan, block_size=spec.tile[0], across=spec.tile[1], granularity="block")
        sat = True if spec.saturate is None else spec.saturate  # block formats' elements saturate
        y = quantize(x.astype(jnp.float32), element, spec.rounding, saturate=sat, words=words, scaling=plan)
        return y.astype(x.dtype)
    elif spec.spec.kind == "block" and axis is not None:
        kw["axis"] = axis
    y = quantize(x.astype(jnp.float32), spec.format, spec.rounding, saturate=spec.saturate, words=words, **kw)
    return y.astype(x.dtype)


def _round_rotated(x, spec: RoleSpec, axis, **kw) -> jax.Array:
    """``round_role`` of ``x R`` times ``R^T``: ``R`` the role's random Hadamard rotation along the
    contraction ``axis`` (axes: flattened in order; None: the last axis), which the rounding then
    scales along as it would ``x``'s (block and channel scaling keep their meaning)."""
    axes = (-1,) if axis is None else (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    axes = tuple(int(a) % x.ndim for a in axes) if x.ndim else ()
    if not axes:
        raise ValueError(f"rotation = {spec.rotation}: a 0-d tensor has no contraction axis to rotate along")
    keep = [i for i in range(x.ndim) if i not in axes]
    moved = jnp.transpose(x, [*keep, *axes])
    flat = moved.reshape(*moved.shape[:len(keep)], -1)
    plain = dataclasses.replace(spec, rotation=None, rotation_seed=0)
    rotated = hadamard_rotate(flat, spec.rotation, spec.rotation_seed, axis=-1)
    y = round_role(rotated, plain, axis=len(keep), **kw)
    back = hadamard_rotate(y, spec.rotation, spec.rotation_seed, axis=-1, inverse=True)
    return jnp.transpose(back.reshape(moved.shape), np.argsort([*keep, *axes])).astype(x.dtype)


def _round_per_channel(x, spec: RoleSpec, axis, **kw) -> jax.Array:
    """``channel`` scaling of a GEMM operand: the contraction ``axis`` (or axes) first, the rest
    flattened last, one scale per column of that view; a fully contracted operand has one scale."""
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    axes = tuple(int(a) % x.ndim for a in axes)
    keep = [i for i in range(x.ndim) if i not in axes]
    perm = [*axes, *keep]
    moved = jnp.transpose(x, perm)
    flat = moved.reshape(int(np.prod([x.shape[i] for i in axes], dtype=np.int64)), -1)
    if not keep:  # no free axis: the whole operand is one channel
        flat = flat.reshape(-1, 1)
    y = round_role(flat, spec, **kw)  # channel scaling along the last axis of the view
    return jnp.transpose(y.reshape(moved.shape), np.argsort(perm))


def _round_flat(x, spec: RoleSpec, axes: tuple[int, ...], **kw) -> jax.Array:
    """``round_role`` with blocks along ``axes`` flattened: a reshape where they are adjacent and
    in order (a GEMM's M of (batch, length)), otherwise moved last first."""
    if len(axes) <= 1 or not _blocked(spec):
        return round_role(x, spec, axis=axes[0] if axes else None, **kw)
    lo, n = axes[0], len(axes)
    if axes == tuple(range(lo, lo + n)):
        flat = x.reshape(*x.shape[:lo], -1, *x.shape[lo + n:])
        return round_role(flat, spec, axis=lo, **kw).reshape(x.shape)
    perm = [i for i in range(x.ndim) if i not in axes] + list(axes)
    moved = jnp.transpose(x, perm)
    flat = moved.reshape(*moved.shape[:-n], -1)
    y = round_role(flat, spec, axis=-1, **kw).reshape(moved.shape)
    return jnp.transpose(y, np.argsort(perm))


def _along(amax, ndim: int, axis) -> jax.Array:
    """A per-channel static amax (a vector, one per index of the contraction ``axis``, default
    the last) shaped to broadcast against the operand; a scalar unchanged."""
    amax = jnp.asarray(amax)
    if amax.ndim != 1:
        return amax
    shape = [1] * ndim
    shape[-1 if axis is None else int(axis)] = amax.shape[0]
    return amax.reshape(shape)


def _sr_words(spec: RoleSpec, key, words):
    """The seed words stochastic rounding by ``spec`` uses (None when it rounds otherwise)."""
    if not spec.stochastic:
        return None
    if words is not None:
        return words
    if key is None:
        raise ValueError(f"role format {spec.format!r} uses stochastic rounding {spec.rounding!r}: "
                         "pass a key (emulate(...)(..., asicsim_key=jax.random.key(seed)))")
    return key_words(key)


def _round_scaled(x, spec: RoleSpec, amax, words):
    """Per-tensor scaling by a given amax estimate (delayed or static scaling): values beyond it
    saturate, as fp8/int8 casts with a stale scale do; a margin leaves headroom above the estimate.

    Delayed scaling computes as Transformer Engine's DelayedScaling does: the scaling factor
    ``sf = (format max / amax) / 2**margin`` in float32, the cast of ``x * sf``, dequantized by
    ``scale_inv = 1 / sf`` (TE keeps the previous scale where amax is 0 or not finite, and caps
    an infinite ``sf`` at the float32 max; with no previous scale, ``sf = 1`` there). Static
    scaling (int8 calibration, TensorRT's convention) divides by ``scale = amax * 2**margin /
    format max`` and multiplies back by it."""
    xf = x.astype(jnp.float32)
    est = _estimate(xf, amax)
    sat = True if spec.saturate is None else spec.saturate
    if spec.scaling == "delayed":
        y, scale_inv = delayed_codes(xf, spec, est, words)
        return (y * scale_inv).astype(x.dtype)
    # the scale's arithmetic, exact on every backend: numerics.fp32_scale (amax * 2**margin is
    # exact on the bits; it used to be a float32 product, flushed where subnormal on XLA:CPU)
    est = mul_pow2(est, spec.margin) if spec.margin else est
    return quantize_static(xf, est, spec.format, spec.rounding, saturate=sat, words=words).astype(x.dtype)


def _estimate(xf, amax) -> jax.Array:
    """The amax a delayed or static scale is computed from: the given estimate where it is
    positive, else the tensor's current amax."""
    amax = jnp.asarray(amax, jnp.float32)
    return jnp.where(positive(amax), amax, _amax(xf))


def delayed_codes(xf, spec: RoleSpec, est, words=None):
    """(codes, scale_inv) of delayed scaling by the amax estimate ``est`` (Transformer Engine's
    DelayedScaling, see :func:`_round_scaled`): the codes are ``x * sf`` cast onto the format,
    ``scale_inv = 1 / sf`` the factor TE hands cuBLASLt as the operand's scale."""
    sat = True if spec.saturate is None else spec.saturate
    sf = divide(jnp.float32(spec.spec.max), est) / jnp.float32(2.0**spec.margin)  # by a power of two: exact
    sf = jnp.where(positive(est) & jnp.isfinite(est), sf, jnp.float32(1.0))
    sf = jnp.where(jnp.isinf(sf), jnp.finfo(jnp.float32).max, sf)
    y = quantize(xf * sf, spec.format, spec.rounding, saturate=sat, words=words)
    return y, divide(jnp.float32(1.0), sf)


def tensor_codes(x, spec: RoleSpec, *, amax=None, words=None):
    """(codes, scale) of ``x`` rounded by a per-tensor role ``spec`` (scaling none, tensor,
    delayed or static): float32 codes on the role's format and a float32 scalar, whose product
    (rounded to float32) is what :func:`round_role` returns; ``amax`` and ``words`` as
    ``round_role`` takes them. The codes come from the quantiser itself, never divided back out."""
    xf = jnp.asarray(x, jnp.float32)
    words = _sr_words(spec, None, words)
    sat = True if spec.saturate is None else spec.saturate
    fmt, rnd = get_format(spec.format), parse_rounding(str(spec.rounding))
    if spec.scaling == "none":
        return quantize(xf, spec.format, spec.rounding, saturate=spec.saturate, words=words), jnp.float32(1)
    if spec.scaling in ("delayed", "static") and (amax is not None or spec.margin):
        est = _estimate(xf, jnp.float32(0) if amax is None else amax)
        if spec.scaling == "delayed":
            return delayed_codes(xf, spec, est, words)
        return static_codes(xf, mul_pow2(est, spec.margin) if spec.margin else est, fmt, rnd, sat, words)
    # no estimate: the current amax, as quantize(..., scaling="tensor") scales (fp32 scale)
    bits = amax_bits(xf, tuple(range(xf.ndim)), keepdims=False) if xf.size else jnp.uint32(0)
    cur = jax.lax.bitcast_convert_type(bits, jnp.float32)
    sat = fmt.saturate if spec.saturate is None else spec.saturate
    return static_codes(xf, cur, fmt, rnd, sat, words)


# tensors below this many elements take the integer amax (see ``_amax``)
INT_AMAX_BELOW = 4096


def _amax(x) -> jax.Array:
    """max |x| as float32.

    Below ``INT_AMAX_BELOW`` elements, ``numerics.scaling.amax_bits`` (an integer max of the
    magnitude bits): XLA:CPU runs it as one kernel, where ``max(abs(x))`` ran as three (abs, a
    reduce-window, a reduce), which cost more than the reduction in a GRU's scan ((100, 18):
    1.0-1.2 against 2.4 us). Larger tensors keep the float max, which XLA:CPU vectorises
    ((1000, 75): 21-22 against 31-32 us). A NaN element gives NaN on the integer path; XLA:CPU's
    vectorised float max keeps or drops it by its position (Transformer Engine's ``fmaxf`` amax
    drops it), and a NaN select there cost the CNN's fp8_hybrid step 3-5 %. Delayed scaling
    copes with either: it scales by the finite amax, or by sf = 1 for a NaN estimate."""
    if not x.size:
        return jnp.float32(0)
    x = x.astype(jnp.float32)
    if x.size >= INT_AMAX_BELOW:
        return jnp.max(jnp.abs(x))
    return lax.bitcast_convert_type(amax_bits(x, tuple(range(x.ndim)), keepdims=False), jnp.float32)


def _blocked(spec: RoleSpec | None) -> bool:
    """Whether rounding by ``spec`` depends on the axis (block scaling, an MX block format, a
    rotation along the contraction)."""
    return spec is not None and not spec.is_identity and (
        spec.scaling == "block" or spec.spec.kind == "block" or spec.rotation is not None)


def _stochastic(spec: RoleSpec | None) -> bool:
    return spec is not None and spec.stochastic
