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
from asicsim.emulate.training import TrainState, make_train_step
from asicsim.emulate.transform import emulate, round_role

__all__ = ["ROLES", "LossScaling", "Policy", "RecipeError", "RoleSpec", "TrainState", "emulate",
           "list_recipes", "load_recipe", "make_train_step", "op_trace", "round_role"]
