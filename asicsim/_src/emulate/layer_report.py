"""Which rule and formats every GEMM of a function gets under a recipe's per-layer rules
(:mod:`asicsim._src.emulate.layer_rules`): :func:`layer_report` traces the emulated function (nothing
runs) and lists each GEMM's weight path, rule and formats, each non-GEMM op's path, rule and
format where the recipe rounds such ops (:mod:`asicsim._src.emulate.op_rules`), and the rules that
matched nothing.

Above :mod:`asicsim._src.emulate.transform`, which it runs; the rules themselves stand below it.
"""

from __future__ import annotations

import warnings
from typing import Any, NamedTuple

import jax

from asicsim._src.emulate.layer_rules import UnusedLayerRule, collecting
from asicsim._src.emulate.recipes import load_recipe
from asicsim._src.emulate.transform import emulate, split_arrays


class LayerReport(NamedTuple):
    """``gemms``: one dict per GEMM as traced (the middle iterations of a scan over layers share
    one), with its ``row`` (None inside such a scan's middle iterations), weight ``path``,
    ``rule`` (the pattern, or None), ``edge`` (the first or last row: ``[first_last]`` applied),
    ``formats`` (role -> format name of the roles a GEMM rounds) and ``policy``; ``unused``: the
    patterns that matched no GEMM or op; ``ops``: where the recipe or a rule has vector roles,
    one dict per non-GEMM op of a vector role as traced, with its ``op`` path (name scope and
    primitive, :mod:`.op_rules`), ``primitive``, ``role``, ``rule``, ``formats`` (its role ->
    format, empty where the op is not rounded) and ``policy``."""

    gemms: list[dict[str, Any]]
    unused: tuple[str, ...]
    ops: list[dict[str, Any]] = []  # noqa: RUF012 (a NamedTuple default, never mutated)


def layer_report(fn, policy, *args, weights: int | None = 0, **kwargs) -> LayerReport:
    """Which rule and formats every GEMM (and rounded op) of ``fn(*args, **kwargs)`` gets under
    ``policy`` (traced only, nothing runs)."""
    pol = load_recipe(policy)
    emulated = emulate(fn, pol, weights=weights)
    arrays, _, rebuild = split_arrays((args, kwargs))  # an Equinox module's functions stay static

    def call(*xs):
        a, k = rebuild(xs)
        return emulated(*a, **k)

    with collecting() as log, warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedLayerRule)  # reported in ``unused`` instead
        jax.eval_shape(call, *arrays)
    roles = ("weight", "act", "out", "acc", "grad", "grad_out", "wgrad")
    gemms, ops = [e for e in log if "op" not in e], [e for e in log if "op" in e]
    for e in gemms:
        e["formats"] = {r: e["policy"].role(r).format for r in roles if e["policy"].role(r) is not None}
    for e in ops:
        spec = e["policy"].role(e["role"])
        e["formats"] = {} if spec is None or spec.is_identity else {e["role"]: spec.format}
    return LayerReport(gemms, unused_rules(pol, log), ops)


def unused_rules(policy, log) -> tuple[str, ...]:
    """The patterns of ``policy.layers`` no entry of ``log`` matched."""
    used = {e["rule"] for e in log}
    return tuple(p for p, _ in policy.layers if p not in used)
