"""Training and inference points run in a worker: a workload trained under one recipe and seed
(its curves and numerics kept), and post-training quantization points evaluated on one fp32 model."""

from __future__ import annotations

import time

import numpy as np

from asicsim._src.sweep.records import Job, finite, numerics_rows, record


def train_point(job: Job) -> list[dict]:
    # here: JAX loads in a worker that trains, not in the sweep's process
    from asicsim._src.workloads.training import train

    (p,) = job.points
    t0 = time.perf_counter()
    res = train(job.workload, job.recipes[p.inputs["recipe"]], seeds=(p.inputs["seed"],))
    run = res.runs[0]
    curves = [dict(zip(run.curves, vals, strict=True)) for vals in zip(*run.curves.values(), strict=True)]
    div = run.divergence or {}
    result = {"metric": run.metric, "value": finite(run.final), "test_accuracy": finite(run.test_accuracy),
              "test_loss": finite(run.test_loss), "diverged": run.diverged,
              "diverged_step": div.get("step"), "diverged_cause": div.get("cause"),
              "skipped_steps": run.skipped_steps, "overflow_steps": run.overflow_steps,
              "steps": res.settings["steps"], "batch": res.settings["batch"], "lr": res.settings["lr"],
              "optimizer": res.settings["optimizer"]}
    tables = {"curves": curves, "numerics": numerics_rows(run.numerics)}
    reason = f"diverged at step {div.get('step')}: {div.get('cause')}" if run.diverged else ""
    return [record(p, "diverged" if run.diverged else "done", reason, result, tables,
                   time.perf_counter() - t0)]


def infer_points(job: Job) -> list[dict]:
    """Post-training quantization points of one (workload, seed): the fp32 model is trained once
    (the process keeps it) and evaluated under each recipe."""
    # here: JAX loads in a worker that infers, not in the sweep's process
    from asicsim._src.workloads.post_training import infer

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
        result = {"metric": res.metric, "value": finite(res.mean), "fp32_value": finite(np.mean(res.fp32)),
                  "drop": finite(res.drop), "diverged": res.diverged, "calibration": res.calibration}
        reason = "non-finite quantized metric" if res.diverged else ""
        out.append(record(p, "diverged" if res.diverged else "done", reason, result,
                          {"numerics": numerics_rows(res.numerics)}, time.perf_counter() - t0))
    return out
