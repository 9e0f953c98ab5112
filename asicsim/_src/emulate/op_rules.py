"""Per-op rules: ``[[layers]]`` rules that round chosen non-GEMM ops (a softmax, a layer norm, a
GELU) in their own formats, by the layer-rule mechanism GEMMs use (:mod:`.layer_rules`).

How an op is named: ``<name scope>/<primitive>``, the scope being JAX's name stack where the op
was traced -- the names ``jax.named_scope`` blocks and Flax Linen modules set (``Block/ln1``,
``Block/attn``), and the name of a jitted function the interpreter enters (``outer/g/inner``
for ``g``'s ops, where ``g = jax.jit(...)`` is called inside ``named_scope("outer")`` and names
a scope ``inner`` itself; a library function JAX keeps as a call likewise: ``jax.nn.silu``'s
ops are ``silu/logistic``, ``silu/mul``); an op outside every scope is its primitive alone, and
a function bound whole as one ``custom_jvp_call`` (``jax.nn.relu``) is one op of that name. So Flax's
``nn.LayerNorm(name="ln1")`` of a module ``Block`` gives ``Block/ln1/rsqrt``,
``Block/ln1/reduce_sum``..., and a softmax written under ``with jax.named_scope("softmax"):``
gives ``softmax/exp``, ``softmax/div``... A rule's glob matches that path as it matches a
GEMM's weight path: ``match = "*/ln1/*"``, ``"*softmax/*"``, ``"*/exp"`` (every ``exp``).
The name scope is what the user's model already sets (microxcaling's ``MxSoftmax`` /
``MxLayerNorm`` and QPyTorch's quantizer modules place rounding per module; here the module's
or scope's name says where), so a model needs no edits beyond a ``named_scope`` where its
framework sets none: Flax's attention computes its softmax in the attention module's own
scope, alongside its query scaling, so only the whole module can be matched there.

Which rules an op consults: those naming a vector role (``vector``, ``transcendental``,
``reduction``); a GEMM consults those naming any other role (a rule naming both kinds
applies to both). The first matching rule wins; its roles replace the recipe's roles of that
name for the op (roles it leaves out stay the recipe's, falling back as usual:
``transcendental`` and ``reduction`` to ``vector``), so a rule ``vector = "fp32"`` keeps the
ops it matches unrounded under a recipe whose ``vector`` is bf16, and a rule ``vector =
"bf16"`` rounds its ops under a recipe that rounds none. A rule that matches nothing warns
(:class:`.layer_rules.UnusedLayerRule`); :func:`asicsim.layer_report` lists each op
with its path, role, rule and format (``ops``).

The interpreter keeps ``scopes`` (:func:`eqn_scope` of each equation it is evaluating, outermost
first). Which ops: the primitives :mod:`.vector_roles` rounds (:func:`.vector_roles.role_of`); data
movement carries a value's grid as it does without rules.
"""

from __future__ import annotations

from asicsim._src.emulate.layer_rules import gemm_policy, is_op_rule, match_rule, note
from asicsim._src.emulate.vector_roles import role_of

_CALL_NAMED = frozenset({"jit", "pjit", "closed_call", "core_call"})  # calls whose name is a scope


def eqn_scope(eqn) -> str:
    """The part of the name stack ``eqn`` adds for the equations inside it: its own name stack,
    and a jitted call's function name."""
    parts = [str(eqn.source_info.name_stack)]
    if eqn.primitive.name in _CALL_NAMED and eqn.params.get("name"):
        parts.append(str(eqn.params["name"]))
    return "/".join(p for p in parts if p)


def op_path(scopes, eqn) -> str:
    """The path an op rule matches for ``eqn``: ``scopes`` (:func:`eqn_scope` of the enclosing
    equations and of ``eqn`` itself, as the interpreter keeps them), then its primitive."""
    return "/".join(p for p in (*scopes, eqn.primitive.name) if p)


def op_policy(policy, scopes, eqn, used: set[int]):
    """The policy op ``eqn`` runs under (the recipe's, or its first matching op rule's, which is
    added to ``used``) and, for :func:`asicsim.layer_report`, a note of the choice."""
    role = role_of(eqn.primitive.name)
    if role is None or not any(is_op_rule(roles) for _, roles in policy.layers):
        if role is not None:
            note({"op": op_path(scopes, eqn), "primitive": eqn.primitive.name, "role": role, "rule": None,
                  "policy": policy})
        return policy
    path = op_path(scopes, eqn)
    rule = match_rule(policy.layers, path, is_op_rule)
    if rule is not None:
        used.add(rule)
    pol = gemm_policy(policy, rule, False)
    note({"op": path, "primitive": eqn.primitive.name, "role": role,
          "rule": None if rule is None else policy.layers[rule][0], "policy": pol})
    return pol
