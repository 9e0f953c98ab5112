"""Emulation on a GPU against the GPU's own native paths, in one command that survives a time limit.

    python benchmarks/gpu_emulate.py [--quick] [--out DIR] [--parts tests,step_time,...]
                                     [--budget SECONDS] [--steps 20] [--repeat 5] [--json OUT.json]
                                     [--tests "PYTEST PATHS"]

Each part runs in its own process under its own deadline (``DEADLINES`` x ``--budget`` / their
sum) and writes every row to ``DIR/<part>.jsonl`` the moment it exists, so a part cut off at its
deadline, or a run the machine's lease ends, keeps what it had measured; ``DIR/<part>.status``
says ``done``, ``timed out after N s`` or the error. ``DIR/summary.json`` and the printed markdown
tables (for benchmarks/RESULTS.md, with the device line) gather them at the end. ``--quick``
shrinks every size so the script is checked on a CPU (tests/test_gpu_emulate_script.py, slow step).

Parts (issue 37; the parts live in ``gpu_emulate_parts.py`` and ``hlo_passes.py``):

* ``tests``: ``pytest tests/numerics tests/emulate`` on the device (``--tests`` chooses others;
  ``--quick``: ``QUICK_TESTS``), with pytest-xdist when it is installed (the row says how many
  workers, or that it ran serially without it), each failure's id, message and traceback appended
  to ``tests.jsonl`` the moment it fails (``pytest_failure_log.py``);
* ``step_time``: every training recipe's step and compile time against the native bf16 step
  (aims <= 1.3x and <= 2x);
* ``hlo_passes``: full-tensor passes per GEMM operand in the optimised HLO, against native;
* ``exact_orders``: the bit-exact MAC orders against cuBLAS bf16 (aim <= 10x, 0 bits differ);
* ``same_bits``: every scaling's bits on the device against the CPU backend (aim 0);
* ``quantize``: rounding throughput as a share of the copy speed (aims >= 1; MX >= 0.9).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))  # the parts' modules, also when imported by a test
#: The ``tests`` part's pytest selection, and the one of ``--quick``: one short test, so the CPU
#: check runs the part (its xdist workers and failure log) in seconds.
DEFAULT_TESTS = "tests/numerics tests/emulate"
QUICK_TESTS = "tests/numerics/test_random.py::test_derive_is_reproducible_and_scalar_or_array_tags_agree"
#: Each part's share of the time budget, in seconds at the default budget (sum 520 s: with the
#: device line's DEVICE_S the default run fits the device machine's 600 s per command).
DEVICE_S = 60
DEADLINES = {"tests": 180, "step_time": 150, "hlo_passes": 60, "exact_orders": 60, "same_bits": 30,
             "quantize": 40}


def table(rows: list[dict]) -> str:
    from gpu_emulate_parts import table as markdown

    return markdown(rows)


def _device_line() -> str:
    import jax

    d = jax.devices()[0]
    return (f"device: {d.platform} {getattr(d, 'device_kind', '')}; host {platform.processor() or platform.machine()}; "
            f"jax {jax.__version__}; date {time.strftime('%Y-%m-%d')}")


def run_tests(out: Path, deadline: float, on_row, selection: str) -> None:
    """pytest on the device: each failure (id, message, traceback) lands in ``tests.jsonl`` as it
    happens (``pytest_failure_log.py``), then the closing line; the whole log in ``tests.log``."""
    import importlib.util

    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:benchmark",
           "-p", "pytest_failure_log", "-rf", *selection.split()]
    workers = "none: pytest-xdist is not installed, the tests ran serially"
    if importlib.util.find_spec("xdist"):
        workers = min(16, os.cpu_count() or 1)
        cmd += ["-n", str(workers)]
    env = {**os.environ, "ASICSIM_FAILURE_LOG": str((out / "tests.jsonl").resolve()),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).parent), os.environ.get("PYTHONPATH")]))}
    t = time.perf_counter()
    with open(out / "tests.log", "w") as log:
        p = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            rc = p.wait(timeout=max(1.0, deadline - 5))
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)  # pytest and its xdist workers, which hold the device
            p.wait()
            rc = "timed out"
    lines = [ln for ln in (out / "tests.log").read_text().splitlines() if ln.strip()]
    on_row({"summary": lines[-1] if lines else "", "exit": rc, "seconds": time.perf_counter() - t,
            "xdist_workers": workers})


def run_part(name: str, args, out: Path) -> None:
    """One part in this process: rows appended to ``out/<name>.jsonl`` as they come. Only the
    part's own process touches the device (the driver does not import jax), and ``tests`` leaves
    it to pytest's processes."""
    sink = open(out / f"{name}.jsonl", "a")

    def on_row(row: dict) -> None:
        sink.write(json.dumps(row) + "\n")
        sink.flush()

    if name == "tests":
        run_tests(out, args.deadline, on_row, args.tests or (QUICK_TESTS if args.quick else DEFAULT_TESTS))
        return
    import gpu_emulate_parts as parts
    import hlo_passes
    import jax

    steps = 2 if args.quick else args.steps
    repeat = 1 if args.quick else args.repeat
    with jax.numpy_dtype_promotion("standard"):  # user code (optax) runs under standard promotion
        {"device": lambda: on_row({"device": _device_line()}),
         "step_time": lambda: parts.step_times(args.quick, steps, repeat, on_row=on_row),
         "hlo_passes": lambda: hlo_passes.recipe_passes(parts.TRAINING_RECIPES, args.quick, on_row=on_row),
         "exact_orders": lambda: parts.exact_orders(args.quick, repeat, on_row=on_row),
         "same_bits": lambda: parts.same_bits(on_row=on_row),
         "quantize": lambda: parts.quantize_speed(args.quick, repeat, on_row=on_row)}[name]()


def _spawn(name: str, args, out: Path, deadline: float) -> str:
    cmd = [sys.executable, __file__, "--part", name, "--out", str(out), "--deadline", f"{deadline:.0f}",
           "--steps", str(args.steps), "--repeat", str(args.repeat)] + (["--quick"] if args.quick else []) \
        + (["--tests", args.tests] if args.tests else [])
    with open(out / f"{name}.log", "w") as log:
        p = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = p.wait(timeout=deadline)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)  # the part and anything it started (pytest workers)
            p.wait()
            return f"timed out after {deadline:.0f} s"
    return "done" if rc == 0 else f"failed (exit {rc}; see {name}.log)"


def _rows(out: Path, name: str) -> list[dict]:
    path = out / f"{name}.jsonl"
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()] if path.is_file() else []


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="tiny sizes (a check of the script on a CPU)")
    p.add_argument("--out", default="gpu_emulate_out", help="folder for each part's rows, status and log")
    p.add_argument("--parts", default=",".join(DEADLINES), help=f"comma-separated, from {', '.join(DEADLINES)}")
    p.add_argument("--budget", type=float, default=sum(DEADLINES.values()),
                   help="seconds for all parts together, shared in proportion to DEADLINES")
    p.add_argument("--steps", type=int, default=20, help="training steps per timed scan")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--json", help="also write every figure to this JSON file")
    p.add_argument("--tests", help="pytest paths (space-separated) for the tests part; default "
                   f"{DEFAULT_TESTS!r}, with --quick {QUICK_TESTS!r}")
    p.add_argument("--part", help=argparse.SUPPRESS)  # internal: run one part in this process
    p.add_argument("--deadline", type=float, default=0, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    names = [n.strip() for n in args.parts.split(",") if n.strip()]
    unknown = sorted(set(names) - set(DEADLINES))
    if unknown:
        p.error(f"--parts: unknown part(s) {', '.join(unknown)}; the parts are {', '.join(DEADLINES)}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.part:
        run_part(args.part, args, out)
        return {}
    scale = args.budget / sum(DEADLINES[n] for n in names)
    _spawn("device", args, out, DEVICE_S)
    device = next((r["device"] for r in _rows(out, "device")), "device: unknown (see device.log)")
    result = {"device": device, "status": {}}
    print(f"# asicsim on the device\n{device}", flush=True)
    for name in names:
        (out / f"{name}.jsonl").unlink(missing_ok=True)
        status = _spawn(name, args, out, DEADLINES[name] * scale)
        (out / f"{name}.status").write_text(status + "\n")
        result["status"][name], result[name] = status, _rows(out, name)
        print(f"\n## {name}: {status}", flush=True)
        print(table([{k: v for k, v in r.items() if k != "traceback"} for r in result[name]]), flush=True)
    (out / "summary.json").write_text(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
