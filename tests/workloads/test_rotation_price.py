"""Rotation pricing (issue 34 item 3): a recipe's Hadamard rotations appear in the op trace as
vector work (``work = "rotation"``: elements x log2(size) additions per rotated operand of each
GEMM, :mod:`asicsim._src.emulate.rotation_trace`) and cost exactly that much more, by hand on TPU v1's
vector unit (256 lanes at the design's 700 MHz; Jouppi et al. 2017, designs/tpu_v1.toml)."""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
import pytest

from asicsim._src.emulate import load_recipe, op_trace
from asicsim._src.hw.node_scaling import energy_factor
from asicsim._src.workloads.trace_price import trace_price

M, K, N = 64, 128, 32
P, X = {"w": jnp.ones((K, N))}, jnp.ones((M, K))


def gemm(p, x):
    return x @ p["w"]


def int8_recipe(rotation: int | None, name: str):
    role = {"format": "int8", "scaling": "tensor", **({"rotation": rotation} if rotation else {})}
    return load_recipe({"name": name, "roles": {"weight": role, "act": role, "acc": "fp32"}})


def test_a_rotated_recipe_costs_its_transforms_by_hand_on_tpu_v1():
    rot, plain = int8_recipe(16, "int8_rot16"), int8_recipe(None, "int8")
    tr, tp = op_trace(gemm, rot, P, X), op_trace(gemm, plain, P, X)
    ew = tr[tr.kind == "elementwise"]
    # one 16-point transform per rotated operand: act (M x K) and weight (K x N), 4 butterfly stages
    assert list(zip(ew.work, ew.lhs_role, ew.elements_out, ew.ops, strict=True)) == [
        ("rotation", "act", M * K, 4), ("rotation", "weight", K * N, 4)]
    assert (tp.kind == "gemm").all()
    a, b = trace_price(tr, ["tpu_v1"], rot), trace_price(tp, ["tpu_v1"], plain)
    ra, rb = a.rows(0), b.rows(0)
    assert ra[ra.kind == "gemm"].time_s.tolist() == rb.time_s.tolist()  # the GEMM itself unchanged
    assert ra[ra.kind == "gemm"].energy_j.tolist() == rb.energy_j.tolist()
    ops = (M * K + K * N) * 4  # additions and subtractions
    cycles = math.ceil(M * K * 4 / 256) + math.ceil(K * N * 4 / 256)  # 256 lanes, one op per lane per cycle
    ta, tb = a.totals(), b.totals()
    assert ta["time_s"][0] - tb["time_s"][0] == pytest.approx(cycles / 700e6, rel=1e-12)
    # a float32 add per operation: Horowitz (ISSCC 2014) 0.9 pJ at 45 nm, scaled to TPU v1's 28 nm
    pj = 0.9 * energy_factor(28)[0]
    assert ta["energy_vector_j"][0] - tb["energy_vector_j"][0] == pytest.approx(ops * pj * 1e-12, rel=1e-12)
    assert ta["dram_bytes"][0] == tb["dram_bytes"][0]  # fused with the quantizer: on chip
    assert ta["energy_j"][0] > tb["energy_j"][0]


def test_nvfp4_training_pays_for_the_wgrad_rotations_only():
    tr = op_trace(gemm, "nvfp4", P, X, training=True)
    ew = tr[tr.kind == "elementwise"]
    # TE's NVFP4 recipe rotates the wgrad GEMM's operands (act_dw: X, M x K; grad_dw: dY, M x N)
    assert list(zip(ew.role, ew.lhs_role, ew.elements_out, ew.ops, strict=True)) == [
        ("grad-weight", "act_dw", M * K, 4), ("grad-weight", "grad_dw", M * N, 4)]
    fwd = op_trace(gemm, "nvfp4", P, X)
    assert (fwd.kind == "gemm").all()  # the forward GEMM reads no rotated operand
    priced = trace_price(tr, ["gpu_h100"], "nvfp4").rows(0)
    rows = priced[priced.work == "rotation"]
    assert len(rows) == 2 and (rows.time_s > 0).all()


@pytest.mark.parametrize("size", [2, 64])
def test_the_work_grows_with_log2_of_the_size(size):
    tr = op_trace(gemm, int8_recipe(size, f"r{size}"), P, X)
    ew = tr[tr.kind == "elementwise"]
    assert np.all(ew.ops == int(math.log2(size))) and ew.primitive.tolist() == [f"hadamard{size}"] * 2


def test_a_rule_rotates_only_its_layers_gemms():
    role = {"format": "int8", "scaling": "tensor"}
    pol = load_recipe({"roles": {"weight": role, "act": role, "acc": "fp32"},
                       "layers": [{"match": "w2", "roles": {"act": {**role, "rotation": 32}}}]})
    p = {"w1": jnp.ones((K, K)), "w2": jnp.ones((K, N))}
    tr = op_trace(lambda p, x: (x @ p["w1"]) @ p["w2"], pol, p, X)
    ew = tr[tr.kind == "elementwise"]
    assert list(zip(ew.lhs_role, ew.elements_out, ew.ops, strict=True)) == [("act", M * K, 5)]
