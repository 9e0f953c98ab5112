"""Bit-accurate number formats: specs, rounding, quantize/encode/decode, arithmetic, the MAC model."""

from .catalog import aliases as aliases
from .catalog import catalog as catalog
from .catalog import get_format as get_format
from .codec import decode as decode
from .codec import encode as encode
from .formats import BlockFormat as BlockFormat
from .formats import FloatFormat as FloatFormat
from .formats import FormatError as FormatError
from .formats import IntFormat as IntFormat
from .mac import MacSpec as MacSpec
from .matmul import dot as dot
from .matmul import matmul as matmul
from .ops import add as add
from .ops import div as div
from .ops import fma as fma
from .ops import mul as mul
from .ops import sqrt as sqrt
from .ops import sub as sub
from .quantize import quantize as quantize
from .rounding import RoundMode as RoundMode
from .rounding import parse_rounding as parse_rounding
from .scaling import Scaling as Scaling
from .scaling import block_scales as block_scales
