"""SIGKILL the sweep process at random moments, several times, then let it finish: nothing lost,
nothing duplicated, no finished point run twice, the same numbers as an uninterrupted sweep.
And the same sweep on a local Ray instance gives the same numbers."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import asicsim as sim
from asicsim._src.sweep import expand, load_results, load_spec

SPEC = """
seeds = [0, 1, 2]
recipes = ["fp32", "bf16", "fp16_mixed"]
designs = ["tpu_v1", "edge_int8_32x32", "gpu_v100"]
[[workloads]]
name = "digits_mlp"
run = ["train", "cost"]
steps = 200
eval_every = 100
[[kernels]]
suite = "deepbench_gemm_inference_device"
precision = "int8"
[[design_space]]
base = "edge_int8_32x32"
vary = { "array.rows" = [8, 16, 64], "array.dataflow" = ["os", "ws"] }
"""

#: Columns that must agree between runs (timings and process ids naturally differ).
SAME = ["id", "kind", "status", "value", "test_loss", "time_s", "energy_j", "dram_bytes"]


def _records(out: Path) -> dict[str, str]:
    """id -> the record's JSON text, over every file; fails if a point has two records."""
    out_: dict[str, str] = {}
    for f in (out / "points").glob("*.json"):
        data = json.loads(f.read_text())
        for r in data["records"] if "records" in data else [data]:
            assert r["id"] not in out_, f"point {r['id']} recorded twice"
            out_[r["id"]] = json.dumps(r, sort_keys=True)
    return out_


def _table(out: Path):
    res = load_results(out)
    return res[[c for c in SAME if c in res]].sort_values("id").reset_index(drop=True)


@pytest.fixture(scope="module")
def spec(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("resume") / "spec.toml"
    p.write_text(SPEC)
    return p


@pytest.fixture(scope="module")
def reference(spec, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("reference") / "out"
    sim.sweep(spec, out, workers=2, progress=None)
    return out


@pytest.mark.slow
def test_sigkill_at_random_moments_then_finish(spec, reference, tmp_path):
    out = tmp_path / "out"
    ids = sorted(p.id for p in expand(load_spec(spec)))
    cmd = [sys.executable, "-m", "asicsim", "sweep", str(spec), "--out", str(out), "--workers", "2", "--json"]
    rng = random.Random(20261122)
    seen: dict[str, str] = {}
    kills = mid = 0
    for round_ in range(6):
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if round_ == 0:  # during start-up, before any point finished
            time.sleep(rng.uniform(0.5, 3.0))
        else:  # at a random moment after this run wrote at least one new record
            deadline = time.monotonic() + 120
            while len(_records(out)) <= len(seen) and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.1)
            time.sleep(rng.uniform(0.0, 3.0))
        if proc.poll() is not None:  # it finished on its own before this kill
            break
        workers = _workers(proc.pid)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        kills += 1
        now = _records(out)
        # a finished point is never rewritten by a later run: no work repeated, nothing replaced
        assert all(now[k] == v for k, v in seen.items())
        assert set(now) <= set(ids)
        mid += 0 < len(now) < len(ids)  # killed with some points finished and some not
        seen = now
        # the killed sweep's workers notice their parent is gone (once past their imports) and exit
        deadline = time.monotonic() + 30
        while [w for w in workers if _alive(w)] and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not [w for w in workers if _alive(w)], "a killed sweep left its workers running"
    assert kills >= 3, "the sweep finished before it could be killed three times: make the spec longer"
    assert mid >= 1, "no kill landed mid-sweep"
    before = _records(out)  # seen, plus what a run that finished on its own wrote
    assert all(before[k] == v for k, v in seen.items())
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    summary = json.loads(done.stdout)
    assert summary["skipped"] == len(before) and summary["ran"] == len(ids) - len(before)
    final = _records(out)
    assert sorted(final) == ids  # every point, each exactly once
    assert all(final[k] == v for k, v in before.items())
    assert not list((out / "points").glob(".*.tmp"))
    assert summary["failed"] == 0
    assert _table(out).equals(_table(reference))


def _workers(pid: int) -> list[int]:
    try:
        kids = [int(x) for x in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []
    return [k for k in kids if _alive(k) and b"spawn_main" in Path(f"/proc/{k}/cmdline").read_bytes()]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore")  # Ray's own start-up warnings
def test_ray_backend_gives_the_same_results(spec, reference, tmp_path):
    out = tmp_path / "ray"
    summary = sim.sweep(spec, out, workers=2, ray="auto", progress=None)  # no cluster: starts a local one
    assert summary["failed"] == 0 and summary["ran"] == summary["points"]
    assert _table(out).equals(_table(reference))
