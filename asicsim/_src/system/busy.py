"""When a GPU is too idle to compare with, and the larger batch a comparison is re-run at.

A GPU step of a small model is mostly launch floor (each kernel's fixed launch and call overhead,
:mod:`asicsim._src.hw.gpu_model`) or runs on a few of its SMs; its energy is then mostly static power
over that idle time, and a ratio against it measures the idling, not the work. Such a GPU is
*bound* (:func:`gpu_bound`) when

- ``launch_fraction`` > :data:`LAUNCH_BOUND`: most of its modelled time is the launch floor, or
- ``sm_fraction`` < :data:`OCCUPANCY_BOUND`: fewer than half its SMs are busy (time-weighted).

Both thresholds are one half: above it the fixed overhead (or the idle SMs) is the larger part of
what the GPU is charged for, so a ratio against it is more about the idling than the work. The
fractions are the schema's (issue 30): every GPU cost row carries them, NaN on systolic designs.

:func:`busy_batch` is the batch a workload is re-priced at so that a bound GPU can also be compared
doing enough work, taken from the GPU's own model: the smallest batch at which no GPU compared is
bound any more, among the workload's batch times :data:`BUSY_GROWTH`:sup:`k` (k >= 1) within
:data:`BUSY_MAX_BATCH` examples and :data:`BUSY_MAX_INPUT_BYTES` of input (the trace builds one
sample batch of that size). Each candidate is the workload's trace at that batch priced on each
GPU (:func:`asicsim._src.workloads.pricing.trace_costs`, the launch and SM shares time-weighted); the
search bisects the candidates, taking a larger batch to bind a GPU no more than a smaller one (more
work per kernel: a smaller share of launch floor, more SMs busy). Where even the largest candidate
leaves a GPU bound, the busy batch is that largest one and the records say "still bound" there.
A GPU that does not execute the recipe's formats is compared with nothing and chooses nothing
(where no GPU executes them, the largest candidate).
The batch depends on the workload (its trace in the recipe and phase) and the GPUs it is chosen
for only: a sweep chooses it for the GPUs its spec names (:data:`BUSY_GPU` where it names none), so
every design of a sweep is priced at the same batch and each record stands alone (a retried point
needs no other point); ``busy_gpu`` names them in the record. Whether each GPU is busy there is
measured, not assumed: its ``busy_launch_fraction`` and ``busy_sm_fraction`` are recorded beside the
figures (:func:`busy_figures`), and the report says "still bound" where it is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from asicsim._src.hw.result import Bound
from asicsim._src.hw.scopes import SCOPE_ENERGY_KEYS

#: Above this share of its modelled time in launch floor a GPU is launch-bound (see the module doc).
LAUNCH_BOUND = 0.5
#: Below this time-weighted share of busy SMs a GPU is occupancy-bound (see the module doc).
OCCUPANCY_BOUND = 0.5

#: The busy batch is the workload's batch times a power of this factor (the candidates searched).
BUSY_GROWTH = 2
#: The largest busy batch in examples: 16,384 (512x the digits MLP's batch of 32, 164x the MNIST-1D
#: CNN's 100); pricing is analytic, but the trace builds one sample batch of that size.
BUSY_MAX_BATCH = 2**14
#: The most input bytes that sample batch may hold: 256 MiB (a speech workload's padded utterances
#: are ~0.3 MB each, so its busy batch stays under a thousand).
BUSY_MAX_INPUT_BYTES = 2**28


#: The GPU a busy batch is chosen for where a sweep or command names none.
BUSY_GPU = "gpu_h100"

#: The record keys :func:`busy_figures` writes (``busy_batch``, the GPUs it was chosen for and the figures at it).
BUSY_KEYS = ("busy_batch", "busy_gpu", "busy_time_s", "busy_energy_j", "busy_energy_dynamic_j", *(f"busy_{k}" for k in SCOPE_ENERGY_KEYS),
             "busy_launch_fraction", "busy_sm_fraction")


def _fraction(v) -> float:
    try:
        v = float(v)
    except (TypeError, ValueError):
        return math.nan
    return v


def gpu_bound(launch_fraction, sm_fraction) -> Bound | str:
    """The price's one bound encoding (:class:`asicsim._src.hw.result.Bound`): ``Bound.LAUNCH`` when the
    launch floor is over :data:`LAUNCH_BOUND` of the time, else ``Bound.OCCUPANCY`` when under
    :data:`OCCUPANCY_BOUND` of the SMs are busy, else ``""`` (busy, or not a GPU: NaN fractions).
    A member is its name (``Bound.LAUNCH == "launch"``).

    >>> gpu_bound(0.97, 0.9), gpu_bound(0.2, 0.3), gpu_bound(0.5, 0.5), gpu_bound(float("nan"), None)
    ('launch', 'occupancy', '', '')
    >>> gpu_bound(0.97, 0.9) is Bound.LAUNCH
    True
    """
    launch, sm = _fraction(launch_fraction), _fraction(sm_fraction)
    if launch > LAUNCH_BOUND:
        return Bound.LAUNCH
    if sm < OCCUPANCY_BOUND:
        return Bound.OCCUPANCY
    return ""


def candidate_batches(batch: int, bytes_per_example: float) -> list[int]:
    """The batches a busy batch is chosen among, smallest first: ``batch`` x :data:`BUSY_GROWTH` ** k
    (k >= 1) within :data:`BUSY_MAX_BATCH` and :data:`BUSY_MAX_INPUT_BYTES`; [] when none fits.

    >>> candidate_batches(1024, 256), candidate_batches(100, 160)[-1], candidate_batches(2**14, 4)
    ([2048, 4096, 8192, 16384], 12800, [])
    """
    out, b = [], int(batch) * BUSY_GROWTH
    while b <= BUSY_MAX_BATCH and b * bytes_per_example <= BUSY_MAX_INPUT_BYTES:
        out.append(b)
        b *= BUSY_GROWTH
    return out


@dataclass(frozen=True)
class Busy:
    """A workload's busy batch (None where no candidate fits), its trace there, the GPUs it was
    chosen for (names), and ``bound``: which of them are still bound there ({} where none is; a GPU
    that cannot price the recipe is ``"unpriced"``)."""

    batch: int | None
    trace: pd.DataFrame | None = field(default=None, repr=False)
    gpus: tuple[str, ...] = ()
    bound: dict = field(default_factory=dict)


def gpu_state(trace: pd.DataFrame, gpu, recipe) -> str:
    """:func:`gpu_bound` of ``trace`` priced on ``gpu``: ``"launch"``, ``"occupancy"``, ``""``
    (busy), or ``"unpriced"`` where the GPU cannot price the recipe (no fraction to judge by)."""
    from asicsim._src.hw.operations import OperationError
    from asicsim._src.workloads.trace_price import trace_price

    try:  # the typed price's vectorised totals (TracePrice.totals), of the one GPU
        t = {k: float(v[0]) for k, v in trace_price(trace, [gpu], recipe).totals().items()}
    except OperationError:
        return "unpriced"
    if not (math.isfinite(t["launch_fraction"]) and math.isfinite(t["sm_fraction"])):
        return "unpriced"
    return gpu_bound(t["launch_fraction"], t["sm_fraction"])


def busy_batch(workload, recipe, training: bool, gpus=None) -> Busy:
    """The smallest of :func:`candidate_batches` at which none of ``gpus`` (design objects or
    names; default :data:`BUSY_GPU`) that prices the recipe is bound, with the workload's trace
    there; the largest candidate where one is still bound there, or where none prices the recipe
    (a GPU that does not execute its formats is compared with nothing, so it chooses nothing).
    Bisects the candidates: the largest first, then halving the range between the last bound and
    the first busy one."""
    from asicsim._src.hw.design_files import load_design
    from asicsim._src.workloads.pricing import workload_trace

    gpus = [load_design(g) for g in (gpus or [BUSY_GPU])]
    cands = candidate_batches(int(workload.batch), input_bytes_per_example(workload))
    if not cands:
        return Busy(None, None, tuple(g.name for g in gpus))
    seen: dict[int, tuple] = {}

    def look(i: int) -> tuple:
        b = cands[i]
        if b not in seen:
            trace = workload_trace(workload, recipe, batch=b, training=training)
            seen[b] = trace, {g.name: gpu_state(trace, g, recipe) for g in gpus}
        return seen[b]

    last = len(cands) - 1
    trace, states = look(last)
    priced = [g for g in gpus if states[g.name] != "unpriced"]
    if not priced:  # no GPU to keep busy: the largest, as measured
        return Busy(cands[last], trace, tuple(g.name for g in gpus), states)
    gpus = priced  # the formats a GPU executes do not depend on the batch
    names = tuple(g.name for g in gpus)

    def bound(i: int) -> dict:
        return {n: s for n, s in look(i)[1].items() if s and n in names}

    if bound(last):  # still bound at the largest: no candidate keeps it busy
        return Busy(cands[last], trace, names, bound(last))
    lo, hi = -1, last  # cands[hi] keeps every GPU busy; every candidate up to lo binds one
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if bound(mid) else (lo, mid)
    return Busy(cands[hi], look(hi)[0], names)


def input_bytes_per_example(workload) -> float:
    """The bytes of one example of ``workload``'s training input as the trace batches it."""
    from asicsim._src.workloads.training import build

    data, _ = build(workload)
    x = np.asarray(data.x_train)
    if data.task == "lm":  # a token stream: an example is a window of ``context`` tokens
        return float(workload.context * x.itemsize)
    return float(x.nbytes / max(len(x), 1))


def trace_totals(costs: pd.DataFrame) -> dict[str, float]:
    """A priced trace's totals (:func:`asicsim._src.workloads.pricing.trace_costs`, or a cost table's
    rows): time, ``energy_j``, ``energy_dynamic_j`` and the energy at each scope summed (NaN where a row is unpriced, or where the rows carry no such scope),
    ``launch_fraction`` and ``sm_fraction`` weighted by each row's time (NaN without them)."""
    time = pd.to_numeric(costs["time_s"], errors="coerce")
    out = {"time_s": float(time.sum(skipna=False))}
    for k in ("energy_j", "energy_dynamic_j"):  # of the record's own scope (board in the schema)
        out[k] = float(pd.to_numeric(costs[k], errors="coerce").sum(skipna=False)) if k in costs else math.nan
    for k in SCOPE_ENERGY_KEYS:
        out[k] = float(pd.to_numeric(costs[k], errors="coerce").sum(skipna=False)) if k in costs else math.nan
    for k in ("launch_fraction", "sm_fraction"):
        if k in costs and out["time_s"] > 0:
            out[k] = float((pd.to_numeric(costs[k], errors="coerce") * time).sum(skipna=False) / out["time_s"])
        else:
            out[k] = math.nan
    return out


def busy_group(busy: Busy | None, designs, recipe, *, objective: str | None = None) -> list[dict]:
    """The record keys :data:`BUSY_KEYS` for each of ``designs`` (one family, or one design
    alone): the workload's trace at its busy batch (``busy``, :func:`busy_batch`) priced in one
    pass (:func:`asicsim._src.workloads.pricing.trace_price`; systolic schedules mapped for
    ``objective``, default the mapper's default), totalled; ``{}`` each when there is no busy batch."""
    if busy is None or busy.batch is None:
        return [{} for _ in designs]
    from asicsim._src.hw.objectives import DEFAULT_OBJECTIVE
    from asicsim._src.workloads.pricing import trace_price

    tot = trace_price(busy.trace, designs, recipe, objective=objective or DEFAULT_OBJECTIVE).totals()
    keys = ["time_s", "energy_j", "energy_dynamic_j", *SCOPE_ENERGY_KEYS, "launch_fraction", "sm_fraction"]
    return [{"busy_batch": int(busy.batch), "busy_gpu": ",".join(busy.gpus),
             **{f"busy_{k}": float(tot[k][i]) for k in keys}} for i in range(len(designs))]


def busy_figures(busy: Busy | None, design, recipe, *, objective: str | None = None) -> dict:
    """:func:`busy_group` for one design."""
    return busy_group(busy, [design], recipe, objective=objective)[0]


