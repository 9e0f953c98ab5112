"""benchmarks/bench_tensorcore.py --kernel (the tensor-core kernel against cuBLAS, issue 33 item 6)
runs on a CPU in its --quick mode, so the script a GPU session runs is known to work before one
is lent: the kernel interpreted on every case, its bits equal to the XLA path's, each row in the
output file as it is made."""

import json

import pytest
from benchmark_scripts import load_benchmark


@pytest.mark.slow  # seven interpreted kernels
def test_kernel_quick_mode_runs_and_writes_rows(tmp_path):
    bench = load_benchmark("bench_tensorcore")
    out = tmp_path / "tc_kernel.jsonl"
    rows = bench.kernel_rows(24, 1, True, out, budget=1e9)
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert written == rows
    presets = [r for r in rows if r["what"] == "preset"]
    assert [r["preset"] for r in presets] == [", ".join(case) for case in bench.CASES]
    for r in presets:
        assert r.get("interpret_f64_bits_differ", 0) == 0, r
        assert r["kernel"] == ("b200" not in r["preset"]), r  # B200 fp8 (late c): the XLA path
    stopped = bench.kernel_rows(24, 1, True, None, budget=0.0)
    assert stopped[-1]["what"] == "stopped"
