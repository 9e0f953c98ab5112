"""Formats a design executes (asicsim._src.hw.native) and the bits a tensor stores (issue 17, item 6).

TPU v1's rates are Jouppi et al., "In-Datacenter Performance Analysis of a Tensor Processing
Unit", ISCA 2017, Sec. 2: 8-bit operands (signed or unsigned) at full rate, half speed with one
16-bit operand, quarter speed with both. TF32 storage is NVIDIA's CUDA Math API ``__nv_tf32``: "The
storage size of this type is 32 bits in total".
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest

import asicsim as sim
from asicsim._src.hw.cost import cost
from asicsim._src.hw.design_files import list_designs, load_design
from asicsim._src.hw.native import MacMode, execution_mode, storage_bits
from asicsim._src.hw.operations import OperationError
from asicsim._src.numerics import catalog, decode, get_format
from asicsim._src.numerics.embed import embeds

# one 256 x 256 weight tile whatever its width, so the schedule is the same in every mode
G = sim.Gemm(1024, 256, 256)


def _f(**roles) -> dict:
    return {r: get_format(v) for r, v in roles.items()}


def test_tpu_v1_16_bit_runs_at_half_and_quarter_rate_of_its_paper():
    int8 = cost(G, "tpu_v1")
    half = cost(G, "tpu_v1", "act=int16")  # 16-bit activations, 8-bit weights: half speed
    quarter = cost(G, "tpu_v1", "act=int16,weight=int16")  # both 16-bit: quarter speed
    assert int8.cycles_compute == 1024  # 1024 x 256 x 256 MACs / 65536 PEs
    assert int8.schedule == half.schedule == quarter.schedule
    assert half.cycles_compute == 2 * int8.cycles_compute
    assert quarter.cycles_compute == 4 * int8.cycles_compute
    assert quarter.cycles_fill_drain == int8.cycles_fill_drain  # paid once per GEMM
    assert quarter.execution.rate == 0.25 and not quarter.execution.emulated
    assert quarter.row()["mac_rate"] == 0.25 and quarter.row()["emulated"] is False
    assert "quarter speed" in quarter.execution.source


def test_fp32_on_int8_designs_errors_naming_the_modes():
    for name in ("tpu_v1", "edge_int8_32x32"):
        with pytest.raises(OperationError) as info:
            cost(G, name, "act=fp32,weight=fp32,acc=fp32")
        msg = str(info.value)
        assert f"design {name!r} does not execute act=float32 x weight=float32 -> acc=float32" in msg
        assert "int8 x int8 -> int32 at 1" in msg and "emulate=" in msg
    with pytest.raises(OperationError, match=r"int16 x int16 -> int32 at 0\.25"):
        cost(G, "tpu_v1", "act=bf16,weight=bf16,acc=fp32")


def test_the_cli_reports_the_error(capsys):
    from asicsim.cli import main

    code = main(["cost", "--design", "tpu_v1", "--gemm", "1024,1024,1024",
                 "--formats", "act=fp32,weight=fp32,acc=fp32"])
    assert code == 2 and "does not execute" in capsys.readouterr().err


def test_formats_that_embed_run_natively():
    # int4 and uint4 values are int8 values: the int8 MAC runs them at full rate
    assert cost(G, "tpu_v1", "act=int4,weight=int4").cycles_compute == 1024
    assert execution_mode(load_design("edge_int8_32x32"), _f(act="uint4", weight="int2", acc="int32")).rate == 1
    # fp8 E4M3 and E5M2 values are bf16 values (8-bit exponent, 7-bit mantissa)
    dc = load_design("dc_bf16_128x128")
    assert execution_mode(dc, _f(act="fp8_e4m3", weight="fp8_e5m2", acc="fp32")).rate == 1
    # a narrower accumulator embeds in the wider one (the array's sums are at least as exact)
    assert execution_mode(dc, _f(act="bf16", weight="bf16", acc="bf16")).rate == 1
    # but fp16 is not: its 10-bit mantissa does not fit bf16's 7 bits
    with pytest.raises(OperationError, match="bfloat16 x bfloat16 -> float32 at 1"):
        execution_mode(dc, _f(act="fp16", weight="fp16", acc="fp32"))


def test_stated_emulation_is_priced_and_reported():
    r = cost(G, "tpu_v1", "act=fp32,weight=fp32,acc=fp32,emulate=16")
    assert r.cycles_compute == 16 * 1024
    assert r.execution.emulated and r.execution.slowdown == 16 and r.execution.rate == 1 / 16
    assert r.row()["emulated"] is True and r.row()["slowdown"] == 16
    assert "stated slowdown of 16" in r.execution.source
    with pytest.raises(OperationError, match=r"emulate = '0\.5'; allowed"):
        cost(G, "tpu_v1", "act=fp32,emulate=0.5")
    with pytest.raises(OperationError, match="emulate = 'fast'; allowed"):
        cost(G, "tpu_v1", "act=fp32,emulate=fast")
    # a native request stays native whatever emulate says
    assert not cost(G, "tpu_v1", "emulate=16").execution.emulated


def test_auto_emulation_rederives_tpu_v1_rates_from_its_8_bit_modes():
    """Digit passes on 8-bit signed and unsigned multipliers: 16 x 8 bits in 2 passes and 16 x 16
    in 4, the half and quarter speed the paper gives for its native 16-bit modes."""
    d = load_design("tpu_v1")
    eight = dataclasses.replace(d, pe=dataclasses.replace(d.pe, modes=tuple(m for m in d.pe.modes if m.rate == 1)))
    half = execution_mode(eight, _f(act="int16", weight="int8", acc="int32"), "auto")
    quarter = execution_mode(eight, _f(act="int16", weight="int16", acc="int32"), "auto")
    assert (half.slowdown, quarter.slowdown) == (2, 4) and quarter.emulated
    assert "int8+uint8" in quarter.source
    # on the real tpu_v1, int32 x int8: four 8-bit digits (or a 16-bit top digit at half rate)
    assert cost(G, "tpu_v1", "act=int32,emulate=auto").execution.slowdown == 4


def test_auto_emulation_on_a_signed_only_multiplier_needs_7_bit_digits():
    # edge_int8_32x32 multiplies int8 only: low digits must be 0..127 (uint7), so int16 takes 3
    r = cost(G, "edge_int8_32x32", "act=int16,weight=int16,emulate=auto")
    assert r.execution.slowdown == 9 and "int2+uint7+uint7" in r.execution.source
    base = cost(G, "edge_int8_32x32")
    assert r.cycles_compute == 9 * base.cycles_compute


def test_auto_emulation_refuses_what_it_cannot_derive_exactly():
    with pytest.raises(OperationError, match="integer formats on integer modes"):
        cost(G, "tpu_v1", "act=fp32,weight=fp32,acc=fp32,emulate=auto")
    with pytest.raises(OperationError, match="integer formats on integer modes"):
        cost(G, "dc_bf16_128x128", "act=int16,emulate=auto")  # a float MAC: no exact digit rule here


def test_vector_work_needs_no_mac_mode():
    # an elementwise op never enters the array: any format, no execution mode
    (r,) = sim.hw.cost_many([sim.Elementwise(1000, 2, 2)], "tpu_v1", "act=fp32,out=fp32")
    assert r.execution is None and r.cycles > 0


def test_tf32_is_stored_in_32_bits():
    tf32 = get_format("tf32")
    assert tf32.bits == 19 and tf32.storage_bits == 32 and storage_bits(tf32) == 32.0
    # sub-byte formats stay packed; MX formats keep their amortised e8m0 scale (8 bits per 32)
    assert get_format("int4").storage_bits == 4 and get_format("fp6_e2m3").storage_bits == 6
    assert get_format("mxfp8_e4m3").storage_bits == 8 + 8 / 32
    # every other catalog format stores its own width
    assert {n for n, f in catalog().items() if f.storage_bits != f.bits} == {"tf32"}
    # DRAM bytes of a tf32 GEMM equal fp32's (both 4-byte words), on a systolic design and a GPU
    # (the DRAM objective: the least bytes, A read once; the default may stream A twice to run faster)
    fp32 = cost(G, "dc_bf16_128x128", "act=fp32,weight=fp32,emulate=3", objective="dram")
    tf = cost(G, "dc_bf16_128x128", "act=tf32,weight=tf32,out=tf32,emulate=3", objective="dram")
    assert tf.dram_bytes == fp32.dram_bytes and tf.traffic["dram.ifmap.reads_bytes"] == 1024 * 256 * 4
    gpu = cost(sim.Gemm(8192, 8192, 8192), "gpu_m40", "act=tf32,weight=tf32,out=tf32")
    ref = cost(sim.Gemm(8192, 8192, 8192), "gpu_m40")
    assert gpu.dram_bytes == ref.dram_bytes


def test_every_catalog_design_has_modes_that_parse():
    for name in list_designs():
        d = load_design(name)
        assert d.pe.modes, name
        own = [m for m in d.pe.modes if (m.a, m.b, m.acc) == (d.pe.a_format, d.pe.b_format, d.pe.acc_format)]
        assert len(own) == 1 and own[0].rate == 1, name  # its [pe] formats are its peak
        assert all(0 < m.rate <= 1 and isinstance(m, MacMode) for m in d.pe.modes)
        assert cost(sim.Gemm(64, 64, 64), d).execution.rate == 1
        hash(d)  # still a jit static argument
    assert [m.rate for m in load_design("tpu_v1").pe.modes] == [1, 1, 1, 1, 0.5, 0.5, 0.25]


def _values(fmt) -> set:
    codes = np.arange(1 << int(fmt.bits), dtype=np.uint32)
    v = np.asarray(decode(codes, fmt), dtype=np.float64)
    return set(v[np.isfinite(v)].tolist()) | {("inf" if np.isinf(v).any() else None), ("nan" if np.isnan(v).any() else None)}


def test_embeds_agrees_with_enumerating_every_value():
    """The witness rule (asicsim._src.numerics.embed) against brute force: every catalog float/int
    format of at most 8 bits, plus int16, fp16 and bf16 as targets."""
    small = [f for f in catalog().values() if f.kind != "block" and f.bits <= 8]
    big = [get_format(n) for n in ("int16", "fp16", "bf16")]
    vals = {f: _values(f) for f in small + big}
    for x, y in itertools.product(small, small + big):
        assert embeds(x, y) == (vals[x] - {None} <= vals[y]), (x.name, y.name)


def test_embeds_wide_formats():
    assert embeds(get_format("int16"), get_format("fp32")) and not embeds(get_format("int32"), get_format("fp32"))
    assert embeds(get_format("tf32"), get_format("fp32")) and not embeds(get_format("fp32"), get_format("tf32"))
    assert embeds(get_format("int8"), get_format("q7.8")) and not embeds(get_format("q7.8"), get_format("int16"))
    assert embeds(get_format("fp8_e4m3"), get_format("mxfp8_e4m3"))  # a unit scale is an e8m0 value
    assert not embeds(get_format("mxfp8_e4m3"), get_format("fp32"))  # not claimed


def test_gpus_refuse_integer_operands_wider_than_8_bits():
    with pytest.raises(OperationError, match=r"GPU 'gpu_v100' does not execute act=int16 x weight=int16 .*int8_dp4a"):
        cost(G, "gpu_v100", "act=int16,weight=int16,acc=int32")
    assert cost(G, "gpu_v100", "act=int8,weight=int8,acc=int32").time_s > 0


def test_tf32_gradients_all_reduce_as_32_bit_words():
    from asicsim._src.system.scaling import _grad_bits

    assert _grad_bits("tf32") == 32 and _grad_bits("bf16") == 16 and _grad_bits("int4") == 4
