"""Issue 20 item 7: an integer ``dot_general`` is the user's exact arithmetic; emulation must not
round it like a float GEMM (771771 came out as 770048 under bf16). Issue 29 item 14: it is still
work, traced and priced in its own formats."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from asicsim._src.emulate import emulate, op_trace
from asicsim._src.hw import Gemm, cost_many
from asicsim._src.workloads.pricing import price_trace, trace_costs


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


# Issue 29 item 14: a model that already runs int8 x int8 -> int32 GEMMs (AQT serving) had no
# op-trace rows, so its GEMMs were priced as zero work; int8 x int8 -> float32 was rounded as a
# float GEMM of the recipe, and an int8 convolution was rewritten as a float im2col GEMM.

RNG = np.random.default_rng(0)
WQ = jnp.asarray(RNG.integers(-127, 128, (64, 32)), jnp.int8)
XQ = jnp.asarray(RNG.integers(-127, 128, (8, 64)), jnp.int8)
W_FLOAT = jnp.asarray(RNG.normal(size=(32, 16)).astype(np.float32))
DN = (((1,), (0,)), ((), ()))


def served(params, x):
    """An int8 layer as AQT serves it (int32 accumulator, dequantized), then a float layer."""
    acc = lax.dot_general(x, params["wq"], DN, preferred_element_type=jnp.int32)
    return (acc.astype(jnp.float32) * 1e-3) @ params["w"]


def test_an_int8_gemm_is_traced_in_its_own_formats_and_has_no_gradient_gemms():
    params = {"wq": WQ, "w": W_FLOAT}
    trace = op_trace(served, "mxfp8", params, XQ, training=True)
    fwd = trace[trace.role == "forward"]
    assert fwd[["M", "N", "K", "lhs_role", "rhs_role", "format_lhs", "format_rhs", "format_acc",
                "format_out"]].values.tolist() == [
        [8, 32, 64, "act", "weight", "int8", "int8", "int32", "int32"],
        [8, 16, 32, "act", "weight", "mxfp8_e4m3_up", "mxfp8_e4m3_up", "float32", "bfloat16"]]
    assert fwd.macs.tolist() == [8 * 32 * 64, 8 * 16 * 32]
    # the float GEMM has its two gradient GEMMs, the integer one none
    assert trace[trace.role != "forward"][["M", "N", "K"]].values.tolist() == [[8, 32, 16], [32, 16, 8]]
    want = served(params, XQ)
    np.testing.assert_array_equal(np.asarray(emulate(served, "fp32")(params, XQ)), np.asarray(want))


@pytest.mark.parametrize("out", [jnp.int32, jnp.float32])
def test_an_int8_gemm_into_any_result_type_is_exact(out):
    def f(w, x):
        return lax.dot_general(x, w, DN, preferred_element_type=out)

    want = np.asarray(XQ, np.int64) @ np.asarray(WQ, np.int64)  # exact (|sums| < 2**24)
    for recipe in ("mxfp4", "fp8_hybrid", "bf16"):  # into float32 it was rounded as a float GEMM
        np.testing.assert_array_equal(np.asarray(emulate(f, recipe)(WQ, XQ)).astype(np.int64), want)
    row = op_trace(f, "mxfp4", WQ, XQ).iloc[0]
    acc = "int32" if out == jnp.int32 else "float32"
    assert (row.format_lhs, row.format_rhs, row.format_acc, row.format_out) == ("int8", "int8", acc,
                                                                               np.dtype(out).name)


def test_an_int8_convolution_is_exact_and_traced():
    x = jnp.asarray(RNG.integers(-127, 128, (2, 3, 8, 8)), jnp.int8)
    k = jnp.asarray(RNG.integers(-127, 128, (4, 3, 3, 3)), jnp.int8)

    def conv(k, x):
        return lax.conv_general_dilated(x, k, (1, 1), "VALID", preferred_element_type=jnp.int32)

    np.testing.assert_array_equal(np.asarray(emulate(conv, "mxfp4")(k, x)), np.asarray(conv(k, x)))
    row = op_trace(conv, "mxfp4", k, x).iloc[0]
    assert (row.kind, row.M, row.N, row.K) == ("conv", 2 * 6 * 6, 4, 3 * 3 * 3)
    assert (row.format_lhs, row.format_rhs, row.format_acc, row.format_out) == ("int8", "int8", "int32", "int32")


@pytest.mark.parametrize("design", ["edge_int8_32x32", "gpu_a100"])
def test_an_int8_gemm_is_priced_as_the_same_gemm_in_int8(design):
    trace = op_trace(served, "bf16", {"wq": WQ, "w": W_FLOAT}, XQ)
    costs = trace_costs(trace, design, "bf16")
    int8 = costs[costs.format_act == "int8"]
    assert len(int8) == 1 and int8.time_s.iloc[0] > 0 and int8.energy_j.iloc[0] > 0
    want = cost_many([Gemm(8, 32, 64)], design, {"act": "int8", "weight": "int8", "acc": "int32", "out": "int32"})[0]
    assert int8.time_s.iloc[0] == want.time_s and int8.energy_j.iloc[0] == want.energy_total_pj * 1e-12
    table = price_trace(trace, [design], "bf16")
    assert table[table.role == "forward"].gemms.iloc[0] == 2
