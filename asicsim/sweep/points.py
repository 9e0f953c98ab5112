"""Running sweep work in a worker: a job (one training or inference point, or a group of cost or
kernel points that share their op trace or suite) becomes one record per point.

A record is a JSON-able dict: ``id``, ``kind``, ``status`` (``done`` | ``diverged`` | ``failed``), ``reason``,
``labels`` (workload, recipe, seed, design, ...), ``result`` (scalars), ``tables`` (row lists:
``curves``, ``numerics``, ``ops``, ``kernels``), ``seconds``, ``finished`` and the versions
(python, asicsim, jax, numpy, ...) that computed it.
A run that diverged (training: a step and cause; inference: a non-finite quantized metric) is
``diverged``, a numerical result with the divergence as its reason (a training run keeps its
curves). ``failed`` is for a point that produced no result: an exception, a timeout, a lost
worker, out of memory; it says nothing about the numerics and ``--retry-failed`` reruns it.

A cost record's ``result`` also prices the workload at a larger batch, the same for every design
(:func:`asicsim.system.busy.busy_batch`: the smallest of the workload's batch x 2**k within 16,384
examples and 256 MiB of input at which no GPU of the spec is launch- or occupancy-bound, by the GPU
model; the largest where one still is), so that a GPU whose step is mostly launch floor can be
compared doing more work (the report does so where the GPU is bound): ``busy_batch``, ``busy_gpu``
(the GPUs it was chosen for, comma-separated), ``busy_time_s``,
``busy_energy_j`` and ``busy_energy_dynamic_j`` (as ``energy_j``), ``busy_energy_<scope>_j`` and ``busy_energy_dynamic_<scope>_j`` (scope core, chip, board, as the
step's own ``energy_<scope>_j``), ``busy_launch_fraction`` and ``busy_sm_fraction`` (NaN on systolic
designs); none of them where the workload's batch is already at that limit.
"""

from __future__ import annotations

import functools
import math
import os
import socket
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from asicsim.hw.family import family_key
from asicsim.hw.operations import OperationError
from asicsim.sweep.point_identity import ID_SCHEME, Point, content_key


@dataclass
class Job:
    """What a worker runs: points that share work, and the resolved objects they need."""

    points: list[Point]
    workload: Any = None  # a Workload (train/infer/cost)
    designs: dict = field(default_factory=dict)  # label -> design object (cost/kernels)
    recipes: dict = field(default_factory=dict)  # name -> recipe (Policy) as the spec loaded it
    gpus: tuple = ()  # the spec's GPU designs: a cost job's busy batch is chosen for them (asicsim.system.busy)

    @property
    def kind(self) -> str:
        return self.points[0].kind


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


@functools.cache
def versions() -> dict[str, str]:
    """The versions that computed a record (a report states them, so results can be reproduced)."""
    import platform
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for pkg in ("asicsim", "jax", "jaxlib", "numpy", "ml_dtypes", "optax", "pandas"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:  # e.g. a source tree: say so, do not fail the point
            out[pkg] = "unknown"
    return out


def record(point: Point, status: str, reason: str = "", result: dict | None = None,
           tables: dict | None = None, seconds: float = 0.0) -> dict:
    return {"id": point.id, "kind": point.kind, "status": status, "reason": reason,
            "labels": dict(point.labels), "result": result or {}, "tables": tables or {},
            "seconds": round(seconds, 3), "finished": _now(), "host": socket.gethostname(),
            "pid": os.getpid(), "asicsim": versions()["asicsim"], "versions": versions(), "ids": ID_SCHEME}


def failed(job: Job, reason: str, seconds: float = 0.0) -> list[dict]:
    """Every point of ``job`` recorded as failed with ``reason``."""
    return [record(p, "failed", reason, seconds=seconds) for p in job.points]


def changed_input(job: Job, p: Point, known: dict | None = None) -> str | None:
    """Why ``p`` must not run: an input whose content (recomputed here, from what the job carries
    and the files it names) differs from what the point's id was computed from; None if none.
    ``known``: (what, name) -> the answer, for the job's other points sharing the input."""
    known = {} if known is None else known
    for what, name, obj, key in _inputs(job, p):
        if (what, name) not in known:
            known[what, name] = _changed(what, name, obj, key)
        if known[what, name]:
            return known[what, name]
    return None


def _inputs(job: Job, p: Point) -> list[tuple]:
    """(what, name, the object the job carries, the content key the id was computed from)."""
    checks = []
    if "recipe_key" in p.inputs:
        checks.append(("recipe", p.inputs["recipe"], job.recipes.get(p.inputs["recipe"]), p.inputs["recipe_key"]))
    if p.inputs.get("workload") is not None:
        checks.append(("workload", p.labels.get("workload"), job.workload, p.inputs["workload"]))
    return checks


def _changed(what: str, name, obj, key: str) -> str | None:
    if obj is None:
        return f"input changed: the job carries no {what} {name!r}"
    try:
        now = content_key(what, obj)
    except Exception as err:  # a format file it names gone or broken since
        return f"input changed: {what} {name!r} cannot be resolved as when this point's id was computed ({err})"
    if now != key:
        return (f"input changed: {what} {name!r} differs from the content this point's id was computed "
                "from (a file it reads was edited while the sweep ran); rerun the sweep: the new content "
                "makes new points")
    return None


def run_job(job: Job) -> list[dict]:
    """Run a job; an exception fails its points with the exception as the reason (the sweep goes
    on). A point whose inputs changed since its id was computed fails saying which."""
    t0 = time.perf_counter()
    known: dict = {}
    changed = [(p, changed_input(job, p, known)) for p in job.points]
    if any(why for _, why in changed):
        out = [record(p, "failed", why, seconds=time.perf_counter() - t0) for p, why in changed if why]
        rest = [p for p, why in changed if not why]
        return out + (run_job(Job(rest, job.workload, job.designs, job.recipes, job.gpus)) if rest else [])
    try:
        return {"train": _train, "infer": _infer, "cost": _cost, "kernels": _kernels}[job.kind](job)
    except MemoryError as err:
        return failed(job, f"out of memory (MemoryError: {err})", time.perf_counter() - t0)
    except Exception as err:  # any failure of a point is recorded, not raised
        tail = "".join(traceback.format_exception(err)[-3:]).strip()
        return failed(job, f"{type(err).__name__}: {err}\n{tail}", time.perf_counter() - t0)


def _finite(x) -> float | None:
    return float(x) if x is not None and math.isfinite(float(x)) else None


def _numerics_rows(numerics: dict) -> list[dict]:
    rows = []
    for tensor, s in numerics.items():
        rows.append({"tensor": tensor, "role": tensor.split(":")[0],
                     **{k: s.get(k) for k in ("format", "size", "underflow", "overflow", "nonfinite", "zero")
                        if k in s},
                     # the outlier measures (asicsim.workloads.stats); kurtosis is NaN for a constant tensor
                     **{k: _finite(s[k]) for k in ("amax", "outliers", "kurtosis") if k in s}})
    return rows


def _train(job: Job) -> list[dict]:
    from asicsim.workloads.training import train

    (p,) = job.points
    t0 = time.perf_counter()
    res = train(job.workload, job.recipes[p.inputs["recipe"]], seeds=(p.inputs["seed"],))
    run = res.runs[0]
    curves = [dict(zip(run.curves, vals, strict=True)) for vals in zip(*run.curves.values(), strict=True)]
    div = run.divergence or {}
    result = {"metric": run.metric, "value": _finite(run.final), "test_accuracy": _finite(run.test_accuracy),
              "test_loss": _finite(run.test_loss), "diverged": run.diverged,
              "diverged_step": div.get("step"), "diverged_cause": div.get("cause"),
              "skipped_steps": run.skipped_steps, "overflow_steps": run.overflow_steps,
              "steps": res.settings["steps"], "batch": res.settings["batch"], "lr": res.settings["lr"],
              "optimizer": res.settings["optimizer"]}
    tables = {"curves": curves, "numerics": _numerics_rows(run.numerics)}
    reason = f"diverged at step {div.get('step')}: {div.get('cause')}" if run.diverged else ""
    return [record(p, "diverged" if run.diverged else "done", reason, result, tables,
                   time.perf_counter() - t0)]


def _infer(job: Job) -> list[dict]:
    """Post-training quantization points of one (workload, seed): the fp32 model is trained once
    (the process keeps it) and evaluated under each recipe."""
    from asicsim.workloads.post_training import infer

    out = []
    for p in job.points:
        t0 = time.perf_counter()
        try:
            res = infer(job.workload, job.recipes[p.inputs["recipe"]], seeds=(p.inputs["seed"],))
        except MemoryError as err:
            out.append(record(p, "failed", f"out of memory (MemoryError: {err})", seconds=time.perf_counter() - t0))
            continue
        except Exception as err:  # one recipe failing does not fail the others
            out.append(record(p, "failed", f"{type(err).__name__}: {err}", seconds=time.perf_counter() - t0))
            continue
        result = {"metric": res.metric, "value": _finite(res.mean), "fp32_value": _finite(np.mean(res.fp32)),
                  "drop": _finite(res.drop), "diverged": res.diverged, "calibration": res.calibration}
        reason = "non-finite quantized metric" if res.diverged else ""
        out.append(record(p, "diverged" if res.diverged else "done", reason, result,
                          {"numerics": _numerics_rows(res.numerics)}, time.perf_counter() - t0))
    return out


def _rates(result: dict) -> dict:
    t, e, f = result.get("time_s"), result.get("energy_j"), result.get("flops")
    return {"flops_per_s": f / t if t else None, "flops_per_j": f / e if e and e == e else None}


def _cost(job: Job) -> list[dict]:
    """A workload's op trace (traced once) priced on each design of the job: one pricing call per
    group of designs (:func:`_design_groups`; a family in one vectorised pass,
    :func:`asicsim.workloads.pricing.trace_price`) and one reshaping of its totals into records. A
    design priced alone keeps its per-op table; a family of several keeps totals only. Rows in
    formats a design does not execute leave its totals NaN, the reason said."""
    from asicsim.hw.cost import scheduled_for
    from asicsim.hw.interface import roof
    from asicsim.system.busy import busy_batch, busy_group
    from asicsim.workloads.pricing import trace_price, workload_trace

    t0 = time.perf_counter()
    p0 = job.points[0]
    recipe = job.recipes[p0.inputs["recipe"]]
    training = p0.inputs["phase"] == "train"
    trace = workload_trace(job.workload, recipe, training=training)
    big = busy_batch(job.workload, recipe, training, job.gpus)  # every design again at a batch keeping the GPUs busy
    share = (time.perf_counter() - t0) / len(job.points)
    batch = int(getattr(job.workload, "batch", 0))
    out = []
    for group in _design_groups(job):
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
            out.append(record(p, "done", reason, result | _rates(result), tables, each + time.perf_counter() - t2))
    return out


def _not_executed(p: Point, design, err: Exception, extra: dict) -> dict:
    """A point whose formats the design does not execute (asicsim.hw.native): done, every figure
    NaN, the reason saying why (pricing it anyway would be a wrong number; failing it would ask
    for a retry that cannot help)."""
    from asicsim.hw.cost import scheduled_for
    from asicsim.hw.interface import roof

    nan = float("nan")
    from asicsim.hw.scopes import SCOPE_ENERGY_KEYS, SCOPES

    result = dict.fromkeys(("time_s", "energy_j", "energy_dynamic_j", "energy_static_j", "dram_bytes", "flops",
                            "flops_per_s", "flops_per_j", *SCOPE_ENERGY_KEYS, *(f"power_{s}_w" for s in SCOPES),
                            *(f"tops_per_w_{s}" for s in SCOPES)), nan)
    return record(p, "done", f"not executed: {err}", result | extra | roof(design)
                  | {"objective": scheduled_for(design)})


def kernel_formats(inputs: dict) -> dict | None:
    """A kernel point's formats: its DeepBench precision's, with its ``formats`` on top."""
    from asicsim.hw.cost import parse_formats
    from asicsim.workloads.deepbench import PRECISIONS

    fmts = dict(PRECISIONS[inputs["precision"]]) if inputs.get("precision") else {}
    fmts |= parse_formats(inputs.get("formats"))
    return fmts or None


def _suite_totals(pr, flops) -> dict:
    """A suite's totals on one design from its typed price (a :class:`~asicsim.hw.result.Price`
    over the kernels): time, energy split into dynamic and static and per scope, DRAM bytes,
    DeepBench's flops, and the geometric mean of the kernels' TFLOP/s."""
    from asicsim.hw.power import derived_power
    from asicsim.hw.scopes import SCOPE_ENERGY_KEYS

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


def _design_groups(job: Job) -> list[list[Point]]:
    """The job's points grouped as one pricing call takes them: the designs of one family
    (:mod:`asicsim.hw.family`, any number) together, a design that joins none (a GPU) alone."""
    groups: dict = {}
    for i, p in enumerate(job.points):
        key = family_key(job.designs[p.inputs["design"]])
        groups.setdefault(("family", key) if key is not None else ("alone", i), []).append(p)
    return list(groups.values())


def _kernels(job: Job) -> list[dict]:
    """A DeepBench suite priced on each design of the job: one pricing call per group of designs
    (:func:`_design_groups`; a family in one vectorised pass) and one reshaping of its price into
    records (:func:`asicsim.workloads.deepbench.kernel_table`). A design priced alone keeps its
    per-kernel table; a family of several keeps totals only."""
    from asicsim.hw.cost import scheduled_for
    from asicsim.hw.family import cost_designs
    from asicsim.hw.interface import roof
    from asicsim.workloads.deepbench import kernel_table, load_suite

    out = []
    for group in _design_groups(job):
        t1 = time.perf_counter()
        p0 = group[0]
        designs = [job.designs[p.inputs["design"]] for p in group]
        gates = designs[0].has_vector_unit
        try:
            suite = load_suite(p0.inputs["suite"])
            fmts = kernel_formats(p0.inputs)
            priced = cost_designs(suite.operations(vector_gates=gates), designs, fmts)
        except OperationError as err:  # formats the designs do not execute: said, not priced
            out += [_not_executed(p, d, err, {"kernels": len(load_suite(p0.inputs["suite"]).flops())})
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
            result = _suite_totals(pr, flops) | roof(d, fmts_used or None) | {"objective": scheduled_for(d)}
            tables = ({"kernels": kernel_table(suite, pr, p.labels["design"], p0.inputs["precision"], gates,
                                               scheduled_for(d)).to_dict("records")} if len(group) == 1 else {})
            out.append(record(p, "done", "", result | _rates(result), tables, each + time.perf_counter() - t2))
    return out
