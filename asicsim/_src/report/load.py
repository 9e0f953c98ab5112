"""A sweep's results directory, read once: the five tables, the spec text and its resolved inputs.

Every table is a DataFrame with at least the columns the report reads (missing ones are NaN), so
a sweep with only kernels, only training, or nothing finished yet reads the same way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from asicsim._files import TextFileError, read_text_file
from asicsim._src.hw.scopes import SCOPE_ENERGY_KEYS
from asicsim._src.sweep.spec import SweepError
from asicsim._src.sweep.store import Store, frames_from_records, results_root

#: A cost point's energies at named scopes, the GPU's launch floor and SM share, and the same at the
#: larger batch every design is also priced at (issue 30's schema; asicsim._src.sweep.points): what the
#: answer compares at a stated scope (asicsim._src.report.scope). NaN in records written before them.
SCOPE_COLUMNS = ("batch", *SCOPE_ENERGY_KEYS, "launch_fraction", "sm_fraction", "busy_batch", "busy_time_s",
                 *(f"busy_{k}" for k in SCOPE_ENERGY_KEYS), "busy_launch_fraction", "busy_sm_fraction")

#: Columns the report reads, per table (added as NaN where a sweep did not produce them).
COLUMNS = {
    "results": ("id", "kind", "status", "reason", "workload", "recipe", "seed", "phase", "design",
                "suite", "precision", "metric", "value", "fp32_value", "drop", "diverged",
                "diverged_step", "diverged_cause", "time_s", "energy_j", "energy_dynamic_j", "energy_mac_j",
                "energy_vector_j", "energy_buffers_j", "energy_dram_j", "energy_static_j",
                "energy_other_j", "dram_bytes", "sram_bytes", "design_kind", "peak_ops_per_s",
                "dram_bytes_per_s", "power_w", "peak_flops_per_w_board", "flops", "flops_per_s", "flops_per_j", "kernels",
                "geomean_tflops", "asicsim", "finished", "seconds", *SCOPE_COLUMNS, "busy_gpu"),
    "curves": ("id", "workload", "recipe", "seed", "step", "train_loss", "test_loss", "test_accuracy"),
    "numerics": ("id", "kind", "workload", "recipe", "seed", "tensor", "role", "format", "size",
                 "underflow", "overflow", "nonfinite", "zero"),
    "ops": ("id", "workload", "recipe", "phase", "design", "role", "op", "macs", "time_s",
            "dram_bytes", "bound"),
    "kernels": ("id", "suite", "precision", "design", "time_us", "tflops", "dram_bytes", "bound"),
}

#: Label columns: always objects (strings or NaN), so tables from any subset of a sweep merge.
LABELS = ("id", "kind", "status", "reason", "workload", "recipe", "phase", "design", "suite", "precision", "formats",
          "metric", "design_kind", "tensor", "role", "format", "bound", "asicsim", "finished", "versions", "op",
          "busy_gpu")

#: The energy components of a cost point, in the order the report stacks them.
ENERGY_PARTS = ("mac", "vector", "buffers", "dram", "static", "other")


@dataclass(frozen=True)
class Results:
    """What a report is made from."""

    root: Path
    results: pd.DataFrame
    curves: pd.DataFrame
    numerics: pd.DataFrame
    ops: pd.DataFrame
    kernels: pd.DataFrame
    spec_text: str  # DIR/spec.toml as written ("" where absent)
    spec: dict  # DIR/spec.json: the resolved inputs ({} where absent)
    skipped: tuple[str, ...] = ()  # "path: why" of each file in points/ that is not a record file

    def table(self, name: str) -> pd.DataFrame:
        return getattr(self, name)

    def done(self, kind: str) -> pd.DataFrame:
        """The finished (status done) points of one kind."""
        r = self.results
        return r[(r["kind"] == kind) & (r["status"] == "done")]

    def gpus(self) -> list[str]:
        """The GPU designs of the sweep (a design_kind of gpu in any cost or kernel point)."""
        r = self.results
        return sorted(set(r.loc[r["design_kind"] == "gpu", "design"].dropna().astype(str)))


def _complete(df: pd.DataFrame, columns: tuple[str, ...]) -> pd.DataFrame:
    df = df.copy()
    for c in columns:
        if c not in df.columns:
            df[c] = np.nan
    for c in df.columns:  # pandas' string dtype and label columns as plain objects (NaN for missing)
        if isinstance(df[c].dtype, pd.StringDtype) or (c in LABELS and df[c].dtype != object):
            df[c] = df[c].astype(object).where(df[c].notna(), np.nan)
    return df


def _energy_dynamic(df: pd.DataFrame) -> pd.DataFrame:
    """``energy_dynamic_j`` where a record lacks it (written before the split was recorded): the
    total less static where both are known, else NaN."""
    derived = pd.to_numeric(df["energy_j"], errors="coerce") - pd.to_numeric(df["energy_static_j"], errors="coerce")
    df = df.copy()
    df["energy_dynamic_j"] = pd.to_numeric(df["energy_dynamic_j"], errors="coerce").fillna(derived)
    return df


def text(s: pd.Series, missing: str = "") -> pd.Series:
    """A label column as strings, ``missing`` for NaN/None (pandas 3's ``astype(str)`` keeps NaN,
    and a NaN among strings breaks sorting and string concatenation)."""
    return pd.Series([missing if v is None or v != v else str(v) for v in s], index=s.index, dtype=object)


def _with_formats(df: pd.DataFrame) -> pd.DataFrame:
    """A kernel point's precision: its DeepBench precision, ``default`` (the design's own formats)
    where the spec gave none, and its formats (set beside or instead) after it, so the report keeps
    points that differ only in formats apart."""
    kernel = df["kind"] == "kernels" if "kind" in df else pd.Series(True, index=df.index)
    if not kernel.any():
        return df
    df = df.copy()
    base = text(df["precision"], "default")
    if "formats" in df:
        has = df["formats"].notna() & (text(df["formats"]) != "")
        base[has] = base[has] + " " + text(df.loc[has, "formats"])
    df.loc[kernel, "precision"] = base[kernel]
    return df


#: The fields of spec.json the report reads, and the JSON types each may have.
_SPEC_FIELDS = {"name": (str, type(None)), "report": (dict, type(None)), "recipe_objects": (dict, type(None)),
                "design_objects": (dict, type(None)), "workload_objects": (list, type(None))}


def _spec_json(path: Path) -> dict:
    """DIR/spec.json, the sweep's resolved inputs ({} where absent); a file that is not a JSON
    object, or a field of the wrong type, is a :class:`SweepError` naming the file and the field
    (the report would otherwise show or rank by something other than what the sweep ran)."""
    if not path.is_file():
        return {}
    fix = "it is written by asicsim sweep: rerun the sweep on this directory, or delete the file"
    try:
        spec = json.loads(read_text_file(path))
    except json.JSONDecodeError as err:
        raise SweepError(f"{path}: not valid JSON ({err}); {fix}") from None
    except TextFileError as err:
        raise SweepError(f"{err}; {fix}") from None
    if not isinstance(spec, dict):
        raise SweepError(f"{path}: a JSON {type(spec).__name__}, not an object of the sweep's resolved inputs; {fix}")
    for k, kinds in _SPEC_FIELDS.items():
        if k in spec and not isinstance(spec[k], kinds):
            allowed = " or ".join({dict: "an object", list: "a list", str: "a string", type(None): "null"}[t]
                                  for t in kinds)
            raise SweepError(f"{path}: {k} = {json.dumps(spec[k])[:60]}: allowed: {allowed}; {fix}")
    return spec


def load(root: str | Path) -> Results:
    """Read ``root`` (raises :class:`asicsim.SweepError` if it is not a results directory)."""
    root = results_root(root)
    store = Store(root)
    if not store.points.is_dir():
        raise SweepError(f"{root}: not a sweep results directory (no points/ folder)")
    frames = {t: _complete(df, COLUMNS[t]) for t, df in frames_from_records(store.records()).items()}
    spec_text = read_text_file(root / "spec.toml") if (root / "spec.toml").is_file() else ""
    spec = _spec_json(root / "spec.json")
    for t in ("results", "kernels"):
        frames[t] = _with_formats(frames[t])
    r = frames["results"] = _energy_dynamic(frames["results"])
    if len(r):  # a stable order, whatever order the records were read in
        frames["results"] = r.sort_values(["kind", "id"], kind="stable").reset_index(drop=True)
    return Results(root=root, spec_text=spec_text, spec=spec, skipped=tuple(store.skipped), **frames)
