"""The sweep's banner (at once, with the number of points), its ETA (a point priced by its
finished sibling seeds, counted down but never to zero while work is left) and its last line (a
newline, on a terminal too)."""

from __future__ import annotations

import io

import pytest

import asicsim._src.sweep.progress as progress
from asicsim._src.sweep.progress import Progress, banner_text

GROUPS = {"a0": ("train", "w", "fp32"), "a1": ("train", "w", "fp32"),
          "b0": ("train", "w", "mxfp8"), "b1": ("train", "w", "mxfp8")}


@pytest.fixture
def clock(monkeypatch):
    now = [0.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: now[0])
    return now


def test_a_seed_is_priced_by_its_finished_sibling(clock):
    bar = Progress(4, 0, None, dict.fromkeys(GROUPS, 100.0), workers=1, groups=GROUPS)
    clock[0] = 60.0
    bar.update([{"id": "a0", "status": "done", "seconds": 10.0}, {"id": "b0", "status": "done", "seconds": 50.0}])
    assert "ETA 1m00s" in bar.line()  # a1 like a0 (10 s), b1 like b0 (50 s)
    clock[0] = 70.0
    bar.update([{"id": "a1", "status": "done", "seconds": 10.0}])
    # b1 is left: 50 s, as b0 took (a mean over every point would say 30 s, a jump down)
    assert "ETA 50s" in bar.line()


def test_an_unseen_recipe_is_priced_by_its_rate_on_another_workload(clock):
    groups = {"x": ("train", "mlp", "mxfp8"), "y": ("train", "cnn", "mxfp8"), "z": ("train", "cnn", "fp32")}
    bar = Progress(3, 0, None, {"x": 100.0, "y": 400.0, "z": 400.0}, workers=2, groups=groups)
    clock[0] = 20.0
    bar.update([{"id": "z", "status": "done", "seconds": 4.0}, {"id": "x", "status": "done", "seconds": 20.0}])
    # y: 400 examples at mxfp8's 0.2 s per example on the other workload, spread over the two workers
    assert bar.seconds_left() == pytest.approx(400 * 0.2 / 2)


def test_the_eta_counts_down_but_not_to_zero_while_points_are_left(clock):
    bar = Progress(4, 0, None, dict.fromkeys(GROUPS, 100.0), workers=1, groups=GROUPS)
    clock[0] = 60.0
    bar.update([{"id": "a0", "status": "done", "seconds": 10.0}, {"id": "b0", "status": "done", "seconds": 50.0}])
    clock[0] = 90.0
    assert bar.seconds_left() == pytest.approx(30.0)
    clock[0] = 500.0  # a slow point: the estimate ran out, the line does not claim it is all but done
    assert bar.seconds_left() == pytest.approx(6.0)
    assert "ETA 6s" in bar.line()


def test_no_basis_before_a_training_point_finishes(clock):
    bar = Progress(3, 0, None, {"t": 100.0, "c": 0.0, "d": 0.0}, workers=2, groups={})
    clock[0] = 5.0
    bar.update([{"id": "c", "status": "done", "seconds": 0.1}])
    assert "ETA ?" in bar.line()


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_line_is_redrawn_in_place_and_ends_on_a_newline(clock):
    out = _Terminal()
    bar = Progress(12, 0, out, {f"p{i}": 0.0 for i in range(12)}, workers=1)
    for i in range(10):
        clock[0] += 1.0
        bar.update([{"id": f"p{i}", "status": "done", "seconds": 1.0}])
    assert "\n" not in out.getvalue() and out.getvalue().count("\r") == 10
    bar.update([], final=True)  # the state was drawn already: the line still gets its newline
    text = out.getvalue()
    assert text.endswith("\n") and text.count("\n") == 1
    last = text.rsplit("\r", 1)[1]
    assert "10/12 done" in last


def test_a_shorter_line_blanks_what_the_longer_one_left(clock):
    out = _Terminal()
    bar = Progress(2, 0, out, {"a": 0.0, "b": 0.0}, workers=1)
    bar._write("x" * 30, end=False)
    bar._write("y" * 10, end=True)
    assert out.getvalue().endswith("\r" + "y" * 10 + " " * 20 + "\n")


def test_banner_text():
    line = banner_text("demo", {"train": 20, "infer": 4, "cost": 60, "kernels": 0}, 84, 4, 30, 2)
    assert line == "demo: 84 points (20 train, 4 infer, 60 cost); 4 from before; 80 to run as 30 jobs on 2 workers"


def test_the_sweep_prints_its_banner_before_any_point(tmp_path):
    import asicsim as sim

    spec = tmp_path / "s.toml"
    spec.write_text('name = "tiny"\ndesigns = ["gpu_v100", "gpu_h100"]\n[[kernels]]\n'
                    'suite = "deepbench_gemm_inference_device"\n')
    out = io.StringIO()
    s = sim.sweep(spec, tmp_path / "out", workers=1, progress=out)
    lines = out.getvalue().splitlines()
    assert s["points"] == 2
    assert lines[0] == "tiny: 2 points (2 kernels); 0 from before; 2 to run as 1 job on 1 worker"
    assert lines[-1].endswith("finished") and out.getvalue().endswith("\n")
