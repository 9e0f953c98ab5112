"""Issue 20 item 7: an integer ``dot_general`` is the user's exact arithmetic; emulation must not
round it like a float GEMM (771771 came out as 770048 under bf16)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from asicsim.emulate import emulate


def test_integer_gemm_stays_exact_and_float_gemms_around_it_are_still_rounded():
    a = jnp.asarray([[771, 1]], jnp.int32)
    b = jnp.asarray([[1001], [0]], jnp.int32)
    assert int(emulate(lambda x, y: x @ y, "bf16")(a, b)[0, 0]) == 771771

    w = jnp.asarray(np.random.default_rng(0).normal(size=(4, 4)).astype(np.float32))

    def f(x, idx, onehot):
        counts = idx @ onehot  # integer: exact
        return x @ w, counts

    x = jnp.asarray(np.random.default_rng(1).normal(size=(2, 4)).astype(np.float32))
    idx = jnp.asarray([[300, 7, 1, 2]], jnp.int32)
    onehot = jnp.asarray(np.eye(4, dtype=np.int32) * 257)
    y, counts = emulate(f, "bf16")(x, idx, onehot)
    np.testing.assert_array_equal(np.asarray(counts), np.asarray(idx @ onehot))
    assert not np.array_equal(np.asarray(y), np.asarray(x @ w))  # the float GEMM is rounded
