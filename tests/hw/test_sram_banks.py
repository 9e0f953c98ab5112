"""Banked SRAM energy (asicsim._src.hw.sram_banks), the Stillmaker & Baas node curve
(asicsim._src.hw.node_scaling) and a published-power check of TPU v1."""

from __future__ import annotations

import numpy as np
import pytest

from asicsim._src.hw import (
    BufferSpec,
    Conv,
    cost,
    design_energy_table,
    load_design,
    sram_energy_pj_per_bit,
)
from asicsim._src.hw.energy import node_scale
from asicsim._src.hw.gpu import precision_path
from asicsim._src.hw.gpu_cost import resolve_gpu_formats
from asicsim._src.hw.gpu_model import energy_per_op_pj, generation_constants, load_fit
from asicsim._src.hw.node_scaling import area_factor, energy_factor, table
from asicsim._src.hw.sram_banks import MAX_BANK_KIB, buffer_access_energy_pj, default_banks


# --- node table: the paper's numbers at its nodes --------------------------------------------
def test_node_table_reproduces_the_papers_worked_example():
    # Stillmaker & Baas (2017), corrigendum to Sec. 4.2.1: a 1 pJ/op circuit at 65 nm, 1.3 V,
    # moved to 32 nm (HP) at 0.9 V: EnergyFactor_x = 0.4571, EnergyFactor_y = 2.604, E_x = 0.1755 pJ.
    import csv

    from asicsim._files import read_text_file
    from asicsim._src.hw import node_scaling

    path = node_scaling.Path(node_scaling.__file__).parent / "data" / node_scaling.CSV_NAME
    rows = {(r["node_nm"], r["model"]): r for r in csv.DictReader(
        line for line in read_text_file(path).splitlines() if not line.startswith("#"))}

    def e(node, model, v):
        r = rows[(node, model)]
        return float(r["e2"]) * v * v + float(r["e1"]) * v + float(r["e0"])

    assert e("32", "HP", 0.9) == pytest.approx(0.4571, abs=5e-5)
    assert e("65", "bulk", 1.3) == pytest.approx(2.604, abs=5e-4)
    assert e("32", "HP", 0.9) / e("65", "bulk", 1.3) == pytest.approx(0.1755, abs=5e-4)


def test_node_factors_at_table_nodes_are_the_polynomials_at_nominal_vdd():
    # HP 45 nm at 1.0 V: 1.018 - 0.3107 + 0.1539 = 0.8612; HP 7 nm at 0.7 V:
    # 0.1776*0.49 - 0.09097*0.7 + 0.02447 = 0.047813 (CSV rows, the paper's coefficients)
    assert energy_factor(7)[0] == pytest.approx(0.047813 / 0.8612, rel=1e-4)
    assert energy_factor(45)[0] == 1.0 and node_scale(45).pj == 1.0
    assert area_factor(7)[0] == 0.059 and area_factor(32)[0] == 0.46  # the paper's area factors
    nodes = [n for n, *_ in table()]
    assert nodes == [180, 130, 90, 65, 45, 32, 20, 16, 14, 10, 7]
    es = [energy_factor(n)[0] for n in nodes]
    assert es == sorted(es, reverse=True)  # energy falls at every published node


def test_between_and_outside_the_table_say_so():
    f28, s28 = energy_factor(28)
    assert energy_factor(20)[0] < f28 < energy_factor(32)[0] and "interpolated" in s28
    f4, s4 = energy_factor(4)
    assert 0 < f4 < energy_factor(7)[0] and "extrapolated below" in s4
    assert "extrapolated above" in energy_factor(250)[1]
    for bad in (0, -7, float("nan"), True, "7"):
        with pytest.raises(ValueError, match="technology node"):
            energy_factor(bad)


def test_gpu_and_systolic_models_share_the_node_curve():
    # the GPU model's energy per op moves between nodes by the same factor as node_scale
    fit = load_fit()
    v100, m40 = load_design("gpu_v100"), load_design("gpu_m40")  # 12 nm and 28 nm
    ratio = []
    for d in (v100, m40):
        path = precision_path(d, resolve_gpu_formats(d, None))
        ratio.append(energy_per_op_pj(d, path, generation_constants(fit, d.architecture)[0]))
    assert ratio[0] == pytest.approx(fit["e_simt_pj_12nm"])
    assert ratio[1] / ratio[0] == pytest.approx(node_scale(28).pj / node_scale(12).pj, rel=1e-12)
    assert "e_node_exponent" not in fit


# --- banks ------------------------------------------------------------------------------------
@pytest.mark.parametrize("kib", [2, 8, 32, 100, 1024])
def test_one_bank_is_the_single_array_curve(kib):
    for node in (45, 28, 7):
        pj, src = buffer_access_energy_pj(kib, 1, 64, node)
        assert pj == pytest.approx(64 * sram_energy_pj_per_bit(kib, node).pj, rel=1e-9)
        assert "wire 0 mm" in src
    assert buffer_access_energy_pj(kib, None, 64, 45)[0] == pytest.approx(buffer_access_energy_pj(kib, 1, 64, 45)[0])


def test_monotone_in_capacity_and_vectorised():
    caps = np.geomspace(1, 64 * 1024 * 1024, 200)  # 1 KiB .. 64 GiB
    for banks in (None, 1, 16):
        v, _ = buffer_access_energy_pj(caps, banks, 32, 28)
        assert v.shape == caps.shape and np.all(np.diff(v) > 0)
        scalar = [buffer_access_energy_pj(float(c), banks, 32, 28)[0] for c in caps[::37]]
        assert np.allclose(v[::37], scalar, rtol=1e-12)


def test_big_buffers_get_banks_by_default_and_cost_less_than_one_array():
    assert BufferSpec(name="b", holds=("ifmap",), capacity_kib=4096).banks is None
    assert list(default_banks([1, 1024, 1025, 4096, 24576])) == [1, 1, 2, 4, 24]
    one_array = 32 * sram_energy_pj_per_bit(4096, 28).pj  # one 4 MiB array: 75 pJ at 45 nm, 40 at 28
    banked, src = buffer_access_energy_pj(4096, None, 32, 28)
    assert banked < 0.7 * one_array and "4 bank(s) of 1024 KiB" in src and "estimate" in src
    # the wire term grows with the buffer: same 1 MiB banks, more of them, longer wire
    assert buffer_access_energy_pj(16384, 16, 32, 28)[0] > buffer_access_energy_pj(4096, 4, 32, 28)[0]
    assert MAX_BANK_KIB == 1024


def test_explicit_banks_and_energies_win():
    d = load_design("tpu_v1")
    t = design_energy_table(d)
    assert "24 bank(s)" in t["unified.read_pj_per_word"].source
    assert "4 bank(s)" in t["accumulators.read_pj_per_word"].source
    d2 = load_design("dc_bf16_128x128")  # banks = 16 and 8 given in the file
    src = " ".join(e.source for e in design_energy_table(d2).values())
    assert "(design)" in src
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="SRAM banks"):
            buffer_access_energy_pj(4096, bad, 32, 28)
    with pytest.raises(ValueError, match="SRAM capacity"):
        buffer_access_energy_pj(np.array([1.0, -1.0]), None, 32, 28)


# --- published figure -------------------------------------------------------------------------
def test_tpu_v1_busy_power_near_published():
    """TPU v1 on a busy layer draws clearly less than its TDP, near its measured busy power.

    Jouppi et al., ISCA 2017, Table 2: TDP 75 W, measured idle 28 W and busy 40 W per die (the die:
    the off-chip DDR3 weight memory is not in it: the chip scope of asicsim._src.hw.power, which adds the
    clock, control and idle power the paper measured to the array and buffers).
    Tolerance: +-15 % of 40 W. The 40 W is an average over Google's production workloads, not this
    layer; the SRAM model's bank size (1 MiB) and wire energy are estimates (sram_banks); 15 %
    admits those and rejects the former one-array model (69 W on die, 76 W with DRAM).
    """
    conv = Conv(19, 19, 256, 256, 3, 3, 1, 1, 8)
    r = cost(conv, "tpu_v1")
    assert r.utilization > 0.85  # a busy layer: the array is nearly always computing
    die_w = r.row()["power_chip_w"]  # the die is the chip scope (no DRAM devices, no regulators)
    assert die_w < 0.8 * 75
    assert die_w == pytest.approx(40, rel=0.15)
