"""A sweep's cost records price every design again at the workload's busy batch (issue 30 item 4:
the answer compares a launch-bound GPU at a batch that keeps it busier): the same batch for every
design, chosen for the spec's GPUs, a family priced in one pass giving what each design gives
alone, each figure the sum of the trace priced at that batch here. The choice itself:
tests/system/test_busy_batch_choice.py."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from asicsim._src.sweep import expand, load_spec
from asicsim._src.sweep.points import Job, run_job
from asicsim._src.system.busy import (
    BUSY_GROWTH,
    BUSY_MAX_BATCH,
    candidate_batches,
    input_bytes_per_example,
)
from asicsim._src.workloads import load_workload
from asicsim._src.workloads.pricing import trace_costs, workload_trace


def test_every_design_is_priced_at_the_busy_batch(tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text(textwrap.dedent("""
        recipes = ["bf16"]
        designs = ["dc_bf16_128x128", "gpu_h100"]
        [[workloads]]
        name = "digits_mlp"
        run = ["cost"]
        [[design_space]]
        base = "dc_bf16_128x128"
        vary = { "array.rows" = [64, 128] }
        """))
    s = load_spec(spec)
    points = [p for p in expand(s) if p.kind == "cost"]
    w = load_workload("digits_mlp")
    # digits: 32 examples of 64 float32 pixels (256 bytes); the H100 is launch-bound at every candidate
    # batch up to 32 x 2**9 = 16384 (launch floor 88 % there), so the busy batch is the largest
    assert (w.batch, input_bytes_per_example(w)) == (32, 256.0)
    assert candidate_batches(32, 256.0)[-1] == 16384 == 32 * BUSY_GROWTH ** 9 == BUSY_MAX_BATCH
    designs = dict(s.designs)
    job = Job(points, w, {p.inputs["design"]: designs[p.inputs["design"]] for p in points},
              {"bf16": s.recipe("bf16")}, (designs["gpu_h100"],))
    recs = run_job(job)
    assert len(recs) == 4 and all(r["status"] == "done" for r in recs)
    big = workload_trace(w, "bf16", batch=16384, training=True)
    for r in recs:
        res, d = r["result"], designs[r["labels"]["design"]]
        costs = trace_costs(big, d, "bf16")
        assert res["busy_batch"] == 16384 and res["batch"] == 32 and res["busy_gpu"] == "gpu_h100"
        assert res["busy_time_s"] == pytest.approx(float(costs["time_s"].sum()), rel=1e-9)
        assert res["busy_energy_j"] == pytest.approx(float(costs["energy_j"].sum()), rel=1e-9)
        assert res["busy_energy_dynamic_j"] == pytest.approx(float(costs["energy_dynamic_j"].sum()), rel=1e-9)
        for k in ("board", "chip"):  # the power model's scopes
            col = f"energy_{k}_j"
            assert res[f"busy_{col}"] == pytest.approx(float(costs[col].sum()), rel=1e-9)
        # a GPU's launch and SM shares reach the record, weighted by each op's time (NaN elsewhere)
        own = trace_costs(workload_trace(w, "bf16", training=True), d, "bf16")
        for k in ("launch_fraction", "sm_fraction"):
            want = float((own[k] * own["time_s"]).sum(skipna=False) / own["time_s"].sum())
            assert res[k] == pytest.approx(want, rel=1e-9, nan_ok=True)
            assert np.isfinite(res[k]) == (d.kind == "gpu") and np.isfinite(res[f"busy_{k}"]) == (d.kind == "gpu")
    # the larger batch costs more time than the step itself on every design
    assert all(r["result"]["busy_time_s"] > r["result"]["time_s"] for r in recs)


@pytest.mark.parametrize(("batch", "per_example", "expected"), [
    (32, 256.0, [64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384]),  # digits MLP
    (100, 160.0, [200, 400, 800, 1600, 3200, 6400, 12800]),            # MNIST-1D CNN: 40 float32
    (16384, 4.0, []),       # already at the limit
    (64, 2.0**20, [128, 256]),  # 1 MiB examples: 256 x 1 MiB = 256 MiB <= 256 MiB < 512 MiB
    (64, 2.0**22, []),      # 4 MiB examples: 128 of them are 512 MiB
])
def test_candidate_batches(batch, per_example, expected):
    assert candidate_batches(batch, per_example) == expected
