"""Divergence: each rule on made-up step metrics (one row per case), then the runs the issue saw:
fp16 with dynamic loss scaling at lr 1e4 skipped 299 of 300 steps and was recorded ``done``."""

from __future__ import annotations

import argparse
import json
import math

import numpy as np
import pytest

from asicsim._src.emulate.loss_scaling import MIN_SCALE
from asicsim._src.workloads.divergence import DivergenceWatch

NAN = math.nan


def metrics(losses, skipped=None, scales=None):
    n = len(losses)
    return {"loss": np.asarray(losses, np.float32), "skipped": np.asarray(skipped or [False] * n),
            "overflow": np.asarray(skipped or [False] * n), "loss_scale": np.asarray(scales or [1.0] * n)}


# (steps of the run, chunks of metrics, expected {"step", "cause" fragment} or None)
CASES = [
    (4, [metrics([2.0, 1.9, 1.8, 1.7])], None),
    (4, [metrics([2.0, NAN, 1.8, 1.7])], (2, "nan loss")),
    (4, [metrics([2.0, math.inf, 1.8, 1.7])], (2, "inf loss")),
    (4, [metrics([2.0, 25.0, 1.8, 1.7])], (2, "loss explosion: 25 > 10 x the first step's 2")),
    # a skipped step's non-finite loss is not a divergence (dynamic loss scaling dropped it)
    (10, [metrics([NAN, 2.0, 1.9, 1.8], [True] + [False] * 3, [8.0, 4.0, 4.0, 4.0])], None),
    # the scale at its floor and the step still overflowed: every later step is skipped too
    (100, [metrics([NAN] * 3, [True] * 3, [2 * MIN_SCALE, MIN_SCALE, MIN_SCALE])],
     (2, "loss scale collapsed: step skipped at the floor scale 2**-24")),
    # 6 of 10 steps skipped (more than half): said at the 6th skip, in the second chunk
    (10, [metrics([2.0, NAN, NAN, 2.0], [False, True, True, False], [8.0, 8.0, 4.0, 2.0]),
          metrics([NAN, NAN, 2.0, NAN, NAN], [True, True, False, True, True], [2.0, 1.0, 0.5, 0.5, 0.25])],
     (9, "most steps skipped: 6 of the first 9 steps skipped by dynamic loss scaling, more than half of the "
         "run's 10")),
    # exactly half skipped is not a divergence
    (8, [metrics([2.0, NAN] * 4, [False, True] * 4, [8.0, 4.0] * 4)], None),
]


@pytest.mark.parametrize("steps, chunks, expected", CASES)
def test_divergence_rules(steps, chunks, expected):
    watch = DivergenceWatch(steps, explode_factor=10.0)
    done = 0
    for m in chunks:
        watch.chunk(done, m)
        done += len(m["loss"])
    if expected is None:
        assert watch.found is None
    else:
        assert watch.found["step"] == expected[0] and expected[1] in watch.found["cause"], watch.found
    assert watch.skipped == sum(int(m["skipped"].sum()) for m in chunks)


def test_non_finite_weights_and_test_loss_after_a_chunk():
    watch = DivergenceWatch(10, 10.0)
    watch.weights(5, {"w": np.ones(3)})
    watch.evaluation(5, 0.3)
    assert watch.found is None
    watch.evaluation(5, NAN)
    assert watch.found == {"step": 5, "cause": "non-finite test loss (nan) of the recipe's forward pass"}
    watch = DivergenceWatch(10, 10.0)
    watch.weights(5, {"w": np.array([1.0, math.inf])})
    assert watch.found == {"step": 5, "cause": "non-finite weights"}


@pytest.mark.parametrize("recipe", [
    "fp16_mixed", pytest.param("fp16_nomaster", marks=pytest.mark.slow)])  # ~5 s each; one stays default
def test_a_collapsed_loss_scale_diverges_the_sweep_point_and_shows_in_train(recipe, capsys):
    # lr 1e4: the first step blows the weights up, every later step overflows; the scale halves
    # from 2**16 to the floor 2**-24 in 40 steps, and step 42 overflows at the floor
    from asicsim._src.emulate import load_recipe
    from asicsim._src.sweep.learning_points import train_point
    from asicsim._src.sweep.point_identity import Point
    from asicsim._src.sweep.records import Job
    from asicsim._src.workloads import load_workload
    from asicsim._src.workloads.cli import add_cli

    w = load_workload("digits_mlp").replace(lr=1e4, steps=300, eval_every=100)
    job = Job([Point("p", "train", {}, {"recipe": recipe, "seed": 0})], workload=w,
              recipes={recipe: load_recipe(recipe)})
    (rec,) = train_point(job)
    assert rec["status"] == "diverged" and rec["result"]["diverged"] is True
    assert rec["result"]["diverged_step"] == 42
    assert rec["reason"].startswith("diverged at step 42: loss scale collapsed")
    assert rec["tables"]["curves"][-1]["step"] == 100  # stops after the chunk it diverged in

    ap = argparse.ArgumentParser()
    add_cli(ap.add_subparsers())
    args = ap.parse_args(["train", "digits_mlp", "--recipe", recipe, "--seeds", "1", "--steps", "60",
                          "--lr", "1e4", "--json"])
    assert args.func(args) == 0
    out = json.loads(capsys.readouterr().out)
    # of 60 steps, 31 skipped (more than half) by step 32, before the scale reaches its floor
    assert out["diverged"] is True and out["runs"][0]["divergence"] == {
        "step": 32, "cause": "most steps skipped: 31 of the first 32 steps skipped by dynamic loss scaling, "
                             "more than half of the run's 60"}


def _trajectory(points, steps, noise, seed=0):
    """Piecewise-linear loss through (step, loss) ``points`` with multiplicative noise."""
    xs, ys = zip(*points, strict=True)
    rng = np.random.default_rng(seed)
    return np.interp(np.arange(1, steps + 1), xs, ys) * (1 + noise * rng.standard_normal(steps))


def test_a_loss_that_climbs_back_up_is_a_divergence():
    # the mxfp4 run of charlm_transformer: from ln(65) = 4.17 down to about 2.6, then up
    # to 8.1 nats/char (under 10x the first loss, so "loss explosion" never fired)
    losses = _trajectory([(1, 4.17), (100, 2.6), (300, 8.1)], 300, 0.02)
    watch = DivergenceWatch(300, explode_factor=10.0)
    watch.chunk(0, metrics(list(losses[:150])))
    watch.chunk(150, metrics(list(losses[150:])))
    assert watch.found is not None and "loss regression" in watch.found["cause"], watch.found
    # said while climbing: when the windowed mean passed 2.6 + 0.75 * (4.17 - 2.6) = 3.78
    assert 120 < watch.found["step"] < 200


@pytest.mark.parametrize("noise", [0.02, 0.1])
def test_noise_around_a_plateau_or_a_slow_rise_is_not_a_divergence(noise):
    # converged runs with noisy minibatch losses, and one that overfits a little at the end
    for points in ([(1, 2.3), (50, 0.05), (400, 0.04)], [(1, 4.17), (200, 1.3), (400, 1.45)]):
        watch = DivergenceWatch(400, explode_factor=10.0)
        watch.chunk(0, metrics(list(_trajectory(points, 400, noise))))
        assert watch.found is None, (points, watch.found)
