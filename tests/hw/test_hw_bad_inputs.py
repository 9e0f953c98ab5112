"""Bad inputs to the hardware model, one row each: design TOML files (systolic and GPU), SCALE-Sim
configs and topologies, operations. Each is a clear error naming the file (where there is one), the
field, the value and what is allowed (issue 16: no tracebacks, nothing absurd accepted silently).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

import asicsim
from asicsim._src.hw import (
    ArraySpec,
    Conv,
    DesignError,
    Elementwise,
    Gemm,
    Rnn,
    ScaleSimFileError,
    load_design,
    read_scalesim_config,
    read_scalesim_topology,
)
from asicsim._src.hw.gpu_model import load_fit
from asicsim._src.hw.limits import Limit
from asicsim._src.hw.operations import AllReduce, OperationError
from asicsim.cli import main

INPUTS = Path(__file__).parent / "golden" / "inputs"
ARRAY = '[array]\nrows = 8\ncols = 8\ndataflow = "ws"\n'
PE = '[pe]\na_format = "int8"\nb_format = "int8"\nacc_format = "int32"\nmac_energy_pj = 0.5\n'
BUFFERS = ('[buffers.ub]\nholds = ["ifmap", "filter", "ofmap"]\ncapacity_kib = 64\nword_bits = 8\n'
           "banks = 2\ndouble_buffered = true\nread_energy_pj = 1\nwrite_energy_pj = 1\n")
DRAM = '[dram]\nkind = "DDR4"\nbandwidth_gbps = 10\nenergy_pj_per_bit = 20\ncapacity_gib = 8\n'
VECTOR = "[vector]\nlanes = 8\nclock_mhz = 700\n"
SYSTOLIC = ('name = "t"\ntechnology_nm = 28\nclock_mhz = 700\nstatic_power_w = 1\ntdp_w = 10\n'
            + ARRAY + PE + BUFFERS + DRAM + VECTOR)
GPU = """kind = "gpu"
name = "g"
launch_year = 2022
process_nm = 4
sm_count = 132
boost_clock_mhz = 1980
tdp_w = 700
fp32_tflops = 67
fp16_tensor_tflops = 989.4
bf16_tensor = true
mem_type = "HBM3"
bandwidth_gbps = 3350
capacity_gib = 80
l2_mib = 50
eff_tensor = 0.8
"""

# (base text, old, new, field path, fragment of what is allowed)
DESIGN_ROWS = [
    # missing tables: "missing keyword-only argument" (TypeError) or a KeyError in cost before
    (SYSTOLIC, ARRAY, "", "array", "a [array] table (required)"),
    (SYSTOLIC, PE, "", "pe", "a [pe] table (required)"),
    (SYSTOLIC, DRAM, "", "dram", "a [dram] table (required)"),
    (SYSTOLIC, BUFFERS, "", "buffers", "one or more [buffers.<name>] tables (required)"),
    # physical ranges: accepted silently before
    (SYSTOLIC, "clock_mhz = 700\nstatic", "clock_mhz = 1e30\nstatic", "clock_mhz", "[1, 10000] MHz"),
    (SYSTOLIC, "clock_mhz = 700\nstatic", "clock_mhz = inf\nstatic", "clock_mhz", "[1, 10000] MHz"),
    (SYSTOLIC, "technology_nm = 28", "technology_nm = 1e6", "technology_nm", "[1, 1000] nm"),
    (SYSTOLIC, "static_power_w = 1", "static_power_w = 1e9", "static_power_w", "[0, 100000] W"),
    (SYSTOLIC, "tdp_w = 10", "tdp_w = inf", "tdp_w", "[1e-06, 100000] W"),
    (SYSTOLIC, "rows = 8", "rows = 9223372036854775807", "array.rows", "[1, 65536] PEs"),
    (SYSTOLIC, "cols = 8", "cols = 65537", "array.cols", "[1, 65536] PEs"),
    (SYSTOLIC, "mac_energy_pj = 0.5", "mac_energy_pj = 1e30", "pe.mac_energy_pj", "[1e-06, 10000] pJ"),
    (SYSTOLIC, "capacity_kib = 64", "capacity_kib = 1e30", "buffers.ub.capacity_kib",
     "[0.0009765625, 67108864] KiB"),
    (SYSTOLIC, "capacity_kib = 64", "capacity_kib = 1e-9", "buffers.ub.capacity_kib", "one byte"),
    (SYSTOLIC, "word_bits = 8", "word_bits = 100000", "buffers.ub.word_bits", "[1, 8192] bits"),
    (SYSTOLIC, "banks = 2", "banks = 1099511627776", "buffers.ub.banks", "[1, 65536] banks"),
    (SYSTOLIC, "banks = 2", "banks = 0", "buffers.ub.banks", "[1, 65536] banks"),  # omit it to derive
    (SYSTOLIC, "banks = 2", "banks = 2.5", "buffers.ub.banks", "an integer in [1, 65536] banks"),
    (SYSTOLIC, "read_energy_pj = 1", "read_energy_pj = inf", "buffers.ub.read_energy_pj",
     "[1e-06, 1000000] pJ per word"),
    (SYSTOLIC, "write_energy_pj = 1", "write_energy_pj = nan", "buffers.ub.write_energy_pj",
     "[1e-06, 1000000] pJ per word"),
    (SYSTOLIC, "bandwidth_gbps = 10", "bandwidth_gbps = inf", "dram.bandwidth_gbps",
     "[0.001, 1000000] GB/s"),
    (SYSTOLIC, "bandwidth_gbps = 10", "bandwidth_gbps = 1e-9", "dram.bandwidth_gbps",
     "[0.001, 1000000] GB/s"),
    (SYSTOLIC, "energy_pj_per_bit = 20", "energy_pj_per_bit = 1e9", "dram.energy_pj_per_bit",
     "[0.001, 1000] pJ/bit"),
    (SYSTOLIC, "capacity_gib = 8", "capacity_gib = 1e30", "dram.capacity_gib", "[9.313225746154785e-10, 65536] GiB"),
    (SYSTOLIC, "lanes = 8", "lanes = 1000000000", "vector.lanes", "[1, 65536] lanes"),
    (SYSTOLIC, 'dataflow = "ws"', 'dataflow = "ws"\nsync_cycles = -1', "array.sync_cycles",
     "[0, 1000000000] cycles per operation"),
    (SYSTOLIC, 'dataflow = "ws"', 'dataflow = "ws"\nsync_cycles = "10"', "array.sync_cycles", "a finite number"),
    (SYSTOLIC, 'dataflow = "ws"', 'dataflow = "ws"\nbypass_unused = "yes"', "array.bypass_unused",
     "true or false"),
    (SYSTOLIC, 'dataflow = "ws"', 'dataflow = "ws"\nbypass_unused = true', "array.bypass_unused_source",
     "required with bypass_unused = true"),
    (SYSTOLIC, 'dataflow = "ws"', 'dataflow = "ws"\nbypass_unused = true\nbypass_unused_source = 3',
     "array.bypass_unused_source", "a string"),
    (SYSTOLIC, "tdp_w = 10", "tdp_w = 1e-12", "tdp_w", "[1e-06, 100000] W"),
    (SYSTOLIC, "capacity_gib = 8", "capacity_gib = 1e-12", "dram.capacity_gib", "one byte"),
    (SYSTOLIC, "lanes = 8\nclock_mhz = 700", "lanes = 8\nclock_mhz = 1e30", "vector.clock_mhz",
     "[1, 10000] MHz"),
    # wrong types (these were already errors; kept so they stay so)
    (SYSTOLIC, "double_buffered = true", 'double_buffered = "no"', "buffers.ub.double_buffered",
     "true or false"),
    (SYSTOLIC, "technology_nm = 28", 'technology_nm = "28"', "technology_nm", "a finite number"),
    (SYSTOLIC, 'holds = ["ifmap", "filter", "ofmap"]', "holds = {ifmap = 1}", "buffers.ub.holds",
     "a non-empty list"),
    (SYSTOLIC, "rows = 8", "rows = true", "array.rows", "an integer"),
    # [[pe.modes]] (asicsim._src.hw.native): native MAC modes, each checked with its path
    (SYSTOLIC, "mac_energy_pj = 0.5", 'mac_energy_pj = 0.5\nmodes = [{a = "int16", b = "int8", acc = "int32", rate = 2.0}]', "pe.modes[0].rate", "a number in (0, 1]"),
    (SYSTOLIC, "mac_energy_pj = 0.5", 'mac_energy_pj = 0.5\nmodes = [{a = "int16", b = "int8", acc = "int32", rate = 0}]', "pe.modes[0].rate", "a number in (0, 1]"),
    (SYSTOLIC, "mac_energy_pj = 0.5", 'mac_energy_pj = 0.5\nmodes = [{a = "int16", b = "int8", acc = "int32", rate = true}]', "pe.modes[0].rate", "a number in (0, 1]"),
    (SYSTOLIC, "mac_energy_pj = 0.5", 'mac_energy_pj = 0.5\nmodes = [{a = "int16", b = "int8", acc = "int32"}]', "pe.modes[0].rate", "a number in (0, 1]"),
    (SYSTOLIC, "mac_energy_pj = 0.5", 'mac_energy_pj = 0.5\nmodes = [{a = "int99", b = "int8", acc = "int32", rate = 1}]', "pe.modes[0].a", "a format name"),
    (SYSTOLIC, "mac_energy_pj = 0.5", 'mac_energy_pj = 0.5\nmodes = [{b = "int8", acc = "int32", rate = 1}]', "pe.modes[0].a", "a format name (required)"),
    (SYSTOLIC, "mac_energy_pj = 0.5", 'mac_energy_pj = 0.5\nmodes = [{a = "int16", b = "int8", acc = "int32", rate = 1, speed = 2}]', "pe.modes[0].speed", "no such field"),
    (SYSTOLIC, "mac_energy_pj = 0.5", 'mac_energy_pj = 0.5\nmodes = "int8"', "pe.modes", "a list of tables"),
    (SYSTOLIC, "mac_energy_pj = 0.5", 'mac_energy_pj = 0.5\nmodes = [1]', "pe.modes[0]", "a table with fields"),
    (SYSTOLIC, "mac_energy_pj = 0.5", 'mac_energy_pj = 0.5\nmodes = [{a = "int4", b = "int4", acc = "int32", rate = 1}, {a = "int4", b = "int4", acc = "int32", rate = 0.5}]', "pe.modes[1]", "distinct (a, b, acc) modes"),
    (SYSTOLIC, "mac_energy_pj = 0.5", 'mac_energy_pj = 0.5\nmodes = [{a = "int8", b = "int8", acc = "int32", rate = 0.5}]', "pe.modes[0].rate", "1: the PE's own"),
    # GPU designs: a list where a string goes was a TypeError; the ranges were missing
    (GPU, 'mem_type = "HBM3"', 'mem_type = ["HBM3"]', "mem_type", "GDDR5 | GDDR5X"),
    (GPU, "boost_clock_mhz = 1980", "boost_clock_mhz = 1e30", "boost_clock_mhz", "[1, 10000] MHz"),
    (GPU, "process_nm = 4", "process_nm = 0.001", "process_nm", "[1, 1000] nm"),
    (GPU, "sm_count = 132", "sm_count = 9223372036854775807", "sm_count", "[1, 65536] SMs"),
    (GPU, "tdp_w = 700", "tdp_w = inf", "tdp_w", "[1e-06, 100000] W"),
    (GPU, "fp32_tflops = 67", "fp32_tflops = 1e30", "fp32_tflops", "[1e-06, 1000000] x 1e12 ops/s"),
    (GPU, "fp16_tensor_tflops = 989.4", "fp16_tensor_tflops = inf", "fp16_tensor_tflops",
     "[1e-06, 1000000] x 1e12 ops/s"),
    (GPU, "bandwidth_gbps = 3350", "bandwidth_gbps = inf", "bandwidth_gbps", "GB/s"),
    (GPU, "capacity_gib = 80", "capacity_gib = 1e30", "capacity_gib", "[9.313225746154785e-10, 65536] GiB"),
    (GPU, "l2_mib = 50", "l2_mib = inf", "l2_mib", "[9.5367431640625e-07, 65536] MiB"),
    (GPU, "fp32_tflops = 67", "fp32_tflops = 1e-12", "fp32_tflops", "1 Mop/s up to"),
    (GPU, "launch_year = 2022", "launch_year = 20220", "launch_year", "[1990, 2100]"),
    (GPU, "bf16_tensor = true", 'bf16_tensor = "no"', "bf16_tensor", "true or false"),
    (GPU, "eff_tensor = 0.8", "eff_tensor = 1.5", "eff_tensor", "(0, 1]"),
    (GPU, "bf16_tensor = true", "mxfp8_tensor = true", "mxfp8_tensor", "false unless fp8_tflops is given"),
    # issue 29 item 18: cross-field checks
    (SYSTOLIC, "word_bits = 8", "word_bits = 3", "buffers.ub.word_bits", "at least 8 bits: one int8 element"),
    (SYSTOLIC, 'acc_format = "int32"', 'acc_format = "int4"', "pe.acc_format",
     "a format holding every int8 x int8 product exactly (16 bits, signed: e.g. int32 or fp32)"),
    (SYSTOLIC, "mac_energy_pj = 0.5\n", 'mac_energy_pj = 0.5\n[[pe.modes]]\na = "uint8"\nb = "uint8"\n'
     'acc = "int16"\nrate = 0.5\n', "pe.modes[0].acc", "every uint8 x uint8 product exactly (16 bits: e.g. int32 or fp32)"),
    (SYSTOLIC, 'a_format = "int8"\nb_format = "int8"\nacc_format = "int32"',
     'a_format = "fp32"\nb_format = "fp32"\nacc_format = "fp8_e4m3"', "pe.acc_format",
     "every value of the operands (float32, float32): the same kind"),
    (SYSTOLIC, 'acc_format = "int32"', 'acc_format = "mxfp8"', "pe.acc_format", "a scalar format"),
    (SYSTOLIC, "static_power_w = 1", "static_power_w = 20", "static_power_w", "at most tdp_w (10 W)"),
]


@pytest.mark.parametrize(("base", "old", "new", "field", "allowed"), DESIGN_ROWS,
                         ids=[f"{r[3]}={r[2][:24]!r}" for r in DESIGN_ROWS])
def test_bad_design_file(tmp_path: Path, base: str, old: str, new: str, field: str,
                         allowed: str) -> None:
    assert old in base
    path = tmp_path / "bad.toml"
    path.write_text(base.replace(old, new, 1))
    with pytest.raises(DesignError) as info:  # the Python API: asicsim.cost on the file
        asicsim.cost(Gemm(8, 8, 8), path)
    assert [p[0] for p in info.value.problems] == [field]
    assert str(path) in str(info.value) and f"{field} = " in str(info.value)
    assert allowed in str(info.value)


def test_a_buffer_smaller_than_an_array_tile_is_said_in_the_result(tmp_path: Path) -> None:
    path = tmp_path / "small.toml"
    path.write_text(SYSTOLIC.replace("capacity_kib = 64", "capacity_kib = 0.03125"))  # 32 bytes
    r = asicsim.cost(Gemm(64, 64, 64), path)
    assert any("buffer(s) smaller than one 8x8 array tile" in n and "ub (0.03125 KiB < 0.1875 KiB)" in n for n in r.notes)
    assert not asicsim.cost(Gemm(64, 64, 64), load_design("edge_int8_32x32")).notes


def test_good_bases_load(tmp_path: Path) -> None:
    for i, text in enumerate((SYSTOLIC, GPU)):
        (tmp_path / f"{i}.toml").write_text(text)
        assert asicsim.cost(Gemm(8, 8, 8), tmp_path / f"{i}.toml").time_s > 0


def _latin1(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode("latin-1"))
    return path


def test_non_utf8_design_file_is_named(tmp_path: Path) -> None:
    path = _latin1(tmp_path, "d.toml", SYSTOLIC.replace('name = "t"', 'name = "café"'))
    with pytest.raises(DesignError, match=r"not UTF-8 text \(byte 0xe9 at offset 11\)") as info:
        load_design(path)
    assert str(path) in str(info.value)


# built in Python: the same checks as a file (a design without buffers was a KeyError in cost)
CODE_ROWS = [
    (lambda d: replace(d, buffers=()), "buffers", "a non-empty tuple"),
    (lambda d: replace(d, buffers=3), "buffers", "a non-empty tuple"),
    (lambda d: ArraySpec(rows=2**63 - 1, cols=2, dataflow="ws"), "rows", "[1, 65536] PEs"),
    (lambda d: replace(d, clock_mhz=1e30), "clock_mhz", "[1, 10000] MHz"),
]


@pytest.mark.parametrize(("build", "field", "allowed"), CODE_ROWS)
def test_bad_design_in_code(build, field: str, allowed: str) -> None:
    with pytest.raises(DesignError) as info:
        build(load_design("scalesim_default"))
    assert [p[0] for p in info.value.problems] == [field] and allowed in str(info.value)


def test_limit_rejects_bools_and_huge_ints() -> None:
    lim = Limit(1, 10, "", "test", integer=True)
    assert lim.ok(10) and not lim.ok(True) and not lim.ok(10**400) and not lim.ok(5.0)
    assert not Limit(0, 1, "", "t", lo_open=True).ok(float("nan"))


# --- SCALE-Sim configs ------------------------------------------------------------------------
CFG = (INPUTS / "shipped_scale.cfg").read_text()
CFG_ROWS = [  # (old, new, message fragment)
    ("ArrayHeight:    32", "ArrayHeight:    100000000", r"'ArrayHeight' = 100000000 \(allowed: an integer in \[1, 65536\]"),
    ("ArrayWidth:     32", "ArrayWidth:     9223372036854775807", r"'ArrayWidth' = 9223372036854775807"),
    ("IfmapSramSzkB:   64", "IfmapSramSzkB:   1000000000000", r"'IfmapSramSzkB' = 1000000000000 .*KiB"),
    ("OfmapSramSzkB:   64", "OfmapSramSzkB:   999999999999", r"'OfmapSramSzkB' = 999999999999"),
    ("Bandwidth : 10", "Bandwidth : 1000000000", r"'Bandwidth' = 1000000000 .*words/cycle"),
    ("IfmapSRAMBankBandwidth: 10", "IfmapSRAMBankBandwidth: 1000000000", r"'IfmapSRAMBankBandwidth'"),
    ("FilterSRAMBankBandwidth: 10", "FilterSRAMBankBandwidth: 0", r"'FilterSRAMBankBandwidth' = 0"),
    ("Dataflow : ws", "Dataflow : ws%", r"Dataflow = 'ws%' \(allowed: os, ws, is\)"),  # was a traceback
    ("SparsitySupport : false", "SparsitySupport : maybe", r"SparsitySupport = 'maybe' is not a boolean"),
    ("UseRamulatorTrace: False", "UseRamulatorTrace: yes", r"UseRamulatorTrace = 'yes' is not supported"),
]


@pytest.mark.parametrize(("old", "new", "match"), CFG_ROWS, ids=[r[1] for r in CFG_ROWS])
def test_bad_scalesim_config(tmp_path: Path, old: str, new: str, match: str) -> None:
    assert old in CFG
    path = tmp_path / "bad.cfg"
    path.write_text(CFG.replace(old, new, 1))
    with pytest.raises(ScaleSimFileError, match=match) as info:
        read_scalesim_config(path)
    assert str(path) in str(info.value)
    with pytest.raises(DesignError, match=match):  # the same through load_design / asicsim.cost
        asicsim.cost(Gemm(8, 8, 8), path)


def test_scalesim_percent_and_false_words(tmp_path: Path) -> None:
    """A '%' is a character (configparser's interpolation made it a traceback); configparser's
    false words (no, off, 0) are false, as SCALE-Sim's own reader takes them."""
    path = tmp_path / "p.cfg"
    path.write_text(CFG.replace("run_name = scale_example_run_32x32_ws", "run_name = 50%_sparse")
                    .replace("SparsitySupport : false", "SparsitySupport : no"))
    assert load_design(path).name == "50%_sparse"


def test_non_utf8_scalesim_files_are_named(tmp_path: Path) -> None:
    cfg = _latin1(tmp_path, "c.cfg", "# café\n" + CFG)
    csv = _latin1(tmp_path, "t.csv", "Layer,M,N,K,\ncafé,3,4,5,\n")
    for path, read in ((cfg, read_scalesim_config), (csv, read_scalesim_topology)):
        with pytest.raises(ScaleSimFileError, match=r"not UTF-8 text \(byte 0xe9") as info:
            read(path)
        assert str(path) in str(info.value)
    with pytest.raises(DesignError, match=r"c\.cfg: not UTF-8"):
        load_design(cfg)


@pytest.mark.parametrize(("text", "match"), [
    ("secret line one\nsecond\n", r"line 1: a line before any \[section\] header"),
    ("[general]\nrun_name = x\nrun_name = y\n", r"line 3: key 'run_name' in \[general\] given twice"),
    ("[general]\nrun_name = x\nhunter2\n", r"line\(s\) 3: neither a \[section\] header nor"),
    ("[general]\n[general]\n", r"line 2: section \[general\] given twice"),
])
def test_a_cfg_that_is_no_scalesim_config_is_said_without_its_content(tmp_path: Path, text: str, match: str) -> None:
    path = tmp_path / "x.cfg"
    path.write_text(text)
    with pytest.raises(DesignError, match=match) as info:
        load_design(path)
    assert "secret" not in str(info.value) and "hunter2" not in str(info.value)


def test_a_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    for name, text in (("d.toml", SYSTOLIC), ("g.toml", GPU), ("c.cfg", CFG)):
        (tmp_path / name).write_bytes(b"\xef\xbb\xbf" + text.encode())
        assert load_design(tmp_path / name).name
    (tmp_path / "t.csv").write_bytes(b"\xef\xbb\xbfLayer,M,N,K,\nL1,3,4,5,\n")
    assert read_scalesim_topology(tmp_path / "t.csv").layer_names == ("L1",)


def test_format_files_named_in_a_design_resolve_beside_it(tmp_path: Path, monkeypatch) -> None:
    """A design's format paths are relative to the design file's folder, not the current one."""
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "my8.toml").write_text('name = "my8"\nkind = "int"\nbits = 8\n')
    (tmp_path / "d" / "mx.toml").write_text('name = "mymx"\nkind = "block"\nelement = "my8.toml"\n'
                                            'scale = "e8m0fnu"\nblock_size = 32\n')
    (tmp_path / "d" / "x.toml").write_text(SYSTOLIC.replace('a_format = "int8"', 'a_format = "my8.toml"')
                                           .replace("[dram]", '[[pe.modes]]\na = "my8.toml"\nb = "my8.toml"\n'
                                                    'acc = "int32"\nrate = 1.0\n\n[dram]'))
    monkeypatch.chdir(tmp_path)
    d = load_design("d/x.toml")
    assert d.pe.a_format.name == "my8"
    assert asicsim.get_format("d/mx.toml").element.name == "my8"  # a block format's element too


@pytest.mark.parametrize(("line", "match"), [
    ("L1,3,4,1099511627776,", r"field 'K' = 1099511627776 \(allowed: an integer in \[1, 2147483647\]"),
    ("L1,3,2147483648,5,", r"field 'N' = 2147483648"),
])
def test_topology_dimension_range(tmp_path: Path, line: str, match: str) -> None:
    path = tmp_path / "t.csv"
    path.write_text(f"Layer,M,N,K,\n{line}\n")
    with pytest.raises(ScaleSimFileError, match=match):
        read_scalesim_topology(path)


# --- operations -------------------------------------------------------------------------------
OP_ROWS = [  # (build, message fragment)
    (lambda: Gemm(-5, 10, 10), "gemm: M = -5; allowed: an integer in [1, 2147483647]"),
    (lambda: Gemm(2**62, 2, 2), "gemm: M = 4611686018427387904; allowed: an integer in [1, 2147483647]"),
    (lambda: Gemm(2**31 - 1, 2**31 - 1, 1), "gemm: C (M x N) elements = 4611686014132420609"),
    (lambda: Conv(8, 8, 1, 1, 3, 3, padding=10**20), "conv: padding = 100000000000000000000"),
    (lambda: Conv(8, 8, 1, 1, 3, 3, stride=2**40), "conv: stride = 1099511627776"),
    (lambda: Rnn("lstm", 2**40, 1, 1), "rnn: hidden = 1099511627776"),
    (lambda: Rnn("gru", 2**30, 2**30, 1), "rnn: A (M x K) elements"),
    (lambda: Elementwise(2**60), "elementwise: elements = 1152921504606846976"),
    (lambda: AllReduce(10, 2, bits_per_element=10**6), "allreduce: bits_per_element = 1000000"),
]


@pytest.mark.parametrize(("build", "message"), OP_ROWS)
def test_bad_operation(build, message: str) -> None:
    with pytest.raises(OperationError) as info:
        build()
    assert message in str(info.value)


def test_non_utf8_fit_file_is_named(tmp_path: Path) -> None:
    path = _latin1(tmp_path, "fit.toml", "# café\n[constants]\n")
    with pytest.raises(ValueError, match=r"fit\.toml: not UTF-8 text"):
        load_fit(path)


# --- the CLI: a one-line error, no traceback ----------------------------------------------------
@pytest.mark.parametrize(("text", "suffix", "needle"), [
    (SYSTOLIC.replace(ARRAY, ""), ".toml", "array = '<missing>'"),
    (SYSTOLIC.replace(BUFFERS, ""), ".toml", "buffers = '<missing>'"),
    (SYSTOLIC.replace("clock_mhz = 700\nstatic", "clock_mhz = 1e30\nstatic"), ".toml", "[1, 10000] MHz"),
    (CFG.replace("ArrayHeight:    32", "ArrayHeight:    100000000"), ".cfg", "ArrayHeight"),
    (CFG.replace("Dataflow : ws", "Dataflow : %"), ".cfg", "Dataflow = '%'"),
])
def test_cli_cost_bad_design(tmp_path: Path, capsys, text: str, suffix: str, needle: str) -> None:
    path = tmp_path / f"bad{suffix}"
    path.write_text(text)
    assert main(["cost", "--design", str(path), "--gemm", "64,64,64"]) == 2
    err = capsys.readouterr().err
    assert needle in err and str(path) in err and "Traceback" not in err
