"""Default energies: published anchors at 45 nm, derived rows, monotonicity, sources, errors."""

import csv
from pathlib import Path

import pytest

from asicsim._src.hw import list_designs, load_design
from asicsim._src.hw.design import DRAM_KINDS as DESIGN_DRAM_KINDS
from asicsim._src.hw.energy import (
    DRAM_KINDS,
    Energy,
    adder_energy_pj,
    dram_energy_pj_per_bit,
    mac_energy_pj,
    multiplier_energy_pj,
    node_scale,
    reference_rows,
    sram_access_energy_pj,
    sram_energy_pj_per_bit,
)
from asicsim._src.hw.energy_table import design_energy_table
from asicsim._src.numerics import get_format

F = get_format


def _csv_value(item: str) -> float:
    (row,) = [r for r in reference_rows() if r["item"] == item and r["category"] == "arith_energy"]
    return float(row["value"])


def test_shipped_csv_matches_the_reference_copy():
    shared = Path(__file__).resolve().parents[2] / "data" / "energy_45nm.csv"  # data/README.md
    assert list(csv.DictReader(shared.read_text().splitlines())) == list(reference_rows())


@pytest.mark.parametrize(("fmt", "pj"), [("int8", 0.2), ("int32", 3.1)])
def test_int_mult_anchors(fmt, pj):
    assert multiplier_energy_pj(F(fmt), F(fmt), 45).pj == pytest.approx(pj, rel=1e-9)


@pytest.mark.parametrize(("fmt", "pj"), [("int8", 0.03), ("int32", 0.1), ("fp16", 0.4), ("fp32", 0.9)])
def test_add_anchors(fmt, pj):
    assert adder_energy_pj(F(fmt), 45).pj == pytest.approx(pj, rel=1e-9)


def test_int16_add_and_mult_near_csv_interpolated_rows():
    assert adder_energy_pj(F("int16")).pj == pytest.approx(0.05, rel=0.1)
    assert multiplier_energy_pj(F("int16"), F("int16")).pj == pytest.approx(0.8, rel=0.25)


@pytest.mark.parametrize(("fmt", "item", "model"), [("fp16", "fp mult", 1.17), ("fp32", "fp mult", 3.51)])
def test_fp_mult_model_within_csv_tolerance_of_published(fmt, item, model):
    bits = "16" if fmt == "fp16" else "32"
    (row,) = [r for r in reference_rows()
              if r["category"] == "arith_energy" and r["item"] == item and r["bits"] == bits]
    e = multiplier_energy_pj(F(fmt), F(fmt), 45).pj
    assert e == pytest.approx(model, abs=0.005)  # the model value the CSV states
    assert e == pytest.approx(float(row["value"]), rel=0.07)  # and the published value


@pytest.mark.parametrize(("fmt", "item"), [
    ("bf16", "fp mult bf16 (e8m7)"), ("float8_e4m3fn", "fp mult fp8 e4m3"),
    ("float8_e5m2", "fp mult fp8 e5m2"), ("float4_e2m1fn", "fp mult fp4 e2m1"),
])
def test_fp_mult_matches_csv_derived_rows(fmt, item):
    assert multiplier_energy_pj(F(fmt), F(fmt)).pj == pytest.approx(_csv_value(item), abs=0.006)


def test_int8_vs_fp16_mult_ratio_tpu_paper():
    ratio = multiplier_energy_pj(F("fp16"), F("fp16")).pj / multiplier_energy_pj(F("int8"), F("int8")).pj
    assert 4 < ratio < 7


@pytest.mark.parametrize(("kib", "pj"), [(8, 10.0), (32, 20.0), (1024, 100.0)])
def test_sram_anchors_per_64bit_access(kib, pj):
    assert sram_access_energy_pj(kib, 64, 45).pj == pytest.approx(pj, rel=1e-9)
    assert sram_energy_pj_per_bit(kib, 45).pj == pytest.approx(pj / 64, rel=1e-9)


def test_monotone_in_significand_width():
    es = [multiplier_energy_pj(F(f), F(f)).pj for f in ("e2m1", "e5m2", "e4m3", "bf16", "fp16", "fp32")]
    assert es == sorted(es)
    ints = [multiplier_energy_pj(F(f"int{b}"), F(f"int{b}")).pj for b in (4, 8, 16, 32)]
    assert ints == sorted(ints)
    adds = [adder_energy_pj(F(f)).pj for f in ("e2m1", "e4m3", "fp16", "fp32")]
    assert adds == sorted(adds) and adds[0] > 0


def test_mixed_formats_between_the_pure_ones():
    lo, hi = (multiplier_energy_pj(F(f), F(f)).pj for f in ("float8_e4m3fn", "bf16"))
    assert lo < multiplier_energy_pj(F("float8_e4m3fn"), F("bf16")).pj < hi


def test_monotone_in_sram_capacity_and_positive_when_extrapolated():
    caps = [0.0625, 1, 4, 8, 16, 32, 256, 1024, 4096, 65536]
    es = [sram_energy_pj_per_bit(c).pj for c in caps]
    assert all(e > 0 for e in es) and es == sorted(es) and len(set(es)) == len(es)
    assert "extrapolated" in sram_energy_pj_per_bit(1).source


def test_smaller_node_lower_energy():
    for kind in ("logic", "sram"):
        fs = [node_scale(n, kind).pj for n in (90, 45, 28, 16, 7)]
        assert fs == sorted(fs, reverse=True) and node_scale(45, kind).pj == 1.0
    m = [mac_energy_pj(F("int8"), F("int8"), F("int32"), n).pj for n in (45, 28, 7)]
    assert m == sorted(m, reverse=True)
    s = [sram_access_energy_pj(32, 8, n).pj for n in (45, 28, 7)]
    assert s == sorted(s, reverse=True)


def test_dram_defaults():
    assert dram_energy_pj_per_bit("HBM2").pj == 3.97
    assert dram_energy_pj_per_bit("GDDR6").pj == 7.5
    assert dram_energy_pj_per_bit("LPDDR4").pj == 13.5
    assert 20 <= dram_energy_pj_per_bit("DDR3").pj <= 40
    assert "placeholder" in dram_energy_pj_per_bit("HBM3").source
    for k in ("DDR4", "DDR5", "LPDDR5", "HBM3E"):
        assert "assumption" in dram_energy_pj_per_bit(k).source
    assert set(DESIGN_DRAM_KINDS) <= set(DRAM_KINDS)  # every kind a design may name has a default


def test_every_result_names_a_source():
    results = [
        multiplier_energy_pj(F("int8"), F("int8"), 7), multiplier_energy_pj(F("bf16"), F("bf16"), 28),
        adder_energy_pj(F("fp32"), 16), mac_energy_pj(F("e4m3"), F("e4m3"), F("fp32"), 4),
        sram_energy_pj_per_bit(100, 28), sram_access_energy_pj(100, 16, 28), node_scale(7, "sram"),
        *(dram_energy_pj_per_bit(k) for k in DRAM_KINDS),
    ]
    for e in results:
        assert isinstance(e, Energy) and e.pj > 0 and e.source.strip()
        assert float(e) == e.pj


@pytest.mark.parametrize("name", list_designs())
def test_design_table_for_every_catalog_design(name):
    d = load_design(name)
    t = design_energy_table(d)
    assert {"mac_mult_pj", "mac_add_pj", "mac_pj", "dram_pj_per_bit"} <= set(t)
    for b in d.buffers:
        assert f"{b.name}.read_pj_per_word" in t and f"{b.name}.write_pj_per_word" in t
    for key, e in t.items():
        assert e.source.strip()
        if key == "register_pj_per_mac" and d.pe.register_energy_pj is None:
            assert e.pj == 0 and e.source.startswith("not priced")  # said, not silent
        else:
            assert e.pj > 0


def test_design_overrides_win():
    import dataclasses

    d = load_design("edge_int8_32x32")
    b0 = dataclasses.replace(d.buffers[0], read_energy_pj=1.25)
    d2 = dataclasses.replace(d, buffers=(b0, *d.buffers[1:]),
                             dram=dataclasses.replace(d.dram, energy_pj_per_bit=9.0),
                             pe=dataclasses.replace(d.pe, mac_energy_pj=0.5))
    t, t2 = design_energy_table(d), design_energy_table(d2)
    key = f"{b0.name}.read_pj_per_word"
    assert t2[key].pj == 1.25 and "read_energy_pj" in t2[key].source and t[key].pj != 1.25
    assert t2[f"{b0.name}.write_pj_per_word"].pj == t[f"{b0.name}.write_pj_per_word"].pj
    assert t2["dram_pj_per_bit"].pj == 9.0 and t2["mac_pj"].pj == 0.5


@pytest.mark.parametrize(("call", "words"), [
    (lambda: dram_energy_pj_per_bit("SDRAM9"), ["'SDRAM9'", "HBM2", "GDDR6"]),
    (lambda: node_scale(0), ["0", "> 0"]),
    (lambda: node_scale(-7), ["-7", "> 0"]),
    (lambda: node_scale(28, "analog"), ["'analog'", "logic", "sram"]),
    (lambda: multiplier_energy_pj(F("int8"), F("int8"), 0), ["0", "> 0"]),
    (lambda: sram_energy_pj_per_bit(0), ["0", "> 0"]),
    (lambda: sram_access_energy_pj(-1, 8), ["-1", "> 0"]),
    (lambda: sram_access_energy_pj(8, 0), ["0", "> 0"]),
])
def test_bad_input_clear_error(call, words):
    with pytest.raises(ValueError) as err:
        call()
    for w in words:
        assert w in str(err.value)
