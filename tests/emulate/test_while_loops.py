"""Issue 20 item 1: ``lax.while_loop`` (and a ``fori_loop`` with a traced bound, which lowers to
one) under ``emulate``: the carry keeps its pytree structure, fp32 is the identity, and a GEMM in
the body is rounded like the same GEMM outside a loop."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from asicsim._src.emulate import emulate

W = jnp.asarray(np.random.default_rng(0).normal(size=(6, 6)).astype(np.float32)) * 0.4
H0 = jnp.asarray(np.random.default_rng(1).normal(size=(3, 6)).astype(np.float32))


def fori_traced(h, n):
    """A traced trip count: jax lowers this fori_loop to a while_loop."""
    return jax.lax.fori_loop(0, n, lambda i, c: jnp.tanh(c @ W), h)


def while_pair(h):
    """A while_loop whose carry is a tuple (counter, state), no GEMM in the condition."""
    def cond(c):
        return c[0] < 4

    def body(c):
        i, x = c
        return i + 1, jnp.tanh(x @ W)
    return jax.lax.while_loop(cond, body, (jnp.int32(0), h))[1]


def no_gemm(n):
    return jax.lax.fori_loop(0, n, lambda i, c: c + 1.5, jnp.float32(0))


def test_a_fori_loop_with_a_traced_bound_runs_and_fp32_is_the_identity():
    n = jnp.int32(4)
    np.testing.assert_array_equal(np.asarray(emulate(fori_traced, "fp32")(H0, n)),
                                  np.asarray(fori_traced(H0, n)))
    assert float(emulate(no_gemm, "bf16")(jnp.int32(3))) == 4.5


def test_a_gemm_in_the_loop_body_is_rounded_like_the_unrolled_loop():
    unrolled = H0
    for _ in range(4):
        unrolled = emulate(lambda x: jnp.tanh(x @ W), "bf16")(unrolled)
    for f in (lambda h: fori_traced(h, jnp.int32(4)), while_pair):
        got = np.asarray(emulate(f, "bf16")(H0))
        np.testing.assert_array_equal(got, np.asarray(unrolled))
        assert not np.array_equal(got, np.asarray(f(H0)))  # rounded, unlike fp32


def test_under_jit():
    """jit composes. (Differentiation does not apply: jax has no reverse mode through a
    while_loop, and an emulated GEMM is a custom_vjp, which has no forward mode.)"""
    for f, args in ((while_pair, (H0,)), (fori_traced, (H0, jnp.int32(2)))):
        e = emulate(f, "bf16")
        np.testing.assert_array_equal(np.asarray(jax.jit(e)(*args)), np.asarray(e(*args)))
