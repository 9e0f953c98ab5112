"""The numerics table of ``asicsim train`` / ``infer``: a figure that is not measured (|x| >= 6 of
a gradient, which training measures times the loss scale; the kurtosis of a tensor without spread)
shows a dash and a line saying why, never ``nan%`` (``--json``: tests/test_cli_json.py)."""

from __future__ import annotations

import numpy as np

from asicsim._src.workloads.cli import _numerics_lines


def _row(fmt="bf16", **kw) -> dict:
    return {"format": fmt, "underflow": 0.0, "overflow": 0.0, "zero": 0.25, "amax": 7.5, "outliers": 0.125,
            "kurtosis": 3.0, "exp_hist": {-3: 4, 2: 1}, "fmt_min_exp": -133, "fmt_max_exp": 127.9, **kw}


def test_unmeasured_figures_are_dashes_with_their_reason():
    lines = _numerics_lines({"act:x": _row(), "wgrad:fc/w": _row(outliers=float("nan")),
                             "grad:x": _row(outliers=np.float32("nan"), kurtosis=float("nan"))})
    text = "\n".join(lines)
    assert "nan" not in text.lower()
    head, act, wgrad, grad = lines[:4]
    col = head.index("|x|>=6") + len("|x|>=6") - 1  # right-aligned under its header
    assert act[col - 5:col + 1] == "12.50%" and wgrad[col] == "–" and grad[col] == "–"
    assert grad[head.index("kurt") + 3] == "–"
    assert "|x|>=6 –: not counted for gradients" in text and "kurt –: no spread" in text


def test_measured_figures_need_no_note():
    lines = _numerics_lines({"act:x": _row(), "grad:x": _row(outliers=0.0)})
    assert len(lines) == 3 and "0.00%" in lines[2]
