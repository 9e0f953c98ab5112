"""Both design kinds answer one interface (asicsim._src.hw.interface.Design), and no consumer outside
asicsim/hw asks a design which class it is."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest

import asicsim.hw as hw
from asicsim._src.hw.cost import CostResult
from asicsim._src.hw.design_checks import DesignError
from asicsim._src.hw.design_files import design_from_any_table
from asicsim._src.hw.family import family_key
from asicsim._src.hw.gpu_cost import gpu_cost_many
from asicsim._src.hw.interface import DESIGN_KINDS, Design, WeightBuffer, roof
from asicsim._src.hw.operations import Gemm, Rnn
from asicsim._src.workloads.deepbench import RecurrentRnn

PACKAGE = Path(__file__).resolve().parents[2] / "asicsim"
FP16 = {"act": "fp16", "weight": "fp16", "acc": "fp32"}
INT8 = {"act": "int8", "weight": "int8", "acc": "int32"}


def _executes(d, formats) -> bool:
    try:
        hw.cost_many([Gemm(8, 8, 8)], d, formats)
    except hw.OperationError:
        return False
    return True


@pytest.mark.parametrize("name", hw.list_designs(None))
def test_every_catalog_design_answers_the_interface(name):
    d = hw.load_design(name)
    assert isinstance(d, Design) and d.kind in DESIGN_KINDS and d.name == name
    for f in (None, FP16, INT8):
        peak = d.peak_ops_per_s(f)
        runs = f is None or _executes(d, f)
        assert (math.isfinite(peak) and peak > 0) if runs else math.isnan(peak), (name, f)
    assert math.isfinite(d.dram_bytes_per_s) and d.dram_bytes_per_s > 0
    assert math.isnan(d.power_w) or d.power_w > 0
    assert isinstance(d.has_vector_unit, bool)
    (r,) = hw.cost_many([Gemm(256, 256, 256)], d)  # a design describes; the pricing front end prices
    assert isinstance(r, CostResult) and r.design == name and r.time_s > 0 and r.energy_total_pj > 0
    assert r.macs == 256**3
    key = family_key(d)
    assert key is None or hash(key) == hash(family_key(d))
    assert not hasattr(d, "cost_many") and not hasattr(d, "family_key")  # issue 31 item 7
    wb = d.weight_buffer()
    assert wb is None or (isinstance(wb, WeightBuffer) and 0 < wb.resident_kib <= wb.capacity_kib)
    assert set(roof(d)) == {"design_kind", "peak_ops_per_s", "dram_bytes_per_s", "power_w", "idle_power_chip_w",
                            "idle_power_board_w", "peak_flops_per_w_board"}  # idle power, peak per board W (issue 30)
    from asicsim._src.hw.efficiency import peak_tops_per_w
    assert roof(d)["peak_flops_per_w_board"] == pytest.approx(peak_tops_per_w(d)["board"] * 1e12)


def test_tpu_v1_published_numbers():
    """Jouppi et al., ISCA 2017, Table 2 and Sec. 2: 256x256 int8 MACs at 700 MHz = 92 TOPS
    (91.75), DDR3 weight memory at 34 GB/s, TDP 75 W per die; the 4-tile 8-bit Weight FIFO
    (4 x 64 KiB, double-buffered as designs/tpu_v1.toml says)."""
    d = hw.load_design("tpu_v1")
    assert d.peak_ops_per_s() == pytest.approx(2 * 256 * 256 * 700e6, rel=1e-12)
    assert d.peak_ops_per_s() / 1e12 == pytest.approx(92, rel=0.005)
    # its native modes (Sec. 2): 16-bit x 16-bit at a quarter of the int8 peak; fp16 not at all
    assert d.peak_ops_per_s("act=int16,weight=int16") == d.peak_ops_per_s() / 4
    assert math.isnan(d.peak_ops_per_s(FP16))
    assert d.peak_tops == d.peak_ops_per_s() / 1e12
    assert d.dram_bytes_per_s == 34e9
    assert d.power_w == 75
    # all 256 KiB can keep weights resident: the mapper double-buffers per operation
    assert d.weight_buffer() == WeightBuffer(capacity_kib=256, resident_kib=256, double_buffered=True, weight_bits=8)


def test_v100_published_numbers():
    """NVIDIA Tesla V100 SXM2 datasheet (designs/gpu_v100.toml): 15.7 TFLOPS fp32, 125 TFLOPS fp16
    tensor cores, DP4A int8 at 4 x fp32 (62.8 TOPS, derived), 900 GB/s HBM2, 300 W."""
    d = hw.load_design("gpu_v100")
    assert d.peak_ops_per_s() == pytest.approx(15.7e12)
    assert d.peak_ops_per_s(FP16) == pytest.approx(125e12)
    assert d.peak_ops_per_s("act=int8,weight=int8,acc=int32") == pytest.approx(4 * 15.7e12)
    assert d.dram_bytes_per_s == 900e9
    assert d.power_w == 300
    assert d.weight_buffer() is None and family_key(d) is None and d.has_vector_unit


def test_systolic_power_is_nan_without_a_published_tdp():
    """dc_bf16_128x128.toml omits tdp_w (one MXU of a chip): no power is made up."""
    assert math.isnan(hw.load_design("dc_bf16_128x128").power_w)
    assert hw.load_design("edge_int8_32x32").power_w == 2  # its file's chosen edge envelope


def test_gpu_prices_an_rnn_without_input_projection_as_its_lowering_says():
    """DeepBench's RNN kernels (RecurrentRnn: the recurrent GEMMs only, CUDNN_SKIP_INPUT) go to
    the GPU model with rnn_skip_input; a full Rnn keeps its input projection; a mixed list is
    priced op by op in order."""
    d = hw.load_design("gpu_v100")
    rec = RecurrentRnn("gru", 512, 16, 25)
    full = Rnn("gru", 512, 16, 25)
    g = Gemm(64, 512, 512)
    (skip,) = gpu_cost_many([rec], d, rnn_skip_input=True)
    (with_input,) = gpu_cost_many([full], d)
    assert hw.cost_many([rec], d)[0].time_s == skip.time_s
    assert hw.cost_many([full], d)[0].time_s == with_input.time_s
    assert skip.time_s < with_input.time_s  # the input projection is real work
    mixed = hw.cost_many([g, rec, full], d)
    assert [r.time_s for r in mixed] == [gpu_cost_many([g], d)[0].time_s, skip.time_s, with_input.time_s]
    assert [r.operation for r in mixed] == [g.label, rec.label, full.label]


def test_with_weight_buffer():
    d = hw.load_design("tpu_v1").with_weight_buffer(1024)
    assert d.name == "tpu_v1_wbuf1024KiB" and d.weight_buffer().capacity_kib == 1024
    assert d.buffer("unified").capacity_kib == 24576  # the other buffers stay
    with pytest.raises(DesignError, match=r"(?s)gpu_v100: .*buffers = .<none>.; allowed: a design with a weight buffer"):
        hw.load_design("gpu_v100").with_weight_buffer(1024)


def test_design_from_any_table_names_a_bad_kind():
    """Sweeps' design spaces build designs from tables through it: a kind other than systolic or
    gpu was once taken for systolic without a word."""
    with pytest.raises(DesignError, match=r"kind = 'tpu'; allowed: 'systolic' \(or omitted\) \| 'gpu'"):
        design_from_any_table({"kind": "tpu", "name": "x"}, "space")
    table = {"name": "g", "kind": "gpu", "process_nm": 12, "sm_count": 80, "boost_clock_mhz": 1530,
             "tdp_w": 300, "fp32_tflops": 15.7, "mem_type": "HBM2", "bandwidth_gbps": 900,
             "capacity_gib": 16, "l2_mib": 6}
    assert design_from_any_table(table).kind == "gpu"


# --- no consumer dispatches on the design's type ------------------------------------------------

DESIGN_CLASSES = {"SystolicDesign", "GpuDesign"}
#: Fields only one kind has: reading them through getattr/hasattr is asking which kind it is.
KIND_FIELDS = {"array", "pe", "buffers", "dram", "vector", "tdp_w", "bandwidth_gbps", "fp32_tflops",
               "int8_path", "sm_count", "boost_clock_mhz", "mem_type", "clock_mhz"}


def _names(node) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}


def _reads_kind(node) -> bool:
    """``x.kind``, ``x.design_kind``, ``t["kind"]``, ``t.get("kind")`` / ``t.pop("kind", ...)``
    (a design object's kind or a design table's; the report's ``df["design_kind"]`` reads
    finished records' labels to pick the GPU baselines it compares against, and is not one)."""
    if isinstance(node, ast.Attribute):
        return node.attr in ("kind", "design_kind")
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value == "kind"
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("get", "pop") and bool(node.args)
            and isinstance(node.args[0], ast.Constant) and node.args[0].value == "kind")


def dispatches(source: str) -> list[str]:
    """Lines of ``source`` that ask a design its type: isinstance/issubclass naming a design class,
    ``x.kind == "gpu"``-style comparisons, getattr/hasattr of a field one kind has, importing a
    design class or the GPU model's pricing directly."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in ("isinstance", "issubclass") and _names(node) & DESIGN_CLASSES:
                out.append(f"{node.lineno}: {node.func.id} on a design class")
            if (node.func.id in ("getattr", "hasattr") and len(node.args) >= 2
                    and isinstance(node.args[1], ast.Constant) and node.args[1].value in KIND_FIELDS):
                out.append(f"{node.lineno}: {node.func.id}(..., {node.args[1].value!r})")
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            kind_attr = any(_reads_kind(s) for s in sides)
            kind_const = any(isinstance(c, ast.Constant) and c.value in DESIGN_KINDS
                             for s in sides for c in [s, *getattr(s, "elts", ())])
            if kind_attr and kind_const:
                out.append(f"{node.lineno}: compares a design kind")
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("asicsim._src.hw"):
            bad = {a.name for a in node.names} & (DESIGN_CLASSES | {"gpu_cost_many"})
            if bad:
                out.append(f"{node.lineno}: imports {sorted(bad)}")
    return sorted(out, key=lambda line: int(line.split(":")[0]))


def _consumers() -> list[Path]:
    files = [PACKAGE / "cli.py", *PACKAGE.glob("_src/*/cli.py")]
    for layer in ("workloads", "system", "sweep", "report"):
        files += (PACKAGE / "_src" / layer).rglob("*.py")
    return sorted(set(files))


def test_the_scanner_finds_the_old_dispatches():
    """The dispatches this interface replaced (sweep/points.py, system/batching.py,
    workloads/deepbench.py before it) are caught, so the test below can fail."""
    old = '''
from asicsim._src.hw.gpu import GpuDesign
from asicsim._src.hw.gpu_cost import gpu_cost_many
if isinstance(design, GpuDesign): pass
if kind == "rnn" and isinstance(spec, (SystolicDesign, int)): pass
gates = getattr(spec, "vector", True) is not None
bufs = [b for b in getattr(d, "buffers", ())]
if d.kind == "gpu": pass
if "systolic" != design.kind: pass
if t.pop("kind", "systolic") == "gpu": pass
if table["kind"] in ("gpu",): pass
'''
    assert [line.split(":")[0] for line in dispatches(old)] == [str(i) for i in range(2, 12)]
    assert dispatches('if op.kind == "rnn": pass\nx = getattr(w, "eval_every", None)\n'
                      'gpus = r.loc[r["design_kind"] == "gpu", "design"]') == []


def test_no_consumer_dispatches_on_the_design_type():
    found = {str(p.relative_to(PACKAGE.parent)): dispatches(p.read_text(encoding="utf-8")) for p in _consumers()}
    assert len(found) > 20  # the scan saw the consumers
    assert {k: v for k, v in found.items() if v} == {}
