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
recipe and the design as loaded (not their names), the seed, and the asicsim version
(:mod:`asicsim._src.sweep.point_identity`).

This module reads a spec file into a checked :class:`SweepSpec` (:func:`load_spec`) and says what
a report shows of it (:func:`spec_dict`); the spec's lists are checked in
:mod:`asicsim._src.sweep.spec_entries`, its ``[report]`` table in :mod:`asicsim._src.sweep.report_options`.
"""

from __future__ import annotations

import dataclasses
import itertools
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from asicsim._catalogs import shipped_dir
from asicsim._files import TextFileError, beside, read_text_file
from asicsim._src.emulate import load_recipe
from asicsim._src.hw.design_files import load_design
from asicsim._src.sweep.errors import SweepError as SweepError
from asicsim._src.sweep.errors import SweepWarning as SweepWarning
from asicsim._src.sweep.report_options import ReportOptions, report_options
from asicsim._src.sweep.spec_entries import (
    design_entries,
    kernel_entries,
    recipe_entries,
    string_list,
    workload_entries,
)

_TOP = {"name", "description", "seeds", "recipes", "infer_recipes", "designs", "workloads", "kernels",
        "design_space", "point_timeout_s", "report"}


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
    report: ReportOptions = field(default_factory=ReportOptions)  # the [report] table, checked, filled in
    text: str = field(default="", repr=False)  # the spec file as written
    # each recipe as loaded once, when the spec loaded: what ids are computed from and jobs carry
    recipe_objects: dict = field(default_factory=dict, repr=False)
    # the spec file's folder, which relative paths in it are relative to (None: a table in code)
    folder: str | None = None

    def recipe(self, name: str):
        """The recipe ``name`` as the spec loaded it (loaded now for a spec built without them)."""
        if name not in self.recipe_objects:
            self.recipe_objects[name] = load_recipe(beside(name, self.folder))
        return self.recipe_objects[name]


def sweeps_dir() -> Path:
    """The shipped ``sweeps/`` folder (the demo's spec)."""
    return shipped_dir("sweeps")


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
    seeds = string_list(t, "seeds", int, "", problems, (0,))
    if len(problems) == before and (not seeds or len(set(seeds)) < len(seeds) or not all(0 <= s < 2**32 for s in seeds)):
        problems.append(f"seeds = {t['seeds']!r}: allowed: a non-empty list of distinct integers in [0, 2**32)")
    loaded: dict = {}
    recipes = recipe_entries(t, "recipes", problems, loaded, folder, ("fp32",))
    if t.get("recipes") == []:
        problems.append("recipes = []: allowed: a non-empty list of recipes (leave it out for [\"fp32\"])")
    infer_recipes = recipe_entries(t, "infer_recipes", problems, loaded, folder)
    before = len(problems)
    designs = design_entries(t, problems, folder)
    design_problems = len(problems) > before
    workloads = workload_entries(t, problems, folder)
    kernels = kernel_entries(t, problems)
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


def _named(spec: SweepSpec) -> list[str]:
    """The labels of the designs listed by name (not from a design space)."""
    n = len(spec.designs) - sum(len(list(itertools.product(*e.get("vary", {}).values()))) for e in spec.spaces)
    return [label for label, _ in spec.designs[:n]]


def spec_dict(spec: SweepSpec) -> dict:
    """What a report shows as the sweep's exact inputs: names, and the resolved designs,
    workloads and recipes the points ran with."""
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
