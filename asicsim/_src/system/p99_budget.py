"""The largest throughput whose simulated p99 latency meets a budget, over a grid of batching
policies (:func:`max_throughput_under_p99`), on the simulator of :mod:`asicsim._src.system.batching`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from asicsim._src.system.batching import (
    BatchingPolicy,
    BatchingResult,
    ServiceTable,
    service_table,
    simulate,
)
from asicsim._src.system.batching_errors import BatchingError, nonneg_float, positive_int
from asicsim._src.system.inference_models import InferenceModel, get_model

# --- the largest throughput under a p99 budget ----------------------------------------------------

@dataclass(frozen=True)
class BudgetResult:
    """The largest arrival rate (over the policy grid) whose simulated p99 meets ``budget_s``."""

    model: str
    design: str
    budget_s: float
    rate_rps: float  # 0 when no policy meets the budget
    max_batch: int
    max_wait_s: float
    best: BatchingResult | None
    grid: list = field(default_factory=list, repr=False)  # one row per policy tried

    def row(self) -> dict:
        r = {"model": self.model, "design": self.design, "p99_budget_ms": self.budget_s * 1e3,
             "max_rate_rps": self.rate_rps, "max_batch": self.max_batch, "max_wait_ms": self.max_wait_s * 1e3}
        if self.best is not None:
            b = self.best
            r |= {"throughput_rps": b.throughput_rps, "latency_p99_ms": b.latency_p99_s * 1e3,
                  "latency_p50_ms": b.latency_p50_s * 1e3, "mean_batch": b.mean_batch,
                  "energy_per_request_mj": b.energy_per_request_j * 1e3}
        return r


def max_throughput_under_p99(model: str | InferenceModel | ServiceTable, design, budget_s: float, *,
                             formats: str | Mapping | None = None,
                             max_batches: Sequence[int] = (1, 2, 4, 8, 16, 32, 64),
                             max_waits_s: Sequence[float] | None = None, requests: int = 20_000,
                             seed: int = 0, arrivals: str = "poisson", max_load: float = 0.95,
                             scan: int = 12, bisections: int = 7) -> BudgetResult:
    """Largest arrival rate whose simulated p99 latency meets ``budget_s``, over a policy grid.

    For each policy (``max_batches`` x ``max_waits_s``, default waits 0, budget/4, budget/2) rates
    are scanned at 0.1 %, 0.3 %, 1 %, 3 % and ``scan`` evenly spaced loads up to ``max_load`` of
    the saturated rate ``B / service(B)`` (p99 need not be monotone in the rate: a long max_wait
    hurts light load most, and p99 can fall again once batches form), then the gap above the
    highest feasible load is bisected
    ``bisections`` times. Every run of a policy reuses one unit-rate arrival sequence scaled by
    1/rate (common random numbers), so p99(rate) is smooth. Loads above ``max_load`` are not
    searched: near saturation a finite run underestimates the steady-state tail (a queue's
    relaxation time grows as 1/(1 - load)^2). Runs hold ``max(requests, 2000 min(B, load B))``
    requests, so big batches still see a couple of thousand launches (a run's first requests are
    the same at every length: the prefix of one seeded sequence). Policies whose full batch alone exceeds the budget are
    skipped (under load their batches fill), and so are those whose saturated rate is below the
    best rate already found. It is a grid search, not a proof: a feasible window narrower than
    the grid's spacing (``max_load / scan``) can be missed. ``model`` may be a :class:`ServiceTable` (``design`` and ``formats``
    are then ignored).
    """
    budget_s = nonneg_float("budget_s", budget_s, positive=True)
    max_load = nonneg_float("max_load", max_load, positive=True)
    if max_load >= 1:
        raise BatchingError(f"max_load = {max_load!r}; allowed: a fraction of the saturated rate in (0, 1)")
    waits = [0.0, budget_s / 4, budget_s / 2] if max_waits_s is None else [
        nonneg_float("max_wait_s", w) for w in max_waits_s]
    bs = sorted({positive_int("max_batch", b) for b in max_batches})
    table = model if isinstance(model, ServiceTable) else service_table(get_model(model), design, formats, max(bs))
    best: tuple | None = None
    grid = []
    loads = sorted({0.001, 0.003, 0.01, 0.03, *np.linspace(max_load / scan, max_load, scan).tolist()})
    loads = [f for f in loads if f <= max_load]

    for B in reversed(bs):  # big batches first: a policy whose saturated rate is below the best
        if table.service_s(B) > budget_s:  # found so far cannot win and is skipped
            continue
        cap = table.capacity(B)
        positive_int("requests", requests)
        for W in waits:
            if best is not None and cap <= best[0]:
                grid.append({"max_batch": B, "max_wait_ms": W * 1e3, "max_rate_rps": None,
                             "skipped": "saturated rate below the best found"})
                continue
            pol = BatchingPolicy(B, W)

            def ok(load, pol=pol, cap=cap, B=B):
                n = max(requests, int(2000 * min(B, max(1.0, load * B))))  # ~2000 launches or more
                r = simulate(table, load * cap, pol, requests=n, seed=seed, arrivals=arrivals)
                return r.stable and r.latency_p99_s <= budget_s, r

            lo, hi, res_lo = None, None, None
            for i, f in enumerate(loads):  # every load: p99 can dip again once batches form
                good, res = ok(f)
                if good:
                    lo, res_lo, hi = f, res, (loads[i + 1] if i + 1 < len(loads) else None)
            if lo is None:
                grid.append({"max_batch": B, "max_wait_ms": W * 1e3, "max_rate_rps": 0.0})
                continue
            for _ in range(bisections if hi is not None else 0):
                mid = 0.5 * (lo + hi)
                good, res = ok(mid)
                if good:
                    lo, res_lo = mid, res
                else:
                    hi = mid
            grid.append({"max_batch": B, "max_wait_ms": W * 1e3, "max_rate_rps": lo * cap, "load": lo,
                         "latency_p99_ms": res_lo.latency_p99_s * 1e3, "mean_batch": res_lo.mean_batch})
            if best is None or lo * cap > best[0]:
                best = (lo * cap, pol, res_lo)
    if best is None:
        return BudgetResult(table.model, table.design, budget_s, 0.0, 0, 0.0, None, grid)
    return BudgetResult(table.model, table.design, budget_s, best[0], best[1].max_batch, best[1].max_wait_s,
                        best[2], grid)
