"""Kernel points run in a worker: a DeepBench suite priced on each design of the job (one pricing
call per group of designs), its totals per design, and a point whose formats the design does not
execute recorded as such (every figure NaN, the reason said)."""

from __future__ import annotations

import time

import numpy as np

from asicsim._src.hw.cost import parse_formats, scheduled_for
from asicsim._src.hw.family import cost_designs
from asicsim._src.hw.interface import roof
from asicsim._src.hw.operations import OperationError
from asicsim._src.hw.power import derived_power
from asicsim._src.hw.scopes import SCOPE_ENERGY_KEYS, SCOPES
from asicsim._src.sweep.cost_points import design_groups, rates
from asicsim._src.sweep.point_identity import Point
from asicsim._src.sweep.records import Job, record
from asicsim._src.workloads.deepbench import PRECISIONS, kernel_table, load_suite


def not_executed(p: Point, design, err: Exception, extra: dict) -> dict:
    """A point whose formats the design does not execute (asicsim._src.hw.native): done, every figure
    NaN, the reason saying why (pricing it anyway would be a wrong number; failing it would ask
    for a retry that cannot help)."""
    nan = float("nan")
    result = dict.fromkeys(("time_s", "energy_j", "energy_dynamic_j", "energy_static_j", "dram_bytes", "flops",
                            "flops_per_s", "flops_per_j", *SCOPE_ENERGY_KEYS, *(f"power_{s}_w" for s in SCOPES),
                            *(f"tops_per_w_{s}" for s in SCOPES)), nan)
    return record(p, "done", f"not executed: {err}", result | extra | roof(design)
                  | {"objective": scheduled_for(design)})


def kernel_formats(inputs: dict) -> dict | None:
    """A kernel point's formats: its DeepBench precision's, with its ``formats`` on top."""
    fmts = dict(PRECISIONS[inputs["precision"]]) if inputs.get("precision") else {}
    fmts |= parse_formats(inputs.get("formats"))
    return fmts or None


def suite_totals(pr, flops) -> dict:
    """A suite's totals on one design from its typed price (a :class:`~asicsim._src.hw.result.Price`
    over the kernels): time, energy split into dynamic and static and per scope, DRAM bytes,
    DeepBench's flops, and the geometric mean of the kernels' TFLOP/s."""
    n = len(flops)
    time_s = np.broadcast_to(np.asarray(pr.time_s, dtype=np.float64), (n,))
    tf = np.divide(flops, time_s * 1e12, out=np.zeros(n), where=time_s > 0)
    e = pr.energy
    total = float(np.sum(np.broadcast_to(e.total, (n,)) * 1e-12))
    static = float(np.sum(np.broadcast_to(e.static, (n,)) * 1e-12))
    scoped = e.scoped()
    sums = {k: float(np.sum(np.broadcast_to(scoped[k], (n,)))) for k in SCOPE_ENERGY_KEYS}
    return {"kernels": n, "time_s": float(time_s.sum()), "energy_j": total,
            "energy_dynamic_j": total - static, "energy_static_j": static,
            **derived_power(sums, float(time_s.sum()), float(flops.sum()) / 2),
            "dram_bytes": float(np.sum(np.broadcast_to(pr.dram_bytes, (n,)))), "flops": float(flops.sum()),
            "geomean_tflops": float(np.exp(np.mean(np.log(np.maximum(tf, 1e-30)))))}


def kernel_points(job: Job) -> list[dict]:
    """A DeepBench suite priced on each design of the job: one pricing call per group of designs
    (:func:`design_groups`; a family in one vectorised pass) and one reshaping of its price into
    records (:func:`asicsim._src.workloads.deepbench.kernel_table`). A design priced alone keeps its
    per-kernel table; a family of several keeps totals only."""
    out = []
    for group in design_groups(job):
        t1 = time.perf_counter()
        p0 = group[0]
        designs = [job.designs[p.inputs["design"]] for p in group]
        gates = designs[0].has_vector_unit
        try:
            suite = load_suite(p0.inputs["suite"])
            fmts = kernel_formats(p0.inputs)
            priced = cost_designs(suite.operations(vector_gates=gates), designs, fmts)
        except OperationError as err:  # formats the designs do not execute: said, not priced
            out += [not_executed(p, d, err, {"kernels": len(load_suite(p0.inputs["suite"]).flops())})
                    for p, d in zip(group, designs, strict=True)]
            continue
        except Exception as err:  # the group fails together, the sweep goes on
            out += [record(p, "failed", f"{type(err).__name__}: {err}", seconds=time.perf_counter() - t1)
                    for p in group]
            continue
        flops = suite.flops()
        each = (time.perf_counter() - t1) / len(group)
        for i, (p, d) in enumerate(zip(group, designs, strict=True)):
            t2 = time.perf_counter()
            pr = priced.take(i)  # the design's typed price: its totals; alone, its table too
            fmts_used = {k: pr.formats[k] for k in ("act", "weight", "acc") if k in pr.formats}
            result = suite_totals(pr, flops) | roof(d, fmts_used or None) | {"objective": scheduled_for(d)}
            tables = ({"kernels": kernel_table(suite, pr, p.labels["design"], p0.inputs["precision"], gates,
                                               scheduled_for(d)).to_dict("records")} if len(group) == 1 else {})
            out.append(record(p, "done", "", result | rates(result), tables, each + time.perf_counter() - t2))
    return out
