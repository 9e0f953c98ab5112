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
(:func:`asicsim._src.system.busy.busy_batch`: the smallest of the workload's batch x 2**k within 16,384
examples and 256 MiB of input at which no GPU of the spec is launch- or occupancy-bound, by the GPU
model; the largest where one still is), so that a GPU whose step is mostly launch floor can be
compared doing more work (the report does so where the GPU is bound): ``busy_batch``, ``busy_gpu``
(the GPUs it was chosen for, comma-separated), ``busy_time_s``,
``busy_energy_j`` and ``busy_energy_dynamic_j`` (as ``energy_j``), ``busy_energy_<scope>_j`` and ``busy_energy_dynamic_<scope>_j`` (scope core, chip, board, as the
step's own ``energy_<scope>_j``), ``busy_launch_fraction`` and ``busy_sm_fraction`` (NaN on systolic
designs); none of them where the workload's batch is already at that limit.
"""

from __future__ import annotations

import time
import traceback

from asicsim._src.sweep.cost_points import cost_points
from asicsim._src.sweep.kernel_points import kernel_points
from asicsim._src.sweep.learning_points import infer_points, train_point
from asicsim._src.sweep.point_identity import Point, content_key
from asicsim._src.sweep.records import Job as Job
from asicsim._src.sweep.records import failed as failed
from asicsim._src.sweep.records import record


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
        return {"train": train_point, "infer": infer_points, "cost": cost_points, "kernels": kernel_points}[job.kind](job)
    except MemoryError as err:
        return failed(job, f"out of memory (MemoryError: {err})", time.perf_counter() - t0)
    except Exception as err:  # any failure of a point is recorded, not raised
        tail = "".join(traceback.format_exception(err)[-3:]).strip()
        return failed(job, f"{type(err).__name__}: {err}\n{tail}", time.perf_counter() - t0)
