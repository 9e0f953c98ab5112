"""The ``[report]`` table of a sweep spec: what the report's answer picks (objective, accuracy
and loss limits, energy scope), checked, with its defaults filled in."""

from __future__ import annotations

from asicsim.hw.scopes import SCOPES

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
