"""asicsim: a bit-accurate reduced-precision accelerator emulator.

>>> import asicsim as sim
>>> float(sim.quantize(1.0 + 2.0**-9, "bf16"))
1.0
"""

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _version

from . import emulate as emulate
from . import sweep as sweep
from .hw import AllReduce as AllReduce
from .hw import Conv as Conv
from .hw import Elementwise as Elementwise
from .hw import Gemm as Gemm
from .hw import Rnn as Rnn
from .hw import cost as cost
from .hw import cost_table as cost_table
from .hw import load_design as load_design
from .numerics import BlockFormat as BlockFormat
from .numerics import FloatFormat as FloatFormat
from .numerics import FormatError as FormatError
from .numerics import IntFormat as IntFormat
from .numerics import MacSpec as MacSpec
from .numerics import RoundMode as RoundMode
from .numerics import Scaling as Scaling
from .numerics import add as add
from .numerics import block_scales as block_scales
from .numerics import decode as decode
from .numerics import div as div
from .numerics import dot as dot
from .numerics import encode as encode
from .numerics import fma as fma
from .numerics import get_format as get_format
from .numerics import matmul as matmul
from .numerics import mul as mul
from .numerics import quantize as quantize
from .numerics import sqrt as sqrt
from .numerics import sub as sub
from .sweep import load_results as load_results

#: ``sim.format("bf16")``: the documented public name of :func:`get_format`.
format = get_format

try:
    __version__ = _version("asicsim")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0+unknown"
