"""Data-parallel training across chips: step time, strong and weak scaling, where scaling stops paying.

One step on ``N`` chips, each holding a full model copy and ``b`` samples (the per-chip batch):

- compute: the per-chip forward and backward operations priced by the chip's design (its
  ``asicsim.hw.cost_many``: a systolic design's physical model, a GPU design's GPU baseline; every
  operation is priced as a forward kernel of its shape). A dense layer ``(b x K) @ (K x N)`` has a forward GEMM and two backward
  GEMMs with the same MACs each: ``dX = dY W^T``, ``(b x N)(N x K)``, and ``dW = X^T dY``,
  ``(K x b)(b x N)``; the first layer skips ``dX`` (nobody needs the input's gradient). An RNN layer
  (:class:`~asicsim._src.hw.operations.Rnn`) is priced forward, then once more for the backward pass
  through time (same MACs and per-step structure; the transposed recurrent shape is not modelled),
  plus its two weight-gradient GEMMs ``(X x bT)(bT x gH)`` and ``(H x bT)(bT x gH)``.
- gradient all-reduce: ``parameters x grad_bits`` over the ring of ``N`` chips
  (:func:`asicsim._src.hw.links.allreduce_time`; none for ``N = 1``).
- step time without overlap: ``forward + backward + allreduce(all gradients)``. With ``overlap``:
  each layer's gradients are all-reduced as their own call as soon as that layer's backward ends
  (last layer first), calls run one at a time on the links, so
  ``step = forward + max(backward end, last all-reduce end)`` of that list schedule.

Strong scaling splits a fixed global batch ``B`` over ``N`` chips (``b = ceil(B / N)``; the
fullest chip sets the pace): efficiency ``T1 / (N * TN)``. Weak scaling keeps ``b`` fixed:
efficiency ``T1 / TN``. Throughput is ``N * b / TN`` samples per second (``B / TN`` for strong).
Scaling "stops paying" at the first chip count whose efficiency falls below ``min_efficiency``
(default 0.5: half of every added chip is waiting on the network); :func:`stops_paying` names it and
the per-chip batch there.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from asicsim._src.hw.cost import cost_many
from asicsim._src.hw.design_files import load_design
from asicsim._src.hw.interface import Design
from asicsim._src.hw.links import (
    Link,
    Topology,
    TopologyError,
    allreduce_time,
    get_topology,
)
from asicsim._src.hw.operations import AllReduce
from asicsim._src.numerics import FormatError, get_format
from asicsim._src.system.training_models import MODELS as MODELS
from asicsim._src.system.training_models import TrainingModel as TrainingModel
from asicsim._src.system.training_models import get_model as get_model

MODES = ("strong", "weak")
DEFAULT_CHIPS = (1, 2, 4, 8, 16, 32, 64)


@dataclass(frozen=True)
class StepResult:
    """One data-parallel training step on ``chips`` chips (times in seconds, energy per chip)."""

    model: str
    design: str
    topology: str
    chips: int
    batch_per_chip: int
    forward_s: float
    backward_s: float
    allreduce_s: float  # all gradient all-reduce calls, end to end if run alone
    step_s: float
    gradient_bytes: float
    compute_energy_j: float  # one chip's forward + backward energy
    overlap: bool

    @property
    def compute_s(self) -> float:
        return self.forward_s + self.backward_s

    @property
    def exposed_comm_s(self) -> float:
        return self.step_s - self.compute_s

    @property
    def samples_per_s(self) -> float:
        return self.chips * self.batch_per_chip / self.step_s

    def row(self) -> dict:
        return asdict(self) | {"compute_s": self.compute_s, "exposed_comm_s": self.exposed_comm_s,
                               "samples_per_s": self.samples_per_s}


def _grad_bits(grad_format: str | int) -> int:
    if isinstance(grad_format, int) and not isinstance(grad_format, bool):
        bits = grad_format
    else:
        try:
            bits = get_format(grad_format).storage_bits  # memory words: tf32 is 32 bits
        except (FormatError, TypeError) as err:
            raise TopologyError(f"grad_format = {grad_format!r}; allowed: a format name or a bit count ({err})") from None
    if not (bits >= 1 and float(bits).is_integer()):
        raise TopologyError(f"grad_format = {grad_format!r} ({bits} bits); allowed: a whole number of bits >= 1")
    return int(bits)


def _compute(model: TrainingModel, batch: int, design, formats) -> tuple[list[float], list[float], float, str]:
    """Per-layer forward and backward seconds, total energy (J) and the design's name."""
    layers = model.layer_operations(batch)
    ops = [op for fwd, bwd in layers for op in fwd + bwd]
    # each operation's (layer, phase) slot: 2 * layer + (0 forward, 1 backward)
    owner = np.concatenate([np.repeat([2 * li, 2 * li + 1], [len(fwd), len(bwd)]) for li, (fwd, bwd) in enumerate(layers)])
    d = load_design(design)
    price = cost_many(ops, d, formats).price  # the typed price over the operations (no records read)
    n = len(ops)  # bincount adds each slot's operations in order, as the records were added
    times = np.bincount(owner, weights=np.broadcast_to(price.time_s, (n,)), minlength=2 * len(layers))
    energy = float(np.bincount(np.zeros(n, dtype=np.int64), weights=np.broadcast_to(price.energy_pj, (n,)))[0]) * 1e-12
    return times[0::2].tolist(), times[1::2].tolist(), energy, d.name


def _step(model, batch, chips, topo: Topology, bits: int, overlap: bool, computed) -> StepResult:
    fwd, bwd, energy, design = computed
    params = model.layer_parameters()
    if chips == 1:
        ar_total, step = 0.0, sum(fwd) + sum(bwd)
    elif not overlap:
        ar_total = allreduce_time(AllReduce(model.parameters, chips, bits), topo).time_s
        step = sum(fwd) + sum(bwd) + ar_total
    else:  # list schedule: layer gradients all-reduced one call each, last layer first
        t = sum(fwd)
        link_free, ar_total = t, 0.0
        for li in reversed(range(len(params))):
            t += bwd[li]
            call = allreduce_time(AllReduce(params[li], chips, bits), topo).time_s
            ar_total += call
            link_free = max(link_free, t) + call
        step = max(t, link_free)
    return StepResult(model.name, design, topo.name, chips, batch, sum(fwd), sum(bwd), ar_total, step,
                      model.parameters * bits / 8, energy, overlap)


def training_step(model: str | TrainingModel, batch_per_chip: int, chips: int,
                  design: str | Design, topology: str | Link | Topology = "nvlink",
                  formats: str | Mapping | None = None, grad_format: str | int = "fp32",
                  overlap: bool = False) -> StepResult:
    """One data-parallel step: compute on ``batch_per_chip`` samples plus the gradient all-reduce."""
    m = get_model(model)
    _check_chips([chips])
    topo = get_topology(topology)
    return _step(m, batch_per_chip, chips, topo, _grad_bits(grad_format), overlap,
                 _compute(m, batch_per_chip, design, formats))


@dataclass(frozen=True)
class ScalingPoint:
    """One chip count of a scaling curve."""

    mode: str
    chips: int
    global_batch: int
    step: StepResult = field(repr=False)
    speedup: float  # throughput over one chip's (strong: T1 / TN; weak: N T1 / TN)
    efficiency: float  # strong: T1 / (N TN); weak: T1 / TN
    marginal_speedup: float  # throughput over the previous point's (nan for the first)

    def row(self) -> dict:
        s = self.step
        return {"mode": self.mode, "chips": self.chips, "global_batch": self.global_batch,
                "batch_per_chip": s.batch_per_chip, "step_ms": s.step_s * 1e3,
                "compute_ms": s.compute_s * 1e3, "allreduce_ms": s.allreduce_s * 1e3,
                "exposed_comm_ms": s.exposed_comm_s * 1e3, "samples_per_s": s.samples_per_s,
                "speedup": self.speedup, "efficiency": self.efficiency,
                "marginal_speedup": self.marginal_speedup}


def _check_chips(chips: Sequence[int]) -> None:
    for n in chips:
        if not (isinstance(n, int) and not isinstance(n, bool) and n >= 1):
            raise TopologyError(f"chips = {n!r}; allowed: integers >= 1")


def scaling_curve(model: str | TrainingModel, design: str | Design,
                  topology: str | Link | Topology = "nvlink", chips: Sequence[int] = DEFAULT_CHIPS,
                  batch: int = 512, mode: str = "strong", formats: str | Mapping | None = None,
                  grad_format: str | int = "fp32", overlap: bool = False) -> list[ScalingPoint]:
    """Strong (``batch`` = global batch) or weak (``batch`` = per-chip batch) scaling over ``chips``.

    Efficiency and speedup are against one chip (computed even when 1 is not in ``chips``).
    """
    if mode not in MODES:
        raise TopologyError(f"mode = {mode!r}; allowed: {' | '.join(MODES)}")
    m, topo, bits = get_model(model), get_topology(topology), _grad_bits(grad_format)
    chips = sorted(set(chips))
    _check_chips(chips)
    if not (isinstance(batch, int) and not isinstance(batch, bool) and batch >= 1):
        raise TopologyError(f"batch = {batch!r}; allowed: an integer >= 1")
    if mode == "strong" and chips[-1] > batch:
        raise TopologyError(f"chips = {chips[-1]} > global batch = {batch} (strong scaling); allowed: "
                            "at most one chip per sample")
    cache: dict[int, tuple] = {}

    def step(n: int) -> StepResult:
        b = math.ceil(batch / n) if mode == "strong" else batch
        if b not in cache:
            cache[b] = _compute(m, b, design, formats)
        return _step(m, b, n, topo, bits, overlap, cache[b])

    one = step(1)
    points, prev = [], None
    for n in chips:
        s = step(n)
        speedup = (one.step_s / s.step_s) * (1 if mode == "strong" else n)
        thr = batch / s.step_s if mode == "strong" else s.samples_per_s
        marginal = thr / prev if prev else math.nan
        points.append(ScalingPoint(mode, n, batch if mode == "strong" else n * batch, s, speedup,
                                   speedup / n, marginal))
        prev = thr
    return points


def stops_paying(points: Sequence[ScalingPoint], min_efficiency: float = 0.5) -> dict | None:
    """The first point whose efficiency is below ``min_efficiency`` (chips, per-chip batch, efficiency,
    and the last point above it), or None if every point pays."""
    if not (isinstance(min_efficiency, (int, float)) and 0 < min_efficiency <= 1):
        raise TopologyError(f"min_efficiency = {min_efficiency!r}; allowed: a fraction in (0, 1]")
    last = None
    for p in points:
        if p.efficiency < min_efficiency:
            return {"min_efficiency": min_efficiency, "chips": p.chips,
                    "batch_per_chip": p.step.batch_per_chip, "efficiency": p.efficiency,
                    "last_paying_chips": last.chips if last else None,
                    "last_paying_batch_per_chip": last.step.batch_per_chip if last else None}
        last = p
    return None
