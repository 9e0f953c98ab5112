"""quantize's optimised HLO, counted by ``benchmarks/bench_quantize.py --passes``
(``hlo_passes.count_passes``): the pass structure behind the throughput figures of
benchmarks/RESULTS.md (issue 37 item 5). Counts, not times: they do not depend on the load."""

import pytest
from benchmark_scripts import load_benchmark

N = 4096 * 16  # 65,536 elements: above mx_floor.BITS_MIN_SIZE, like the benchmark's tensors


@pytest.fixture(scope="module")
def rows():
    bench = load_benchmark("bench_quantize")
    return {(r["format"], r["rounding"]): r
            for r in bench.pass_rows(N, [("float8_e4m3fn", {}), ("bfloat16", {}), ("mxfp8_e4m3", {})])}


def test_element_formats_round_in_one_pass(rows):
    """One fused kernel that reads and writes the tensor once (a copy: 1.00); SR adds only the
    kernels of ``key_words`` on two words, no traffic."""
    for fmt in ("float8_e4m3fn", "bfloat16"):
        assert rows[fmt, "rne"]["kernels"] == 1
        for rounding in ("rne", "sr"):
            assert rows[fmt, rounding]["copies"] == pytest.approx(1.0, abs=0.01)


def test_mx_block_amax_reads_the_tensor_once(rows):
    """The MX amax fuses its bit masking into the reduce. Before (a float max that XLA:CPU hands
    to a library fusion), the masked tensor was written out and read back: MX rne 6.24 copies
    of traffic at 4096 x 4096 (both lax.cond branches counted, input donated), then 4.24; at this
    size 6.48 -> 4.48 (this test fails on that code)."""
    assert rows["mxfp8_e4m3", "rne"]["copies"] < 5


def test_mx_rounds_in_place_after_its_amax(rows):
    """MX rne is the amax reduce, the per-block values and one elementwise pass written in place
    of the donated input: no conditional and no copy of its result (11 kernels and 4.24 copies
    of traffic with the magic-number pass and its cond; 3 and 1.59 now; this test fails on that
    code)."""
    assert rows["mxfp8_e4m3", "rne"]["kernels"] <= 3
    assert rows["mxfp8_e4m3", "rne"]["copies"] < 2


def test_per_channel_scaling_reads_its_rows_once_for_the_amax():
    """int8 per-channel (one fp32 scale per row of 256): the amax over each row reduces 32-lane
    pieces first, which fuses the bit masking into the reduce, then one elementwise pass writes
    the result in place of the donated input: 1.51 copies of traffic. Before, XLA:CPU wrote a
    masked copy of the whole tensor to feed its split reduce and materialised the codes before
    the product's exactness condition (5.55 copies); with the codes and product in each branch
    of that condition, 3.54 (every branch counted; its result copied into the output). The
    product is now float64's rounded once, with no condition (``fp32_exact``): this test fails
    on both earlier versions."""
    bench = load_benchmark("bench_quantize")
    for row in bench.pass_rows(4096 * 256, [("int8", {"axis": 0})]):
        assert row["copies"] < 2, row


@pytest.mark.parametrize("axis,across", [(0, 1), (1, 1), (0, 128), (1, 128)])
def test_fp32_blocks_and_tiles_round_in_place(axis, across):
    """DeepSeek-V3's fp32-scaled 1x128 blocks and 128x128 tiles on a 4096 x 256 tensor, along
    either axis: rounded on a view of the tensor split in place (``scaling._blocks_in_place``),
    2.5-3.7 copies of traffic with rne. Before, the tensor was transposed into (tiles, members)
    and back: 4.6-5.6 (both branches of the product's exactness condition counted; this test
    fails on that code). What is left above the amax's read and one elementwise pass (1.5) is
    the result's copy into the donated input, which the view's reshape keeps XLA from writing
    in place."""
    from asicsim._src.numerics.scaling import Scaling

    bench = load_benchmark("bench_quantize")
    plan = Scaling(granularity="block", axis=axis, block_size=128, across=across, scale_format="fp32")
    row = bench.pass_rows(4096 * 256, [("float8_e4m3fn", {"scaling": plan})])[0]
    assert row["rounding"] == "rne" and row["copies"] < 4, row


def test_sr_words_mode_times_each_case(capsys):
    """``--sr-words`` runs (the copy, the words alone, SR with its words and with a one-op word,
    rne) and prints one row per case; its figures are in benchmarks/RESULTS.md (issue 37 item 5)."""
    import numpy as np

    bench = load_benchmark("bench_quantize")
    bench.sr_words(np.linspace(-3, 3, 4096 * 4, dtype=np.float32), 1)
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ") and "ns" not in line]
    assert len(rows) == 3 + 3 * 3, rows
    assert all(float(r.split("|")[2]) > 0 for r in rows)


def test_vector_width_reaches_the_compiled_cases(monkeypatch):
    """``--vector-width`` compiles the cases with XLA:CPU's preferred vector width: the runner
    passes it to ``jax.jit`` (what a user's jit can do), and the result is the same bits."""
    import jax
    import numpy as np

    bench = load_benchmark("bench_quantize")
    x = np.linspace(-3, 3, 4096 * 2, dtype=np.float32)
    seen = []
    real = jax.jit

    def spy(*a, **k):
        seen.append(k.get("compiler_options"))
        return real(*a, **k)

    def quantized(options):
        monkeypatch.setattr(bench, "COMPILER_OPTIONS", options)
        monkeypatch.setattr(bench.jax, "jit", spy)
        run = bench.asicsim_runner(x, "float8_e4m3fn", {}, "sr")  # compiles and runs once
        return np.asarray(run.state["v"])

    wide = quantized({"xla_cpu_prefer_vector_width": 512})
    assert seen[-1] == {"xla_cpu_prefer_vector_width": 512}
    plain = quantized({})
    assert seen[-1] is None
    np.testing.assert_array_equal(wide, plain)
