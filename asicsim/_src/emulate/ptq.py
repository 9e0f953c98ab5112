"""Post-training quantization for inference recipes (``int8_ptq_tensor``, ``int8_ptq_channel``,
``int4_w_g128``, ``w4a8_g128``...):

    pol = calibrate(apply_fn, params, batches, "int8_ptq_channel")  # static activation scales
    qparams = quantize_params(params, pol)                          # weights on their grid
    logits = emulate(apply_fn, pol)(qparams, x)
    codes = export_params(params, pol)      # group-quantized weights: integer codes + scales
    params_back = dequantize_params(codes)  # float32, bit-identical to the emulated weights

Calibration runs the emulated model over the calibration batches and records, per GEMM row
(numbered in the order :func:`asicsim.emulate` meets them; a scan over stacked layers has a row
per layer, :mod:`.site_rows`), the largest magnitude each operand with ``static`` scaling took:
the max over batches and over every execution of the row (the iterations of a time scan, a
``fori_loop`` or a ``while_loop`` such as a KV-cache generation loop, whatever its trip count;
each ``cond``/``switch`` branch its own rows; ``jax.checkpoint`` and ``custom_vjp`` bodies as
inlined), observed on the host as the model runs (:mod:`.ptq_observe`), so integer outputs
(generated tokens) and non-differentiable paths (``argmax``, ``stop_gradient``) are calibrated
too. The result is the same recipe with those amaxes in ``Policy.static_scales``; roles with
``scaling = "static"`` then scale by them (values beyond saturate), as a TensorRT-style max
calibrator does. While calibrating, activations are quantized with their current amax, so each
site sees its inputs as the quantized model makes them. An operand that no calibration batch
reached (a branch never taken, a loop that never iterated) or that was only ever zero has no
static scale: it keeps its current amax, is listed in ``Policy.uncalibrated`` and calibration
warns (:class:`UncalibratedSites`); where no operand at all was reached it is an error.

A recipe's ``[calibration] method`` other than ``max`` (percentile, mse, entropy: TensorRT's
calibrators, :mod:`.calibrators`) records histograms of the operands too, in a second pass;
``granularity = "channel"`` one static amax per input feature of an activation (SmoothQuant-style
per-channel statistics; ``Policy.channel_scales``).
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Iterable

import jax
import numpy as np

from asicsim._src.emulate.group_weights import (
    dequantize_params,
    export_weights,
    is_weight_leaf,
    round_group,
)
from asicsim._src.emulate.policy import Policy
from asicsim._src.emulate.ptq_observe import (
    SiteStats,
    any_operand,
    collect,
    recorded,
    static_from_stats,
)
from asicsim._src.emulate.recipes import load_recipe
from asicsim._src.emulate.training import MAX_SITES, round_tree


class UncalibratedSites(UserWarning):
    """Some GEMM operands with static scaling were not observed by calibration (never reached, or
    only zeros): they scale by their current amax (``Policy.uncalibrated`` lists them)."""


def observe_amax(fn: Callable, policy, *args, weights: int = 0, max_sites: int = MAX_SITES,
                 key=None) -> np.ndarray:
    """(max_sites, 3) amax of (lhs, rhs, grad: 0, the forward has none) per GEMM row in one call
    of ``fn(*args)`` (largest over the row's executions: loop iterations), as the emulated
    ``fn`` feeds its GEMMs (operands scaled by their current amax)."""
    pol = _blank(load_recipe(policy))
    if key is None and pol.stochastic:
        key = jax.random.key(0)
    stats = SiteStats(pol.calibration_bins, channel=False)
    recorded(fn, pol, stats, weights, key, phase="max", wanted=any_operand)(*args)
    jax.effects_barrier()
    if stats.n_rows > max_sites:
        raise ValueError(f"{getattr(fn, '__name__', 'the function')} has {stats.n_rows} GEMM/convolution rows; "
                         f"observe_amax(..., max_sites={stats.n_rows}) holds them")
    out = np.zeros((max_sites, 3), np.float32)
    for (row, side), amax in stats.amax.items():
        out[row, side] = amax
    return out


def calibrate(apply_fn: Callable, params, batches: Iterable, policy, *, weights: int = 0, key=None) -> Policy:
    """``policy`` with static scales from ``apply_fn(params, batch)`` over ``batches`` (at most
    ``policy.calibration_batches`` of them are used). A recipe with stochastic rounding draws its
    bits from ``key`` (default ``jax.random.key(0)``: calibration is deterministic).

    ``policy.calibration_method`` max (the amax seen), percentile, mse or entropy (from a
    histogram over [0, amax]: :mod:`asicsim._src.emulate.calibrators`); with
    ``calibration_granularity = "channel"`` each activation operand contracted along one axis
    also gets one amax per index of that axis (``Policy.channel_scales``), which its GEMM scales
    by instead of the per-tensor one. Operands the batches never reached: see the module doc."""
    pol = load_recipe(policy)
    if not pol.needs_calibration:
        raise ValueError(f"calibrate: recipe {pol.name!r} has no role with scaling = 'static' (its roles scale "
                         "each tensor by itself): there is nothing to calibrate")
    if key is None and pol.stochastic:
        key = jax.random.key(0)
    stats = collect(apply_fn, params, batches, _blank(pol), weights=weights, key=key,
                    histograms=pol.calibration_method != "max")
    name = getattr(apply_fn, "__name__", "the function")
    never, zeros = stats.unobserved()
    if not stats.expected:
        raise ValueError(f"calibrate: {name} has no GEMM or convolution operand with static scaling under "
                         f"recipe {pol.name!r} (its layer rules and [first_last] included): nothing to calibrate")
    if not stats.amax:
        raise ValueError(f"calibrate: no GEMM operand with static scaling ran on the calibration batches "
                         f"({_sites(never)} of {name} never executed: a branch not taken, a loop that never "
                         "iterated); give batches that reach them")
    static, channels = static_from_stats(stats, pol)
    missing = tuple(sorted({*never, *zeros}))
    if missing:
        parts = [f"{_sites(never)} never executed on the calibration batches (a branch not taken, a loop "
                 "that never iterated)"] if never else []
        parts += [f"{_sites(zeros)} only ever zero"] if zeros else []
        warnings.warn(f"calibrate: {name} under {pol.name!r}: {'; '.join(parts)}: no static scale, they scale "
                      "by their current amax (Policy.uncalibrated lists them); give batches that reach them",
                      UncalibratedSites, stacklevel=2)
    return dataclasses.replace(pol, static_scales=static, channel_scales=channels, uncalibrated=missing)


def _blank(pol: Policy) -> Policy:
    """``pol`` without scales from an earlier calibration (calibration scales by the current amax)."""
    return dataclasses.replace(pol, static_scales=(), channel_scales=(), uncalibrated=())


def _sites(keys) -> str:
    """(row, operand) pairs in words: "GEMM row 3 lhs, row 5 rhs"."""
    shown = ", ".join(f"row {r} {'lhs' if s == 0 else 'rhs'}" for r, s in keys[:8])
    more = f" and {len(keys) - 8} more" if len(keys) > 8 else ""
    return f"{len(keys)} GEMM operand(s) ({shown}{more})"


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
    :class:`~asicsim._src.emulate.group_weights.QuantizedWeight` (integer codes, scales in the scale
    format, zero points, group size, axis, formats) for a recipe whose ``weight`` role has
    ``scaling = "group"``; groups along ``axis`` (-2: Flax/Haiku ``(..., in, out)`` kernels;
    -1 for Equinox's ``(out, in)``). :func:`dequantize_params` gives back the float32 weights
    the emulated GEMMs use, bit for bit."""
    pol = load_recipe(policy)
    spec = pol.role("weight")
    if spec is None or spec.scaling != "group":
        raise ValueError(f"export_params: recipe {pol.name!r} has weight scaling "
                         f"{None if spec is None else str(spec.scaling)!r}; integer codes need scaling = 'group' "
                         "(asicsim._src.emulate.export.export_codes exports every weight recipe as codes and scales)")
    return export_weights(params, spec, axis)


__all__ = ["UncalibratedSites", "calibrate", "dequantize_params", "export_params", "observe_amax",
           "quantize_params"]
