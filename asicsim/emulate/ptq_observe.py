"""Activation statistics per GEMM site for the histogram calibrators and per-channel static scales.

The emulated function runs under an interpreter that, at every GEMM/convolution site, hands the
operands whose role has ``static`` scaling to the host (``jax.debug.callback``) before the GEMM
quantizes them: the values the quantized model feeds that site, as the max calibrator sees them.
Two passes over the calibration batches (TensorRT's order: the amax first, then histograms over
``[0, amax]``). A dot_general operand with one contraction axis also gets per-channel
statistics (one per index of that axis: an activation's input features); a convolution, or a
GEMM contracting several axes of the operand, is calibrated per tensor only.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable

import jax
import jax.numpy as jnp
import numpy as np

from asicsim.emulate import calibrators as cal
from asicsim.emulate.interpreter import _dot_roles, _integer_gemm, _Interpreter
from asicsim.emulate.policy import Policy
from asicsim.emulate.site_rows import count_rows
from asicsim.emulate.transform import split_arrays
from asicsim.numerics.random import key_words


class _Recorder(_Interpreter):
    def __init__(self, policy: Policy, sink: Callable, words=None, n_rows: int = 0):
        super().__init__(policy, words, n_rows=n_rows)
        self.sink = sink

    def eqn(self, eqn, invals, flags, paths=None, data=None):
        name = eqn.primitive.name
        if name in ("dot_general", "conv_general_dilated") and not _integer_gemm(eqn):
            roles = _dot_roles(flags)
            for side in (0, 1):
                spec = self.policy.role(roles[side])
                if spec is None or spec.scaling != "static":
                    continue
                axis = None
                if name == "dot_general":
                    contract = eqn.params["dimension_numbers"][0][side]
                    axis = int(contract[0]) if len(contract) == 1 else None
                row = self.site if self.row_base is None else self.row_base + self.site  # the GEMM's row
                jax.debug.callback(functools.partial(self.sink, side=side, axis=axis, role=roles[side]),
                                   jnp.asarray(row, jnp.int32), invals[side])
        return super().eqn(eqn, invals, flags, paths, data)


def _run_recorded(fn: Callable, pol: Policy, sink, args, weights: int | None, key=None):
    """``fn(*args)`` under the recording interpreter (weight provenance as :func:`emulate` finds it)."""
    counts = [len(jax.tree_util.tree_leaves(a)) for a in args]
    start = sum(counts[:weights]) if weights is not None and weights < len(args) else 0
    stop = start + (counts[weights] if weights is not None and weights < len(args) else 0)
    arrays, positions, rebuild = split_arrays((args, {}))
    flags = [1 if start <= i < stop else 0 for i in positions]

    def flat_fn(*xs):
        a, _ = rebuild(xs)
        return fn(*a)

    closed = jax.make_jaxpr(flat_fn)(*arrays)
    rec = _Recorder(pol, sink, None if key is None else key_words(key), n_rows=count_rows(closed.jaxpr, flags))
    return rec.run(closed.jaxpr, closed.consts, arrays, flags)


class _Stats:
    """Per (site, operand): amax (tensor and per channel), then histograms over [0, amax]."""

    def __init__(self, bins: int, channel: bool):
        self.bins, self.channel, self.phase = bins, channel, "max"
        self.amax: dict = {}
        self.camax: dict = {}
        self.hist: dict = {}
        self.chist: dict = {}
        self.role: dict = {}

    def __call__(self, site, x, *, side: int, axis: int | None, role: str):
        key = (int(site), side)
        self.role[key] = role
        a = np.abs(np.asarray(x, np.float32))
        ch = self.channel and axis is not None
        if ch:
            a_c = np.moveaxis(a, axis, -1)
        if self.phase == "max":
            self.amax[key] = max(self.amax.get(key, 0.0), float(a.max()) if a.size else 0.0)
            if ch:
                m = a_c.reshape(-1, a_c.shape[-1]).max(axis=0)
                self.camax[key] = np.maximum(self.camax.get(key, 0.0), m)
            return
        h = cal.histogram(a, self.amax[key], self.bins)
        self.hist[key] = self.hist.get(key, 0) + h
        if ch:
            self.chist[key] = self.chist.get(key, 0) + cal.channel_histograms(a_c, self.camax[key], self.bins)


def collect(apply_fn: Callable, params, batches: Iterable, pol: Policy, *, weights: int = 0, key=None,
            histograms: bool) -> _Stats:
    """The statistics of up to ``pol.calibration_batches`` batches (two passes with histograms)."""
    stats = _Stats(pol.calibration_bins, pol.calibration_granularity == "channel")
    run = jax.jit(lambda p, b: _run_recorded(apply_fn, pol, stats, (p, b), weights, key))
    kept = []
    for batch in batches:
        if len(kept) >= pol.calibration_batches:
            break
        kept.append(batch)
    if not kept:
        raise ValueError("calibrate: no calibration batches were given")
    for phase in ("max", "hist") if histograms else ("max",):
        stats.phase = phase
        for batch in kept:
            jax.block_until_ready(run(params, batch))
        jax.effects_barrier()
    return stats


def static_from_stats(stats: _Stats, pol: Policy) -> tuple[tuple, tuple]:
    """(static_scales, channel_scales) of a Policy from collected statistics and its method."""
    method = pol.calibration_method
    rows: dict = {}
    channels = []
    for (site, side), amax in sorted(stats.amax.items()):
        fmt = pol.role(stats.role[(site, side)]).spec
        if method in ("mse", "entropy") and fmt.kind != "int":
            raise ValueError(f"calibration method {method!r} models an integer grid (pytorch-quantization's "
                             f"fake_tensor_quant); role {stats.role[(site, side)]!r} is {fmt.name!r}: use "
                             "method = 'max' or 'percentile'")
        num_bits, unsigned = int(getattr(fmt, "bits", 8)), not getattr(fmt, "signed", True)
        if method != "max":
            amax = cal.amax_from_histogram(method, stats.hist[(site, side)], amax, num_bits=num_bits,
                                           unsigned=unsigned, percentile=pol.calibration_percentile)
        rows.setdefault(site, [0.0, 0.0, 0.0])[side] = float(amax)
        if (site, side) in stats.camax:
            cam = stats.camax[(site, side)]
            if method == "percentile":
                h = stats.chist[(site, side)]
                cam = np.asarray([cal.amax_percentile(h[c], cam[c], pol.calibration_percentile)
                                  for c in range(cam.size)])
            channels.append((site, side, tuple(float(v) for v in cam)))
    n = max(rows) + 1 if rows else 0
    static = tuple((i, tuple(rows.get(i, (0.0, 0.0, 0.0)))) for i in range(n))
    return static, tuple(channels)
