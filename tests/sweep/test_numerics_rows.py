"""A training point's numerics table carries the outlier measures (amax, fraction |x| >= 6,
kurtosis) next to underflow/overflow, so a sweep's results show them per tensor."""

import math

import jax.numpy as jnp

from asicsim._src.emulate.policy import RoleSpec
from asicsim._src.sweep.records import numerics_rows
from asicsim._src.workloads.stats import describe, tensor_stats


def test_numerics_rows_keep_amax_outliers_and_kurtosis():
    x = jnp.array([0.5, -1.0, 7.0, -8.0], jnp.float32)  # hand: amax 8, 2 of 4 elements >= 6
    const = jnp.full((4,), 2.0, jnp.float32)  # a constant tensor: kurtosis undefined (NaN)
    spec = RoleSpec("fp8_e4m3")
    rows = numerics_rows({"act:h": describe(tensor_stats(x, spec), spec),
                           "act:c": describe(tensor_stats(const, spec), spec)})
    h, c = rows
    assert (h["tensor"], h["role"], h["amax"], h["outliers"]) == ("act:h", "act", 8.0, 0.5)
    # Pearson kurtosis E[(x-mu)^4] / var^2 of the four values, by hand in float64
    v = [0.5, -1.0, 7.0, -8.0]
    mu = sum(v) / 4
    m2, m4 = (sum((t - mu) ** 2 for t in v) / 4), (sum((t - mu) ** 4 for t in v) / 4)
    assert math.isclose(h["kurtosis"], m4 / m2**2, rel_tol=1e-5)
    assert c["kurtosis"] is None and c["amax"] == 2.0 and c["outliers"] == 0.0
