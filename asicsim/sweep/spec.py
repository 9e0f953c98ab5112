"""Sweep specs: a TOML file naming recipes, designs (and ranges over their fields), workloads and
seeds, expanded into points, each with a stable identity.

A spec (see ``sweeps/demo.toml``)::

    name = "my-sweep"
    seeds = [0, 1]
    recipes = ["fp32", "bf16"]             # training recipes
    infer_recipes = ["int8_ptq_channel"]   # post-training quantization recipes (optional)
    designs = ["tpu_v1", "gpu_v100", "my_design.toml"]
    point_timeout_s = 900                  # optional: a point running longer fails

    [[workloads]]                          # a training workload, what to run on it, overrides
    name = "digits_mlp"
    run = ["train", "cost"]                # train | infer | cost (its op trace priced per design)
    scale = "small"                        # optional: one of the workload's scales (e.g. "gpu")
    steps = 500

    [[kernels]]                            # a DeepBench kernel suite priced on every design
    suite = "deepbench_gemm_inference_server"
    precision = "int8"                     # a DeepBench precision (optional)
    formats = "act=fp8_e4m3,weight=fp8_e4m3"   # roles set or overridden (optional)

    [[design_space]]                       # a grid over fields of one design (dotted keys)
    base = "edge_int8_32x32"
    vary = { "array.rows" = [16, 32], "array.dataflow" = ["os", "ws"] }

    [report]                               # what the report's answer picks (optional)
    objective = "energy"                   # energy | time | edp, per training step / inference batch
    max_accuracy_drop = 0.5                # accuracy points (percent) below fp32 a recipe may lose
    max_loss_increase = 0.01               # lower-is-better metrics (val_loss, test_cer): units above fp32
    scope = "board"                        # core | chip | board: the scope energies are compared at

Expansion: ``train`` gives one point per (workload, recipe, seed); ``infer`` one per
(workload, infer recipe, seed); ``cost`` one per (workload, recipe, design) for the training step
of each training recipe and the inference batch of each infer recipe; each kernel suite one per
(suite, design). Designs are the named ones plus every grid point of every design space.

A point's identity is a hash of its fully resolved inputs — the workload after overrides, the
recipe and the design as loaded (not their names), the seed, and the asicsim version — so editing a
recipe or design file makes new points, while renaming nothing reruns nothing.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import itertools
import json
import tomllib
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from asicsim._catalogs import shipped_dir
from asicsim._files import TextFileError, beside, read_text_file
from asicsim.hw.scopes import SCOPES
from asicsim.sweep.designs import spec_designs
from asicsim.sweep.errors import SweepError as SweepError
from asicsim.sweep.errors import SweepWarning as SweepWarning

RUN_KINDS = ("train", "infer", "cost")
_TOP = {"name", "description", "seeds", "recipes", "infer_recipes", "designs", "workloads", "kernels",
        "design_space", "point_timeout_s", "report"}
_WORKLOAD_KEYS = {"name", "run", "scale", "steps", "batch", "lr", "optimizer", "eval_every", "momentum"}


#: What the report's answer minimises, per training step (inference batch for inference): total
#: energy, time, or their product (energy-delay product).
OBJECTIVES = ("energy", "time", "edp")

#: The ``[report]`` table's defaults: accuracy in points (percent: 0.5 = 0.005 of a fraction metric),
#: loss metrics in their own units (nats).
REPORT_DEFAULTS = {"objective": "energy", "max_accuracy_drop": 0.5, "max_loss_increase": 0.01, "scope": "board"}



def report_options(t, where: str = "report") -> tuple[dict, list[str]]:
    """The ``[report]`` table with defaults filled in, and its problems (each naming the field, the
    value and what is allowed); ``t`` None gives the defaults."""
    if t is None:
        return dict(REPORT_DEFAULTS), []
    if not isinstance(t, dict):
        return dict(REPORT_DEFAULTS), [f"{where} = {t!r}: allowed: a table [report] with {sorted(REPORT_DEFAULTS)}"]
    problems = [f"{where}.{k}: no such field; fields are {sorted(REPORT_DEFAULTS)}" for k in sorted(set(t) - set(REPORT_DEFAULTS))]
    out = {**REPORT_DEFAULTS, **{k: v for k, v in t.items() if k in REPORT_DEFAULTS}}
    if out["objective"] not in OBJECTIVES:
        problems.append(f"{where}.objective = {out['objective']!r}: allowed: {list(OBJECTIVES)}")
    if out["scope"] not in SCOPES:
        problems.append(f"{where}.scope = {out['scope']!r}: allowed: {list(SCOPES)}")
    for k in ("max_accuracy_drop", "max_loss_increase"):
        v = out[k]
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not v >= 0 or v == float("inf"):
            problems.append(f"{where}.{k} = {v!r}: allowed: a finite number >= 0")
        else:
            out[k] = float(v)
    return out, problems


@dataclass(frozen=True)
class Point:
    """One unit of work: ``kind``, what it is (``labels``: names a reader knows), what it runs
    (``inputs``: JSON-able, enough to run it in another process) and its identity ``id``."""

    id: str
    kind: str
    labels: dict
    inputs: dict
    group: str = ""  # points with the same group share work (one op trace priced on many designs)


@dataclass(frozen=True)
class SweepSpec:
    name: str
    source: str
    seeds: tuple[int, ...]
    recipes: tuple[str, ...]
    infer_recipes: tuple[str, ...]
    designs: tuple[tuple[str, Any], ...]  # (label, design object)
    workloads: tuple[dict, ...]
    kernels: tuple[dict, ...]
    point_timeout_s: float | None = None
    description: str = ""
    spaces: tuple[dict, ...] = ()  # the [[design_space]] entries as written
    report: dict = field(default_factory=lambda: dict(REPORT_DEFAULTS))  # the [report] table, filled in
    text: str = field(default="", repr=False)  # the spec file as written
    # each recipe as loaded once, when the spec loaded: what ids are computed from and jobs carry
    recipe_objects: dict = field(default_factory=dict, repr=False)
    # the spec file's folder, which relative paths in it are relative to (None: a table in code)
    folder: str | None = None

    def recipe(self, name: str):
        """The recipe ``name`` as the spec loaded it (loaded now for a spec built without them)."""
        if name not in self.recipe_objects:
            from asicsim.emulate import load_recipe

            self.recipe_objects[name] = load_recipe(beside(name, self.folder))
        return self.recipe_objects[name]


def sweeps_dir() -> Path:
    """The shipped ``sweeps/`` folder (the demo's spec)."""
    return shipped_dir("sweeps")


def _version() -> str:
    from asicsim import __version__

    return __version__


#: Bumped when points with the same resolved inputs may have recorded wrong results, so a rerun
#: on an old results directory makes new points instead of keeping those records. 2: workloads
#: sharing a name (and overrides) ran each other's model (before, each job looked its workload up
#: by name). 3: recipes edited while a sweep ran were recorded under the old content's id, GPUs
#: priced formats they have no path for (fp8 on a V100), a timeout was recorded as a divergence.
ID_SCHEME = 3


def identity(payload: dict) -> str:
    """A point's stable id: sha256 of its resolved inputs (canonical JSON), the asicsim version
    and :data:`ID_SCHEME`."""
    text = json.dumps({**payload, "asicsim": _version(), "ids": ID_SCHEME}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def _resolve_path(spec: str | Path) -> Path:
    text = str(spec)
    path = Path(text)
    if path.is_file():
        return path
    shipped = sweeps_dir() / f"{text}.toml"
    if not text.endswith(".toml") and shipped.is_file():
        return shipped
    names = sorted(p.stem for p in sweeps_dir().glob("*.toml"))
    raise SweepError(f"sweep spec {text!r}: no such file; give a .toml path or a shipped spec {names}")


def _list(t: dict, key: str, kind: type, where: str, problems: list, default=()) -> tuple:
    value = t.get(key, list(default))
    if not isinstance(value, list) or not all(isinstance(v, kind) and not isinstance(v, bool) for v in value):
        problems.append(f"{where}{key} = {value!r}: allowed: a list of {kind.__name__}")
        return ()
    return tuple(value)


def _designs(t: dict, problems: list, folder: str | None) -> tuple[tuple[str, Any], ...]:
    return spec_designs(t, _list(t, "designs", str, "", problems), problems, folder)


def _workloads(t: dict, problems: list, folder: str | None) -> tuple[dict, ...]:
    from asicsim.workloads.deepbench import WorkloadError
    from asicsim.workloads.workload import load_workload, workload_problems

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


def _kernels(t: dict, problems: list) -> tuple[dict, ...]:
    from asicsim.hw.cost import parse_formats
    from asicsim.hw.operations import OperationError
    from asicsim.workloads.deepbench import PRECISIONS, list_suites

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


def _recipes(t: dict, key: str, problems: list, loaded: dict, folder: str | None,
             default=()) -> tuple[str, ...]:
    """The recipe names of ``key``, each loaded into ``loaded`` (name -> Policy) once (a relative
    path against the spec's ``folder``)."""
    from asicsim.emulate import RecipeError, load_recipe
    from asicsim.numerics.formats import FormatError

    names = _list(t, key, str, "", problems, default)
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


#: The most points one sweep expands into (each is a record file and a row of the results).
MAX_POINTS = 1_000_000


def point_count(seeds, recipes, infer_recipes, designs: int, workloads, kernels) -> int:
    """How many points a spec expands into, at most (entries of one content count once more)."""
    n = 0
    for w in workloads:
        n += len(seeds) * (len(recipes) * ("train" in w["run"]) + len(infer_recipes) * ("infer" in w["run"]))
        if "cost" in w["run"]:
            phases = len(recipes) if "train" in w["run"] or "infer" not in w["run"] else 0
            n += designs * (phases + (len(infer_recipes) if "infer" in w["run"] else 0))
    return n + designs * len(kernels)


def load_spec(spec: str | Path | dict) -> SweepSpec:
    """A sweep spec from a TOML path, a shipped spec name (``demo``) or a parsed table; every
    problem is reported at once in one :class:`SweepError`."""
    if isinstance(spec, dict):
        t, source, text, folder = spec, "<table>", "", None
    else:
        path = _resolve_path(spec)
        try:
            text = read_text_file(path)  # without a byte-order mark; not UTF-8: names the file
        except TextFileError as err:
            raise SweepError(str(err)) from None
        source, folder = str(path), str(path.parent)
        try:
            t = tomllib.loads(text)
        except tomllib.TOMLDecodeError as err:
            raise SweepError(f"{source}: not valid TOML ({err})") from None
    problems: list[str] = [f"{k}: no such field; fields are {sorted(_TOP)}" for k in sorted(set(t) - _TOP)]
    before = len(problems)
    seeds = _list(t, "seeds", int, "", problems, (0,))
    if len(problems) == before and (not seeds or len(set(seeds)) < len(seeds) or not all(0 <= s < 2**32 for s in seeds)):
        problems.append(f"seeds = {t['seeds']!r}: allowed: a non-empty list of distinct integers in [0, 2**32)")
    loaded: dict = {}
    recipes = _recipes(t, "recipes", problems, loaded, folder, ("fp32",))
    if t.get("recipes") == []:
        problems.append("recipes = []: allowed: a non-empty list of recipes (leave it out for [\"fp32\"])")
    infer_recipes = _recipes(t, "infer_recipes", problems, loaded, folder)
    before = len(problems)
    designs = _designs(t, problems, folder)
    design_problems = len(problems) > before
    workloads = _workloads(t, problems, folder)
    kernels = _kernels(t, problems)
    timeout = t.get("point_timeout_s")
    if timeout is not None and (not isinstance(timeout, (int, float)) or isinstance(timeout, bool)
                                or timeout <= 0):
        problems.append(f"point_timeout_s = {timeout!r}: allowed: a positive number of seconds")
    report, bad = report_options(t.get("report"))
    problems.extend(bad)
    if not workloads and not kernels:
        problems.append("workloads/kernels: none given; a sweep needs at least one [[workloads]] or [[kernels]]")
    needs_designs = kernels or any("cost" in w["run"] for w in workloads)
    if needs_designs and not designs and not design_problems:
        problems.append("designs: none given, but cost/kernels points need designs (designs = [...] "
                        "or [[design_space]])")
    if any("infer" in w["run"] for w in workloads) and not infer_recipes:
        problems.append("infer_recipes: none given, but a workload runs 'infer'")
    n = point_count(seeds, recipes, infer_recipes, len(designs), workloads, kernels)
    if not problems and n > MAX_POINTS:
        problems.append(f"{n:,} points ({len(designs):,} designs); allowed: at most {MAX_POINTS:,} per sweep: "
                        "split it into several sweeps")
    if problems:
        raise SweepError(f"{source}: " + "; ".join(problems))
    return SweepSpec(name=str(t.get("name", Path(source).stem)), source=source, seeds=seeds,
                     recipes=recipes, infer_recipes=infer_recipes, designs=designs,
                     spaces=tuple(t.get("design_space", [])),
                     workloads=workloads, kernels=kernels, point_timeout_s=timeout,
                     description=str(t.get("description", "")), text=text, report=report, recipe_objects=loaded,
                     folder=folder)


def canon(obj) -> str:
    """A resolved object (workload, recipe, design) as text that changes when any field does. A
    recipe's roles may name format files (``act = "my_fp6.toml"``), read where they are used:
    their content is part of the recipe's (a format file edited makes new points)."""
    from asicsim.emulate.policy import Policy

    text = repr(obj)
    if isinstance(obj, Policy):
        from asicsim.numerics.catalog import get_format

        files = sorted({str(spec.format) for _, spec in obj.all_roles if str(spec.format).endswith(".toml")})
        if files:
            text += " where " + "; ".join(f"{f} = {get_format(f)!r}" for f in files)
    return text


def content_key(what: str, obj) -> str:
    """The hash of one resolved input (``what``: workload | recipe | design) that a point's id is
    computed from; a worker recomputes it from what it runs, and a point whose input changed
    on the way (a format file edited while the sweep ran) fails saying so."""
    return identity({what: canon(obj)})


def _named(spec: SweepSpec) -> list[str]:
    """The labels of the designs listed by name (not from a design space)."""
    n = len(spec.designs) - sum(len(list(itertools.product(*e.get("vary", {}).values()))) for e in spec.spaces)
    return [label for label, _ in spec.designs[:n]]


def spec_dict(spec: SweepSpec) -> dict:
    """What a report shows as the sweep's exact inputs: names, and the resolved designs,
    workloads and recipes the points ran with."""
    from asicsim.hw.design_files import load_design

    named = set(_named(spec))
    return {"name": spec.name, "source": spec.source, "seeds": list(spec.seeds),
            "recipes": list(spec.recipes), "infer_recipes": list(spec.infer_recipes),
            "designs": [label for label, _ in spec.designs],
            "workloads": [{"name": w["name"], "run": list(w["run"]), **w["overrides"]} for w in spec.workloads],
            "kernels": list(spec.kernels), "point_timeout_s": spec.point_timeout_s, "report": dict(spec.report),
            # the named designs as loaded; a design space as its base design and the grid over it
            "design_objects": {label: dataclasses.asdict(d) for label, d in spec.designs if label in named},
            "design_spaces": [{"base": str(e["base"]), "vary": e.get("vary", {}),
                               "base_object": dataclasses.asdict(load_design(beside(e["base"], spec.folder))),
                               "designs": len(list(itertools.product(*e.get("vary", {}).values())))}
                              for e in spec.spaces],
            "workload_objects": [dataclasses.asdict(w["workload"]) for w in spec.workloads],
            "recipe_objects": {r: repr(spec.recipe(r)) for r in spec.recipes + spec.infer_recipes}}
