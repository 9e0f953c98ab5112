"""Emulate real workloads in reduced precision: :func:`emulate`, precision recipes, the op trace.

The package is callable: ``asicsim.emulate(fn, policy)`` is :func:`emulate` (DESIGN.md's public
name), while ``asicsim.emulate.load_recipe`` and the other names below stay reachable.
"""

import sys
import types

from asicsim.emulate.layer_rules import layer_report
from asicsim.emulate.opaque import OpaqueError, OpaquePrimitive
from asicsim.emulate.policy import (
    ROLES,
    LossScaling,
    Policy,
    RecipeError,
    RoleSpec,
    list_recipes,
)
from asicsim.emulate.recipes import load_recipe
from asicsim.emulate.tracing import op_trace
from asicsim.emulate.training import TrainState, make_train_step
from asicsim.emulate.transform import emulate, round_role

__all__ = ["ROLES", "LossScaling", "OpaqueError", "OpaquePrimitive", "Policy", "RecipeError", "RoleSpec",
           "TrainState", "emulate", "layer_report", "list_recipes", "load_recipe", "make_train_step", "op_trace",
           "round_role"]


class _CallableModule(types.ModuleType):
    """Lets ``asicsim.emulate(fn, policy)`` call the transformation and keep the submodules."""

    def __call__(self, fn, policy, **kwargs):
        return emulate(fn, policy, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
