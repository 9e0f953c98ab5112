"""A training workload: one ``workloads/<name>.toml`` (dataset, model and sizes, optimizer,
learning rate, batch, steps, evaluation cadence) as a :class:`Workload`, which checks its own
settings when built, so one made in code or by ``replace`` is as checked as one loaded from a
file; :func:`load_workload` reads one by name or path, :func:`list_workloads` names the shipped
ones.

Scales: the base tables are scale ``small`` (the default: trains on 2 CPU cores); a file may add
``[scales.<name>]`` tables (``[scales.gpu]``: sized for one GPU), each with an optional
``dataset = "..."`` and optional ``[scales.<name>.model]`` / ``[scales.<name>.train]`` subtables
whose keys override ``[model]`` / ``[train]`` (``model.kind`` included)::

    [scales.gpu]
    dataset = "gcide"
    [scales.gpu.model]
    d_model = 768
    [scales.gpu.train]
    steps = 20000

``load_workload(name, scale="gpu")`` resolves one; the :class:`Workload` holds the resolved
settings, the scale's name and the names the file offers (``scales``), so a sweep point's identity
(its resolved content) changes with the scale.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from asicsim._files import TextFileError, read_text_file
from asicsim._src.numerics.frozen_fields import convert_fields, converted, list_as_tuple, settle
from asicsim._src.workloads.datasets import DATASETS
from asicsim._src.workloads.deepbench import WorkloadError, workloads_dir
from asicsim._src.workloads.prune_rules import PruneRule, rule_from_table
from asicsim._src.workloads.workload_checks import (
    MAX_BATCH,
    MAX_EXAMPLES,
    MAX_STEPS,
    MAX_WIDTH,
    MODELS,
    reference_problems,
    size_problems,
)

OPTIMIZERS = ("sgd", "adam")
DEFAULT_SCALE = "small"  # the base tables: a size that trains on 2 CPU cores


@dataclass(frozen=True)
class Workload:
    """A training workload (one ``workloads/<name>.toml``)."""

    name: str
    dataset: str
    model: str
    sizes: dict = field(default_factory=dict)
    optimizer: str = "adam"
    lr: float = 1e-3
    momentum: float = 0.0
    batch: int = 32
    steps: int = 1000
    eval_every: int = 250
    shuffle: bool = True  # False: batches in dataset order every epoch (the MNIST-1D paper's code)
    context: int = 64  # language model: characters per training window
    eval_windows: int = 64  # language model: validation windows
    explode_factor: float = 10.0
    description: str = ""
    source: str = ""
    reference: dict = field(default_factory=dict)
    scale: str = DEFAULT_SCALE  # which of ``scales`` these settings are
    scales: tuple = (DEFAULT_SCALE,)  # the scales the workload's file offers
    prune: tuple = converted(list_as_tuple, default=())  # PruneRules ([[prune]] tables, asicsim._src.workloads.prune_rules): pruning in training

    def __post_init__(self) -> None:
        convert_fields(self)
        problems = workload_problems(self)
        if problems:
            raise WorkloadError(f"workload {self.name!r}: " + "; ".join(problems))
        # an int learning rate is a float learning rate
        settle(self, **{k: float(getattr(self, k)) for k, (kind, _, _) in _CHECKS.items() if kind is float})

    def replace(self, **kw) -> Workload:
        """A copy with the settings given (None: keep); not another scale, whose settings come
        from the file (:func:`load_workload` with ``scale``)."""
        kw = {k: v for k, v in kw.items() if v is not None}
        if kw.get("scale", self.scale) != self.scale or kw.get("scales", self.scales) != self.scales:
            raise WorkloadError(f"workload {self.name!r}: scale = {kw.get('scale')!r}: a scale's "
                                "settings come from the workload's file; load_workload(name, "
                                "scale=...) resolves them")
        return dataclasses.replace(self, **kw)


#: field -> (type, test, what is allowed) of a Workload's numeric settings.
_CHECKS = {
    "batch": (int, lambda v: 1 <= v <= MAX_BATCH, f"an integer in 1 .. {MAX_BATCH}"),
    "steps": (int, lambda v: 1 <= v <= MAX_STEPS, f"an integer in 1 .. {MAX_STEPS}"),
    "eval_every": (int, lambda v: 1 <= v <= MAX_STEPS, f"an integer in 1 .. {MAX_STEPS}"),
    "context": (int, lambda v: 1 <= v <= MAX_WIDTH, f"an integer in 1 .. {MAX_WIDTH}"),
    "eval_windows": (int, lambda v: 1 <= v <= MAX_BATCH, f"an integer in 1 .. {MAX_BATCH}"),
    "lr": (float, lambda v: math.isfinite(v) and v > 0, "a finite number > 0"),
    "momentum": (float, lambda v: 0 <= v < 1, "a number in [0, 1)"),
    "explode_factor": (float, lambda v: v > 1, "a number > 1 (inf: never)"),
}


def workload_problems(w: Workload) -> list[str]:
    """What is wrong with ``w``'s settings, one ``field = value: allowed: ...`` each."""
    out = []
    for k, (kind, ok, allowed) in _CHECKS.items():
        v = getattr(w, k)
        types = (int,) if kind is int else (int, float)
        if isinstance(v, bool) or not isinstance(v, types) or not ok(v):
            out.append(f"{k} = {v!r}: allowed: {allowed}")
    if w.optimizer not in OPTIMIZERS:
        out.append(f"optimizer = {w.optimizer!r}: allowed: {' | '.join(OPTIMIZERS)}")
    if not isinstance(w.shuffle, bool):
        out.append(f"shuffle = {w.shuffle!r}: allowed: true | false")
    if not isinstance(w.name, str) or not w.name:
        out.append(f"name = {w.name!r}: allowed: a non-empty string")
    for k, names in (("dataset", DATASETS), ("model", MODELS)):
        if getattr(w, k) not in names:
            close = difflib.get_close_matches(str(getattr(w, k)).lower(), names, n=1, cutoff=0.5)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            out.append(f"{k} = {getattr(w, k)!r}: allowed: {' | '.join(names)}{hint}")
    if not isinstance(w.sizes, dict):
        out.append(f"sizes = {w.sizes!r}: allowed: a table of model sizes")
    elif w.model in MODELS:
        out += size_problems(w.model, w.sizes)
    out += reference_problems(w.reference)
    out += _prune_problems(w)
    if not out and w.steps * w.batch > MAX_EXAMPLES:
        out.append(f"steps x batch = {w.steps} x {w.batch}: allowed: at most {MAX_EXAMPLES} examples drawn "
                   "(a run's example order is one table of that many indices)")
    scales = w.scales
    if (not isinstance(scales, tuple) or DEFAULT_SCALE not in scales
            or not all(isinstance(n, str) and n for n in scales)):
        out.append(f"scales = {scales!r}: allowed: a tuple of scale names including {DEFAULT_SCALE!r}")
    elif w.scale not in scales:
        out.append(f"scale = {w.scale!r}: allowed: {' | '.join(scales)}")
    return out


def _prune_problems(w: Workload) -> list[str]:
    """A ``prune`` that is no tuple of rules, or a schedule that would not finish within the run."""
    try:  # rules, or their fields (dataclasses.asdict of a Workload, as a sweep checks overrides)
        rules = [r if isinstance(r, PruneRule) else PruneRule(**r) for r in w.prune]
        assert isinstance(w.prune, tuple)
    except (TypeError, AssertionError, WorkloadError):
        return [f"prune = {w.prune!r}: allowed: a tuple of PruneRule ([[prune]] tables)"]
    return [f"prune[{i}].end = {r.end!r}: allowed: at most steps ({w.steps!r}): the schedule must finish "
            "within the run" for i, r in enumerate(rules) if isinstance(w.steps, int) and r.end > w.steps]


_TRAIN_KEYS = {"optimizer", "lr", "momentum", "batch", "steps", "eval_every", "shuffle", "context",
               "eval_windows", "explode_factor"}


def list_workloads() -> list[str]:
    """Names of the shipped training workloads (``workloads/*.toml`` that name a dataset)."""
    out = []
    for p in sorted(workloads_dir().glob("*.toml")):
        try:
            if "dataset" in tomllib.loads(read_text_file(p)):
                out.append(p.stem)
        except (tomllib.TOMLDecodeError, TextFileError):
            continue
    return out


def _resolve_scale(t: dict, scale: str, problems: list) -> tuple[dict, tuple]:
    """The file's tables with scale ``scale``'s overrides applied, and the scale names it offers;
    what is wrong goes to ``problems`` (``scales.<name>.<key>: ...``)."""
    tables = t.get("scales", {})
    if not isinstance(tables, dict) or not all(isinstance(v, dict) for v in tables.values()):
        problems.append(f"scales = {tables!r}: allowed: [scales.<name>] tables")
        return t, (DEFAULT_SCALE,)
    names = (DEFAULT_SCALE, *sorted(n for n in tables if n != DEFAULT_SCALE))
    if DEFAULT_SCALE in tables:
        problems.append(f"scales.{DEFAULT_SCALE}: the base tables are scale {DEFAULT_SCALE!r}; "
                        "edit [model] / [train] instead")
    for name, table in tables.items():
        for k in sorted(set(table) - {"dataset", "model", "train"}):
            problems.append(f"scales.{name}.{k}: no such field; fields are ['dataset', 'model', 'train']")
        if "dataset" in table and not isinstance(table["dataset"], str):
            problems.append(f"scales.{name}.dataset = {table['dataset']!r}: allowed: a dataset name")
        for sub in ("model", "train"):
            if not isinstance(table.get(sub, {}), dict):
                problems.append(f"scales.{name}.{sub} = {table[sub]!r}: allowed: a table")
        bad = sorted(set(table.get("train", {}) if isinstance(table.get("train"), dict) else {})
                     - _TRAIN_KEYS)
        problems.extend(f"scales.{name}.train.{k}: no such field; fields are {sorted(_TRAIN_KEYS)}"
                        for k in bad)
    if scale not in names:
        problems.append(f"scale = {scale!r}: no such scale; this workload's scales are {list(names)}")
    if problems or scale == DEFAULT_SCALE:
        return t, names
    over = tables[scale]
    out = dict(t)
    if "dataset" in over:
        out["dataset"] = over["dataset"]
    for sub in ("model", "train"):
        out[sub] = {**t.get(sub, {}), **over.get(sub, {})}
    return out, names


def load_workload(workload: str | Path | Workload, scale: str | None = None) -> Workload:
    """A workload by name, TOML path or :class:`Workload`, at ``scale`` (default ``small``, the
    base tables; a :class:`Workload` keeps its own unless ``scale`` names another, which is an
    error: reload it by name); bad fields raise :class:`WorkloadError`."""
    if isinstance(workload, Workload):
        if scale is not None and scale != workload.scale:
            raise WorkloadError(f"workload {workload.name!r} is already resolved at scale "
                                f"{workload.scale!r}; load it by name or path for scale {scale!r}")
        return workload
    scale = DEFAULT_SCALE if scale is None else scale
    text = str(workload)
    path = Path(text) if text.endswith(".toml") else workloads_dir() / f"{text}.toml"
    if not path.is_file() or (not text.endswith(".toml") and text not in list_workloads()):
        names = list_workloads()
        close = difflib.get_close_matches(text, names, n=3, cutoff=0.5)
        hint = f" did you mean {', '.join(map(repr, close))}?" if close else ""
        raise WorkloadError(f"unknown training workload {text!r};{hint} workloads are {names}")
    try:
        t = tomllib.loads(read_text_file(path))
    except TextFileError as err:
        raise WorkloadError(str(err)) from None
    except tomllib.TOMLDecodeError as err:
        raise WorkloadError(f"{path}: not valid TOML ({err})") from None
    problems = []
    for k in sorted(set(t) - {"name", "description", "source", "dataset", "model", "train",
                              "reference", "scales", "prune"}):
        problems.append(f"{k}: no such field")
    t, names = _resolve_scale(t, scale, problems)
    model = dict(t.get("model", {}))
    kind = model.pop("kind", None)
    if kind is None:
        problems.append(f"model.kind: missing ({', '.join(MODELS)})")
    tr = t.get("train", {})
    for k in sorted(set(tr) - _TRAIN_KEYS):
        problems.append(f"train.{k}: no such field; fields are {sorted(_TRAIN_KEYS)}")
    if problems:
        raise WorkloadError(f"{path}: " + "; ".join(problems))
    tables = t.get("prune", [])
    try:
        if not isinstance(tables, list):
            raise WorkloadError(f"prune = {tables!r}: allowed: [[prune]] tables")
        rules = tuple(rule_from_table(i, tb) for i, tb in enumerate(tables))
    except WorkloadError as err:
        raise WorkloadError(f"{path}: {err}") from None
    try:
        out = Workload(name=t.get("name", path.stem), dataset=t.get("dataset", "<missing>"), model=kind,
                       sizes=model, description=t.get("description", ""), source=t.get("source", ""),
                       reference=t.get("reference", {}), scale=scale, scales=names, prune=rules,
                       **{k: tr[k] for k in tr})
    except WorkloadError as err:  # it names the field, the value and what is allowed
        raise WorkloadError(f"{path}: {err}") from None
    if scale == DEFAULT_SCALE:  # every other scale is checked too: a bad one is an error now, not when run
        for other in names[1:]:
            try:
                load_workload(path, other)
            except WorkloadError as err:
                raise WorkloadError(str(err).replace(f"{path}: ", f"{path}: [scales.{other}]: ", 1)) from None
    return out
