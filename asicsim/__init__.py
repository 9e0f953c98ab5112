"""asicsim: a bit-accurate reduced-precision accelerator emulator.

>>> import asicsim as sim
>>> float(sim.quantize(1.0 + 2.0**-9, "bf16"))
1.0
"""

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _version

from ._lazy import lazy_package

# The public names, imported on first use: ``import asicsim`` (and ``asicsim --help``) loads
# neither JAX nor pandas until one that needs them is used.
lazy_package(__name__, {
    ".emulate": None,
    ".sweep": None,
    ".hw": ["AllReduce", "Conv", "Elementwise", "Gemm", "Rnn", "cost", "cost_table", "load_design"],
    ".numerics": ["BlockFormat", "FloatFormat", "FormatError", "IntFormat", "MacSpec", "RoundMode", "Scaling",
                  "add", "block_scales", "decode", "div", "dot", "encode", "fma", "get_format", "matmul", "mul",
                  "quantize", "sqrt", "sub"],
    ".sweep.store": ["load_results"],
})

try:
    __version__ = _version("asicsim")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0+unknown"
