"""What a newcomer expects of a command line: ``--version``; the catalogs listed one entry per line
with a description; every option's default in ``--help``; a progress line on stderr for the long
commands that leaves ``--json`` stdout pure JSON; no bare placeholder cells."""

from __future__ import annotations

import argparse
import io
import json
import sys
from pathlib import Path

import pytest

from asicsim import __version__
from asicsim._src.cli_progress import StepProgress
from asicsim.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]


def _run(argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        rc = main(argv)
    except SystemExit as exit_:  # argparse's own exits (--version, --help)
        rc = exit_.code
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_version(capsys):
    rc, out, _ = _run(["--version"], capsys)
    assert rc == 0 and out.strip() == f"asicsim {__version__}"


@pytest.mark.parametrize("command, files", [
    ("designs", sorted(p.stem for p in (ROOT / "designs").glob("*.toml"))),
    ("recipes", sorted(p.stem for p in (ROOT / "formats" / "recipes").glob("*.toml"))),
])
def test_catalog_lists_every_file_with_a_description(command, files, capsys):
    rc, out, _ = _run([command], capsys)
    assert rc == 0
    rows = {line.split()[0]: line for line in out.splitlines()[1:]}
    assert sorted(rows) == files
    rc, out, _ = _run([command, "--json"], capsys)
    entries = json.loads(out)
    assert sorted(e["name"] for e in entries) == files
    assert all(e["description"].strip() for e in entries)
    for e in entries:  # the listing shows the description's first sentence, on one line
        assert e["description"].split()[0] in rows[e["name"]]


def test_designs_lists_systolic_and_gpu(capsys):
    _, out, _ = _run(["designs", "--json"], capsys)
    kinds = {e["name"]: e["kind"] for e in json.loads(out)}
    assert kinds["tpu_v1"] == "systolic" and kinds["gpu_h100"] == "gpu"


def test_workloads_lists_training_workloads_and_kernel_suites(capsys):
    from asicsim._src.workloads import list_suites, list_workloads

    rc, out, _ = _run(["workloads", "--json"], capsys)
    assert rc == 0
    rows = json.loads(out)
    assert [r["name"] for r in rows if r["kind"] == "training"] == list_workloads()
    assert [r["name"] for r in rows if r["kind"].startswith("suite:")] == list_suites()
    assert {"digits_mlp", "charlm_transformer", "deepbench_gemm_train"} <= {r["name"] for r in rows}
    assert all(r["description"].strip() for r in rows)
    _, text, _ = _run(["workloads"], capsys)
    assert len(text.splitlines()) == len(rows) + 1


def _options():
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, p in sub.choices.items():
        formatter = p._get_formatter()
        for action in p._actions:
            if action.option_strings and not isinstance(action, argparse._HelpAction):
                yield name, action, formatter


OPTIONS = list(_options())


def test_every_command_is_walked():
    assert {name for name, _, _ in OPTIONS} >= {"cost", "train", "infer", "sweep", "report", "designs"}


@pytest.mark.parametrize("command, action, formatter", OPTIONS,
                         ids=[f"{n} {a.option_strings[-1]}" for n, a, _ in OPTIONS])
def test_every_option_help_states_its_default(command, action, formatter):
    if action.nargs == 0:  # a flag: off unless given
        return
    text = formatter._expand_help(action) if action.help else ""
    assert "default" in text or action.required, f"asicsim {command} {action.option_strings[-1]}: {text!r}"
    if action.default is not None and action.default is not False:  # the value itself, as written
        shown = {str(action.default)} | ({f"{action.default:g}"} if isinstance(action.default, float) else set())
        assert any(v in text for v in shown), f"asicsim {command} {action.option_strings[-1]}: {text!r}"


def test_help_shows_a_default_value(capsys):
    rc, out, _ = _run(["train", "--help"], capsys)
    assert rc == 0 and "(default: fp32)" in " ".join(out.split())  # --recipe


# --- progress ---------------------------------------------------------------------------------


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def loud(monkeypatch):
    """A progress line from the first update, every update (the commands under test are quick)."""
    monkeypatch.setattr(StepProgress, "QUIET_S", 0.0)
    monkeypatch.setattr(StepProgress, "EVERY", 0.0)


def test_progress_line_in_a_log(loud):
    log = io.StringIO()
    bar = StepProgress("train x", "steps", stream=log)
    for done in (0, 50, 100):
        bar.update(done, 100)
    bar.close()
    lines = log.getvalue().splitlines()
    assert lines[0].startswith("train x: 0/100 steps") and lines[0].endswith("ETA ?")
    assert "50/100 steps" in lines[1] and "ETA" in lines[1]
    assert lines[-1].endswith("finished") and "\r" not in log.getvalue()


def test_progress_line_on_a_terminal_redraws_and_ends_the_line(loud):
    tty = Tty()
    bar = StepProgress("report r", "stages", stream=tty)
    bar.update(1, 5)
    bar.update(5, 5)
    bar.close()
    text = tty.getvalue()
    assert text.count("\r") == 3 and text.endswith("finished\n") and text.count("\n") == 1


def test_progress_on_the_default_stderr_redraws_on_a_terminal(loud, monkeypatch):
    # the default stream is the string "stderr", resolved to sys.stderr at construction: the
    # terminal test must ask that stream, not the string (which never was a terminal)
    tty = Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    bar = StepProgress("train x", "steps")
    bar.update(1, 4)
    bar.update(2, 4)
    bar.close()
    assert tty.getvalue().count("\r") == 3 and tty.getvalue().count("\n") == 1
    log = io.StringIO()  # and not on a log
    monkeypatch.setattr(sys, "stderr", log)
    bar = StepProgress("train x", "steps")
    bar.update(1, 4)
    bar.close()
    assert "\r" not in log.getvalue() and log.getvalue().count("\n") == 2


def test_progress_is_silent_at_first_and_when_quiet():
    log = io.StringIO()
    bar = StepProgress("quick", stream=log)  # done within the first second: nothing shown
    bar.update(10, 10)
    bar.close()
    assert log.getvalue() == ""
    with pytest.raises(ValueError, match="done = -1"):
        bar.update(-1, 10)


def test_train_progress_on_stderr_json_on_stdout(loud, capsys):
    rc, out, err = _run(["train", "digits_mlp", "--recipe", "bf16", "--seeds", "2", "--steps", "40",
                         "--eval-every", "20", "--json"], capsys)
    assert rc == 0
    assert json.loads(out)["recipe"] == "bf16"
    assert "train digits_mlp under bf16: 20/80 steps" in err and "80/80 steps" in err


def test_infer_progress_on_stderr_json_on_stdout(loud, capsys):
    rc, out, err = _run(["infer", "digits_mlp", "--recipe", "int8_ptq_tensor", "--steps", "30", "--json"],
                        capsys)
    assert rc == 0
    assert "drop" in json.loads(out)
    assert "30/30 steps" in err


def test_report_progress_on_stderr_json_on_stdout(loud, capsys, tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text('designs = ["tpu_v1"]\n[[kernels]]\nsuite = "deepbench_gemm_inference_device"\n')
    assert main(["sweep", str(spec), "--out", str(tmp_path / "out"), "--workers", "1", "--json"]) == 0
    capsys.readouterr()
    rc, out, err = _run(["report", str(tmp_path / "out"), "--json"], capsys)
    assert rc == 0
    assert Path(json.loads(out)["html"]).is_file()
    assert "0/5 stages" in err and "5/5 stages" in err


# --- placeholders: a word, or a footnote saying what the mark means -----------------------------


def test_formats_table_explains_its_empty_cells(capsys):
    _, out, _ = _run(["formats", "int8", "bf16", "mxfp4"], capsys)
    rows = out.splitlines()[2:5]
    assert all(" - " not in r for r in rows)
    assert "n/a" in rows[0] and any(line.startswith("min subnormal n/a:") for line in out.splitlines())


def test_trace_says_why_a_cell_is_empty(capsys):
    _, out, _ = _run(["trace", "digits_mlp", "--design", "tpu_v1"], capsys)  # fp32 does not run on int8
    assert "NaN" not in out and "n/a" in out
    assert "n/a: not priced on that design" in out
    assert "tpu_v1 (forward, grad-input, grad-weight): not priced" in out
