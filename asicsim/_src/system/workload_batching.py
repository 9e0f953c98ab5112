"""Batching a training workload's own model: the service table from its inference op trace.

``asicsim batching --model <workload>`` serves the model a workload trains (``workloads/*.toml``:
the same builder, sizes and input shape, e.g. the Deep Speech 2 model of ``speech_ds2``) instead
of a hand-written preset. For every batch size ``b`` the workload's inference pass is traced under
``recipe`` at batch ``b`` (:func:`asicsim._src.workloads.pricing.workload_trace`: shapes only, every
GEMM and elementwise op the model runs, with the formats the recipe gives each one) and priced on
the design by :func:`asicsim._src.workloads.pricing.trace_costs`: the same pricing as ``asicsim trace``
gives the workload, summed over the trace. One request is one example of the workload's dataset as
the model sees it in training (for speech: one utterance at the dataset's padded frame count).

The weights' values do not change the cost; the shapes, the formats and the work do, and those are
the trained model's. A recipe whose formats the design does not execute is an error that says so
(never a table with missing rows).
"""

from __future__ import annotations

import numpy as np

from asicsim._src.hw.design_files import load_design
from asicsim._src.system.batching import ServiceTable
from asicsim._src.system.batching_errors import BatchingError, positive_int

#: The recipe a workload is served in when none is named: the default design's formats.
DEFAULT_RECIPE = "bf16"


def is_workload(name: str) -> bool:
    """Whether ``name`` names a training workload (a shipped name or a ``.toml`` path)."""
    from asicsim._src.workloads import list_workloads

    return name.endswith(".toml") or name in list_workloads()


def workload_service_table(workload, design, recipe: str = DEFAULT_RECIPE, max_batch: int = 64, *,
                           scale: str | None = None) -> ServiceTable:
    """Service time and energy of one inference batch of ``workload``'s model, batch 1..max_batch,
    on ``design`` in ``recipe``'s formats (see the module docstring)."""
    from asicsim._src.workloads.pricing import trace_price, unpriced_problem, workload_trace

    w = _load(workload, scale)
    n = positive_int("max_batch", max_batch)
    d = load_design(design)
    t, e = np.zeros(n), np.zeros(n)
    formats: dict = {}
    for b in range(1, n + 1):
        priced = trace_price(workload_trace(w, recipe, batch=b, training=False), [d], recipe)
        if any(part.price is None for part in priced.parts):
            raise BatchingError(unpriced_problem(priced.rows(0), recipe, d.name, w.name))
        fig = priced.row_figures(0)  # the typed price's per-row figures, summed as the table's were
        t[b - 1], e[b - 1] = fig["time_s"].sum(), fig["energy_j"].sum()
        if not formats and priced.parts:  # the first GEMM's formats (else the first row's)
            part = next((p for p in priced.parts if p.kind == "gemm"), priced.parts[0])
            formats = {k: part.formats[k] for k in ("act", "weight", "acc", "out")}
    return ServiceTable(f"{w.name} ({recipe})", d.name, formats, t, e)


def workload_description(workload, *, scale: str | None = None) -> str:
    """One line: the workload's model and what one request is."""
    from asicsim._src.workloads.training import build

    w = _load(workload, scale)
    data, model = build(w)
    shape = (w.context,) if data.task == "lm" else data.feature_shape
    sizes = ", ".join(f"{k} {v}" for k, v in model.sizes.items())
    return (f"workload {w.name}: the {model.kind} model it trains ({sizes}); one request = one "
            f"{data.name} example of shape {tuple(shape)}")


def _load(workload, scale: str | None):
    from asicsim._src.workloads import load_workload

    return load_workload(workload) if scale is None else load_workload(workload, scale=scale)
