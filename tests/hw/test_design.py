"""Design specs and the designs/ catalog: every shipped design loads with the numbers its sources
give, SCALE-Sim configs convert to the matching catalog designs, and bad files fail with every
problem named (file, field path, value, what is allowed)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import asicsim
from asicsim._src.hw import (
    ArraySpec,
    BufferSpec,
    DesignError,
    SystolicDesign,
    designs_dir,
    list_designs,
    load_design,
)
from asicsim._src.numerics import get_format

INPUTS = Path(__file__).parent / "golden" / "inputs"
CATALOG = list_designs()

# Hand-checked numbers per design: (rows, cols, dataflow, a, b, acc, MACs/s, SRAM KiB, DRAM GB/s).
EXPECTED = {
    # Jouppi et al. ISCA 2017: 256x256 int8 at 700 MHz = 91.75e12 ops/s ("92 TOPS"); 24+4 MiB + FIFO
    "tpu_v1": (256, 256, "ws", "int8", "int8", "int32", 65536 * 700e6, 24576 + 4096 + 256, 34),
    "scalesim_default": (32, 32, "ws", "int8", "int8", "int32", 1024 * 1e9, 3 * 64, 10),
    "scalesim_google": (256, 256, "os", "int8", "int8", "int32", 65536 * 1e9, 6144 * 2 + 2048, 10),
    "edge_int8_32x32": (32, 32, "ws", "int8", "int8", "int32", 1024 * 800e6, 256 + 128 + 32, 12.8),
    "dc_bf16_128x128": (128, 128, "ws", "bfloat16", "bfloat16", "float32", 16384 * 940e6,
                        32768 + 16384 + 4096, 460.8),
    "fp8_128x128": (128, 128, "ws", "float8_e4m3fn", "float8_e4m3fn", "float32", 16384 * 1.5e9,
                    32768 + 12288 + 4096, 819.2),
    # Chen et al. JSSC 2017: 12x14 16-bit PEs at 200 MHz; 108 KB global buffer + 168 x 448 B filter
    # scratchpads; 64-bit link at 60 MHz
    "eyeriss_v1": (12, 14, "ws", "int16", "int16", "int32", 168 * 200e6, 105.5 + 73.5, 0.48),
    # Jouppi et al. ISCA 2023: 8 MXUs of 128x128 bf16 at 1050 MHz (275 TFLOPS); 2 x 16 MiB VMEM +
    # 128 MiB CMEM; HBM2 at 1200 GB/s
    "tpu_v4": (256, 512, "ws", "bfloat16", "bfloat16", "float32", 8 * 16384 * 1050e6, 2 * 16384 + 131072, 1200),
}

GOOD = """
name = "mine"
technology_nm = 22
clock_mhz = 500
[array]
rows = 8
cols = 16
dataflow = "os"
[pe]
a_format = "bf16"
b_format = "e4m3"
acc_format = "fp32"
[buffers.unified]
holds = ["ifmap", "filter", "ofmap"]
capacity_kib = 96
[dram]
kind = "GDDR6"
bandwidth_gbps = 64
"""


def test_catalog_is_what_ships() -> None:
    assert set(CATALOG) == set(EXPECTED)
    assert designs_dir().is_dir()


@pytest.mark.parametrize("name", CATALOG)
def test_catalog_design_numbers(name: str) -> None:
    d = load_design(name)
    rows, cols, flow, a, b, acc, macs, sram_kib, gbps = EXPECTED[name]
    assert d.name == name
    assert (d.array.rows, d.array.cols, d.array.dataflow, d.pes) == (rows, cols, flow, rows * cols)
    assert (d.pe.a_format.name, d.pe.b_format.name, d.pe.acc_format.name) == (a, b, acc)
    assert d.peak_macs_per_s == pytest.approx(macs, rel=1e-12)
    assert d.peak_tops == pytest.approx(2 * macs / 1e12, rel=1e-12)
    assert d.sram_kib == sram_kib
    assert d.dram.bandwidth_gbps == gbps
    assert d.description and d.source  # every catalog design says what it is and where from
    for buf in d.buffers:  # every word width is known: stated, or the operand format's width
        assert d.word_bits(buf.name) in (8, 16, 32)


@pytest.mark.parametrize("name", CATALOG)
def test_catalog_design_is_hashable_value(name: str) -> None:
    """Equal by value, hashable (a dict key / jax.jit static argument), frozen."""
    a = load_design(name)
    b = load_design(designs_dir() / f"{name}.toml")  # a fresh object read from the same file
    assert a == b and hash(a) == hash(b) and a is not b
    assert {a: 1}[b] == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.clock_mhz = 1.0  # type: ignore[misc]
    assert dataclasses.replace(a, clock_mhz=a.clock_mhz + 1) != a


def test_tpu_v1_published_numbers() -> None:
    d = asicsim.load_design("tpu_v1")
    assert d.peak_tops == pytest.approx(91.75, abs=0.01)  # the paper's "92 TOPS"
    assert d.buffer("unified").capacity_bytes == 24 * 2**20
    assert d.buffer("accumulators").capacity_bytes == 4096 * 256 * 4  # 4096 x 256 x 32 bit
    assert d.buffers_holding("filter") == (d.buffer("weight_fifo"),)
    assert (d.technology_nm, d.clock_mhz, d.tdp_w, d.dram.kind) == (28, 700, 75, "DDR3")


def test_jit_static_argument() -> None:
    import jax
    import jax.numpy as jnp

    @jax.jit(static_argnums=0)
    def scaled(design: SystolicDesign, x):
        return x * design.pes

    assert int(scaled(load_design("tpu_v1"), jnp.int32(1))) == 65536


def test_user_toml_path(tmp_path: Path) -> None:
    path = tmp_path / "mine.toml"
    path.write_text(GOOD)
    for ref in (path, str(path)):
        d = load_design(ref)
        assert (d.name, d.pes, d.array.dataflow) == ("mine", 128, "os")
        assert d.pe.b_format == get_format("e4m3") and d.pe.b_format.max == 240  # IEEE-like e4m3
        # no word_bits: the widest held operand (ofmap leaves the array as fp32)
        assert d.word_bits("unified") == 32
        assert [d.operand_bits(op) for op in ("ifmap", "filter", "ofmap")] == [16, 8, 32]
        assert d.static_power_w is None and d.vector is None and d.buffer("unified").banks is None
        assert d.peak_macs_per_s == 128 * 500e6


@pytest.mark.parametrize(("cfg", "name"), [("shipped_scale.cfg", "scalesim_default"),
                                           ("shipped_google.cfg", "scalesim_google")])
def test_scalesim_cfg_matches_catalog(cfg: str, name: str) -> None:
    """A SCALE-Sim .cfg converts to the same design as the catalog entry (but for its labels)."""
    converted = load_design(INPUTS / cfg)
    shipped = load_design(name)
    labels = {"name": "x", "description": "", "source": ""}
    assert dataclasses.replace(converted, **labels) == dataclasses.replace(shipped, **labels)
    assert converted.name == {"shipped_scale.cfg": "scale_example_run_32x32_ws",
                              "shipped_google.cfg": "GoogleTPU_v1_os"}[cfg]


def _error(tmp_path: Path, text: str) -> DesignError:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(DesignError) as info:
        load_design(path)
    assert str(path) in str(info.value)  # the message names the file
    return info.value


@pytest.mark.parametrize(
    ("old", "new", "field", "needle"),
    [
        ('kind = "GDDR6"', 'kind = "GDDR6"\nspeed = 3', "dram.speed", "no such field"),
        ("rows = 8", 'rows = "8"', "array.rows", "an integer in [1, 65536] PEs"),
        ("rows = 8", "rows = 8.5", "array.rows", "an integer in [1, 65536] PEs"),
        ("capacity_kib = 96", "capacity_kib = -96", "buffers.unified.capacity_kib",
         "a finite number in [0.0009765625, 67108864] KiB"),
        ('dataflow = "os"', 'dataflow = "rs"', "array.dataflow", "'os' | 'ws' | 'is'"),
        ('b_format = "e4m3"', 'b_format = "bfloat61"', "pe.b_format", "did you mean 'bfloat16'"),
        ("clock_mhz = 500\n", "", "clock_mhz", "required"),
        ('holds = ["ifmap", "filter", "ofmap"]', 'holds = ["ifmap", "weights"]',
         "buffers.unified.holds", "'psum'"),
        ("capacity_kib = 96", "capacity_kib = 96\ndouble_buffered = 1",
         "buffers.unified.double_buffered", "true or false"),
        ('kind = "GDDR6"', 'kind = "SDRAM"', "dram.kind", "HBM2E"),
        ("[array]", "turbo = true\n[array]", "turbo", "no such field"),
    ],
)
def test_bad_field_is_named(tmp_path: Path, old: str, new: str, field: str, needle: str) -> None:
    assert old in GOOD
    err = _error(tmp_path, GOOD.replace(old, new, 1))
    assert [p[0] for p in err.problems] == [field]
    assert needle in str(err) and f"{field} = " in str(err)


def test_all_errors_of_a_file_together(tmp_path: Path) -> None:
    text = (GOOD.replace("technology_nm = 22", "technology_nm = 0")
            .replace('dataflow = "os"', 'dataflow = "xx"')
            .replace("capacity_kib = 96", "capacity_kib = -1\ncolour = 'red'")
            .replace('acc_format = "fp32"', 'acc_format = "fp322"'))
    err = _error(tmp_path, text)
    fields = sorted(p[0] for p in err.problems)
    assert fields == ["array.dataflow", "buffers.unified.capacity_kib", "buffers.unified.colour",
                      "pe.acc_format", "technology_nm"]
    assert "5 invalid design field(s)" in str(err)


def test_not_a_table_and_bad_toml(tmp_path: Path) -> None:
    err = _error(tmp_path, "dram = 3\n" + GOOD.replace("[dram]\n", "[dram2]\n"))
    assert {p[0] for p in err.problems} >= {"dram", "dram2"}
    assert "valid TOML" in str(_error(tmp_path, "name = = 1"))


def test_unknown_design_name_suggests() -> None:
    with pytest.raises(DesignError, match="did you mean 'tpu_v1'"):
        load_design("tpu-v1")
    with pytest.raises(DesignError, match=r"an existing \.toml or \.cfg file"):
        load_design("no/such/file.toml")


def test_direct_construction_is_validated() -> None:
    with pytest.raises(DesignError) as info:
        BufferSpec(name="b", holds=("ifmap",), capacity_kib=0, banks=0)
    assert sorted(p[0] for p in info.value.problems) == ["banks", "capacity_kib"]
    with pytest.raises(DesignError, match="dataflow"):
        ArraySpec(rows=2, cols=2, dataflow="WS")
    d = load_design("edge_int8_32x32")
    dup = (*d.buffers, d.buffers[0])
    with pytest.raises(DesignError, match="distinct buffer names"):
        dataclasses.replace(d, buffers=dup)
