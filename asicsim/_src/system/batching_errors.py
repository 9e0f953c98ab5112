"""The batching model's error and the checks of its numeric settings, shared by the simulator,
the models and the budget search."""

from __future__ import annotations

import math

import numpy as np


class BatchingError(ValueError):
    """Bad input to the batching model: names the field, the bad value and what is allowed."""


def positive_int(name: str, v) -> int:
    if not (isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= 1):
        raise BatchingError(f"{name} = {v!r}; allowed: an integer >= 1")
    return int(v)


def nonneg_float(name: str, v, *, positive: bool = False) -> float:
    ok = isinstance(v, (int, float, np.floating, np.integer)) and not isinstance(v, bool)
    if ok:
        v = float(v)
        ok = math.isfinite(v) and (v > 0 if positive else v >= 0)
    if not ok:
        raise BatchingError(f"{name} = {v!r}; allowed: a finite number {'> 0' if positive else '>= 0'}")
    return v
