"""asicsim: a bit-accurate reduced-precision accelerator emulator.

>>> import asicsim as sim
>>> float(sim.quantize(1.0 + 2.0**-9, "bf16"))
1.0
"""

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _version

from ._lazy import lazy_package

# The public names, imported on first use: ``import asicsim`` (and ``asicsim --help``) loads
# neither JAX nor pandas until one that needs them is used. Emulation and sweeps are functions
# (``asicsim.emulate(fn, policy)``, ``asicsim.sweep(spec, out)``) with their companions beside
# them; the other layers are the packages ``asicsim.numerics``, ``hw``, ``workloads``, ``system``
# and ``report``. Everything under ``asicsim._src`` is the implementation, not the supported surface.
lazy_package(__name__, {
    "._src.emulate.attention": ["attention_role"],
    "._src.emulate.export": ["export_codes"],
    "._src.emulate.export_io": ["load_codes", "onnx_qdq", "save_codes"],
    "._src.emulate.group_weights": ["dequantize_params"],
    "._src.emulate.layer_report": ["layer_report"],
    "._src.emulate.lsq": ["lsq_init", "lsq_quantize"],
    "._src.emulate.opaque": ["OpaqueError", "OpaquePrimitive"],
    "._src.emulate.policy": ["ROLES", "LossScaling", "Policy", "RecipeError", "RoleSpec", "list_recipes"],
    "._src.emulate.ptq": ["calibrate", "export_params"],
    "._src.emulate.recipes": ["load_recipe"],
    "._src.emulate.serving": ["serve"],
    "._src.emulate.tracing": ["op_trace"],
    "._src.emulate.training": ["TrainState", "make_train_step"],
    "._src.emulate.transform": ["emulate", "round_role"],
    "._src.sweep.errors": ["SweepError"],
    "._src.sweep.expansion": ["expand"],
    "._src.sweep.point_identity": ["Point"],
    "._src.sweep.run": ["sweep"],
    "._src.sweep.spec": ["SweepSpec", "load_spec"],
    "._src.sweep.store": ["load_results"],
    ".hw": ["AllReduce", "Conv", "Elementwise", "Gemm", "Rnn", "cost", "cost_table", "load_design"],
    ".numerics": ["BlockFormat", "FloatFormat", "FormatError", "IntFormat", "MacSpec", "RoundMode", "Scaling",
                  "add", "block_scales", "decode", "div", "dot", "encode", "fma", "get_format", "matmul", "mul",
                  "quantize", "sqrt", "sub"],
})

try:
    __version__ = _version("asicsim")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0+unknown"
