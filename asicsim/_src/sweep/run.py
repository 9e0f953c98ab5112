"""``sweep(spec, out)``: expand a spec, skip what the store has, run the rest in parallel, and
write each point's record the moment it finishes."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from asicsim._src.sweep.execute import connect_ray, run_local, run_ray
from asicsim._src.sweep.expansion import expand
from asicsim._src.sweep.point_identity import Point
from asicsim._src.sweep.points import Job
from asicsim._src.sweep.progress import Progress, banner_text
from asicsim._src.sweep.spec import SweepError, SweepSpec, load_spec, spec_dict
from asicsim._src.sweep.store import Store, results_root

#: Cost/kernel points of one shared trace or suite per job: big enough to amortise the trace
#: and vectorise a design space (asicsim._src.hw.family), small enough that workers share a large one.
GROUP_CHUNK = 2048


def jobs_for(spec: SweepSpec, points: list[Point]) -> list[Job]:
    """Training points one per job; inference points grouped per (workload, seed) (one fp32
    model), cost and kernel points grouped by the trace or suite they share. A job carries its
    inputs resolved (workload, recipes, designs: the objects the points' ids were computed from),
    so nothing is looked up by name in the worker."""
    workload = workload_of(spec)
    designs = dict(spec.designs)
    gpus = tuple(d for d in designs.values() if getattr(d, "kind", "") == "gpu")  # busy batches are chosen for them
    jobs: list[Job] = []
    groups: dict[str, list[Point]] = {}
    def recipes(chunk: list[Point]) -> dict:
        return {p.inputs["recipe"]: spec.recipe(p.inputs["recipe"]) for p in chunk if "recipe" in p.inputs}

    for p in points:
        if p.kind == "train":
            jobs.append(Job([p], workload(p), recipes=recipes([p])))
        else:
            groups.setdefault(p.group, []).append(p)
    for members in groups.values():
        for i in range(0, len(members), GROUP_CHUNK):
            chunk = members[i:i + GROUP_CHUNK]
            jobs.append(Job(chunk, workload(chunk[0]),
                            {p.inputs["design"]: designs[p.inputs["design"]] for p in chunk if "design" in p.inputs},
                            recipes(chunk), gpus))
    # the longest first (training and inference, by examples processed), so the tail is short
    return sorted(jobs, key=lambda j: -_examples(j.workload) if j.kind in ("train", "infer") else 0)


def workload_of(spec: SweepSpec) -> Callable[[Point], object]:
    """point -> the resolved Workload it runs (None for kernel points), found by the hash of its
    content the point carries: never by name, which two different workloads may share."""
    table = {w["key"]: w["workload"] for w in spec.workloads}
    return lambda p: table.get(p.inputs.get("workload"))


def _examples(w) -> int:
    return int(w.steps * w.batch) if w is not None else 0


def sweep(spec: str | Path | dict | SweepSpec, out: str | Path, *, workers: int | None = None,
          ray: str | None = None, retry_failed: bool = False, progress=sys.stderr,
          on_record: Callable[[dict], None] | None = None) -> dict:
    """Run a sweep into ``out`` and return a summary (points, skipped, done, diverged, failed,
    seconds, and the diverged and failed points with their reasons).

    Finished points already in ``out`` are skipped; ``retry_failed`` reruns the failed ones (an
    error, a timeout, a lost worker: no result), replacing their records, but not the diverged ones
    (a divergence is a result, and the same inputs give it again). ``workers``: parallel processes (default: the CPU count); ``ray``: a Ray address
    (``auto``: the running cluster or a new local one). ``progress``: a stream, or None for quiet.
    """
    results_root(out)  # an empty name is refused before the spec is expanded
    spec = spec if isinstance(spec, SweepSpec) else load_spec(spec)
    workers = (os.cpu_count() or 1) if workers is None else workers
    if workers < 1:
        raise SweepError(f"workers = {workers}; allowed: 1 or more")
    if ray:
        connect_ray(ray, workers)  # a bad address is said before any work (a bounded wait)
    points = expand(spec)
    t0 = time.monotonic()
    with Store(out) as store:
        store.clean_temporaries()
        store.write_spec(spec.text, spec_dict(spec))
        status = store.status()
        todo = [p for p in points if p.id not in status or (retry_failed and status[p.id] == "failed")]
        workload = workload_of(spec)  # expected work for the ETA: optimizer steps; pricing is nearly free
        # steps, not examples: the small models' steps cost about the same whatever their batch
        work = {p.id: float(workload(p).steps) if p.kind in ("train", "infer") and workload(p) is not None else 0.0
                for p in todo}
        jobs = jobs_for(spec, todo)
        n_workers = min(workers, max(len(jobs), 1))
        groups = {p.id: (p.kind, p.inputs.get("workload"), p.inputs.get("recipe")) for p in todo}
        bar = Progress(len(points), len(points) - len(todo), progress, work, n_workers, groups)
        kinds: dict[str, int] = {}
        for p in points:
            kinds[p.kind] = kinds.get(p.kind, 0) + 1
        bar.banner(banner_text(spec.name or str(spec.source), kinds, len(points), len(points) - len(todo),
                               len(jobs), n_workers))

        def on_records(records: list[dict]) -> None:
            store.write(records)  # the commit point: written before anything else happens
            if on_record is not None:
                for r in records:
                    on_record(r)
            bar.update(records)

        if ray:
            run_ray(jobs, on_records, ray, workers, spec.point_timeout_s)
        else:
            run_local(jobs, on_records, n_workers, spec.point_timeout_s)
        bar.update([], final=True)
        frames = store.consolidate()
    res = frames["results"]
    status = res["status"] if len(res) else pd.Series(dtype=object)
    return {"out": str(out), "spec": spec.source, "points": len(points), "skipped": len(points) - len(todo),
            "ran": bar.ran, "done": int((status == "done").sum()), "diverged": int((status == "diverged").sum()),
            "failed": int((status == "failed").sum()), "seconds": round(time.monotonic() - t0, 2),
            "divergences": _listed(res, "diverged"), "failures": _listed(res, "failed")}


def _listed(res: pd.DataFrame, status: str) -> list[dict]:
    """The points of one status: id, kind and the first line of the reason."""
    rows = res[res["status"] == status] if len(res) else res
    return [{"id": r.id, "kind": r.kind, "reason": str(r.reason).splitlines()[0] if str(r.reason) else ""}
            for r in rows.itertuples()]
