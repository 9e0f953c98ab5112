"""The calibrated scales a recipe carries after :func:`asicsim.calibrate`, checked and
normalised when its :class:`~asicsim._src.emulate.policy.Policy` is built, so scales set in code are
checked as those calibration computes:

* ``static_scales``: ``((row, (lhs, rhs, grad)), ...)``, one amax per operand of a GEMM row
  (0: none, the operand scales by its current amax), rows distinct;
* ``channel_scales``: ``((row, operand 0 | 1, (amax per contraction index, ...)), ...)``;
* ``uncalibrated``: ``((row, operand 0 | 1), ...)`` calibration did not observe.

Amaxes are finite numbers >= 0, stored as Python floats in tuples (a list or a numpy array
becomes one), so the recipe stays hashable.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

Problem = tuple[str, Any, str]

_ROW = "an integer >= 0 (a GEMM row)"
_SIDE = "0 (lhs) or 1 (rhs)"


def _row(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool) and v >= 0


def _amaxes(v, n: int | None = None) -> bool:
    if isinstance(v, np.ndarray):
        v = v.tolist() if v.ndim == 1 else None
    if not isinstance(v, (list, tuple)) or (n is not None and len(v) != n) or not v:
        return False
    return all(isinstance(x, numbers.Real) and not isinstance(x, bool) and math.isfinite(x) and x >= 0 for x in v)


def _seq(v) -> bool:
    return isinstance(v, (list, tuple))


def _floats(v) -> tuple[float, ...]:
    return tuple(float(x) for x in (v.tolist() if isinstance(v, np.ndarray) else v))


def calibrated_scales(static, channel, uncalibrated) -> tuple[dict, list[Problem]]:
    """(the three fields normalised, their problems as (field, value, allowed)); the fields only
    when there is no problem."""
    out: list[Problem] = []
    for name, v in (("static_scales", static), ("channel_scales", channel), ("uncalibrated", uncalibrated)):
        if not _seq(v):
            out.append((name, v, "a tuple (empty: none)"))
    if out:
        return {}, out
    rows = []
    for i, e in enumerate(static):
        if not (_seq(e) and len(e) == 2 and _row(e[0]) and _amaxes(e[1], 3)):
            out.append((f"static_scales[{i}]", e, f"(row, (lhs, rhs, grad)): row {_ROW}, three finite amaxes >= 0"))
        else:
            rows.append(int(e[0]))
    if len(set(rows)) != len(rows):
        out.append(("static_scales", sorted(rows), "distinct rows"))
    keys = []
    for i, e in enumerate(channel):
        if not (_seq(e) and len(e) == 3 and _row(e[0]) and e[1] in (0, 1) and not isinstance(e[1], bool)
                and _amaxes(e[2])):
            out.append((f"channel_scales[{i}]", e, f"(row, operand, amaxes): row {_ROW}, operand {_SIDE}, "
                                                   "a non-empty sequence of finite amaxes >= 0"))
        else:
            keys.append((int(e[0]), int(e[1])))
    if len(set(keys)) != len(keys):
        out.append(("channel_scales", sorted(keys), "distinct (row, operand) pairs"))
    for i, e in enumerate(uncalibrated):
        if not (_seq(e) and len(e) == 2 and _row(e[0]) and e[1] in (0, 1) and not isinstance(e[1], bool)):
            out.append((f"uncalibrated[{i}]", e, f"(row, operand): row {_ROW}, operand {_SIDE}"))
    if out:
        return {}, out
    return {"static_scales": tuple((int(r), _floats(a)) for r, a in static),
            "channel_scales": tuple((int(r), int(s), _floats(a)) for r, s, a in channel),
            "uncalibrated": tuple((int(r), int(s)) for r, s in uncalibrated)}, []
