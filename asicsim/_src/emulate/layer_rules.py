"""Per-layer rules: roles chosen by the pytree path of a GEMM's weight (``Policy.layers``,
``[[layers]]`` in a recipe), so one recipe can say "attention in bf16, MLP in fp8, first and
last layer in fp16".

A rule is ``(pattern, roles)``: ``pattern`` a glob (:func:`fnmatch.fnmatchcase`: ``*`` matches
any characters, ``/`` included; ``?``, ``[seq]``; case-sensitive) over the path of the weight
leaf the GEMM's weight operand comes from -- the keys from the ``weights`` argument down to the
leaf, joined by ``/`` (``jax.tree_util.keystr`` without the brackets): ``params/Block_0/attn/
query/kernel`` for a Flax Linen variables dict, ``layers/0/mlp/weight`` for an Equinox module,
``w1`` for a plain dict. The path follows the weight through reshapes, transposes, slices, casts
and scans (a layer of a stacked ``nn.scan`` keeps the stacked leaf's path, e.g. ``params/
ScanBlock/Dense_0/kernel``). A GEMM with no weight operand (attention's ``q k^T`` and ``p v``) is
matched by the path ``<act>``, one whose weight the function closes over (no leaf of ``weights``)
by ``<const>``: a rule ``match = "<act>"`` sets the attention-score GEMMs, ``match = "*"`` every
GEMM. The first matching rule wins; its roles replace the recipe's roles of that name (roles it
does not name stay the recipe's); ``[first_last]`` is applied on top of them, so the first and
last layer keep their edge formats whatever rule their weights match.

Conventions this follows: NVIDIA TensorRT Model Optimizer's ``quant_cfg`` (wildcards over module
names such as ``"*lm_head*"`` or ``"*attn*"``, a later pattern refining an earlier one), AQT's
per-``dot_general`` configs (``aqt_flax.AqtDotGeneral(cfg)`` given to each Flax layer), and
Transformer Engine's ``fp8_autocast(enabled=..., fp8_recipe=...)`` regions, a recipe per module.
Here the rule is data in the recipe, first match wins (as ``.gitignore``-style ordered lists read
top to bottom), so a model needs no edits.

A rule naming a vector role (``vector``, ``transcendental``, ``reduction``) matches non-GEMM
ops (a softmax, a layer norm) by their name scope: :mod:`.op_rules`. A GEMM consults only the
rules naming some other role.

A rule that matches no GEMM or op of a traced function is reported: :func:`emulate` warns
(:class:`UnusedLayerRule`) and :func:`layer_report` lists, for every GEMM row, the path, the rule
and the formats it got (and every rounded op's).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fnmatch
import functools

import jax

from asicsim._src.emulate.fields import VECTOR_ROLES

ACT_PATH = "<act>"  # a GEMM with no weight operand
CONST_PATH = "<const>"  # a weight the function closes over (not a leaf of ``weights``)

_LOGS: list[list[dict]] = []


class UnusedLayerRule(UserWarning):
    """A ``[[layers]]`` rule matched no GEMM (no op, for a rule of vector roles) of the function
    being emulated."""


def key_name(entry) -> str:
    """One pytree key as a path component (dict key, attribute name, sequence index)."""
    for attr in ("key", "name", "idx"):
        if hasattr(entry, attr):
            return str(getattr(entry, attr))
    return str(entry)


def leaf_paths(tree) -> list[str]:
    """The ``/``-joined key path of every leaf of ``tree``, in ``tree_flatten`` order."""
    flat, _ = jax.tree_util.tree_flatten_with_path(tree)
    return ["/".join(key_name(k) for k in path) for path, _ in flat]


def is_op_rule(roles) -> bool:
    """Whether a rule's roles name a vector role: non-GEMM ops consult it (:mod:`.op_rules`)."""
    return any(r in VECTOR_ROLES for r, _ in roles)


def is_gemm_rule(roles) -> bool:
    """Whether a rule's roles name a role other than the vector roles: GEMMs consult it."""
    return any(r not in VECTOR_ROLES for r, _ in roles)


def match_rule(layers, path: str | None, consults=is_gemm_rule) -> int | None:
    """Index of the first rule of ``layers`` whose pattern matches ``path``, among the rules
    whose roles ``consults`` accepts (GEMMs: :func:`is_gemm_rule`), or None."""
    for i, (pattern, roles) in enumerate(layers):
        if consults(roles) and fnmatch.fnmatchcase(path, pattern):
            return i
    return None


@functools.lru_cache(maxsize=256)
def gemm_policy(policy, rule: int | None, edge: bool):
    """The policy one GEMM runs under: the recipe's roles, then rule ``rule``'s, then (``edge``:
    the first or last row) ``first_last``'s; itself a plain policy (no rules, no edges)."""
    if rule is None and not edge and not policy.layers and not policy.first_last:
        return policy
    roles = dict(policy.roles)
    if rule is not None:
        roles.update(dict(policy.layers[rule][1]))
    if edge:
        roles.update(dict(policy.first_last))
    return dataclasses.replace(policy, roles=tuple(roles.items()), first_last=(), layers=())


def note(entry: dict) -> None:
    """Record one GEMM's rule choice for the innermost :func:`collecting` block."""
    if _LOGS:
        _LOGS[-1].append(entry)


@contextlib.contextmanager
def collecting():
    buf: list[dict] = []
    _LOGS.append(buf)
    try:
        yield buf
    finally:
        _LOGS.pop()
