"""``asicsim report DIR -o X``: X must be a regular file or a new path (never a device, a folder, a
link or a pipe, which the atomic rename would replace), so must the Markdown beside it, and the
tables folder a folder or a new path; all checked before any of the report is computed."""

from __future__ import annotations

import importlib
import os
import stat
from pathlib import Path

import pytest

import asicsim.report as report
from asicsim.cli import main


def _unwritable_folder(tmp: Path) -> Path:
    """A folder no file can be created in: read-only for a user; /sys (sysfs) for root, whom a mode
    does not stop."""
    if os.geteuid() != 0:
        folder = tmp / "ro"
        folder.mkdir()
        folder.chmod(0o555)
        return folder
    if os.access("/sys", os.W_OK) and not Path("/sys/class").is_dir():
        pytest.skip("no sysfs to stand for a read-only folder")
    return Path("/sys")


# (what -o is, made in a temporary folder; expected message fragment)
BAD_OUTPUTS = [
    ("devnull", lambda t: Path("/dev/null"), "/dev/null: a character device; allowed: a regular file or a new path"),
    ("symlink to a device", lambda t: _link(t / "r.html", "/dev/null"),
     "r.html: a symbolic link (to /dev/null); give the file it points to; allowed: a regular file or a new path"),
    ("symlink to a file", lambda t: _link(t / "r.html", _file(t / "real.html")), "r.html: a symbolic link"),
    ("folder", lambda t: _mkdir(t / "r.html"), "r.html: a folder; allowed: a regular file or a new path"),
    ("pipe", lambda t: _fifo(t / "r.html"), "r.html: a named pipe; allowed: a regular file or a new path"),
    ("markdown beside is a folder", lambda t: (_mkdir(t / "r.md"), t / "r.html")[1],
     "r.md: a folder; allowed: a regular file or a new path"),
    ("markdown beside is a device link", lambda t: (_link(t / "r.md", "/dev/null"), t / "r.html")[1],
     "r.md: a symbolic link (to /dev/null)"),
    ("tables folder is a file", lambda t: (_file(t / "r_tables"), t / "r.html")[1],
     "r_tables: a file; allowed: a folder or a new path"),
    ("the Markdown name itself", lambda t: t / "r.md", "r.md: the Markdown report would replace it"),
    ("under a file", lambda t: _file(t / "f") / "r.html", "is not a folder; allowed: a path in a folder"),
    ("read-only folder", lambda t: _unwritable_folder(t) / "new" / "r.html", "cannot write in"),
]


def _file(p: Path) -> Path:
    p.write_text("")
    return p


def _mkdir(p: Path) -> Path:
    p.mkdir()
    return p


def _link(p: Path, target) -> Path:
    p.symlink_to(target)
    return p


def _fifo(p: Path) -> Path:
    os.mkfifo(p)
    return p


@pytest.fixture
def results(tmp_path) -> Path:
    (tmp_path / "res" / "points").mkdir(parents=True)  # an empty results directory
    return tmp_path / "res"


@pytest.mark.parametrize(("make", "message"), [c[1:] for c in BAD_OUTPUTS], ids=[c[0] for c in BAD_OUTPUTS])
def test_bad_output_refused_before_any_work(results, tmp_path, monkeypatch, capsys, make, message):
    target = make(tmp_path)
    before = {p: p.lstat() for p in tmp_path.rglob("*")} | {Path("/dev/null"): Path("/dev/null").lstat()}
    monkeypatch.setattr(importlib.import_module("asicsim._src.report.load"), "load",
                        lambda *a: pytest.fail("the report was computed before its output was checked"))
    with pytest.raises(ValueError) as err:
        report.write_report(results, target)
    assert message in str(err.value)
    monkeypatch.undo()
    assert main(["report", str(results), "-o", str(target)]) == 2  # the command: one line, no traceback
    out = capsys.readouterr().err
    assert out.count("\n") == 1 and message in out
    after = {p: p.lstat() for p in before}  # nothing replaced (a device stays a device), no probe left
    assert {p: (s.st_mode, s.st_ino) for p, s in after.items()} == {p: (s.st_mode, s.st_ino)
                                                                     for p, s in before.items()}
    assert not [p for p in tmp_path.rglob(".*.tmp")]
    assert stat.S_ISCHR(Path("/dev/null").stat().st_mode)


@pytest.mark.parametrize("name", ["r.html", "new/deeper/r.html", "r"])
def test_regular_file_or_new_path_written(results, tmp_path, name):
    target = tmp_path / name
    if name == "r.html":
        target.write_text("an old report")
    info = report.write_report(results, target)
    assert Path(info["html"]).read_text().startswith("<!DOCTYPE html>")
    assert Path(info["markdown"]) == target.with_suffix(".md") and Path(info["markdown"]).is_file()
    assert not [p for p in tmp_path.rglob(".*.tmp")]
