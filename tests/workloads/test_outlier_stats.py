"""amax, outlier fraction (LLM.int8()'s |x| >= 6) and kurtosis in the numerics statistics, on
hand-made tensors checked against hand calculations and scipy, and recorded per tensor at every
evaluation of a training run."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats

from asicsim._src.emulate.policy import RoleSpec
from asicsim._src.workloads.stats import OUTLIER_THRESHOLD, describe, extremes, tensor_stats
from asicsim._src.workloads.training import train


def _ex(x, spec=None):
    return extremes({"t": describe(tensor_stats(np.asarray(x, np.float32), spec), spec)})["t"]


def test_outliers_by_hand():
    # 10 elements: |x| >= 6 for -6 (the threshold counts), 7.5 and -100; 5.999 does not
    x = [0.0, 1.0, -2.0, 5.999, -6.0, 7.5, 3.0, -100.0, 0.5, 2.0]
    s = _ex(x)
    assert OUTLIER_THRESHOLD == 6.0
    assert s["outliers"] == pytest.approx(0.3) and s["amax"] == 100.0


def test_nonfinite_elements_are_left_out():
    s = _ex([np.inf, np.nan, 8.0, 1.0])
    assert s["amax"] == 8.0 and s["outliers"] == pytest.approx(0.5)  # of the 2 finite elements
    assert s["kurtosis"] == pytest.approx(1.0)  # two points: Pearson kurtosis 1


def test_kurtosis_matches_scipy_and_is_scale_free():
    rng = np.random.default_rng(0)
    g = rng.standard_normal(20000).astype(np.float32)
    t = rng.standard_t(3, 20000).astype(np.float32)
    for x in (g, t, np.float32(1e30) * g / 1e10, np.float32(1e-30) * t):  # huge and tiny: no overflow in x**4
        ref = scipy.stats.kurtosis(x.astype(np.float64), fisher=False)
        assert _ex(x)["kurtosis"] == pytest.approx(ref, rel=1e-3)
    assert _ex(g)["kurtosis"] == pytest.approx(3.0, abs=0.1)  # a Gaussian's


def test_one_spike_kurtosis_and_constant_tensor():
    n = 1000
    x = np.zeros(n, np.float32)
    x[0] = 1.0  # mean 1/n, var (n-1)/n^2, kurtosis (n^2 - 3n + 3)/(n - 1) for one spike
    assert _ex(x)["kurtosis"] == pytest.approx((n * n - 3 * n + 3) / (n - 1), rel=1e-4)
    assert math.isnan(_ex(np.full(8, 2.0))["kurtosis"])  # undefined for a constant tensor
    assert _ex(np.full(8, 2.0))["amax"] == 2.0


def test_statistics_are_of_the_tensor_not_its_rounded_copy():
    x = np.array([0.0, 1.0, 7.0, 300.0], np.float32)  # 300 > fp8_e4m3's max (448 is the max; e5m2 saturates elsewhere)
    a, b = _ex(x), _ex(x, RoleSpec("fp8_e5m2"))
    assert a == b and a["amax"] == 300.0 and a["outliers"] == 0.5


def test_training_records_per_tensor_extremes_at_every_evaluation():
    r = train("digits_mlp", "bf16", seeds=(0,), steps=20, eval_every=10)
    curve = r.runs[0].numerics_curve
    assert [c["step"] for c in curve] == [10, 20]
    last = r.runs[0].numerics
    for c in curve:
        t = c["tensors"]
        assert set(t) == set(last) and {"act:input", "act:out_in", "weight:fc0/w", "grad:out_in"} <= set(t), set(t)
        assert all(set(v) == {"amax", "outliers", "kurtosis"} for v in t.values())
    # the input pixels are /16: amax 1, none >= 6; the last evaluation's entry is the run's numerics
    assert curve[-1]["tensors"]["act:input"] == {k: last["act:input"][k] for k in ("amax", "outliers", "kurtosis")}
    assert curve[0]["tensors"]["act:input"]["amax"] == 1.0 and curve[0]["tensors"]["act:input"]["outliers"] == 0.0


def test_gradient_outlier_fraction_is_not_reported_under_a_loss_scale():
    # fp16_mixed measures gradients times its loss scale (2^16): |x| >= 6 would count almost every
    # element, so the fraction is NaN for grad/wgrad; activations and weights keep theirs.
    r = train("digits_mlp", "fp16_mixed", seeds=(0,), steps=10, eval_every=10)
    num = r.runs[0].numerics
    assert all(math.isnan(s["outliers"]) for k, s in num.items() if k.split(":")[0] in ("grad", "wgrad"))
    assert all(0 <= s["outliers"] <= 1 for k, s in num.items() if k.split(":")[0] in ("act", "weight"))
    assert max(s["amax"] for k, s in num.items() if k.startswith("wgrad:")) > 6  # what it would have counted
