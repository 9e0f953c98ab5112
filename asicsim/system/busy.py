"""When a GPU is too idle to compare with, and the larger batch a comparison is re-run at.

A GPU step of a small model is mostly launch floor (each kernel's fixed launch and call overhead,
:mod:`asicsim.hw.gpu_model`) or runs on a few of its SMs; its energy is then mostly static power
over that idle time, and a ratio against it measures the idling, not the work. Such a GPU is
*bound* (:func:`gpu_bound`) when

- ``launch_fraction`` > :data:`LAUNCH_BOUND`: most of its modelled time is the launch floor, or
- ``sm_fraction`` < :data:`OCCUPANCY_BOUND`: fewer than half its SMs are busy (time-weighted).

Both thresholds are one half: above it the fixed overhead (or the idle SMs) is the larger part of
what the GPU is charged for, so a ratio against it is more about the idling than the work. The
fractions are the schema's (issue 30): every GPU cost row carries them, NaN on systolic designs.

:func:`busy_batch` is the batch a workload is re-priced at so that a bound GPU can also be compared
doing enough work: the workload's batch times :data:`BUSY_GROWTH`:sup:`k`, the largest within
:data:`BUSY_MAX_BATCH` examples and :data:`BUSY_MAX_INPUT_BYTES` of input (the trace builds one
sample batch of that size). It depends on the workload only, so every design of a sweep is priced
at the same batch and each record stands alone (a retried point needs no other point). Whether the
GPU is busy there is measured, not assumed: its ``busy_launch_fraction`` and ``busy_sm_fraction``
are recorded beside the figures (:func:`busy_figures`), and the report says "still bound" where it is.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from asicsim.hw.scopes import SCOPE_ENERGY_KEYS

#: Above this share of its modelled time in launch floor a GPU is launch-bound (see the module doc).
LAUNCH_BOUND = 0.5
#: Below this time-weighted share of busy SMs a GPU is occupancy-bound (see the module doc).
OCCUPANCY_BOUND = 0.5

#: The busy batch is the workload's batch times a power of this factor.
BUSY_GROWTH = 4
#: The largest busy batch in examples: 16,384 (512x the digits MLP's batch of 32, 164x the MNIST-1D
#: CNN's 100); pricing is analytic, but the trace builds one sample batch of that size.
BUSY_MAX_BATCH = 2**14
#: The most input bytes that sample batch may hold: 256 MiB (a speech workload's padded utterances
#: are ~0.3 MB each, so its busy batch stays under a thousand).
BUSY_MAX_INPUT_BYTES = 2**28


#: The record keys :func:`busy_figures` writes (``busy_batch`` and the figures at it).
BUSY_KEYS = ("busy_batch", "busy_time_s", "busy_energy_j", "busy_energy_dynamic_j", *(f"busy_{k}" for k in SCOPE_ENERGY_KEYS),
             "busy_launch_fraction", "busy_sm_fraction")


def _fraction(v) -> float:
    try:
        v = float(v)
    except (TypeError, ValueError):
        return math.nan
    return v


def gpu_bound(launch_fraction, sm_fraction) -> str:
    """``"launch"`` when the launch floor is over :data:`LAUNCH_BOUND` of the time, else
    ``"occupancy"`` when under :data:`OCCUPANCY_BOUND` of the SMs are busy, else ``""`` (busy, or
    not a GPU: NaN fractions).

    >>> gpu_bound(0.97, 0.9), gpu_bound(0.2, 0.3), gpu_bound(0.5, 0.5), gpu_bound(float("nan"), None)
    ('launch', 'occupancy', '', '')
    """
    launch, sm = _fraction(launch_fraction), _fraction(sm_fraction)
    if launch > LAUNCH_BOUND:
        return "launch"
    if sm < OCCUPANCY_BOUND:
        return "occupancy"
    return ""


def busy_batch(batch: int, bytes_per_example: float) -> int | None:
    """The batch a workload of ``batch`` examples (``bytes_per_example`` of input each) is
    re-priced at: ``batch`` x :data:`BUSY_GROWTH` ** k, the largest within :data:`BUSY_MAX_BATCH`
    and :data:`BUSY_MAX_INPUT_BYTES`; None when no k >= 1 fits.

    >>> busy_batch(32, 256), busy_batch(100, 160), busy_batch(2**14, 4), busy_batch(64, 2**22)
    (8192, 6400, None, None)
    """
    best, b = None, int(batch) * BUSY_GROWTH
    while b <= BUSY_MAX_BATCH and b * bytes_per_example <= BUSY_MAX_INPUT_BYTES:
        best, b = b, b * BUSY_GROWTH
    return best


def input_bytes_per_example(workload) -> float:
    """The bytes of one example of ``workload``'s training input as the trace batches it."""
    from asicsim.workloads.training import build

    data, _ = build(workload)
    x = np.asarray(data.x_train)
    if data.task == "lm":  # a token stream: an example is a window of ``context`` tokens
        return float(workload.context * x.itemsize)
    return float(x.nbytes / max(len(x), 1))


def trace_totals(costs: pd.DataFrame) -> dict[str, float]:
    """A priced trace's totals (:func:`asicsim.workloads.pricing.trace_costs`, or a cost table's
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


def busy_figures(trace: pd.DataFrame | None, batch: int | None, design, recipe, *,
                 objective: str | None = None) -> dict:
    """The record keys :data:`BUSY_KEYS` for ``design``: ``trace`` (the workload's trace at
    ``batch``, the :func:`busy_batch`) priced (systolic schedules mapped for ``objective``, default
    the mapper's default), totalled; ``{}`` when there is no busy batch."""
    if trace is None or batch is None:
        return {}
    from asicsim.hw.objectives import DEFAULT_OBJECTIVE
    from asicsim.workloads.pricing import trace_costs

    t = trace_totals(trace_costs(trace, design, recipe, objective=objective or DEFAULT_OBJECTIVE))
    return {"busy_batch": int(batch), **{f"busy_{k}": v for k, v in t.items()}}


def busy_family(trace: pd.DataFrame | None, batch: int | None, designs, recipe) -> list[dict]:
    """:func:`busy_figures` for every design of one family (:mod:`asicsim.hw.family`), priced in
    one vectorised pass (:func:`asicsim.workloads.pricing.trace_totals_family`)."""
    if trace is None or batch is None:
        return [{} for _ in designs]
    from asicsim.workloads.pricing import trace_totals_family

    tot = trace_totals_family(trace, designs, recipe)
    nan = np.full(len(designs), math.nan)
    keys = ["time_s", "energy_j", "energy_dynamic_j", *SCOPE_ENERGY_KEYS,
            "launch_fraction", "sm_fraction"]
    return [{"busy_batch": int(batch), **{f"busy_{k}": float(np.asarray(tot.get(k, nan))[i]) for k in keys}}
            for i in range(len(designs))]


def busy_trace(workload, recipe, training: bool) -> tuple[pd.DataFrame | None, int | None]:
    """``workload``'s op trace at its :func:`busy_batch` and that batch; (None, None) where none fits."""
    from asicsim.workloads.pricing import workload_trace

    b = busy_batch(int(workload.batch), input_bytes_per_example(workload))
    if b is None:
        return None, None
    return workload_trace(workload, recipe, batch=b, training=training), b
