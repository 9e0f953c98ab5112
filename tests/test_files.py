"""Atomic writes: the new content replaces the old in one step; a failed write keeps the old file
and leaves no temporary."""

from __future__ import annotations

import pytest

from asicsim._files import atomic_path, write_text_atomic


def test_replaces_whole_file(tmp_path):
    target = tmp_path / "a.json"
    target.write_text("old")
    write_text_atomic(target, "new ✓", fsync=True)
    assert target.read_text(encoding="utf-8") == "new ✓"
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]


def test_failed_write_keeps_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "t.csv"
    target.write_text("old")
    with pytest.raises(RuntimeError, match="disk full"), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("disk full")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["t.csv"]


def test_temporary_is_hidden_beside_target(tmp_path):
    with atomic_path(tmp_path / "x.npz", suffix=".tmp.npz") as tmp:
        assert tmp.parent == tmp_path and tmp.name.startswith(".x.npz.") and tmp.name.endswith(".tmp.npz")
        tmp.write_bytes(b"1")
    assert (tmp_path / "x.npz").read_bytes() == b"1"
