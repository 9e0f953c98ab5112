"""What an equation's outputs inherit from its inputs, as the interpreter follows values: whether
a weight stays on its pre-rounded grid through an op that only moves values, and which
attention mark (asicsim._src.emulate.attention) its outputs carry."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax.extend import core as jcore

from asicsim._src.emulate.attention import marked_role
from asicsim._src.emulate.policy import RoleSpec

# of the structural ops (:data:`.provenance.STRUCTURAL`), the ones that keep every value
# unchanged (a value on a format's grid stays on it)
VALUE_PRESERVING = {"reshape", "transpose", "broadcast_in_dim", "squeeze", "expand_dims", "slice",
                     "dynamic_slice", "dynamic_update_slice", "copy", "copy_p", "rev", "concatenate", "stack",
                     "split", "unstack", "tile"}


def same_grid(spec: RoleSpec | None, pre: RoleSpec | None) -> bool:
    """Whether values rounded by ``pre`` are left unchanged by rounding with ``spec``: the same
    plain (unscaled, elementwise) format and overflow rule; the rounding mode does not matter,
    every mode keeps a value that is on the grid."""
    if spec is None or pre is None or spec.is_identity or spec.scaling != "none" or pre.scaling != "none":
        return False
    a, b = spec.spec, pre.spec
    return a.kind != "block" and a == b and spec.saturate == pre.saturate


def grid_level(eqn, flags) -> int:
    """Weight level of a structural op's outputs: 2 (on the pre-rounded grid) when the op only
    moves values and every float input is an on-grid weight (a literal is not), else 1."""
    name = eqn.primitive.name
    if name == "convert_element_type":
        if np.dtype(eqn.params.get("new_dtype")) != np.float32:
            return 1
    elif name not in VALUE_PRESERVING:
        return 1
    floats = [(v, f) for v, f in zip(eqn.invars, flags, strict=True) if jnp.issubdtype(v.aval.dtype, jnp.floating)]
    ok = floats and all(f == 2 and not isinstance(v, jcore.Literal) for v, f in floats)
    return 2 if ok else 1


def out_tags(eqn, in_tags, inner_tags) -> dict:
    """The attention marks of ``eqn``'s outputs: its own mark, a nested call's results' marks
    (``inner_tags``), or the one mark of the inputs of an op that only moves values."""
    role = marked_role(eqn)
    if role is not None:
        return {eqn.outvars[0]: role}
    if inner_tags is not None and len(inner_tags) == len(eqn.outvars):
        return {v: t for v, t in zip(eqn.outvars, inner_tags, strict=True) if t is not None}
    name = eqn.primitive.name
    if name not in VALUE_PRESERVING and name != "convert_element_type":
        return {}
    marks = {t for t in in_tags if t is not None}
    return {v: marks.pop() for v in eqn.outvars} if len(marks) == 1 else {}
