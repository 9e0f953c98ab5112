"""Cost points run in a worker: a workload's op trace (traced once) priced on each design of the
job, one pricing call per group of designs (a family in one vectorised pass), with the workload
priced again at a batch that keeps the spec's GPUs busy."""

from __future__ import annotations

import time

from asicsim._src.hw.cost import scheduled_for
from asicsim._src.hw.family import family_key
from asicsim._src.hw.interface import roof
from asicsim._src.sweep.point_identity import Point
from asicsim._src.sweep.records import Job, record


def rates(result: dict) -> dict:
    t, e, f = result.get("time_s"), result.get("energy_j"), result.get("flops")
    return {"flops_per_s": f / t if t else None, "flops_per_j": f / e if e and e == e else None}


def cost_points(job: Job) -> list[dict]:
    """A workload's op trace (traced once) priced on each design of the job: one pricing call per
    group of designs (:func:`design_groups`; a family in one vectorised pass,
    :func:`asicsim._src.workloads.pricing.trace_price`) and one reshaping of its totals into records. A
    design priced alone keeps its per-op table; a family of several keeps totals only. Rows in
    formats a design does not execute leave its totals NaN, the reason said."""
    # here: tracing loads JAX (and pandas) in a worker that prices a workload, not in the sweep's process
    from asicsim._src.system.busy import busy_batch, busy_group
    from asicsim._src.workloads.pricing import trace_price, workload_trace

    t0 = time.perf_counter()
    p0 = job.points[0]
    recipe = job.recipes[p0.inputs["recipe"]]
    training = p0.inputs["phase"] == "train"
    trace = workload_trace(job.workload, recipe, training=training)
    big = busy_batch(job.workload, recipe, training, job.gpus)  # every design again at a batch keeping the GPUs busy
    share = (time.perf_counter() - t0) / len(job.points)
    batch = int(getattr(job.workload, "batch", 0))
    out = []
    for group in design_groups(job):
        t1 = time.perf_counter()
        designs = [job.designs[p.inputs["design"]] for p in group]
        try:
            priced = trace_price(trace, designs, recipe)
            tot = priced.totals()
            busy = busy_group(big, designs, recipe)
        except Exception as err:  # the group fails together, the sweep goes on
            out += [record(p, "failed", f"{type(err).__name__}: {err}", seconds=time.perf_counter() - t1)
                    for p in group]
            continue
        reason = next((f"not priced: {part.error}" for part in priced.parts if part.price is None), "")
        forward = [part for part in priced.parts if part.role == "forward"] or list(priced.parts)
        fmts = {k: forward[0].formats[k] for k in ("act", "weight", "acc")} if forward else None
        each = (time.perf_counter() - t1) / len(group) + share
        for i, (p, d) in enumerate(zip(group, designs, strict=True)):
            t2 = time.perf_counter()
            result = ({k: float(v[i]) for k, v in tot.items()} | roof(d, fmts)
                      | {"batch": batch, "objective": scheduled_for(d)} | busy[i])
            result["flops"] = 2.0 * result["macs"]
            tables = ({"ops": priced.rows(i).rename(columns={"kind": "op"}).to_dict("records")}  # "kind" is the point's
                      if len(group) == 1 else {})
            out.append(record(p, "done", reason, result | rates(result), tables, each + time.perf_counter() - t2))
    return out


def design_groups(job: Job) -> list[list[Point]]:
    """The job's points grouped as one pricing call takes them: the designs of one family
    (:mod:`asicsim._src.hw.family`, any number) together, a design that joins none (a GPU) alone."""
    groups: dict = {}
    for i, p in enumerate(job.points):
        key = family_key(job.designs[p.inputs["design"]])
        groups.setdefault(("family", key) if key is not None else ("alone", i), []).append(p)
    return list(groups.values())
