"""Emulate real workloads in reduced precision: :func:`emulate`, precision recipes, the op trace.

The package is callable: ``asicsim.emulate(fn, policy)`` is :func:`emulate` (DESIGN.md's public
name), while ``asicsim._src.emulate.load_recipe`` and the other names below stay reachable.
"""

from asicsim._lazy import LazyPackage, lazy_package

__all__ = ["ROLES", "LossScaling", "OpaqueError", "OpaquePrimitive", "Policy", "RecipeError", "RoleSpec",
           "TrainState", "attention_role", "emulate", "layer_report", "list_recipes", "load_recipe", "lsq_init", "lsq_quantize",
           "make_train_step", "op_trace",
           "round_role"]


class _CallableModule(LazyPackage):
    """Lets ``asicsim.emulate(fn, policy)`` call the transformation and keep the submodules."""

    def __call__(self, fn, policy, **kwargs):
        return self.emulate(fn, policy, **kwargs)


lazy_package(__name__, {
    ".attention": ["attention_role"],
    ".layer_report": ["layer_report"],
    ".lsq": ["lsq_init", "lsq_quantize"],
    ".opaque": ["OpaqueError", "OpaquePrimitive"],
    ".policy": ["ROLES", "LossScaling", "Policy", "RecipeError", "RoleSpec", "list_recipes"],
    ".recipes": ["load_recipe"],
    ".tracing": ["op_trace"],
    ".training": ["TrainState", "make_train_step"],
    ".transform": ["emulate", "round_role"],
}, _CallableModule)
