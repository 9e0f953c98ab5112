"""Collect-all validation for design specs: one :class:`DesignError` lists every bad field.

Each spec class checks a dict of its field values with these helpers and appends
(field, value, allowed) problems instead of stopping at the first one, so a file with five mistakes
is reported once, with five lines (STYLE.md: validate at construction, raise one exception).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from asicsim._src.hw.limits import Limit

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


def in_range(out: list[Problem], v: dict, key: str, limit: Limit, *, optional: bool = False) -> None:
    """Append a problem unless ``v[key]`` lies in ``limit`` (None too if ``optional``); the
    problem quotes the range and why it is what it is (:mod:`asicsim._src.hw.limits`)."""
    if key not in v or (optional and v[key] is None):
        return
    if not limit.ok(v[key]):
        out.append((key, v[key], limit.allowed() + (" (or omitted)" if optional else "")))


def flag(out: list[Problem], v: dict, key: str) -> None:
    """Append a problem unless ``v[key]`` is a boolean (TOML ``true``/``false``; "no" is no bool)."""
    if key in v and not isinstance(v[key], bool):
        out.append((key, v[key], "true or false (a TOML boolean, unquoted)"))


def sourced_flag(out: list[Problem], v: dict, key: str, claim: str) -> None:
    """A boolean ``key`` that needs ``<key>_source`` (a string saying who says ``claim``) when true:
    a modelling choice that moves figures carries its evidence."""
    flag(out, v, key)
    text(out, v, f"{key}_source")
    why = v.get(f"{key}_source", "")
    if v.get(key) is True and isinstance(why, str) and not why.strip():
        out.append((f"{key}_source", why, f"a non-empty string saying who says {claim} (required with "
                                          f"{key} = true)"))


def choice(out: list[Problem], v: dict, key: str, allowed, shown: str) -> None:
    """Append a problem unless ``v[key]`` is one of the strings ``allowed`` (a list or a table
    given instead is a problem too, not a TypeError)."""
    if key in v and not (isinstance(v[key], str) and v[key] in allowed):
        out.append((key, v[key], shown))


def text(out: list[Problem], v: dict, key: str, *, nonempty: bool = False) -> None:
    if key in v and (not isinstance(v[key], str) or (nonempty and not v[key].strip())):
        out.append((key, v[key], "a non-empty string" if nonempty else "a string"))


def raise_if(problems: list[Problem]) -> None:
    if problems:
        raise DesignError(problems)


def own_fields(obj: Any) -> dict[str, Any]:
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
