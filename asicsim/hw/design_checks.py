"""Collect-all validation for design specs: one :class:`DesignError` lists every bad field.

Each spec class checks a dict of its field values with these helpers and appends
(field, value, allowed) problems instead of stopping at the first one, so a file with five mistakes
is reported once, with five lines (STYLE.md: validate at construction, raise one exception).
"""

from __future__ import annotations

import dataclasses
from typing import Any

#: One problem: (field path, offending value, what is allowed).
Problem = tuple[str, Any, str]


class DesignError(ValueError):
    """One or more invalid fields of a design; ``.problems`` lists (field, value, allowed)."""

    def __init__(self, problems: list[Problem], source: str | None = None) -> None:
        self.problems = list(problems)
        self.source = source
        where = f"{source}: " if source else ""
        head = f"{where}{len(self.problems)} invalid design field(s):"
        lines = [f"  - {f} = {v!r}; allowed: {a}" for f, v, a in self.problems]
        super().__init__("\n".join([head, *lines]))


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def positive(out: list[Problem], v: dict, key: str, *, integer: bool = False,
              optional: bool = False, zero: bool = False) -> None:
    """Append a problem unless ``v[key]`` is a positive number (an integer if asked; None if
    optional; 0 too if ``zero``)."""
    if key not in v or (optional and v[key] is None):
        return
    x = v[key]
    ok = (_is_int(x) if integer else _is_num(x)) and (x >= 0 if zero else x > 0)
    if not ok:
        kind = "an integer" if integer else "a number"
        out.append((key, x, f"{kind} {'>=' if zero else '>'} 0" + (" (or omitted)" if optional else "")))


def text(out: list[Problem], v: dict, key: str, *, nonempty: bool = False) -> None:
    if key in v and (not isinstance(v[key], str) or (nonempty and not v[key].strip())):
        out.append((key, v[key], "a non-empty string" if nonempty else "a string"))


def raise_if(problems: list[Problem]) -> None:
    if problems:
        raise DesignError(problems)


def own_fields(obj: Any) -> dict[str, Any]:
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
