"""What a GEMM's operands are, as the interpreter sees them: their roles from the provenance flags
(activation, weight, a cotangent's gradient, an attention operand), the path a layer rule matches,
and whether every role it rounds is plain float32 (then the user's own op runs)."""

from __future__ import annotations

from collections.abc import Sequence

from asicsim._src.emulate.custom_rules import GRAD  # flag of a value computed from a cotangent
from asicsim._src.emulate.gemm import _GEMM_ROLES
from asicsim._src.emulate.layer_rules import ACT_PATH, CONST_PATH
from asicsim._src.emulate.policy import Policy


def dot_roles(flags: Sequence[int]) -> tuple[str, str]:
    if GRAD in flags[:2]:  # a gradient GEMM in a user's backward: the cotangent is role ``grad``
        return tuple("grad" if f == GRAD else ("weight" if f else "act") for f in flags[:2])
    lhs_w, rhs_w = flags[:2]
    if rhs_w and not lhs_w:
        return "act", "weight"
    if lhs_w and not rhs_w:
        return "weight", "act"
    if lhs_w and rhs_w:
        return "weight", "weight"
    return "act", "act"


def attention_roles(roles, tags) -> tuple[str, str]:
    """``roles`` with each activation operand marked as an attention operand given that role."""
    tags = list(tags[:2]) + [None] * (2 - len(tags[:2]))
    return tuple(t if r == "act" and t is not None else r for r, t in zip(roles, tags, strict=True))


def plain_float32(pol: Policy) -> bool:
    """Every role a GEMM rounds is float32 round-to-nearest and the MAC order is ``fast``: the
    emulated GEMM would be the user's own, so the user's op runs (its precision, its layout;
    a convolution is not rewritten as im2col)."""
    return pol.mac_spec() is None and all(pol.role(r) is None or pol.role(r).is_identity for r in _GEMM_ROLES)


def gemm_path(roles, paths) -> str:
    """The path a layer rule matches for a GEMM: its weight operand's leaf path (``<const>``: a
    weight closed over; ``<act>``: no weight operand)."""
    weights = [q for r, q in zip(roles, paths[:2], strict=True) if r == "weight"]
    if not weights:
        return ACT_PATH
    return next((q for q in weights if q is not None), CONST_PATH)
