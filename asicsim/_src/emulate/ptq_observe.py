"""Calibration's observer: what every GEMM operand a static scale is set from takes, as the
quantized model feeds it.

The emulated function runs under an interpreter (:class:`_Recorder`) that, at every GEMM or
convolution site whose operand role has ``static`` scaling (under that site's own roles: layer
rules and ``[first_last]`` applied), hands the operand's amax to the host (``jax.debug.callback``)
before the GEMM quantizes it; while calibrating, activations are scaled by their current amax.
Every execution of a site calls back, so a site in a ``while_loop`` (a KV-cache generation loop,
its trip count data-dependent), a time scan, a ``fori_loop``, a ``cond``/``switch`` branch, a
``jax.checkpoint`` or a ``custom_vjp`` gets the largest amax over every execution and batch, and
nothing depends on the function's outputs (a generation loop returns integer tokens). Each site
knows its row (:mod:`.site_rows`) from the interpreter's per-row estimates, which here hold the
row numbers (a layer scan slices them per iteration: each stacked layer its own row).

Two passes for the histogram calibrators (TensorRT's order: the amax first, then histograms over
``[0, amax]``), the second handing over the operands themselves. A dot_general operand with one
contraction axis also gets per-channel amaxes (one per index of that axis: an activation's input
features); a convolution, or a GEMM contracting several axes of the operand, is calibrated per
tensor only.

Which operands calibration should see is known from the trace (:attr:`SiteStats.expected`):
those no batch reached (a branch never taken, a loop that never iterated) are reported by
:func:`asicsim._src.emulate.ptq.calibrate`, never left to fall back to their current amax in silence.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable

import jax
import jax.numpy as jnp
import numpy as np

from asicsim._src.emulate import calibrators as cal
from asicsim._src.emulate.interpreter import _Interpreter
from asicsim._src.emulate.layer_rules import leaf_paths
from asicsim._src.emulate.operand_roles import dot_roles
from asicsim._src.emulate.policy import Policy, RoleSpec
from asicsim._src.emulate.provenance import input_data, loop_data
from asicsim._src.emulate.site_rows import count_rows, is_layer_scan, scan_parts
from asicsim._src.emulate.transform import split_arrays
from asicsim._src.numerics.random import key_words


def static_operand(spec: RoleSpec | None) -> bool:
    """An operand that calibration sets a static scale for."""
    return spec is not None and spec.scaling == "static"


def any_operand(spec: RoleSpec | None) -> bool:
    """Every GEMM operand (:func:`asicsim._src.emulate.ptq.observe_amax`)."""
    return True


class _Recorder(_Interpreter):
    """The interpreter, calling ``sink`` back with each wanted operand's statistics (``phase``
    "max": its amax, per channel too where ``channel``; "hist": the operand itself)."""

    def __init__(self, policy: Policy, sink: Callable, n_rows: int, *, phase: str, channel: bool,
                 wanted: Callable = static_operand, words=None):
        super().__init__(policy, words, n_rows=n_rows)
        self.sink, self.phase, self.per_channel, self.wanted = sink, phase, channel, wanted
        # the per-row estimates hold the row numbers (exact in float32), sliced with the rows by
        # a layer scan; the GEMMs get no estimate (their current amax), as calibration wants
        self.est = jnp.repeat(jnp.arange(n_rows, dtype=jnp.float32)[:, None], 3, axis=1)
        self.channel = {}
        self._no_estimate = jnp.zeros(3, jnp.float32)
        self._site_seen = None  # (row, policy) of the GEMM being interpreted
        self._bases: list[set[int]] = []  # rows of site 0 of each layer scan iteration, innermost last
        self.known: dict[int, set[int]] = {}  # row -> wanted operands, traced at that (static) row
        self.derived: dict[int, set[int]] = {}  # the same, traced once for a layer scan's middle iterations

    def _site(self, path=None):
        meta, words, pol = super()._site(path)
        self._site_seen = (meta[1][0], pol)
        return (None, self._no_estimate), words, pol

    def _scope_bases(self) -> set[int]:
        return {self.row_base} if self.row_base is not None else self._bases[-1]

    def eqn(self, eqn, invals, flags, paths=None, data=None):
        name, p = eqn.primitive.name, eqn.params
        if name == "scan" and is_layer_scan(p, flags):  # iteration t's rows start at site + t * k
            nc, ncarry = scan_parts(p)
            body = p["jaxpr"].jaxpr
            k = count_rows(body, [*flags[:nc], *([False] * ncarry), *flags[nc + ncarry:]],
                           loop_data(body, input_data(flags, data), nc, ncarry))
            self._bases.append({b + self.site + t * k for b in self._scope_bases() for t in range(p["length"])})
            try:
                return super().eqn(eqn, invals, flags, paths, data)
            finally:
                self._bases.pop()
        if name not in ("dot_general", "conv_general_dilated"):
            return super().eqn(eqn, invals, flags, paths, data)
        site, self._site_seen = self.site, None
        outs = super().eqn(eqn, invals, flags, paths, data)
        if self._site_seen is None:  # not a site (an integer GEMM)
            return outs
        row, pol = self._site_seen
        roles = dot_roles(flags)
        sides = [s for s in (0, 1) if self.wanted(pol.role(roles[s])) and invals[s].size]
        table = self.known if self.row_base is not None else self.derived
        for r in (b + site for b in self._scope_bases()):
            table.setdefault(r, set()).update(sides)
        for side in sides:
            self._emit(eqn, side, row, invals[side], pol.role(roles[side]))
        return outs

    def _emit(self, eqn, side: int, row, x, spec):
        axis = None
        if eqn.primitive.name == "dot_general":
            contract = eqn.params["dimension_numbers"][0][side]
            axis = int(contract[0]) if len(contract) == 1 else None
        a = jnp.abs(x.astype(jnp.float32))
        data = {"amax": jnp.max(a)}
        if self.per_channel and axis is not None and self.phase == "max":
            data["camax"] = jnp.max(jnp.moveaxis(a, axis, -1).reshape(-1, a.shape[axis]), axis=0)
        if self.phase == "hist":
            data["abs"] = a
        jax.debug.callback(functools.partial(self.sink, side=side, axis=axis, spec=spec), row, data)

    def expected(self) -> dict[int, set[int]]:
        """row -> operands (0 lhs, 1 rhs) the sink should hear from: a row traced at a static
        row as it was traced there (a peeled first/last layer has roles of its own)."""
        out = {r: set(s) for r, s in self.derived.items() if r not in self.known}
        out.update({r: set(s) for r, s in self.known.items()})
        return {r: s for r, s in out.items() if s}


def _run_recorded(fn: Callable, pol: Policy, stats: SiteStats, args, weights: int | None, key=None, *,
                  phase: str, wanted: Callable = static_operand):
    """``fn(*args)`` under the recording interpreter (weight provenance as :func:`emulate` finds
    it); the operands it should see go to ``stats.expected`` while tracing."""
    counts = [len(jax.tree_util.tree_leaves(a)) for a in args]
    start = sum(counts[:weights]) if weights is not None and weights < len(args) else 0
    stop = start + (counts[weights] if weights is not None and weights < len(args) else 0)
    arrays, positions, rebuild = split_arrays((args, {}))
    flags = [1 if start <= i < stop else 0 for i in positions]
    # each weight leaf's path inside the ``weights`` argument, for the layer rules (as emulate())
    wpaths = leaf_paths(args[weights]) if pol.layers and start < stop else []
    paths = [wpaths[i - start] if wpaths and start <= i < stop else None for i in positions]

    def flat_fn(*xs):
        a, _ = rebuild(xs)
        return fn(*a)

    closed = jax.make_jaxpr(flat_fn)(*arrays)
    n_rows = count_rows(closed.jaxpr, flags)
    rec = _Recorder(pol, stats, n_rows, phase=phase, channel=stats.channel, wanted=wanted,
                    words=None if key is None else key_words(key))
    out = rec.run(closed.jaxpr, closed.consts, arrays, flags, paths)
    stats.n_rows = max(stats.n_rows, n_rows)
    for r, sides in rec.expected().items():
        stats.expected.setdefault(r, set()).update(sides)
    return out


def recorded(fn: Callable, pol: Policy, stats: SiteStats, weights: int | None, key=None, *, phase: str,
             wanted: Callable = static_operand) -> Callable:
    """``run(*args)``: ``fn(*args)`` recorded into ``stats``, compiled once per structure and
    shapes of the arguments (their array leaves traced; anything else, such as an Equinox
    module's functions, static)."""
    programs: dict = {}

    def run(*args):
        arrays, _, rebuild = split_arrays((args, {}))
        tree = jax.tree_util.tree_structure((args, {}))
        if tree not in programs:
            def program(*xs, rebuild=rebuild):
                return _run_recorded(fn, pol, stats, rebuild(xs)[0], weights, key, phase=phase, wanted=wanted)
            programs[tree] = jax.jit(program)
        return jax.block_until_ready(programs[tree](*arrays))

    return run


class SiteStats:
    """Per (row, operand): amax (tensor and per channel), then histograms over [0, amax]; and
    the operands the trace says calibration should see (``expected``: row -> operands)."""

    def __init__(self, bins: int, channel: bool):
        self.bins, self.channel, self.phase = bins, channel, "max"
        self.amax: dict = {}
        self.camax: dict = {}
        self.hist: dict = {}
        self.chist: dict = {}
        self.spec: dict = {}  # the operand's role spec at its site
        self.expected: dict[int, set[int]] = {}
        self.n_rows = 0

    def __call__(self, row, data, *, side: int, axis: int | None, spec: RoleSpec):
        key = (int(np.rint(np.asarray(row))), side)
        self.spec[key] = spec
        if self.phase == "max":
            self.amax[key] = max(self.amax.get(key, 0.0), float(data["amax"]))
            if "camax" in data:
                self.camax[key] = np.maximum(self.camax.get(key, 0.0), np.asarray(data["camax"]))
            return
        a = np.asarray(data["abs"])
        self.hist[key] = self.hist.get(key, 0) + cal.histogram(a, self.amax.get(key, 0.0), self.bins)
        if key in self.camax and axis is not None:
            a_c = np.moveaxis(a, axis, -1)
            self.chist[key] = self.chist.get(key, 0) + cal.channel_histograms(a_c, self.camax[key], self.bins)

    def unobserved(self) -> tuple[tuple[tuple[int, int], ...], tuple[tuple[int, int], ...]]:
        """((row, operand) never seen, (row, operand) seen only as zeros), each sorted."""
        want = sorted((r, s) for r, sides in self.expected.items() for s in sides)
        return (tuple(k for k in want if k not in self.amax),
                tuple(k for k in want if self.amax.get(k, -1.0) == 0.0))


def collect(apply_fn: Callable, params, batches: Iterable, pol: Policy, *, weights: int = 0, key=None,
            histograms: bool) -> SiteStats:
    """The statistics of up to ``pol.calibration_batches`` batches (two passes with histograms)."""
    stats = SiteStats(pol.calibration_bins, pol.calibration_granularity == "channel")
    kept = []
    for batch in batches:
        if len(kept) >= pol.calibration_batches:
            break
        kept.append(batch)
    if not kept:
        raise ValueError("calibrate: no calibration batches were given")
    for phase in ("max", "hist") if histograms else ("max",):
        stats.phase = phase
        run = recorded(apply_fn, pol, stats, weights, key, phase=phase)
        for batch in kept:
            run(params, batch)
        jax.effects_barrier()
    return stats


def static_from_stats(stats: SiteStats, pol: Policy) -> tuple[tuple, tuple]:
    """(static_scales, channel_scales) of a Policy from collected statistics and its method."""
    method = pol.calibration_method
    rows: dict = {}
    channels = []
    for (site, side), amax in sorted(stats.amax.items()):
        spec = stats.spec[(site, side)]
        fmt = spec.spec
        if method in ("mse", "entropy") and fmt.kind != "int":
            raise ValueError(f"calibration method {method!r} models an integer grid (pytorch-quantization's "
                             f"fake_tensor_quant); a GEMM operand with static scaling (row {site}) is "
                             f"{fmt.name!r}: use method = 'max' or 'percentile'")
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
