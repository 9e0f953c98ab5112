"""The package's layers import one way: numerics <- hw and emulate <- workloads <- system <- sweep
<- report <- cli (DEVELOPERS.md). A module may import its own layer and those below, never one
above it, and hw and emulate (one level) not each other. The helpers at the top of the package
(``_files``, ``_catalogs``, ``_jax_compat``, ``_lazy``, and ``cli_types`` and ``cli_progress``, the argparse
types and progress line every layer's subcommands use) sit below every layer."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "asicsim"
LEVEL = {"_files": 0, "_catalogs": 0, "_jax_compat": 0, "_lazy": 0, "cli_types": 0, "cli_progress": 0, "numerics": 1,
         "hw": 2, "emulate": 2, "workloads": 3, "system": 4, "sweep": 5, "report": 6, "cli": 7,
         "cli_catalog": 7, "__main__": 7, "__init__": 7}


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path):
    """(line, imported asicsim module) for every import in ``path``, relative ones resolved."""
    package = _module(path) if path.name == "__init__.py" else _module(path).rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            target = ".".join([*base, node.module] if node.module else base)
            names = [f"{target}.{a.name}" for a in node.names] if target == "asicsim" else [target]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        yield from ((node.lineno, n) for n in names if n.split(".")[0] == "asicsim")


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _violations(path: Path) -> list[str]:
    mine = _layer(_module(path))
    out = []
    for line, target in _imports(path):
        theirs = _layer(target)
        if theirs not in LEVEL:
            continue  # a public name of the package root (asicsim.__version__ and the like)
        peer_clash = theirs != mine and LEVEL[theirs] == LEVEL[mine] and LEVEL[mine] < 7
        if LEVEL[theirs] > LEVEL[mine] or peer_clash:
            out.append(f"{path.relative_to(PACKAGE.parent)}:{line} ({mine}) imports {target} ({theirs})")
    return out


def test_every_module_has_a_layer():
    assert {_layer(_module(p)) for p in PACKAGE.rglob("*.py")} <= set(LEVEL)


def test_layers_import_one_way():
    bad = [v for p in sorted(PACKAGE.rglob("*.py")) for v in _violations(p)]
    assert not bad, "imports against the layer order:\n" + "\n".join(bad)


@pytest.mark.parametrize(("source", "expected"), [
    ("from asicsim.report import write_report\n", "imports asicsim.report (report)"),
    ("from ..system import links\n", "imports asicsim.system (system)"),
    ("import asicsim.emulate.policy\n", "imports asicsim.emulate.policy (emulate)"),
    ("def f():\n    from asicsim.sweep import sweep\n", "imports asicsim.sweep (sweep)"),  # a lazy import
])
def test_the_check_catches_an_upward_import(tmp_path, monkeypatch, source, expected):
    # A module of the hw layer that imports upward or sideways must be reported.
    fake = PACKAGE / "hw" / "_layer_probe.py"
    monkeypatch.setattr(Path, "read_text", lambda self, encoding=None: source)
    assert any(expected in v for v in _violations(fake))

