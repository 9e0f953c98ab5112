"""The designs of a sweep spec, each with the label a report shows: the named ones
(``designs = [...]``) and every grid point of every ``[[design_space]]``.

A named design's label is the name or path the spec gives. A grid point's label is its base
design's name plus the varied fields (``edge_int8_32x32[array.rows=16]``); where bases of
different content share a name (two files both saying ``name = "npu"``), each one's base as the
spec gives it (its path) stands in for that name, so two different designs never share a label.
"""

from __future__ import annotations

import collections
import itertools
import math
import tomllib
import warnings
from pathlib import Path
from typing import Any

from asicsim._files import TextFileError, beside, read_text_file
from asicsim._src.sweep.errors import SweepError, SweepWarning

#: The most designs one sweep builds (named ones and design-space grid points together): a
#: million would take hours to build before the first point runs.
MAX_DESIGNS = 100_000

#: Beyond this many designs a sweep says how many it builds (a :class:`SweepWarning`).
WARN_DESIGNS = 10_000

#: Seconds to build one design-space grid point (measured: about 1 ms on one busy core).
SECONDS_PER_DESIGN = 1e-3


def _set_dotted(table: dict, key: str, value, where: str) -> None:
    """Set ``a.b.c`` in ``table``, copying the tables along the path (the others stay shared)."""
    parts = key.split(".")
    node = table
    for p in parts[:-1]:
        if not isinstance(node.get(p), dict):
            raise SweepError(f"{where}: {key!r}: the base design has no table {p!r}")
        node[p] = dict(node[p])
        node = node[p]
    if parts[-1] not in node and len(parts) == 1 and parts[-1] in ("name",):
        raise SweepError(f"{where}: {key!r} cannot be varied")
    node[parts[-1]] = value


def _space_base(entry: Any, i: int, folder: str | None = None) -> tuple[str, dict, dict]:
    """One ``[[design_space]]`` entry checked: (base as given, its design table with the format
    files it names resolved beside it, vary)."""
    from asicsim._src.hw.design_files import designs_dir, formats_beside

    where = f"design_space[{i}]"
    if not isinstance(entry, dict) or set(entry) - {"base", "vary"} or "base" not in entry:
        raise SweepError(f"{where} = {entry!r}: allowed: a table with base = DESIGN and vary = "
                     "{{ \"dotted.field\" = [values...] }}")
    base = str(entry["base"])
    path = Path(beside(base, folder)) if base.endswith(".toml") else designs_dir() / f"{base}.toml"
    if not path.is_file():
        raise SweepError(f"{where}.base = {base!r}: no such design (a catalog name or a .toml path)")
    try:
        table = tomllib.loads(read_text_file(path))
    except (tomllib.TOMLDecodeError, TextFileError) as err:
        raise SweepError(f"{where}.base = {base!r}: {path}: not a valid design file ({err})") from None
    vary = entry.get("vary", {})
    if not isinstance(vary, dict) or not all(isinstance(v, list) and v for v in vary.values()):
        raise SweepError(f"{where}.vary = {vary!r}: allowed: a table of dotted field = [values...]")
    table.setdefault("name", path.stem)
    return base, formats_beside(table, path.parent), vary


def _space_points(base_table: dict, vary: dict, stem: str, i: int) -> list[tuple[str, Any]]:
    """Every grid point of one design space, as (label, design)."""
    from asicsim._src.hw.design_checks import DesignError
    from asicsim._src.hw.design_files import design_from_any_table

    where = f"design_space[{i}]"
    keys = list(vary)
    out = []
    for values in itertools.product(*(vary[k] for k in keys)):
        t = dict(base_table)  # copied along each varied path only (_set_dotted), not deep-copied
        label = stem
        if keys:
            label += "[" + ",".join(f"{k}={v}" for k, v in zip(keys, values, strict=True)) + "]"
        for k, v in zip(keys, values, strict=True):
            _set_dotted(t, k, v, where)
        t["name"] = label
        try:
            design = design_from_any_table(t, f"{where} {label}")
        except DesignError as err:
            raise SweepError(str(err)) from None  # it names the design space and grid point
        out.append((label, design))
    return out


def spec_designs(t: dict, names: tuple[str, ...], problems: list,
                 folder: str | None = None) -> tuple[tuple[str, Any], ...]:
    """(label, design) of every named design and design-space grid point; problems appended;
    relative paths are relative to ``folder`` (the spec file's)."""
    from asicsim._src.hw.design_checks import DesignError
    from asicsim._src.hw.design_files import load_design

    out = []
    for name in names:
        try:
            out.append((name, load_design(beside(name, folder))))
        except DesignError as err:
            problems.append(f"designs: {err}")
    spaces = t.get("design_space", [])
    if not isinstance(spaces, list):
        problems.append(f"design_space = {spaces!r}: allowed: [[design_space]] tables")
        spaces = []
    bases = []
    for i, entry in enumerate(spaces):
        try:
            bases.append((i, *_space_base(entry, i, folder)))
        except SweepError as err:  # it names the entry
            problems.append(str(err))
    sizes = [math.prod(len(v) for v in vary.values()) for _, _, _, vary in bases]
    total = len(out) + sum(sizes)
    if total > MAX_DESIGNS:  # said before any is built (about a millisecond each)
        each = ", ".join(f"design_space[{i}]: {n:,} ({' x '.join(str(len(v)) for v in vary.values())})"
                         for (i, _, _, vary), n in zip(bases, sizes, strict=True))
        problems.append(f"design_space: {total:,} designs in all ({each}); allowed: at most {MAX_DESIGNS:,} "
                        "per sweep (building them alone would take about "
                        f"{total * SECONDS_PER_DESIGN / 60:,.0f} minutes): split the space into several sweeps "
                        "or vary fewer values")
        return tuple(out)
    if total > WARN_DESIGNS:
        warnings.warn(f"design_space: {total:,} designs to build and price (about "
                      f"{total * SECONDS_PER_DESIGN:,.0f} s to build them)", SweepWarning, stacklevel=3)
    # bases of different content under one name: each goes by its base as the spec gives it
    tables_by_name = collections.defaultdict(list)
    for _, _, table, _ in bases:
        if table not in tables_by_name[table["name"]]:
            tables_by_name[table["name"]].append(table)
    for i, base, table, vary in bases:
        stem = base if len(tables_by_name[table["name"]]) > 1 else table["name"]
        try:
            out.extend(_space_points(table, vary, stem, i))
        except SweepError as err:  # it names the entry and grid point
            problems.append(str(err))
    dup = sorted(k for k, n in collections.Counter(label for label, _ in out).items() if n > 1)
    if dup:
        problems.append(f"designs: {dup} named twice")
    return tuple(out)
