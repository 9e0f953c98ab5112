"""The workload where fp16 without loss scaling fails (issue 35 item 3): mnist1d_deep_mlp's
activation gradients lie below fp16's smallest subnormal, fp16_noscale stays at chance while
fp16_mixed (dynamic loss scaling) trains as fp32 does."""

import pytest

from asicsim._src.workloads import load_workload, train
from asicsim._src.workloads.grad_underflow import merged_histogram, underflow_fractions


def test_the_workload_is_a_deep_plain_mlp():
    w = load_workload("mnist1d_deep_mlp")
    assert (w.dataset, w.model, w.optimizer) == ("mnist1d", "mlp", "adam")
    assert w.sizes["hidden"] == [100] * 18 and w.sizes["residual"] is False


@pytest.mark.slow  # ~2-3 min on 2 cores: three recipes, 500 steps each
def test_fp16_fails_without_loss_scaling_and_recovers_with_it():
    # seed 4: the RESULTS.md figures are seeds 0-3
    first = train("mnist1d_deep_mlp", "fp32", seeds=(4,), steps=1, eval_every=1).runs[0].numerics
    f = underflow_fractions(merged_histogram(first), "fp16")
    assert f["zero"] > 0.3  # a large part of the activation gradients flushes to 0 in fp16
    acc = {rec: train("mnist1d_deep_mlp", rec, seeds=(4,), steps=500, eval_every=250, stats=False).mean
           for rec in ("fp32", "fp16_noscale", "fp16_mixed")}
    chance = 0.1  # MNIST-1D: 10 balanced classes
    assert acc["fp16_noscale"] < chance + 0.05, acc
    assert acc["fp32"] > chance + 0.2 and acc["fp16_mixed"] > chance + 0.2, acc
    assert abs(acc["fp16_mixed"] - acc["fp32"]) < 0.1, acc


@pytest.mark.slow  # 1-2.5 min on 2 cores: four short trainings, each compiled
def test_benchmark_script_runs(capsys):
    from benchmark_scripts import load_benchmark

    out = load_benchmark("fp16_underflow").main(["--seeds", "0", "--steps", "10"])
    text = capsys.readouterr().out
    assert "<- fp16 smallest subnormal 2^-24" in text and "| fp16_noscale |" in text
    assert set(out["runs"]) == {"fp32", "fp16_noscale", "fp16_mixed"}
    assert out["after_first_step"]["zero"] > 0.3 and next(iter(out["layer_below_min_after_first_step"])) == "fc1_in"
