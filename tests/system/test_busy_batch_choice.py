"""The busy batch is the smallest candidate batch at which the GPU is no longer bound, by the GPU
model's own price of the workload there (issue 30 item 4), checked by pricing the neighbouring
candidates; the largest candidate, said still bound, where none unbinds it."""

from __future__ import annotations

import pytest

from asicsim._src.hw.design_files import load_design
from asicsim._src.sweep.points import Job, run_job
from asicsim._src.system.busy import (
    busy_batch,
    candidate_batches,
    gpu_bound,
    gpu_state,
    input_bytes_per_example,
    trace_totals,
)
from asicsim._src.workloads import load_workload
from asicsim._src.workloads.pricing import trace_costs, workload_trace


def _state(w, batch: int, gpu) -> str:
    t = trace_totals(trace_costs(workload_trace(w, "bf16", batch=batch, training=True), gpu, "bf16"))
    return gpu_bound(t["launch_fraction"], t["sm_fraction"])


def test_the_smallest_batch_that_unbinds_the_gpu():
    w, h100 = load_workload("fmnist_cnn"), load_design("gpu_h100")
    cands = candidate_batches(w.batch, input_bytes_per_example(w))
    assert cands == [256, 512, 1024, 2048, 4096, 8192, 16384]  # 128 x 2**k, 3,136 bytes an example
    busy = busy_batch(w, "bf16", True, [h100])
    # every candidate priced here: the choice is the first the H100 is busy at, all before it bound
    # (with issue 32's GPU model: launch-bound to 1,024, occupancy-bound at 2,048 and 4,096, busy at
    # 8,192; with the model before it, busy at 4,096)
    states = {b: _state(w, b, h100) for b in cands}
    first = next(b for b in cands if states[b] == "")
    assert (busy.batch, busy.gpus, busy.bound) == (first, ("gpu_h100",), {})
    assert all(states[b] for b in cands if b < first) and first > cands[0]
    assert gpu_state(busy.trace, h100, "bf16") == ""
    assert len(busy.trace) == len(workload_trace(w, "bf16", batch=first, training=True))


def test_no_batch_within_the_caps_unbinds_it():
    w = load_workload("digits_mlp")
    busy = busy_batch(w, "bf16", True)  # the default GPU: gpu_h100
    # launch floor 88 % even at 16,384: the largest candidate, said still bound
    assert (busy.batch, busy.gpus, busy.bound) == (16384, ("gpu_h100",), {"gpu_h100": "launch"})


@pytest.mark.slow  # about 6 s: two jobs priced at the busy batch
def test_a_sweep_records_the_batch_chosen_for_its_gpus(tmp_path):
    from asicsim._src.sweep import expand, load_spec
    from asicsim._src.sweep.run import jobs_for

    spec = tmp_path / "s.toml"
    spec.write_text('recipes = ["bf16"]\ndesigns = ["dc_bf16_128x128", "gpu_h100"]\n'
                    '[[workloads]]\nname = "fmnist_cnn"\nrun = ["cost"]\n')
    s = load_spec(spec)
    jobs = jobs_for(s, [p for p in expand(s) if p.kind == "cost"])
    assert len(jobs) == 1 and [g.name for g in jobs[0].gpus] == ["gpu_h100"]
    one = jobs[0]
    # a retried point alone (the accelerator without the GPU's point) is priced at the same batch
    alone = Job([p for p in one.points if p.inputs["design"] == "dc_bf16_128x128"], one.workload,
                {"dc_bf16_128x128": one.designs["dc_bf16_128x128"]}, one.recipes, one.gpus)
    both = run_job(one)
    chosen = busy_batch(load_workload("fmnist_cnn"), "bf16", True, [load_design("gpu_h100")]).batch
    for r in both + run_job(alone):
        assert r["status"] == "done"
        assert (r["result"]["busy_batch"], r["result"]["busy_gpu"]) == (chosen, "gpu_h100")
    gpu = next(r for r in both if r["labels"]["design"] == "gpu_h100")["result"]
    assert gpu_bound(gpu["busy_launch_fraction"], gpu["busy_sm_fraction"]) == ""
    assert gpu_bound(gpu["launch_fraction"], gpu["sm_fraction"]) == "launch"


def test_a_gpu_that_does_not_run_the_recipe_chooses_nothing():
    """fp8 has no path on the V100: the batch is chosen for the H100 alone; with the V100 alone,
    nothing keeps a GPU busy, so the largest candidate, said unpriced."""
    w = load_workload("digits_mlp")
    both = busy_batch(w, "fp8_hybrid", True, ["gpu_v100", "gpu_h100"])
    assert (both.batch, both.gpus, both.bound) == (16384, ("gpu_h100",), {"gpu_h100": "launch"})
    alone = busy_batch(w, "fp8_hybrid", True, ["gpu_v100"])
    assert (alone.batch, alone.gpus, alone.bound) == (16384, ("gpu_v100",), {"gpu_v100": "unpriced"})


def test_gpu_bound_speaks_the_price_bound_encoding():
    """A bound GPU is named by the price's one encoding (asicsim._src.hw.result.Bound), not its own
    strings; the codes the per-kernel price stores keep their meaning."""
    from asicsim._src.hw.result import Bound

    assert gpu_bound(0.97, 0.9) is Bound.LAUNCH and gpu_bound(0.2, 0.3) is Bound.OCCUPANCY
    assert gpu_bound(0.5, 0.5) == "" and gpu_bound(float("nan"), None) == ""
    assert Bound.of(Bound.LAUNCH.code) is Bound.LAUNCH and f"{Bound.LAUNCH}-bound" == "launch-bound"
    assert [Bound.of(i).value for i in range(4)] == ["compute", "bandwidth", "occupancy", "power"]
