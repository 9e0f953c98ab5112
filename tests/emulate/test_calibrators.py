"""Static-scale calibrators (percentile, MSE, entropy; per tensor and per channel) against known
distributions, a brute-force search and pytorch-quantization's algorithm re-implemented here in
plain Python; and calibrate() with them on a model."""

from __future__ import annotations

import dataclasses
from collections import Counter

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import entropy

from asicsim._src.emulate import calibrators as cal
from asicsim._src.emulate import emulate, load_recipe
from asicsim._src.emulate.ptq import calibrate, observe_amax


def test_percentile_of_a_known_sample():
    x = np.arange(1, 10001, dtype=np.float64)  # |x| uniform on 1..10000: the 99 % point is 9900
    h = cal.histogram(x, 10000.0, 2000)  # bins of width 5
    assert cal.amax_percentile(h, 10000.0, 99.0) == pytest.approx(9900.0, abs=5.0)
    assert cal.amax_percentile(h, 10000.0, 100.0) == 10000.0
    assert cal.amax_percentile(h, 10000.0, 50.0) == pytest.approx(5000.0, abs=5.0)


def test_mse_picks_the_amax_of_least_error_by_brute_force():
    rng = np.random.default_rng(0)
    x = np.abs(rng.standard_t(3, 200_000))  # heavy tails: the best amax is well below the max
    amax = float(x.max())
    h = cal.histogram(x, amax, 1024)
    got = cal.amax_mse(h, amax, num_bits=8, unsigned=False)
    e = np.linspace(0, amax, 1025)
    c = (e[1:] + e[:-1]) / 2
    best, best_err = None, np.inf
    for i in range(128, 1024):  # every candidate, the error written out
        scale = 127.0 / c[i]
        q = np.clip(np.round(c * scale), -128, 127) / scale
        err = float(np.sum((q - c) ** 2 * h)) / c.size
        if err < best_err:
            best, best_err = c[i], err
    assert got == best and got < 0.8 * amax


def _pq_entropy(calib_hist, calib_bin_edges, num_bits=8, unsigned=False, stride=1, start_bin=128):
    """pytorch-quantization calib/histogram.py ``_compute_amax_entropy``, as written there."""
    bins = calib_hist[:].copy()
    bins[0] = bins[1]
    divergences, arguments = [], []
    nbins = 1 << (num_bits - 1 + int(unsigned))
    new_density_counts = np.zeros(nbins, dtype=np.float64)
    for i in range(start_bin, len(bins) + 1, stride):
        new_density_counts.fill(0)
        space = np.linspace(0, i, num=nbins + 1)
        digitized_space = np.digitize(range(i), space) - 1
        digitized_space[bins[:i] == 0] = -1
        for idx, digitized in enumerate(digitized_space):
            if digitized != -1:
                new_density_counts[digitized] += bins[idx]
        counter = Counter(digitized_space)
        for key, val in counter.items():
            if key != -1:
                new_density_counts[key] = new_density_counts[key] / val
        new_density = np.zeros(i, dtype=np.float64)
        for idx, digitized in enumerate(digitized_space):
            if digitized != -1:
                new_density[idx] = new_density_counts[digitized]
        reference_density = np.array(bins[:len(digitized_space)])
        reference_density[-1] += np.sum(bins[i:])
        divergences.append(entropy(reference_density, new_density))
        arguments.append(i)
    divergences = np.array(divergences)
    last_argmin = len(divergences) - 1 - np.argmin(divergences[::-1])
    return calib_bin_edges[last_argmin * stride + start_bin]


@pytest.mark.parametrize(("dist", "bits", "unsigned"), [("laplace", 8, False), ("t", 8, False),
                                                        ("laplace", 4, True)])
def test_entropy_is_pytorch_quantizations_algorithm(dist, bits, unsigned):
    rng = np.random.default_rng(1)
    x = np.abs(rng.laplace(size=100_000) if dist == "laplace" else rng.standard_t(4, 100_000))
    amax = float(x.max())
    h = cal.histogram(x, amax, 512)
    want = _pq_entropy(h, np.linspace(0, amax, 513), bits, unsigned, start_bin=128 if bits == 8 else 16)
    got = cal.amax_entropy(h, amax, bits, unsigned, start_bin=128 if bits == 8 else 16)
    assert got == want and got < amax


def test_entropy_on_a_small_hand_checked_histogram():
    """2-level (num_bits=1, unsigned) quantization, start_bin 2 over 4 bins [4, 4, 0, 8]: at i = 2
    the reference is [4, 4 + 8] against q = [4, 4] (KL > 0), at i = 3 [4, 4, 8] is inexpressible
    (q = 0 where p > 0: inf), at i = 4 [4, 4, 0, 8] against q = [4, 4, 0, 8]: KL = 0, amax = 4."""
    h = np.array([4, 4, 0, 8])
    assert cal.amax_entropy(h, 4.0, num_bits=1, unsigned=True, start_bin=2) == 4.0
    # [4, 4, 8, 0]: KL 0 at i = 3 ([4, 4, 8] vs [4, 4, 8]) and at i = 4 (the empty bin stays
    # empty): the last of equal minima, amax 4
    assert cal.amax_entropy(np.array([4, 4, 8, 0]), 4.0, num_bits=1, unsigned=True, start_bin=2) == 4.0
    # [4, 4, 8, 1]: i = 3 compares [4, 4, 9] with [4, 4, 8] (small KL), i = 4 [4, 4, 8, 1] with
    # [4, 4, 4.5, 4.5] (larger), i = 2 [4, 13] with [4, 4]: amax 3
    assert cal.amax_entropy(np.array([4, 4, 8, 1]), 4.0, num_bits=1, unsigned=True, start_bin=2) == 3.0


def mlp(p, x):
    return jax.nn.relu(x @ p["w1"]) @ p["w2"]


P = {"w1": jax.random.normal(jax.random.key(0), (24, 16)) * 0.3,
     "w2": jax.random.normal(jax.random.key(1), (16, 4)) * 0.3}
# uneven features: a few large input channels (as LLM activation outliers)
XS = [jax.random.normal(jax.random.key(2 + i), (64, 24)) * jnp.where(jnp.arange(24) % 8 == 0, 8.0, 0.5)[None]
      for i in range(3)]


def _pol(method="max", granularity="tensor", **kw):
    return dataclasses.replace(load_recipe("int8_ptq_tensor"), calibration_method=method,
                               calibration_granularity=granularity, **kw)


def test_recorded_max_is_the_max_calibrator_and_histogram_methods_are_below_it():
    base = calibrate(mlp, P, XS, "int8_ptq_tensor")
    chan = calibrate(mlp, P, XS, _pol("max", "channel"))  # recorded: same per-tensor amax
    assert [r[1][0] for r in chan.static_scales] == [r[1][0] for r in base.static_scales]
    x_amax = max(float(jnp.abs(x).max()) for x in XS)
    assert base.static_scales[0][1][0] == pytest.approx(x_amax, rel=0, abs=0)
    seen = np.asarray(observe_amax(mlp, "int8_ptq_tensor", P, XS[0]))
    assert seen[0, 0] == float(jnp.abs(XS[0]).max())
    for method in ("percentile", "mse", "entropy"):
        pol = calibrate(mlp, P, XS, _pol(method))
        a = pol.static_scales[0][1][0]
        assert 0 < a <= x_amax, method
        if method == "percentile":  # site 0 sees the input itself: its histogram over the batches
            absx = np.concatenate([np.abs(np.asarray(x)).ravel() for x in XS])
            assert a == cal.amax_percentile(cal.histogram(absx, x_amax), x_amax, 99.99)


def test_per_channel_static_scales_are_per_input_feature_and_used_by_the_gemm():
    pol = calibrate(mlp, P, XS, _pol("max", "channel"))
    site0 = next(v for s, side, v in pol.channel_scales if (s, side) == (0, 0))
    want = np.max(np.stack([np.abs(np.asarray(x)).max(axis=0) for x in XS]), axis=0)
    assert np.array_equal(np.asarray(site0, np.float32), want.astype(np.float32))
    x = np.asarray(XS[0])
    scale = np.asarray(site0, np.float32) / np.float32(127)  # TensorRT's static int8 scale, per feature
    qx = np.clip(np.rint(x / scale[None]), -128, 127).astype(np.float32) * scale[None]
    w1 = np.asarray(P["w1"])
    ws = np.float32(np.abs(w1).max()) / np.float32(127)  # int8_ptq_tensor's weights: per tensor
    qw = np.clip(np.rint(w1 / ws), -128, 127).astype(np.float32) * ws
    first = emulate(lambda p, x: x @ p["w1"], pol)(P, XS[0])
    np.testing.assert_allclose(np.asarray(first), qx @ qw, rtol=1e-5, atol=1e-5)
    per_tensor = calibrate(mlp, P, XS, "int8_ptq_tensor")
    y_c, y_t = (np.asarray(emulate(mlp, q)(P, XS[0])) for q in (pol, per_tensor))
    ref = np.asarray(mlp(P, XS[0]))
    assert np.abs(y_c - ref).mean() < 0.7 * np.abs(y_t - ref).mean()  # outlier features: per channel wins


def test_percentile_per_channel():
    pol = calibrate(mlp, P, XS, _pol("percentile", "channel", calibration_percentile=99.0))
    site0 = np.asarray(next(v for s, side, v in pol.channel_scales if (s, side) == (0, 0)))
    absx = np.concatenate([np.abs(np.asarray(x)) for x in XS])
    cmax = absx.max(axis=0)
    for c in (0, 1, 8):
        h = cal.histogram(absx[:, c], cmax[c])
        assert site0[c] == cal.amax_percentile(h, cmax[c], 99.0)
    assert np.all(site0 <= cmax)


def test_calibration_fields_are_checked():
    from asicsim._src.emulate import RecipeError

    base = {"name": "t", "roles": {"weight": "int8", "act": {"format": "int8", "scaling": "static"}, "acc": "fp32"}}
    for cal_t, msg in [({"method": "kl"}, "max | percentile | mse | entropy"),
                       ({"method": "percentile", "percentile": 0}, r"\(0, 100\]"),
                       ({"method": "max", "percentile": 99.9}, "only with method = 'percentile'"),
                       ({"method": "entropy", "granularity": "channel"}, "'tensor' with method"),
                       ({"granularity": "token"}, "tensor | channel"), ({"bins": 10}, ">= 256")]:
        with pytest.raises(RecipeError, match=msg):
            load_recipe({**base, "calibration": cal_t})
    with pytest.raises(ValueError, match="integer grid"):
        calibrate(mlp, P, XS[:1], load_recipe({**base, "roles": {**base["roles"], "act": {"format": "e4m3", "scaling": "static"}},
                                               "calibration": {"method": "mse"}}))
