"""Issue 20 item 14: ``fast`` GEMMs on narrow inputs (tensor cores) where that is exact.

No GPU here: the narrow branch (what a GPU runs) is exercised on the CPU by calling it directly,
and against the float32 path on data whose sums are exact in float32 (few-bit values), so any
rounding the narrow path added (an operand off its grid, a gradient rounded to the input dtype
by JAX's transpose rule) would change bits."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from asicsim._src.emulate import RoleSpec, emulate
from asicsim._src.emulate import contract as gemm_mod  # the GEMM itself (fast_dot) runs there
from asicsim._src.emulate.tensor_cores import _in_range, grid_dtypes, narrow_dot, narrow_dtype


@pytest.mark.parametrize(("fmt", "want"), [
    ("bf16", (("bfloat16", True),)), ("fp16", (("float16", True),)),
    ("fp8_e4m3", (("bfloat16", True), ("float16", True))), ("fp8_e5m2", (("bfloat16", True), ("float16", True))),
    ("mxfp8_e4m3", (("bfloat16", False),)), ("mxfp4", (("bfloat16", False),)),
    ("tf32", ()), ("fp32", ()), ("int8", ())])
def test_which_grids_fit_a_narrow_input(fmt, want):
    assert grid_dtypes(RoleSpec(fmt)) == want


def test_scaled_roles_keep_float32():
    assert grid_dtypes(RoleSpec("fp8_e4m3", scaling="tensor")) == ()
    assert narrow_dtype((RoleSpec("bf16"), RoleSpec("fp16"))) is None  # no common input type
    assert narrow_dtype((RoleSpec("fp8_e4m3"), RoleSpec("fp16"))) == ("float16", True)


def _few_bits(rng, shape):
    return jnp.asarray(rng.integers(-8, 9, size=shape).astype(np.float32) / 4)


def test_narrow_branch_equals_float32_on_exact_data_and_casts_to_bf16():
    rng = np.random.default_rng(0)
    a, b = _few_bits(rng, (16, 32)), _few_bits(rng, (32, 8))
    dn = (((1,), (0,)), ((), ()))
    specs = (RoleSpec("bf16"), RoleSpec("bf16"))
    got = jax.jit(lambda a, b: narrow_dot(a, b, dn, specs))(a, b)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(a) @ np.asarray(b))
    assert "bf16" in str(jax.make_jaxpr(lambda a, b: narrow_dot(a, b, dn, specs))(a, b))


def test_mx_values_below_bf16_normal_range_take_float32():
    x = jnp.asarray([1.0, 0.0, -2.0**-126, np.inf], jnp.float32)
    assert bool(_in_range(x))
    assert not bool(_in_range(x.at[0].set(1.0078125 * 2.0**-130)))  # a bf16 cast would round it


def test_gradients_by_the_narrow_branch_are_the_float32_ones(monkeypatch):
    # the GPU branch in place of the CPU one: forward, dX and dW bit-identical on exact data (a
    # dX rounded to bf16 by JAX's transpose rule, then to grad_out, would differ)
    rng = np.random.default_rng(1)
    w, x, c = _few_bits(rng, (24, 16)), _few_bits(rng, (8, 24)), _few_bits(rng, (8, 16))

    def loss(w, x):
        return jnp.sum((x @ w) * c)

    pol = {"name": "bf16_operands_fp32_out", "roles": {"weight": "bf16", "act": "bf16", "acc": "fp32",
                                                       "grad": "bf16", "out": "fp32", "grad_out": "fp32",
                                                       "wgrad": "fp32"}}
    want = jax.grad(emulate(loss, pol), argnums=(0, 1))(w, x)
    calls = []

    def gpu_branch(a, b, dn, specs=(None, None)):
        calls.append(narrow_dtype(specs))
        return narrow_dot(a.astype(jnp.float32), b.astype(jnp.float32), dn, specs)

    monkeypatch.setattr(gemm_mod, "fast_dot", gpu_branch)
    got = jax.grad(emulate(loss, pol), argnums=(0, 1))(w, x)
    for g, h in zip(got, want, strict=True):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(h))
    assert calls.count(("bfloat16", True)) == 3  # forward, dX and dW all took the narrow inputs
