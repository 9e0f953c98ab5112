"""The op trace's elementwise rows (asicsim._src.emulate.elementwise_trace) and their pricing on the
vector unit (asicsim._src.workloads.pricing).

The model is plain JAX with a conv + bias, relu, a 2x2 max-pool and a layer norm, so every count
below is done by hand from the shapes: x is (2, 8, 8, 2) NHWC, the conv has 4 filters ("SAME"):
(2, 8, 8, 4) = 512 outputs; the pool gives (2, 4, 4, 4) = 128; the norm's statistics are over
the 4 channels of 32 pixels.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from asicsim._src.emulate import op_trace
from asicsim._src.hw import Elementwise, cost_many, load_design
from asicsim._src.hw.native import MacMode
from asicsim._src.workloads.pricing import price_trace, trace_costs, workload_trace


def net(p, x):
    h = lax.conv_general_dilated(x, p["w"], (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    h = jax.nn.relu(h + p["b"])
    h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    mu = jnp.mean(h, -1, keepdims=True)
    d = h - mu
    var = jnp.mean(d * d, -1, keepdims=True)
    y = d * lax.rsqrt(var + 1e-5) * p["g"] + p["beta"]
    return y.reshape(2, -1) @ p["v"]


P = {"w": jnp.ones((3, 3, 2, 4)), "b": jnp.zeros((1, 1, 1, 4)), "g": jnp.ones((1, 1, 1, 4)),
     "beta": jnp.zeros((1, 1, 1, 4)),
     "v": jnp.ones((64, 3))}
X = jnp.ones((2, 8, 8, 2))

# (work, primitive, elements_out, inputs, elements_in, ops per output, times)
HAND = [
    ("elementwise", "add", 512, 2, 512 + 4, 1, 1),  # conv bias (4 values broadcast)
    ("activation", "max", 512, 1, 512, 1, 1),  # relu: max(h, 0.0), 0.0 an immediate
    ("pooling", "reduce_window_max", 128, 4, 512, 3, 1),  # 2x2 windows, 3 compares each
    ("reduction", "reduce_sum", 32, 4, 128, 3, 2),  # the two means' sums over 4 channels
    ("elementwise", "div", 32, 1, 32, 1, 2),  # ... divided by 4.0
    ("elementwise", "sub", 128, 2, 128 + 32, 1, 1),  # h - mu
    ("elementwise", "mul", 128, 2, 128, 1, 1),  # d * d: d read once
    ("elementwise", "add", 32, 1, 32, 1, 1),  # var + eps
    ("normalisation", "rsqrt", 32, 1, 32, 1, 1),
    ("elementwise", "mul", 128, 2, 128 + 32, 1, 1),  # d * rsqrt(...)
    ("elementwise", "mul", 128, 2, 128 + 4, 1, 1),  # * g
    ("elementwise", "add", 128, 2, 128 + 4, 1, 1),  # + beta
]


def _rows(t):
    ew = t[t.kind == "elementwise"]
    return sorted((r.work, r.primitive, int(r.elements_out), int(r.inputs), int(r.elements_in), int(r.ops),
                   int(r["count"])) for _, r in ew.iterrows())


def test_relu_maxpool_layernorm_counts_equal_hand_counts():
    t = op_trace(net, "fp32", P, X, elementwise=True)
    assert _rows(t[t.role == "forward"]) == sorted(HAND)
    # the GEMMs are still there, unchanged, and elementwise rows carry no MACs
    assert list(t[t.kind != "elementwise"].kind) == ["conv", "gemm"]
    assert t[t.kind == "elementwise"].macs.sum() == 0
    # without elementwise=True the trace is the GEMMs only, as before
    assert list(op_trace(net, "fp32", P, X).kind) == ["conv", "gemm"]


def test_training_mirrors_the_elementwise_work_as_grad_input_rows():
    t = op_trace(lambda p, x: jnp.sum(net(p, x)), "fp32", P, X, elementwise=True, training=True)
    fwd, bwd = t[t.role == "forward"], t[t.role == "grad-input"]
    assert _rows(bwd) == _rows(fwd)
    assert ("reduction", "reduce_sum", 1, 6, 6, 5, 1) in _rows(fwd)  # the loss: 2 x 3 outputs summed


def test_scan_bodies_count_their_length():
    def f(c):
        return lax.scan(lambda c, _: (jnp.tanh(c), None), c, None, length=5)[0]

    t = op_trace(f, "fp32", jnp.ones((3, 4)), elementwise=True)
    assert _rows(t) == [("activation", "tanh", 12, 1, 12, 1, 5)]


def test_elementwise_rows_are_priced_on_the_vector_unit():
    t = op_trace(net, "fp32", P, X, elementwise=True)
    costs = trace_costs(t, "tpu_v1", "fp32")
    ew = costs[costs.kind == "elementwise"]
    assert len(ew) == len(HAND) and (ew.time_s > 0).all() and (ew.energy_vector_j > 0).all()
    # the pool by hand on TPU v1's 256 lanes at the array's 700 MHz: ceil(128 x 3 / 256) = 2 cycles
    pool = ew[ew.work == "pooling"].iloc[0]
    assert pool.time_s == pytest.approx(2 / 700e6)
    (want,) = cost_many([Elementwise(128, 3, inputs=4, input_elements=512, work="pooling")], "tpu_v1",
                        {"act": "float32", "weight": "float32", "acc": "float32", "out": "float32"})
    assert pool.energy_j == pytest.approx(want.energy_total_pj * 1e-12)
    # a GPU prices them on its SIMT cores
    assert (trace_costs(t, "gpu_v100", "fp32").query("kind == 'elementwise'").time_s > 0).all()


def _with_fp32(name: str):
    """A catalog int8 design given an fp32 MAC mode at a stated rate (asicsim._src.hw.native): the fp32
    recipe's GEMMs then run on it, and only the vector unit is in question here."""
    d = load_design(name)
    fp32 = MacMode(a="fp32", b="fp32", acc="fp32", rate=0.25, source="test: a stated rate")
    return dataclasses.replace(d, pe=dataclasses.replace(d.pe, modes=(*d.pe.modes, fp32)))


def test_a_design_without_a_vector_unit_prices_them_at_zero_and_says_so():
    t = workload_trace("digits_mlp", "fp32")
    assert {"activation", "elementwise", "reduction"} <= set(t.work.dropna())
    google, tpu = _with_fp32("scalesim_google"), _with_fp32("tpu_v1")
    costs = trace_costs(t, google, "fp32")
    ew = costs[costs.kind == "elementwise"]
    assert (ew.time_s == 0).all() and (ew.energy_j == 0).all()
    assert ew.note.str.contains("no \\[vector\\] unit").all()
    table = price_trace(t, [google, tpu], "fp32")
    fwd = table[table.role == "forward"].set_index("design")
    assert "no [vector] unit" in fwd.loc["scalesim_google", "note"] and fwd.loc["tpu_v1", "note"] == ""
    gemm_time = costs[(costs.role == "forward") & (costs.kind == "gemm")].time_s.sum()
    assert fwd.loc["scalesim_google", "time_s"] == pytest.approx(gemm_time)
    assert np.isfinite(table.time_s).all()
