"""The package's layers import one way, and no package imports itself in a circle.

Layer order, lowest first (a module may import its own layer and those below, never one above
it; ``hw`` and ``emulate`` share a level and do not import each other):

    helpers (_files, _catalogs, _jax_compat, _lazy, cli_types, cli_json, cli_progress, cli_commands)
      <- numerics <- hw, emulate <- workloads <- system <- sweep <- report <- cli

The helpers at the top of the package sit below every layer (``cli_types``, ``cli_json``,
``cli_progress`` and ``cli_commands`` are the argparse types, JSON writer, progress line and
command list every layer's subcommands use). Every import counts:
top-level ones and those inside functions (a lazy import is still a dependency); only imports
under ``if TYPE_CHECKING:`` do not run and are skipped. A name imported from a package that
exports it lazily (``from asicsim import load_results``, ``from asicsim._src.numerics import quantize``;
:mod:`asicsim._lazy`) is a dependency on the module that defines it.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "asicsim"
LEVEL = {"_src": 0, "_files": 0, "_catalogs": 0, "_jax_compat": 0, "_lazy": 0, "cli_types": 0, "cli_json": 0, "cli_progress": 0,
         "cli_commands": 0, "numerics": 1,
         "hw": 2, "emulate": 2, "workloads": 3, "system": 4, "sweep": 5, "report": 6, "cli": 7,
         "cli_catalog": 7, "cost_cli": 7, "__main__": 7, "__init__": 7}


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def _modules() -> frozenset[str]:
    return frozenset(_module(p) for p in PACKAGE.rglob("*.py"))


@cache
def _lazy_exports() -> dict[tuple[str, str], str]:
    """(package, exported name) -> the module that defines it, from each ``lazy_package`` call."""
    out = {}
    for path in PACKAGE.rglob("__init__.py"):
        package = _module(path)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "lazy_package":
                for module, names in ast.literal_eval(node.args[1]).items():
                    target = f"{package}.{module.lstrip('.')}" if module.startswith(".") else module
                    for name in names or [target.rpartition(".")[2]]:
                        out[(package, name)] = target
    return out


def _type_checking_only(tree: ast.AST) -> set[int]:
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(sub) for sub in ast.walk(node))
    return skip


def _imports(path: Path):
    """(line, imported asicsim module) for every import in ``path`` that runs, relative ones
    resolved and lazily exported names followed to the module that defines them."""
    package = _module(path) if path.name == "__init__.py" else _module(path).rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _type_checking_only(tree)
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            target = ".".join([*base, node.module] if node.module else base)
            if target.split(".")[0] != "asicsim":
                continue
            for alias in node.names:
                name = f"{target}.{alias.name}"
                yield node.lineno, (name if name in _modules()
                                    else _lazy_exports().get((target, alias.name), name if target == "asicsim" else target))
        elif isinstance(node, ast.Import):
            yield from ((node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "asicsim")


def _layer(module: str) -> str:
    """A module's layer: its package under ``asicsim`` (or under ``asicsim._src``, where the
    implementation lives; the public ``asicsim.<package>`` facades share their package's layer)."""
    parts = module.split(".")
    if parts[1:2] == ["_src"]:
        return parts[2] if len(parts) > 2 else "_src"
    return parts[1] if len(parts) > 1 else "__init__"


def _violations(path: Path) -> list[str]:
    mine = _layer(_module(path))
    out = []
    for line, target in _imports(path):
        theirs = _layer(target)
        if theirs not in LEVEL:
            continue  # a name the package root defines itself (asicsim.__version__)
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
    ("from asicsim._src.report import write_report\n", "imports asicsim._src.report (report)"),
    ("from asicsim.report import write_report\n", "imports asicsim.report (report)"),  # the public facade
    ("from ..system import links\n", "imports asicsim._src.system (system)"),
    ("import asicsim._src.emulate.policy\n", "imports asicsim._src.emulate.policy (emulate)"),
    ("def f():\n    from asicsim._src.sweep import sweep\n", "imports asicsim._src.sweep.run (sweep)"),  # a lazy import
    ("from asicsim import load_results\n", "imports asicsim._src.sweep.store (sweep)"),  # a root export
    ("from asicsim import emulate\n", "imports asicsim._src.emulate.transform (emulate)"),  # a sideways root export
])
def test_the_check_catches_an_upward_import(tmp_path, monkeypatch, source, expected):
    # A module of the hw layer that imports upward or sideways must be reported.
    fake = PACKAGE / "_src" / "hw" / "_layer_probe.py"
    monkeypatch.setattr(Path, "read_text", lambda self, encoding=None: source)
    assert any(expected in v for v in _violations(fake))



# --- cycles --------------------------------------------------------------------------------------

def import_graph(paths=None) -> dict[str, set[str]]:
    """module -> the asicsim modules it imports (every import that runs)."""
    paths = paths or {_module(p): p for p in PACKAGE.rglob("*.py")}
    return {m: {t for _, t in _imports(p) if t in paths and t != m} for m, p in paths.items()}


def cycles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[frozenset[str]] = set()
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.add(top)
                    if top == node:
                        break
                if len(component) > 1:
                    found.add(frozenset(component))
    return found


def test_no_package_imports_itself_in_a_circle():
    # issue 36 item 1: every cycle is gone, counting imports inside functions (each was held
    # together only by one); a module shared by two others goes below both instead
    found = sorted(sorted(c) for c in cycles(import_graph()))
    assert not found, f"import cycles: {found}"


def test_the_cycle_check_finds_a_cycle_made_by_a_lazy_import():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == {frozenset("abc")}
    assert cycles({"a": {"b"}, "b": set()}) == set()


def test_imports_inside_functions_and_through_lazy_exports_are_edges(tmp_path, monkeypatch):
    source = "def f():\n    from asicsim._src.numerics import quantize\n    from . import scaling\n"
    monkeypatch.setattr(Path, "read_text", lambda self, encoding=None: source)
    got = {t for _, t in _imports(PACKAGE / "_src" / "numerics" / "codec.py")}
    assert got == {"asicsim._src.numerics.quantize", "asicsim._src.numerics.scaling"}
