"""Bit-accurate number formats: specs, rounding, quantize/encode/decode, arithmetic, the MAC model."""

from asicsim._lazy import lazy_package

lazy_package(__name__, {
    ".two_level": ["two_level_parts"],
    ".catalog": ["aliases", "catalog", "get_format"],
    ".codec": ["decode", "encode"],
    ".formats": ["BlockFormat", "FloatFormat", "FormatError", "IntFormat"],
    ".mac": ["MacSpec", "tensor_core"],
    ".matmul": ["dot", "matmul"],
    ".ops": ["add", "div", "fma", "mul", "sqrt", "sub"],
    ".quantize": ["quantize"],
    ".rounding": ["RoundMode", "parse_rounding"],
    ".scaling": ["Scaling", "block_scales"],
})
