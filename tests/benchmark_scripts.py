"""Load a script of ``benchmarks/`` as a module, as tests that check a benchmark's figures need.

The scripts are not a package: each is executed from its file, with ``benchmarks/`` on
``sys.path`` (as when it runs as a script, so its siblings such as ``_timing`` import) and
registered under its own name (dataclasses and pickling look a module up there).
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load_benchmark(name: str) -> types.ModuleType:
    """A fresh module of ``benchmarks/<name>.py``."""
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod
