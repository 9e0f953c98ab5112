"""The progress line: counts, and an ETA weighted by each point's expected work."""

from __future__ import annotations

import io

from asicsim._src.sweep.run import Progress


def test_eta_weighs_training_points_by_their_work():
    stream = io.StringIO()
    bar = Progress(5, 1, stream, {"a": 100.0, "b": 300.0, "c": 0.0, "d": 0.0})
    bar.t0 -= 10.0  # ten seconds in
    bar.update([{"id": "c", "status": "done"}])
    assert "ETA ?" in bar.line()  # only a priced point finished: no basis for an estimate yet
    bar.update([{"id": "a", "status": "failed"}])
    line = bar.line()
    assert "2/5 done (1 from before), 1 failed, 2 left" in line
    assert "ETA 30s" in line  # 100 examples took 10 s, 300 are left
    bar.update([{"id": "b", "status": "done"}, {"id": "d", "status": "done"}], final=True)
    assert "finished" in stream.getvalue().splitlines()[-1]


def test_priced_points_only_count_equally_and_quiet_means_silent():
    bar = Progress(4, 0, None, {k: 0.0 for k in "abcd"})
    bar.t0 -= 8.0
    bar.update([{"id": "a", "status": "done"}, {"id": "b", "status": "done"}])
    assert "ETA 8s" in bar.line()


def test_a_diverged_point_is_counted_apart_from_the_failed():
    bar = Progress(4, 0, None, {k: 0.0 for k in "abcd"})
    bar.update([{"id": "a", "status": "diverged"}, {"id": "b", "status": "failed"}, {"id": "c", "status": "done"}])
    assert "1/4 done (0 from before), 1 diverged, 1 failed, 1 left" in bar.line() and bar.ran == 3
