"""benchmarks/gpu_emulate.py (issue 20's GPU figures in one command) runs end to end: checked on
the CPU with --quick so the script a GPU session runs is known to work before one is lent. On a
CPU the "device" is the CPU itself, so part 4 must find no differing bits (a check of the
comparison, not of a GPU)."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_gpu_benchmark_script_quick(tmp_path):
    spec = importlib.util.spec_from_file_location("gpu_emulate", ROOT / "benchmarks" / "gpu_emulate.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = mod.main(["--quick", "--skip-tests", "--json", str(tmp_path / "out.json")])
    assert (tmp_path / "out.json").is_file()
    assert [r["model"] for r in out["step_time"]] == ["mlp 64 wide", "transformer d64"]
    for r in out["step_time"]:
        assert r["anchor_ms"] > 0 and all(r[f"{k}_x"] > 0 for k in mod.RECIPES)
    assert out["step_time"][1]["compile_mxfp8_s"] > 0
    assert [r["n"] for r in out["exact_orders"]] == [64] * 5 + [128] * 5
    assert all(r["bits_differ_loop"] == 0 and r["bits_differ_cpu"] == 0 for r in out["exact_orders"])
    assert len(out["same_bits"]) == 10 and all(r["bits_differ"] == 0 for r in out["same_bits"])
