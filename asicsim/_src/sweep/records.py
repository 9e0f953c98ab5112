"""What a worker is handed and what it hands back: a :class:`Job` (points that share work and the
resolved objects they need) and one record per point (:func:`record`, :func:`failed`), stamped
with the versions that computed it (:mod:`asicsim._src.sweep.points` describes a record's fields)."""

from __future__ import annotations

import functools
import math
import os
import platform
import socket
import time
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from asicsim._src.sweep.point_identity import ID_SCHEME, Point


@dataclass
class Job:
    """What a worker runs: points that share work, and the resolved objects they need."""

    points: list[Point]
    workload: Any = None  # a Workload (train/infer/cost)
    designs: dict = field(default_factory=dict)  # label -> design object (cost/kernels)
    recipes: dict = field(default_factory=dict)  # name -> recipe (Policy) as the spec loaded it
    gpus: tuple = ()  # the spec's GPU designs: a cost job's busy batch is chosen for them (asicsim._src.system.busy)

    @property
    def kind(self) -> str:
        return self.points[0].kind


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


@functools.cache
def versions() -> dict[str, str]:
    """The versions that computed a record (a report states them, so results can be reproduced)."""
    out = {"python": platform.python_version()}
    for pkg in ("asicsim", "jax", "jaxlib", "numpy", "ml_dtypes", "optax", "pandas"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:  # e.g. a source tree: say so, do not fail the point
            out[pkg] = "unknown"
    return out


def record(point: Point, status: str, reason: str = "", result: dict | None = None,
           tables: dict | None = None, seconds: float = 0.0) -> dict:
    return {"id": point.id, "kind": point.kind, "status": status, "reason": reason,
            "labels": dict(point.labels), "result": result or {}, "tables": tables or {},
            "seconds": round(seconds, 3), "finished": _now(), "host": socket.gethostname(),
            "pid": os.getpid(), "asicsim": versions()["asicsim"], "versions": versions(), "ids": ID_SCHEME}


def failed(job: Job, reason: str, seconds: float = 0.0) -> list[dict]:
    """Every point of ``job`` recorded as failed with ``reason``."""
    return [record(p, "failed", reason, seconds=seconds) for p in job.points]


def finite(x) -> float | None:
    return float(x) if x is not None and math.isfinite(float(x)) else None


def numerics_rows(numerics: dict) -> list[dict]:
    rows = []
    for tensor, s in numerics.items():
        rows.append({"tensor": tensor, "role": tensor.split(":")[0],
                     **{k: s.get(k) for k in ("format", "size", "underflow", "overflow", "nonfinite", "zero")
                        if k in s},
                     # the outlier measures (asicsim._src.workloads.stats); kurtosis is NaN for a constant tensor
                     **{k: finite(s[k]) for k in ("amax", "outliers", "kurtosis") if k in s}})
    return rows
