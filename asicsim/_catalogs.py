"""Where the user-editable catalogs (``formats/``, ``designs/``, ``workloads/``) live in this installation."""

from __future__ import annotations

from pathlib import Path


def shipped_dir(name: str) -> Path:
    """The catalog folder ``name``: inside the wheel (``asicsim/_catalog/<name>``, put there by
    the build's force-include) or, in a source checkout, at the repository root."""
    package = Path(__file__).resolve().parent
    for candidate in (package / "_catalog" / name, package.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"asicsim's {name}/ catalog is missing from this installation")
