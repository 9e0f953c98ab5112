"""Post-training quantization for inference recipes (``int8_ptq_tensor``, ``int8_ptq_channel``,
``int4_w_g128``, ``w4a8_g128``...):

    pol = calibrate(apply_fn, params, batches, "int8_ptq_channel")  # static activation scales
    qparams = quantize_params(params, pol)                          # weights on their grid
    logits = emulate(apply_fn, pol)(qparams, x)
    codes = export_params(params, pol)      # group-quantized weights: integer codes + scales
    params_back = dequantize_params(codes)  # float32, bit-identical to the emulated weights

Calibration runs the emulated model over the calibration batches and records, per GEMM row
(numbered in the order :func:`asicsim.emulate` meets them; a scan over stacked layers has a row
per layer, :mod:`.site_rows`), the largest magnitude each operand took (max over batches, and
over the iterations of a time scan). The result is the same recipe with those
amaxes in ``Policy.static_scales``; roles with ``scaling = "static"`` then scale by them (values
beyond saturate), as a TensorRT-style max calibrator does. While calibrating, activations are
quantized with their current amax, so each site sees its inputs as the quantized model makes them.

A recipe's ``[calibration] method`` other than ``max`` (percentile, mse, entropy: TensorRT's
calibrators, :mod:`.calibrators`) or ``granularity = "channel"`` (one static amax per input
feature of an activation, SmoothQuant-style per-channel statistics; ``Policy.channel_scales``)
records the activations themselves (:mod:`.ptq_observe`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable

import jax
import jax.numpy as jnp
import numpy as np

from asicsim.emulate.group_weights import (
    dequantize_params,
    export_weights,
    is_weight_leaf,
    round_group,
)
from asicsim.emulate.policy import Policy
from asicsim.emulate.ptq_observe import collect, static_from_stats
from asicsim.emulate.recipes import load_recipe
from asicsim.emulate.training import MAX_SITES, round_tree
from asicsim.emulate.transform import emulate


def observe_amax(fn: Callable, policy, *args, weights: int = 0, max_sites: int = MAX_SITES,
                 key=None) -> jax.Array:
    """(max_sites, 3) amax of (lhs, rhs, grad-unused) per GEMM row in one call of ``fn(*args)``."""
    pol = load_recipe(policy)
    emulated = emulate(fn, pol, weights=weights)
    kw = {"asicsim_key": key} if key is not None else {}

    def run(amax):
        out = emulated(*args, asicsim_amax=amax, **kw)
        leaves = [x for x in jax.tree_util.tree_leaves(out) if jnp.issubdtype(x.dtype, jnp.floating)]
        return sum(jnp.sum(x.astype(jnp.float32)) for x in leaves)

    return jax.grad(run)(jnp.zeros((max_sites, 3), jnp.float32))


def calibrate(apply_fn: Callable, params, batches: Iterable, policy, *, weights: int = 0,
              max_sites: int = MAX_SITES, key=None) -> Policy:
    """``policy`` with static scales from ``apply_fn(params, batch)`` over ``batches`` (at most
    ``policy.calibration_batches`` of them are used). A recipe with stochastic rounding draws its
    bits from ``key`` (default ``jax.random.key(0)``: calibration is deterministic).

    ``policy.calibration_method`` max (the amax seen), percentile, mse or entropy (from a
    histogram over [0, amax]: :mod:`asicsim.emulate.calibrators`); with
    ``calibration_granularity = "channel"`` each activation operand contracted along one axis
    also gets one amax per index of that axis (``Policy.channel_scales``), which its GEMM scales
    by instead of the per-tensor one."""
    pol = load_recipe(policy)
    if key is None and pol.stochastic:
        key = jax.random.key(0)
    if pol.calibration_method != "max" or pol.calibration_granularity != "tensor":
        stats = collect(apply_fn, params, batches, pol, weights=weights, key=key,
                        histograms=pol.calibration_method != "max")
        static, channels = static_from_stats(stats, pol)
        return dataclasses.replace(pol, static_scales=static, channel_scales=channels)
    observe = jax.jit(lambda p, b: observe_amax(apply_fn, pol, p, b, weights=weights, max_sites=max_sites,
                                                key=key))
    amax = np.zeros((max_sites, 3), np.float32)
    n = 0
    for batch in batches:
        if n >= pol.calibration_batches:
            break
        amax = np.maximum(amax, np.asarray(observe(params, batch)))
        n += 1
    if n == 0:
        raise ValueError("calibrate: no calibration batches were given")
    used = np.flatnonzero(amax.any(axis=1))
    rows = amax[: (used[-1] + 1 if used.size else 0)]
    scales = tuple((i, tuple(float(v) for v in row)) for i, row in enumerate(rows))
    return dataclasses.replace(pol, static_scales=scales)


def quantize_params(params, policy, *, axis: int = -2):
    """Weights (float leaves of rank >= 2) rounded as role ``weight`` says (its scaling: per
    tensor, per output channel = last axis, per block; ``group``: in groups along ``axis``, the
    input axis of (..., in, out) kernels); biases and other vectors stay float32.
    GEMMs round their weight operand again, onto the same grid, so this is for inspection and
    storage: ``emulate(apply_fn, policy)(params, x)`` gives the same result either way."""
    pol = load_recipe(policy)
    spec = pol.role("weight")

    def one(x):
        if not is_weight_leaf(x):
            return x
        if spec is not None and spec.scaling == "group":
            return round_group(x, spec, axis)
        return round_tree(x, spec, jax.random.key(0))

    return jax.tree_util.tree_map(one, params)


def export_params(params, policy, *, axis: int = -2):
    """``params`` with each weight leaf (float, rank >= 2) as a
    :class:`~asicsim.emulate.group_weights.QuantizedWeight` (integer codes, scales in the scale
    format, zero points, group size, axis, formats) for a recipe whose ``weight`` role has
    ``scaling = "group"``; groups along ``axis`` (-2: Flax/Haiku ``(..., in, out)`` kernels;
    -1 for Equinox's ``(out, in)``). :func:`dequantize_params` gives back the float32 weights
    the emulated GEMMs use, bit for bit."""
    pol = load_recipe(policy)
    spec = pol.role("weight")
    if spec is None or spec.scaling != "group":
        raise ValueError(f"export_params: recipe {pol.name!r} has weight scaling "
                         f"{None if spec is None else str(spec.scaling)!r}; integer codes need scaling = 'group'")
    return export_weights(params, spec, axis)


__all__ = ["calibrate", "dequantize_params", "export_params", "observe_amax", "quantize_params"]
