"""The supported jax range is stated once in pyproject.toml; README and CI must say the same."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import jax
from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parents[1]


def _jax_spec() -> SpecifierSet:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    (spec,) = [d for d in deps if re.match(r"jax\b", d)]
    return SpecifierSet(spec[len("jax"):])


def test_readme_states_the_declared_jax_range():
    spec = _jax_spec()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    bounds = sorted((str(s) for s in spec), key=lambda s: not s.startswith(">"))
    assert f"`jax{','.join(bounds)}`" in readme
    lower = next(s.version for s in spec if s.operator == ">=")
    assert f"lower bound, {lower}" in readme


def test_the_installed_jax_is_inside_the_declared_range():
    assert jax.__version__ in _jax_spec()
