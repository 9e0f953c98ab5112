"""What training returns: :class:`RunResult` (one seed's run: curves, final metric, divergence,
numerics statistics) and :class:`TrainResult` (all seeds of one workload and recipe)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class RunResult:
    """One seed's run."""

    seed: int
    metric: str
    final: float
    test_accuracy: float | None
    test_loss: float
    curves: dict
    diverged: bool = False
    divergence: dict | None = None
    skipped_steps: int = 0
    overflow_steps: int = 0
    numerics: dict = field(default_factory=dict)
    numerics_curve: list = field(default_factory=list)
    seconds: float = 0.0
    sparsity: dict = field(default_factory=dict)  # pruned runs: zeros per weight matrix (pruning.py)
    params: Any = field(default=None, repr=False)

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d.pop("params")
        return d


@dataclass
class TrainResult:
    """All seeds of one (workload, recipe) training."""

    workload: str
    recipe: str
    settings: dict
    runs: list[RunResult]

    @property
    def metric(self) -> str:
        return self.runs[0].metric

    @property
    def per_seed(self) -> list[float]:
        return [r.final for r in self.runs]

    @property
    def mean(self) -> float:
        return float(np.mean(self.per_seed))

    @property
    def diverged(self) -> bool:
        return any(r.diverged for r in self.runs)

    def to_dict(self) -> dict:
        return {"workload": self.workload, "recipe": self.recipe, "settings": self.settings,
                "metric": self.metric, self.metric: self.mean, "per_seed": self.per_seed,
                "diverged": self.diverged, "runs": [r.to_dict() for r in self.runs]}
