"""Emulate real workloads in reduced precision: :func:`emulate`, precision recipes, the op trace."""

from asicsim.emulate.policy import (
    ROLES,
    LossScaling,
    Policy,
    RecipeError,
    RoleSpec,
    list_recipes,
    load_recipe,
)
from asicsim.emulate.tracing import op_trace
from asicsim.emulate.transform import emulate, round_role

__all__ = ["ROLES", "LossScaling", "Policy", "RecipeError", "RoleSpec", "emulate", "list_recipes",
           "load_recipe", "op_trace", "round_role"]
