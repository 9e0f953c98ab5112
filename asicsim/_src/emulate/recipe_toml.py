"""A recipe as the TOML a user would write (``formats/recipes/*.toml``): the inverse of
:func:`asicsim._src.emulate.recipes.policy_from_table`, fields at their defaults left out. What a
report shows for the recipes a sweep ran; reading the text back gives the same Policy.

>>> from asicsim._src.emulate import load_recipe
>>> print(recipe_toml(load_recipe("bf16")).split("[roles]")[1].strip().splitlines()[0])
weight = "bf16"

:func:`policy_from_repr` rebuilds a Policy from its ``repr`` (what a sweep's spec.json records),
evaluating only Policy, RoleSpec and LossScaling calls over literals.
"""

from __future__ import annotations

import ast
import dataclasses
import json

from asicsim._src.emulate.policy import LossScaling, Policy, RoleSpec

#: The ``[calibration]`` keys and the Policy fields they set (as the loader reads them).
_CALIBRATION = {"batches": "calibration_batches", "method": "calibration_method",
                "percentile": "calibration_percentile", "granularity": "calibration_granularity",
                "bins": "calibration_bins"}


def _defaults(cls) -> dict:
    return {f.name: f.default for f in dataclasses.fields(cls) if f.default is not dataclasses.MISSING}


def _plain(v):
    """An enum's value, else the value."""
    return getattr(v, "value", v)


def _role(spec: RoleSpec):
    """``"bf16"``, or the fields that differ from their defaults (format first)."""
    base = _defaults(RoleSpec)
    fields = {k: _plain(getattr(spec, k)) for k in base if _plain(getattr(spec, k)) != _plain(base[k])}
    return _plain(spec.format) if not fields else {"format": _plain(spec.format), **fields}


def recipe_table(policy: Policy) -> dict:
    """The recipe as a TOML table (what ``policy_from_table`` reads back to ``policy``)."""
    t: dict = {"name": policy.name}
    for k in ("description", "source"):
        if getattr(policy, k):
            t[k] = getattr(policy, k)
    t["roles"] = {r: _role(s) for r, s in policy.roles}
    if policy.first_last:
        t["first_last"] = {r: _role(s) for r, s in policy.first_last}
    base = _defaults(LossScaling)
    ls = {k: _plain(getattr(policy.loss_scaling, k)) for k in base
          if _plain(getattr(policy.loss_scaling, k)) != _plain(base[k])}
    if ls:
        t["loss_scaling"] = ls
    pol = _defaults(Policy)
    mac = {k: getattr(policy, f) for k, f in (("order", "mac_order"), ("spec", "mac"))
           if _plain(getattr(policy, f)) != _plain(pol[f])}
    if mac:
        t["mac"] = {k: _plain(v) for k, v in mac.items()}
    cal = {k: _plain(getattr(policy, f)) for k, f in _CALIBRATION.items()
           if _plain(getattr(policy, f)) != _plain(pol[f])}
    if cal:
        t["calibration"] = cal
    if policy.tensor_core:
        tc = policy.tensor_core
        t["tensor_core"] = tc if isinstance(tc, str) else dict(tc)
    if policy.layers:
        t["layers"] = [{"match": m, "roles": {r: _role(s) for r, s in roles}} for m, roles in policy.layers]
    return t


def _value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)  # a TOML basic string is a JSON string
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_value(x)}" for k, x in v.items()) + " }"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    raise TypeError(f"recipe TOML: {v!r}; allowed: strings, numbers, booleans, tables and lists")


def recipe_toml(policy: Policy) -> str:
    """The recipe file's text: top-level keys, then ``[roles]``, ``[first_last]``,
    ``[loss_scaling]``, ``[mac]``, ``[calibration]`` and ``[[layers]]``."""
    t = recipe_table(policy)
    tops = ("name", "description", "source") + (("tensor_core",) if isinstance(t.get("tensor_core"), str) else ())
    lines = [f"{k} = {_value(t[k])}" for k in tops if k in t]
    tables = ("roles", "first_last", "loss_scaling", "mac", "calibration", "tensor_core")
    for table in (k for k in tables if k not in tops):
        if table in t:
            lines += ["", f"[{table}]", *(f"{k} = {_value(v)}" for k, v in t[table].items())]
    for rule in t.get("layers", []):
        lines += ["", "[[layers]]", f"match = {_value(rule['match'])}", f"roles = {_value(rule['roles'])}"]
    return "\n".join(lines) + "\n"


_CALLS = {"Policy": Policy, "RoleSpec": RoleSpec, "LossScaling": LossScaling}


def policy_from_repr(text: str) -> Policy:
    """The Policy whose ``repr`` is ``text``: only Policy, RoleSpec and LossScaling calls with
    keyword arguments, and literals (strings, numbers, None, booleans, tuples, lists) are read;
    anything else is a ValueError."""
    def build(node):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _CALLS \
                and not node.args:
            return _CALLS[node.func.id](**{k.arg: build(k.value) for k in node.keywords})
        if isinstance(node, (ast.Tuple, ast.List)):
            return tuple(build(e) for e in node.elts)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -build(node.operand)
        if isinstance(node, ast.Constant):
            return node.value
        raise ValueError(f"not a recipe's repr: {ast.dump(node)[:80]}")

    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as err:
        raise ValueError(f"not a recipe's repr: {err}") from None
    policy = build(tree.body)
    if not isinstance(policy, Policy):
        raise ValueError("not a recipe's repr: no Policy(...)")
    return policy
