"""Power at named scopes (asicsim._src.hw.power): the schema's keys, how the scopes nest, idle power,
the [power] table's checks, the TDP cap shared with the GPU model, the GPU's split and its
launch/SM fractions, and TOPS/W."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import asicsim as sim
from asicsim._src.hw import load_design
from asicsim._src.hw.design_checks import DesignError
from asicsim._src.hw.design_files import design_from_table
from asicsim._src.hw.efficiency import energy_per_mac_pj, peak_tops_per_w
from asicsim._src.hw.power import component, power_capped_time
from asicsim._src.hw.power_spec import PowerSpec
from asicsim._src.hw.scopes import SCOPE_ENERGY_KEYS

SCHEMA = (*SCOPE_ENERGY_KEYS, "power_core_w", "power_chip_w", "power_board_w", "idle_power_chip_w",
          "idle_power_board_w", "launch_fraction", "sm_fraction", "objective",
          "tops_per_w_core", "tops_per_w_chip", "tops_per_w_board")


@pytest.mark.parametrize("design", ["tpu_v1", "edge_int8_32x32", "dc_bf16_128x128", "eyeriss_v1", "gpu_h100"])
def test_rows_carry_the_schema_and_scopes_nest(design):
    row = sim.cost(sim.Gemm(512, 512, 512), design).row()
    assert set(SCHEMA) <= set(row)
    assert row["energy_j"] == row["energy_board_j"]
    assert row["energy_dynamic_j"] == pytest.approx(row["energy_dynamic_board_j"], rel=1e-12)
    assert row["energy_static_j"] == pytest.approx(row["energy_j"] - row["energy_dynamic_j"], rel=1e-12)
    gpu = design.startswith("gpu")
    if gpu:  # no separable core; the GPU's own terms
        assert math.isnan(row["energy_core_j"]) and math.isnan(row["power_core_w"])
        assert 0 <= row["launch_fraction"] <= 1 and 0 < row["sm_fraction"] <= 1
        assert row["objective"] == "fastest"
    else:
        assert 0 < row["energy_core_j"] < row["energy_chip_j"]
        assert math.isnan(row["launch_fraction"]) and math.isnan(row["sm_fraction"])
    assert 0 < row["energy_chip_j"] < row["energy_board_j"]
    for s in ("chip", "board"):  # busy power is idle power plus the work's
        assert row[f"power_{s}_w"] > row[f"idle_power_{s}_w"] > 0
        assert row[f"power_{s}_w"] == pytest.approx(row[f"energy_{s}_j"] / row["time_s"], rel=1e-12)
    assert row["tops_per_w_chip"] == pytest.approx(row["tops"] / row["power_chip_w"], rel=1e-9)


def test_static_energy_is_idle_power_times_time():
    r = sim.cost(sim.Gemm(1024, 1024, 1024), "dc_bf16_128x128")
    row = r.row()
    static_board = sum(v for k, v in r.energy_pj.items() if component(k)[1] == "static") * 1e-12
    assert static_board == pytest.approx(row["idle_power_board_w"] * r.time_s, rel=1e-9)
    static_chip = sum(v for k, v in r.energy_pj.items() if component(k) in (("core", "static"), ("chip", "static")))
    assert static_chip * 1e-12 == pytest.approx(row["idle_power_chip_w"] * r.time_s, rel=1e-9)


def test_an_idle_dc_design_draws_power():
    # the issue: dc_bf16_128x128 has 52 MiB of SRAM and an HBM2E stack and drew nothing when idle
    row = sim.cost(sim.Gemm(64, 64, 64), "dc_bf16_128x128").row()
    assert row["idle_power_chip_w"] > 52 * 0.030 and row["idle_power_board_w"] > row["idle_power_chip_w"] + 1.0


def test_published_idle_power_keeps_its_value_with_the_rest_named_fitted():
    r = sim.cost(sim.Gemm(256, 256, 256), "tpu_v1")
    assert r.idle_power_w["chip"] == pytest.approx(28.0)  # Jouppi et al. 2017 Table 2
    assert "fitted" in r.sources["other_idle"]
    # a published idle below the modelled components: the estimates are scaled to it
    d = dataclasses.replace(load_design("dc_bf16_128x128"), static_power_w=1.0)
    r = sim.cost(sim.Gemm(256, 256, 256), d)
    assert r.idle_power_w["chip"] == pytest.approx(1.0) and "scaled to fit" in r.sources["leakage.sram"]


def test_power_table_overrides_and_sources():
    d = load_design("edge_int8_32x32")
    own = dataclasses.replace(d, power=PowerSpec(host_interface_w=0.5, vr_efficiency=0.8, source="datasheet X"))
    a, b = sim.cost(sim.Gemm(256, 256, 256), d), sim.cost(sim.Gemm(256, 256, 256), own)
    assert b.idle_power_w["chip"] == pytest.approx(a.idle_power_w["chip"] + 0.5)
    assert "datasheet X" in b.sources["host_interface"] and "[power] vr_efficiency" in b.sources["vr_loss.static"]
    assert b.energy_pj["vr_loss.dynamic"] / b.energy_pj["dram"] > a.energy_pj["vr_loss.dynamic"] / a.energy_pj["dram"]


BAD_POWER = [
    ({"vr_efficiency": 0}, "power.vr_efficiency"),
    ({"vr_efficiency": 1.5}, "a fraction in (0, 1]"),
    ({"sram_leakage_mw_per_mib": -1}, "power.sram_leakage_mw_per_mib"),
    ({"clock_fraction": "high"}, "power.clock_fraction"),
    ({"dram_phy_w": float("inf")}, "power.dram_phy_w"),
    ({"fan_w": 3}, "power.fan_w"),
]


@pytest.mark.parametrize(("table", "fragment"), BAD_POWER)
def test_bad_power_table_is_named(table, fragment):
    import tomllib

    from asicsim._src.hw.design_files import designs_dir

    t = tomllib.loads((designs_dir() / "edge_int8_32x32.toml").read_text())
    with pytest.raises(DesignError, match=None) as err:
        design_from_table(t | {"power": table}, "edge.toml")
    assert fragment in str(err.value) and "edge.toml" in str(err.value)


def test_power_spec_checks_itself():
    with pytest.raises(DesignError, match="vr_efficiency"):
        PowerSpec(vr_efficiency=-0.1)


def test_power_capped_time_is_the_gpu_rule():
    # 10 J of dynamic energy under 100 W TDP with 60 W static: 0.25 s at least
    assert power_capped_time(0.1, 10.0, 100.0, 60.0) == pytest.approx(0.25)
    assert power_capped_time(1.0, 10.0, 100.0, 60.0) == 1.0
    assert power_capped_time(np.array([0.1]), np.array([10.0]), 100.0, 100.0)[0] == 0.1  # no budget: uncapped


def test_a_systolic_design_over_its_tdp_runs_at_a_capped_clock():
    d = load_design("dc_bf16_128x128")
    free = sim.cost(sim.Gemm(4096, 4096, 4096), d)
    busy_w = free.row()["power_chip_w"]
    tdp = (busy_w + free.idle_power_w["chip"]) / 2  # between idle and the uncapped busy power
    capped = sim.cost(sim.Gemm(4096, 4096, 4096), dataclasses.replace(d, tdp_w=tdp))
    row = capped.row()
    assert capped.bound == "power" and capped.time_s > free.time_s
    assert row["power_chip_w"] == pytest.approx(tdp, rel=1e-9)
    assert capped.clock_hz < d.clock_hz and capped.cycles == free.cycles
    # the dynamic energy is the same work; only the static part grows with the longer time
    assert row["energy_dynamic_chip_j"] == pytest.approx(free.row()["energy_dynamic_chip_j"], rel=1e-9)


def test_gpu_static_split_sums_to_the_models_static_power():
    r = sim.cost(sim.Gemm(256, 256, 256), "gpu_h100", "act=bf16,weight=bf16,acc=fp32")
    static = {k: v for k, v in r.energy_pj.items() if k.startswith("static.")}
    assert sum(static.values()) == pytest.approx(0.25 * 700 * r.time_s * 1e12)
    assert static["static.hbm"] == pytest.approx(5 * 1.0 * r.time_s * 1e12)  # 5 HBM3 stacks at 1 W
    assert r.idle_power_w == pytest.approx({"chip": 175 - 17.5 - 5, "board": 175})


def test_gpu_launch_and_sm_fractions():
    small = sim.cost(sim.Gemm(256, 256, 256), "gpu_h100", "act=bf16,weight=bf16,acc=fp32")
    big = sim.cost(sim.Gemm(8192, 8192, 8192), "gpu_h100", "act=bf16,weight=bf16,acc=fp32")
    assert small.launch_fraction > 0.8 and small.sm_fraction < 0.2  # launch-bound, few tiles
    assert big.launch_fraction < 0.01 and big.sm_fraction > 0.95


def test_energy_per_mac_and_peak_tops_per_w():
    pm = energy_per_mac_pj("tpu_v1")
    assert pm["total"] == pytest.approx(sum(v for k, v in pm.items() if k != "total"))
    eff = peak_tops_per_w("tpu_v1")
    assert eff["core"] > eff["chip"] > eff["board"] > 0
    # core: 2 ops over the array's own pJ per MAC and its leakage
    core_pj = pm["mult"] + pm["add"] + pm["registers"] + pm["leakage.logic"] + pm["leakage.sram"]
    assert eff["core"] == pytest.approx(2 / core_pj)
    gpu = peak_tops_per_w("gpu_h100", "act=fp16,weight=fp16,acc=fp32")
    assert math.isnan(gpu["core"]) and gpu["board"] == pytest.approx(989.4 / 700, rel=0.01)
    with pytest.raises(ValueError, match="GPU"):
        energy_per_mac_pj("gpu_h100")


def test_designs_json_quotes_peak_efficiency(capsys):
    import json

    from asicsim.cli import main

    assert main(["designs", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    tpu = rows["tpu_v1"]["peak"][0]
    assert tpu["peak_tops"] == pytest.approx(91.75, rel=1e-3)
    assert tpu["tops_per_w_core"] > tpu["tops_per_w_chip"] > tpu["tops_per_w_board"] > 0
    h100 = rows["gpu_h100"]
    assert h100["tdp_w"] == 700 and h100["peak"][1]["tops_per_w_core"] is None
    assert h100["idle_power_board_w"] == pytest.approx(175)


def test_lpddr_background_is_the_micron_idd2n_sum():
    """LPDDR4 standby per x16 channel from Micron's currents as DRAMPower ships them (memspecs/
    MICRON_6Gb_LPDDR4-3200_32bit_A.json): IDD2N 2.0 mA x 1.8 V + 27 mA x 1.1 V + 0.75 mA x 1.1 V
    = 34.1 mW (was a 20 mW estimate). edge_int8_32x32: 2 GiB = 2 channels."""
    from asicsim._src.hw.power import dram_background_w

    w, src = dram_background_w("LPDDR4", 12.8, 2)
    assert w == pytest.approx(2 * (1.8 * 2.0 + 1.1 * 27.0 + 1.1 * 0.75) * 1e-3)
    assert "IDD2N" in src and "Micron" in src and "estimate" not in src
    r = sim.cost(sim.Gemm(256, 256, 256), "edge_int8_32x32")
    assert r.energy_pj["dram_background"] * 1e-12 / r.time_s == pytest.approx(w)
