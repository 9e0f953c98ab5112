"""The docs run: every ```python block of README.md (in order, in one namespace, as a reader pastes
them), every ``>>>`` example in the package's docstrings, and every ``asicsim`` command line of the
README's ```bash blocks parses (the commands themselves run in tests/test_cli.py and beside their
models; the demo in tests/sweep/test_demo.py)."""

from __future__ import annotations

import doctest
import importlib
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def _blocks(lang: str) -> list[tuple[int, str]]:
    """(first line number, text) of every ```lang block of the README."""
    out, lines = [], README.read_text(encoding="utf-8").splitlines()
    start = None
    for i, line in enumerate(lines, 1):
        if start is None and line.strip() == f"```{lang}":
            start = i + 1
        elif start is not None and line.strip() == "```":
            out.append((start, "\n".join(lines[start - 1:i - 1])))
            start = None
    return out


# A reader runs the README's sweep (its bash block) before loading it; a small sweep stands in.
SETUP = '''
import asicsim as _sim
open("spec.toml", "w").write('designs = ["tpu_v1"]\\n[[kernels]]\\nsuite = "deepbench_gemm_inference_server"\\n')
_sim.sweep("spec.toml", "my-sweep", workers=1, progress=None)
'''

RUNNER = '''
import sys
namespace = {}
exec(compile(SETUP, "setup", "exec"), {})
for line, text in BLOCKS:
    print(f"README.md block at line {line}", file=sys.stderr, flush=True)
    exec(compile(text, f"README.md:{line}", "exec"), namespace)
'''


def test_readme_has_python_blocks():
    assert len(_blocks("python")) >= 5


def test_readme_python_blocks_run(tmp_path):
    blocks = _blocks("python")
    script = f"SETUP = {SETUP!r}\nBLOCKS = {blocks!r}\n{RUNNER}"
    out = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True,
                         timeout=300, env=_env())
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stderr.count("README.md block at line") == len(blocks)


def _env() -> dict:
    import os

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def _modules_with_examples() -> list[str]:
    out = []
    for path in sorted((ROOT / "asicsim").rglob("*.py")):
        if ">>>" in path.read_text(encoding="utf-8"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            out.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return out


MODULES = _modules_with_examples()


def test_docstring_examples_are_found():
    assert {"asicsim", "asicsim._src.hw.cost", "asicsim._src.workloads.training"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    for test in finder.find(module, name):
        for ex in test.examples:  # a skipped example says why in the prose beside it
            if ex.options.get(doctest.SKIP):
                assert "Skipped by the doctests" in test.docstring, f"{test.name}: +SKIP without a reason"
        runner.run(test, out=lambda _: None)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{name}: {result.failed} docstring example(s) failed; run python -m doctest -v"


def _commands() -> list[tuple[int, list[str]]]:
    """Every ``asicsim ...`` command line of the README's bash blocks, without comments and the
    ``[--flag]`` notation for an optional flag."""
    out = []
    for line, text in _blocks("bash"):
        for command in text.replace("\\\n", " ").splitlines():
            command = command.split(" #")[0]
            if command.lstrip().startswith("#") or "asicsim " not in command:
                continue
            command = re.sub(r"\[(--[\w-]+)\]", "", command[command.index("asicsim "):])
            out.append((line, shlex.split(command)[1:]))
    return out


COMMANDS = _commands()


def test_readme_bash_blocks_have_commands():
    assert {argv[0] for _, argv in COMMANDS} >= {"demo", "cost", "train", "sweep", "report", "scaling"}


@pytest.mark.parametrize("line, argv", COMMANDS, ids=[f"{a[0]}@{n}" for n, a in COMMANDS])
def test_readme_command_lines_parse(line, argv, capsys):
    from asicsim.cli import build_parser

    try:
        build_parser().parse_args(argv)
    except SystemExit:
        pytest.fail(f"README.md:{line}: asicsim {' '.join(argv)} does not parse: {capsys.readouterr().err}")
