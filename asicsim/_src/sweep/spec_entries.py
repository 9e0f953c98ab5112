"""The lists of a sweep spec checked into entries: its workloads (with overrides and the labels
results show), its DeepBench kernel suites, its recipes (each loaded once) and its designs. Each
function appends the problems it finds (naming the entry, the field, the value and what is
allowed) to ``problems`` and returns the entries that passed."""

from __future__ import annotations

import collections
import dataclasses
import types
from typing import Any

from asicsim._files import beside
from asicsim._src.emulate import RecipeError, load_recipe
from asicsim._src.hw.cost import parse_formats
from asicsim._src.hw.operations import OperationError
from asicsim._src.numerics.formats import FormatError
from asicsim._src.sweep.designs import spec_designs
from asicsim._src.sweep.point_identity import canon, content_key
from asicsim._src.workloads.deepbench import PRECISIONS, WorkloadError, list_suites
from asicsim._src.workloads.workload import load_workload, workload_problems

RUN_KINDS = ("train", "infer", "cost")
_WORKLOAD_KEYS = {"name", "run", "scale", "steps", "batch", "lr", "optimizer", "eval_every", "momentum"}


def string_list(t: dict, key: str, kind: type, where: str, problems: list, default=()) -> tuple:
    value = t.get(key, list(default))
    if not isinstance(value, list) or not all(isinstance(v, kind) and not isinstance(v, bool) for v in value):
        problems.append(f"{where}{key} = {value!r}: allowed: a list of {kind.__name__}")
        return ()
    return tuple(value)


def design_entries(t: dict, problems: list, folder: str | None) -> tuple[tuple[str, Any], ...]:
    return spec_designs(t, string_list(t, "designs", str, "", problems), problems, folder)


def workload_entries(t: dict, problems: list, folder: str | None) -> tuple[dict, ...]:
    entries = t.get("workloads", [])
    if not isinstance(entries, list):
        problems.append(f"workloads = {entries!r}: allowed: [[workloads]] tables")
        return ()
    out: list[dict] = []
    index: list[int] = []  # each entry's place in the spec
    for i, e in enumerate(entries):
        where = f"workloads[{i}]"
        if not isinstance(e, dict) or "name" not in e:
            problems.append(f"{where} = {e!r}: allowed: a table with name = WORKLOAD")
            continue
        bad = sorted(set(e) - _WORKLOAD_KEYS)
        if bad:
            problems.append(f"{where}: unknown field(s) {bad}; allowed: {sorted(_WORKLOAD_KEYS)}")
        run = e.get("run", ["train", "cost"])
        if not isinstance(run, list) or not run or set(run) - set(RUN_KINDS):
            problems.append(f"{where}.run = {run!r}: allowed: a non-empty list of {list(RUN_KINDS)}")
            continue
        try:
            w = load_workload(beside(e["name"], folder))
        except WorkloadError as err:
            problems.append(f"{where}.name: {err}")
            continue
        try:  # the named workload at the scale given: a sweep point's identity is that content
            w = load_workload(beside(e["name"], folder), e.get("scale"))
        except WorkloadError as err:
            problems.append(f"{where}.scale: {err}")
            continue
        overrides = {k: e[k] for k in _WORKLOAD_KEYS - {"name", "run", "scale"} if k in e}
        bad = workload_problems(types.SimpleNamespace(**{**dataclasses.asdict(w), **overrides}))
        if bad:  # the shipped file is valid, so these are the overrides'
            problems.extend(f"{where}.{b}" for b in bad)
            continue
        try:
            w = w.replace(**overrides)
        except (TypeError, WorkloadError) as err:
            problems.append(f"{where}: {err}")
            continue
        entry = {"name": w.name, "given": str(e["name"]), "run": tuple(run), "overrides": overrides,
                 "workload": w, "key": content_key("workload", w)}
        same = next((j for j, o in zip(index, out, strict=True) if (o["key"], o["run"]) == (entry["key"], entry["run"])),
                    None)
        if same is not None:
            problems.append(f"{where} = {e!r}: the same workload and runs as workloads[{same}]; allowed: each "
                            "once")
            continue
        out.append(entry)
        index.append(i)
    for e, label in zip(out, _labels(out), strict=True):
        e["label"] = label
    return tuple(out)


def _labels(entries: list[dict]) -> list[str]:
    """What the results call each workload: its name; where entries of different content share a
    name, the name or path the spec gives; where those still clash (one workload listed with
    different overrides or scales), the overrides (and a scale other than small) too. Two
    different workloads never share a label."""
    def clashing(labels: list[str]) -> set:
        keys = collections.defaultdict(set)
        for label, e in zip(labels, entries, strict=True):
            keys[label].add(e["key"])
        return {k for k, v in keys.items() if len(v) > 1}

    names = [e["name"] for e in entries]
    by_name = clashing(names)
    labels = [e["given"] if e["name"] in by_name else e["name"] for e in entries]
    again = clashing(labels)
    for i, e in enumerate(entries):
        if labels[i] in again:
            scale = e["workload"].scale
            given = {**e["overrides"], **({"scale": scale} if scale != "small" else {})}
            labels[i] += "[" + ",".join(f"{k}={v}" for k, v in sorted(given.items())) + "]"
    return labels


def kernel_entries(t: dict, problems: list) -> tuple[dict, ...]:
    entries = t.get("kernels", [])
    if not isinstance(entries, list):
        problems.append(f"kernels = {entries!r}: allowed: [[kernels]] tables")
        return ()
    out: list[dict] = []
    index: list[int] = []  # each entry's place in the spec
    for i, e in enumerate(entries):
        where = f"kernels[{i}]"
        if not isinstance(e, dict) or set(e) - {"suite", "precision", "formats"} or "suite" not in e:
            problems.append(f"{where} = {e!r}: allowed: a table with suite = NAME and optional precision "
                            "and formats")
            continue
        if e["suite"] not in list_suites() or e["suite"] == "deepbench_allreduce":
            problems.append(f"{where}.suite = {e['suite']!r}: allowed: "
                            f"{[s for s in list_suites() if s != 'deepbench_allreduce']}")
            continue
        p = e.get("precision")
        if p is not None and p not in PRECISIONS:
            problems.append(f"{where}.precision = {p!r}: allowed: {list(PRECISIONS)}")
            continue
        f = e.get("formats")
        if f is not None:
            try:
                f = ",".join(f"{k}={v}" for k, v in parse_formats(f).items())
            except (OperationError, AttributeError) as err:
                problems.append(f"{where}.formats = {f!r}: {err}")
                continue
        entry = {"suite": e["suite"], "precision": p, "formats": f}
        if entry in out:
            problems.append(f"{where} = {e!r}: the same as kernels[{index[out.index(entry)]}]; allowed: each "
                            "suite, precision and formats once")
            continue
        out.append(entry)
        index.append(i)
    return tuple(out)


def recipe_entries(t: dict, key: str, problems: list, loaded: dict, folder: str | None,
             default=()) -> tuple[str, ...]:
    """The recipe names of ``key``, each loaded into ``loaded`` (name -> Policy) once (a relative
    path against the spec's ``folder``)."""
    names = string_list(t, key, str, "", problems, default)
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        problems.append(f"{key} = {list(names)!r}: {twice} listed twice; allowed: each recipe once")
    for n in names:
        if n in loaded:
            continue
        try:
            loaded[n] = load_recipe(beside(n, folder))
            canon(loaded[n])  # the format files it names are read (and checked) now
        except (RecipeError, FormatError) as err:
            problems.append(f"{key}: {err}")
    return names
