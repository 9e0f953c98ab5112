"""A cost result's energy split: static power over the busy time (the components
:func:`asicsim._src.hw.power.is_static` names, at every scope) and the dynamic rest, in the result, its
row, the sweep's suite table and the CLI."""

from __future__ import annotations

import dataclasses

import pytest

import asicsim as sim
from asicsim._src.hw import Elementwise
from asicsim._src.hw.power import is_static
from asicsim._src.hw.result import EnergySplit

CASES = [(sim.Gemm(64, 64, 64), "gpu_h100"), (sim.Gemm(64, 64, 64), "edge_int8_32x32"),
         (sim.Gemm(256, 128, 512), "tpu_v1"), (Elementwise(4096, 4), "tpu_v1")]


@pytest.mark.parametrize(("op", "design"), CASES)
def test_dynamic_and_static_sum_to_the_total(op, design):
    r = sim.cost(op, design)
    static = sum(v for k, v in r.energy_pj.items() if is_static(k))
    assert r.energy_static_pj == pytest.approx(static, rel=1e-12) and static > 0
    assert r.energy_dynamic_pj == pytest.approx(sum(v for k, v in r.energy_pj.items() if not is_static(k)),
                                                rel=1e-12)
    assert r.energy_dynamic_pj > 0
    assert r.energy_dynamic_pj + r.energy_static_pj == pytest.approx(r.energy_total_pj, rel=1e-12)
    row = r.row()
    assert row["energy_static_j"] == pytest.approx(r.energy_static_pj * 1e-12)
    assert row["energy_dynamic_j"] + row["energy_static_j"] == pytest.approx(row["energy_j"], rel=1e-12)


def test_a_gpus_microsecond_gemm_is_mostly_static():
    # a launch-bound 64^3 GEMM: the GPU's static power over the busy time is most of its energy
    r = sim.cost(sim.Gemm(64, 64, 64), "gpu_h100")
    assert r.energy_static_pj / r.energy_total_pj > 0.5


def test_a_result_without_static_is_all_dynamic():
    r = sim.cost(sim.Gemm(64, 64, 64), "tpu_v1")
    r = dataclasses.replace(r, energy_pj=EnergySplit.from_parts({k: v for k, v in r.energy_pj.items()
                                                                 if not is_static(k)}))
    assert r.energy_static_pj == 0.0 and r.energy_dynamic_pj == r.energy_total_pj
    assert r.row()["energy_static_j"] == 0.0


def test_cost_table_suite_costs_and_trace_prices_carry_the_split():
    from asicsim._src.workloads.deepbench import suite_costs
    from asicsim._src.workloads.pricing import price_trace, workload_trace

    t = sim.hw.cost_table([sim.Gemm(64, 64, 64)], ["gpu_h100", "tpu_v1"]).frame()
    assert (t["energy_dynamic_j"] + t["energy_static_j"]).to_numpy() == pytest.approx(t["energy_j"].to_numpy())
    k = suite_costs("deepbench_gemm_inference_server", "gpu_h100", precision="int8")
    assert (k["energy_static_j"] > 0).all()
    assert (k["energy_dynamic_j"] + k["energy_static_j"]).to_numpy() == pytest.approx(k["energy_j"].to_numpy())
    p = price_trace(workload_trace("digits_mlp", "fp32"), ["gpu_v100"], "fp32")
    assert (p["energy_static_j"] > 0).all()
    assert (p["energy_dynamic_j"] + p["energy_static_j"]).to_numpy() == pytest.approx(p["energy_j"].to_numpy())


def test_cost_cli_shows_dynamic_and_static_energy(capsys):
    from asicsim.cli import main

    assert main(["cost", "--design", "gpu_h100", "--gemm", "64,64,64"]) == 0
    head = capsys.readouterr().out.splitlines()[0].split()
    assert {"energy_uj", "energy_dynamic_uj", "energy_static_uj", "dram_mb"} <= set(head)
    assert main(["cost", "--workload", "deepbench_gemm_inference_server", "--design", "gpu_h100",
                 "--precision", "int8"]) == 0
    head = capsys.readouterr().out.splitlines()[0].split()
    assert {"energy_uj", "energy_dynamic_uj", "energy_static_uj", "dram_mb"} <= set(head)
