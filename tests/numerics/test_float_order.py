"""Bit-pattern float32 comparisons against numpy's float compare (numpy does not read subnormals
as zero; XLA:CPU's compare does, which is why asicsim._src.numerics.float_order exists)."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from asicsim._src.numerics.float_order import order_key, positive

EDGES = np.float32([0.0, -0.0, 2.0**-149, -(2.0**-149), 2.0**-126, -(2.0**-126), 1.0, -1.0,
                    np.finfo(np.float32).max, -np.finfo(np.float32).max, np.inf, -np.inf,
                    3.0 * 2.0**-149, 2.0**-127])


def test_order_key_orders_every_pair_of_edge_values_as_numpy_does():
    a, b = np.meshgrid(EDGES, EDGES)
    ka, kb = np.asarray(order_key(a)), np.asarray(order_key(b))
    np.testing.assert_array_equal(ka < kb, a < b)
    np.testing.assert_array_equal(ka == kb, a == b)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(width=32, allow_nan=False), min_size=2, max_size=64))
def test_order_key_matches_numpy_compare(xs):
    x = np.float32(xs)
    k = np.asarray(order_key(x))
    np.testing.assert_array_equal(k[:, None] < k[None, :], x[:, None] < x[None, :])


def test_positive_on_subnormals_zeros_and_nan():
    x = np.concatenate([EDGES, np.float32([np.nan, -np.nan])])
    want = (x > 0) & ~np.isnan(x)
    np.testing.assert_array_equal(np.asarray(positive(x)), want)
