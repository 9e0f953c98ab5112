"""The activation-gradient underflow histogram (asicsim._src.workloads.grad_underflow) against numpy
and ml_dtypes on a hand-made tensor, and its bad inputs."""

import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from asicsim._src.emulate.policy import RoleSpec
from asicsim._src.workloads.grad_underflow import (
    format_thresholds,
    histogram_lines,
    merged_histogram,
    underflow_fractions,
)
from asicsim._src.workloads.stats import describe, tensor_stats


def _hand_made() -> np.ndarray:
    """Magnitudes 2^-40 .. 2^1 with random significands and signs, every power of two near fp16's
    thresholds, and each power's float32 neighbours (where a log2 rounds onto the power)."""
    rng = np.random.default_rng(7)
    x = rng.uniform(1, 2, 4000) * 2.0 ** rng.integers(-40, 1, 4000)
    powers = 2.0 ** np.arange(-30, -9, dtype=np.float64)
    edges = np.concatenate([powers, np.nextafter(powers.astype(np.float32), np.float32(0)),
                            np.nextafter(powers.astype(np.float32), np.float32(1))])
    x = np.concatenate([x, edges, np.zeros(50)]).astype(np.float32)
    return x * rng.choice([-1.0, 1.0], x.size).astype(np.float32)


def test_thresholds_are_fp16s():
    assert format_thresholds("fp16") == (-24, -14)  # IEEE 754 binary16
    assert float(ml_dtypes.finfo(np.float16).smallest_subnormal) == 2.0 ** -24
    assert float(ml_dtypes.finfo(np.float16).smallest_normal) == 2.0 ** -14


def test_fractions_match_numpy_and_ml_dtypes():
    x = _hand_made()
    raw = tensor_stats(jnp.asarray(x), RoleSpec("fp16"))
    s = describe(raw, RoleSpec("fp16"))
    got = underflow_fractions(merged_histogram({"grad:h": s}), "fp16")
    a = np.abs(x.astype(np.float64))
    nz = a[a > 0]
    assert got["values"] == nz.size
    assert got["below_min"] == pytest.approx(np.mean(nz < 2.0 ** -24), abs=0)
    assert got["subnormal"] == pytest.approx(np.mean(nz < 2.0 ** -14), abs=0)
    assert got["zero"] == pytest.approx(np.mean(nz < 2.0 ** -25), abs=0)
    # what fp16 round-to-nearest-even really flushes (ml_dtypes' cast): |x| < 2^-25, and 2^-25
    # itself (a tie, to the even 0), which the histogram counts in the next bin
    flushed = np.mean(x[x != 0].astype(np.float16) == 0)
    assert flushed == pytest.approx(np.mean(nz <= 2.0 ** -25), abs=0)
    assert s["underflow"] == pytest.approx(flushed, rel=1e-6)


def test_histogram_bins_are_floor_log2():
    x = _hand_made()
    s = describe(tensor_stats(jnp.asarray(x), RoleSpec("fp16")), RoleSpec("fp16"))
    a = np.abs(x.astype(np.float64))
    e = np.floor(np.log2(a[a > 0])).astype(int)  # float64 log2: exact for these float32 values
    want = dict(zip(*np.unique(np.clip(e, -48, 24), return_counts=True), strict=True))
    assert {k: v for k, v in s["exp_hist"].items() if v} == {int(k): int(v) for k, v in want.items()}


def test_histogram_lines_mark_the_thresholds():
    lines = histogram_lines({-30: 1, -20: 3, -10: 4}, "fp16")
    marked = [ln for ln in lines if "<-" in ln]
    assert len(marked) == 2
    assert marked[0].startswith("[2^ -24") and "smallest subnormal" in marked[0]
    assert marked[1].startswith("[2^ -14") and "smallest normal" in marked[1]
    # the lowest bin of stats' histograms counts every smaller value too
    assert histogram_lines({-48: 1, -20: 1}, "fp16")[0].startswith("(0, 2^ -47)")


@pytest.mark.parametrize("call, fragment", [
    (lambda: underflow_fractions({}, "fp16"), "no gradient"),
    (lambda: underflow_fractions({-3: 1}, "int8"), "a float format"),
    (lambda: merged_histogram({"grad:h": {"size": 3}}), "no exp_hist"),
])
def test_bad_inputs(call, fragment):
    with pytest.raises(ValueError, match=fragment):
        call()
