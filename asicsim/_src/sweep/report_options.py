"""The ``[report]`` table of a sweep spec: what the report's answer picks (objective, accuracy
and loss limits, energy scope), as a frozen :class:`ReportOptions` that checks itself when built
(so options built in code are checked as those read from a spec), with its defaults filled in."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields

from asicsim._src.hw.scopes import SCOPES
from asicsim._src.numerics.frozen_fields import convert_fields, converted
from asicsim._src.sweep.errors import SweepError

#: What the report's answer minimises, per training step (inference batch for inference): total
#: energy, time, or their product (energy-delay product).
OBJECTIVES = ("energy", "time", "edp")

_LIMITS = ("max_accuracy_drop", "max_loss_increase")


def option_problems(values: Mapping, where: str = "report") -> list[str]:
    """The problems of ``[report]`` ``values`` (a table, or :class:`ReportOptions`' fields), each
    naming the field, the value and what is allowed."""
    names = sorted(REPORT_DEFAULTS)
    out = [f"{where}.{k}: no such field; fields are {names}" for k in sorted(set(values) - set(names))]
    if "objective" in values and values["objective"] not in OBJECTIVES:
        out.append(f"{where}.objective = {values['objective']!r}: allowed: {list(OBJECTIVES)}")
    if "scope" in values and values["scope"] not in SCOPES:
        out.append(f"{where}.scope = {values['scope']!r}: allowed: {list(SCOPES)}")
    for k in _LIMITS:
        v = values.get(k, 0.0)
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not v >= 0 or v == math.inf:
            out.append(f"{where}.{k} = {v!r}: allowed: a finite number >= 0")
    return out


@dataclass(frozen=True, eq=False)
class ReportOptions(Mapping):
    """The ``[report]`` settings, checked at construction (a :class:`~asicsim.SweepError`
    names every bad field); the limits are stored as floats. Read as a mapping too
    (``opts["objective"]``, ``dict(opts)``), as the spec's table it comes from.

    >>> ReportOptions(max_accuracy_drop=1)["max_accuracy_drop"]
    1.0
    """

    objective: str = "energy"
    max_accuracy_drop: float = converted(float, default=0.5)  # accuracy points (0.5 = 0.005 of a fraction)
    max_loss_increase: float = converted(float, default=0.01)  # a loss metric's own units (nats)
    scope: str = "board"  # the energy scope the answer compares (asicsim._src.hw.scopes)

    def __post_init__(self) -> None:
        problems = option_problems({f.name: getattr(self, f.name) for f in fields(self)}, "ReportOptions")
        if problems:
            raise SweepError("; ".join(problems))
        convert_fields(self)

    def __getitem__(self, key: str):
        if key not in REPORT_DEFAULTS:
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        return iter(REPORT_DEFAULTS)

    def __len__(self) -> int:
        return len(REPORT_DEFAULTS)

    def __hash__(self) -> int:
        return hash(tuple(self.items()))

    def __repr__(self) -> str:
        return f"ReportOptions({', '.join(f'{k}={v!r}' for k, v in self.items())})"


#: The ``[report]`` table's defaults: accuracy in points (percent: 0.5 = 0.005 of a fraction metric),
#: loss metrics in their own units (nats).
REPORT_DEFAULTS = {f.name: f.default for f in fields(ReportOptions)}


def report_options(t, where: str = "report") -> tuple[ReportOptions, list[str]]:
    """The ``[report]`` table as :class:`ReportOptions` (the defaults where the table has problems),
    and its problems (each naming the field, the value and what is allowed); ``t`` None gives the
    defaults."""
    if t is None:
        return ReportOptions(), []
    if not isinstance(t, Mapping):
        return ReportOptions(), [f"{where} = {t!r}: allowed: a table [report] with {sorted(REPORT_DEFAULTS)}"]
    problems = option_problems(t, where)
    if problems:
        return ReportOptions(), problems
    return ReportOptions(**t), []
