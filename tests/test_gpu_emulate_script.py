"""benchmarks/gpu_emulate.py (the GPU check in one command, issue 37 item 4) runs end to end and
survives its deadlines: checked on the CPU with --quick so the script a GPU session runs is known
to work before one is lent. On a CPU the "device" is the CPU itself, so same_bits must find no
differing bits (a check of the comparison, not of a GPU)."""

import json
from pathlib import Path

import pytest
from benchmark_scripts import load_benchmark

ROOT = Path(__file__).resolve().parents[1]


HLO = """HloModule m

%fused_dot (p0: f32[4,8], p1: f32[8,2]) -> f32[4,2] {
  %p0 = f32[4,8]{1,0} parameter(0)
  %p1 = f32[8,2]{1,0} parameter(1)
  ROOT %d = f32[4,2]{1,0} dot(%p0, %p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

%body (s: (f32[4,8], s32[])) -> (f32[4,8], s32[]) {
  %s = (f32[4,8]{1,0}, s32[]) parameter(0)
  %x = f32[4,8]{1,0} get-tuple-element(%s), index=0
  %y = f32[4,8]{1,0} multiply(%x, %x)
  %i = s32[] get-tuple-element(%s), index=1
  ROOT %t = (f32[4,8]{1,0}, s32[]) tuple(%y, %i)
}

ENTRY %main (a: f32[4,8], b: f32[8,2]) -> f32[4,2] {
  %a = f32[4,8]{1,0} parameter(0)
  %b = f32[8,2]{1,0} parameter(1)
  %c = bf16[4,8]{1,0} convert(%a)
  %w = (f32[4,8]{1,0}, s32[]) while(%init), condition=%cond, body=%body
  ROOT %g = f32[4,2]{1,0} fusion(%a, %b), kind=kCustom, calls=%fused_dot
}
"""


def test_hlo_passes_counts_traffic_outside_gemms():
    """Hand count of the module above: the GEMM fusion reads a (128 B) and b (64 B); the convert
    reads 128 B and writes 64 B; the while body's multiply reads 128 B once and writes 128 B
    (get-tuple-element, tuple and parameter are free)."""
    hlo = load_benchmark("hlo_passes")
    got = hlo.count_passes(HLO)
    assert got["gemms"] == 1 and got["gemm_operand_mb"] == pytest.approx(192e-6)
    assert got["other_instructions"] == 2 and got["traffic_mb"] == pytest.approx((128 + 64 + 128 + 128) * 1e-6)
    assert hlo.type_bytes("(f8e4m3fn[16], s4[4], bf16[2,3]{1,0})") == 16 + 2 + 12


def test_hlo_passes_counts_the_transformer_too(capsys):
    """``--model transformer`` counts the transformer of ``benchmarks/gpu_emulate.py``'s step
    times (issue 37 item 2 names both models): its GEMMs (QKV, the attention's batched products,
    the projections and the MLP, forward and backward) against the native step's."""
    hlo = load_benchmark("hlo_passes")
    rows = hlo.main(["--quick", "--model", "transformer", "--recipes", "bf16"])
    assert [(r["model"], r["recipe"]) for r in rows] == [("transformer", "native bf16"), ("transformer", "bf16")]
    assert rows[0]["gemms"] > 12 and rows[0]["passes_x"] == 1 and rows[1]["passes"] > 0
    assert "| transformer | bf16 |" in capsys.readouterr().out
    with pytest.raises(ValueError, match="allowed 'mlp', 'transformer'"):
        hlo.recipe_passes(["bf16"], True, model="cnn")


def _mlp_step_traffic(recipes, batch: int) -> dict:
    """Traffic outside the GEMMs (MB, ``hlo_passes.count_passes``) of each recipe's training step
    of the 512-wide, 2-layer MLP of ``benchmarks/hlo_passes.py`` (Adam), compiled for XLA:CPU."""
    import jax
    import jax.numpy as jnp
    import optax

    hlo = load_benchmark("hlo_passes")
    from gpu_emulate_parts import mlp  # benchmarks/ is on sys.path once a benchmark is loaded

    from asicsim._src.emulate import make_train_step

    init, loss = mlp(512, 2)
    data = (jnp.zeros((batch, 512), jnp.float32), jnp.zeros((batch,), jnp.int32))
    traffic = {}
    with jax.numpy_dtype_promotion("standard"):
        for recipe in recipes:
            init_state, step = make_train_step(loss, recipe, optax.adam(1e-3))
            text = jax.jit(step).lower(init_state(init(0), 1), data).compile().as_text()
            traffic[recipe] = hlo.count_passes(text)["traffic_mb"]
    return traffic


def test_fp16_mixed_step_reads_its_working_weights_from_the_kept_master():
    """fp16_mixed keeps an fp32 master copy and fp16 working weights, as the bf16 recipe keeps
    bf16 ones, so their steps move about the same traffic outside the GEMMs (the 512-wide MLP of
    ``benchmarks/hlo_passes.py`` on XLA:CPU: 1.07x). When the working weights were computed from
    the master copy before the skip select, XLA wrote the optimizer's update out and read it
    twice, and the master and working weights once more each: 1.36x."""
    traffic = _mlp_step_traffic(("bf16", "fp16_mixed"), batch=64)
    assert traffic["fp16_mixed"] < 1.15 * traffic["bf16"], traffic


def test_deepseek_step_rounds_its_tiles_in_place():
    """fp8_deepseek_v3 scales its weights per 128x128 tile and its activations and gradients per
    128 elements along each GEMM's contraction (128x1 for the weight-gradient GEMM's operands):
    those are rounded on views of the tensors split in place (``scaling._blocks_in_place``), and
    each code's product with its scale is float64's, rounded once, with no condition around it,
    so the step of the 512-wide MLP of ``benchmarks/hlo_passes.py`` (batch 256) moves 1.64x the
    bf16 recipe's traffic on XLA:CPU. Before, each tile and each block along another axis than
    the last was transposed into (tiles, members) and back, and XLA materialised the operands
    of the product's exactness condition: 3.08x (2.09x with the view alone)."""
    traffic = _mlp_step_traffic(("bf16", "fp8_deepseek_v3"), batch=256)
    assert traffic["fp8_deepseek_v3"] < 1.9 * traffic["bf16"], traffic


@pytest.mark.slow
def test_gpu_benchmark_script_quick(tmp_path):
    mod = load_benchmark("gpu_emulate")
    out = mod.main(["--quick", "--out", str(tmp_path / "out"), "--parts",
                    "tests,step_time,hlo_passes,exact_orders,same_bits,quantize", "--budget", "2800",
                    "--json", str(tmp_path / "out.json")])
    assert json.loads((tmp_path / "out.json").read_text())["status"] == out["status"]
    assert all(s == "done" for s in out["status"].values()), out["status"]
    assert [r["summary"].split(" in ")[0] for r in out["tests"]] == ["1 passed"]  # QUICK_TESTS
    parts = load_benchmark("gpu_emulate_parts")
    assert [(r["model"], r["recipe"]) for r in out["step_time"]] == [
        (m, r) for m in ("mlp 64 wide", "transformer d64") for r in parts.QUICK_RECIPES]
    assert all(r["anchor_ms"] > 0 and r["step_x"] > 0 and r["compile_x"] > 0 for r in out["step_time"])
    assert [r["recipe"] for r in out["hlo_passes"]] == ["native bf16", *parts.TRAINING_RECIPES]
    assert out["hlo_passes"][0]["passes_x"] == 1 and all(r["passes"] > 0 for r in out["hlo_passes"])
    assert [r["n"] for r in out["exact_orders"]] == [64] * 5 + [128] * 5
    assert all(r["bits_differ_loop"] == 0 and r["bits_differ_cpu"] == 0 for r in out["exact_orders"])
    assert len(out["same_bits"]) == 10 and all(r["bits_differ"] == 0 for r in out["same_bits"])
    assert {r["format"] for r in out["quantize"]} == set(parts.QUANTIZE_FORMATS)


FAILING_TESTS = '''
def test_passes():
    assert 1 + 1 == 2


def test_fails_with_a_traceback():
    value = 41
    assert value == 42, "the answer is off by one"
'''


@pytest.mark.slow
def test_tests_part_keeps_each_failures_traceback(tmp_path):
    """The tests part on a file with one passing and one failing test: exactly one row for the
    failure (under pytest-xdist the workers' own reports were logged as well as the controller's:
    two rows, on the old code), with its message and the traceback's source line, then the
    closing line; with xdist installed, the workers it ran on."""
    (tmp_path / "test_two.py").write_text(FAILING_TESTS)
    mod = load_benchmark("gpu_emulate")
    out = mod.main(["--quick", "--out", str(tmp_path / "out"), "--parts", "tests", "--budget", "300",
                    "--tests", str(tmp_path / "test_two.py")])
    assert out["status"]["tests"] == "done"
    failures = [r for r in out["tests"] if "failed" in r and "summary" not in r]
    assert [r["failed"].split("::")[-1] for r in failures] == ["test_fails_with_a_traceback"]
    assert failures[0]["message"] == "AssertionError: the answer is off by one"
    assert "assert value == 42" in failures[0]["traceback"]
    (summary,) = [r for r in out["tests"] if "summary" in r]
    assert summary["summary"].startswith("1 failed, 1 passed") and summary["exit"] == 1
    import importlib.util

    assert (summary["xdist_workers"] >= 1) if importlib.util.find_spec("xdist") else \
        summary["xdist_workers"].startswith("none")


@pytest.mark.slow
def test_a_part_past_its_deadline_keeps_its_rows(tmp_path):
    """A 1-second budget cuts same_bits off: its status says so and the run still finishes."""
    mod = load_benchmark("gpu_emulate")
    out = mod.main(["--quick", "--out", str(tmp_path), "--parts", "same_bits", "--budget", "1"])
    assert out["status"]["same_bits"].startswith("timed out after")
    assert (tmp_path / "same_bits.status").read_text().startswith("timed out")


def test_every_shipped_recipe_is_timed_or_says_why_not():
    from asicsim._src.emulate import list_recipes

    parts = load_benchmark("gpu_emulate_parts")
    assert not set(parts.TRAINING_RECIPES) & set(parts.NOT_TIMED)
    assert set(parts.TRAINING_RECIPES) | set(parts.NOT_TIMED) == set(list_recipes())


def test_unknown_part_is_an_error(capsys):
    mod = load_benchmark("gpu_emulate")
    with pytest.raises(SystemExit):
        mod.main(["--parts", "tests,nonsense"])
    assert "unknown part(s) nonsense" in capsys.readouterr().err
