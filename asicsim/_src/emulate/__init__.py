"""Emulate real workloads in reduced precision: :func:`emulate`, precision recipes, the op trace.

The public names are exported by ``asicsim`` itself (``asicsim.emulate(fn, policy)``,
``asicsim.load_recipe``, ...); this package is the implementation.
"""

from asicsim._lazy import lazy_package

__all__ = ["ROLES", "LossScaling", "OpaqueError", "OpaquePrimitive", "Policy", "RecipeError", "RoleSpec",
           "TrainState", "attention_role", "emulate", "layer_report", "list_recipes", "load_recipe", "lsq_init", "lsq_quantize",
           "make_train_step", "op_trace",
           "round_role"]


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
})
