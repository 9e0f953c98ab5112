"""Bad input to the numerics: one row per case (input, the fragment the error must contain).

Every case raised a traceback from inside asicsim, or was accepted silently, before the fix:
a format file whose value had the wrong type, a block format that contains itself, a file that
is not UTF-8, an axis outside the array, NaN into a format with no NaN code; (issue 29) strings,
None and complex numbers read as numbers, codes wrapped modulo 2**bits, ``saturate='no'`` read as
true, a block size of 10**12 padded to its length, ``MacSpec(saturate=True)`` on an integer MAC.
"""

from __future__ import annotations

import re

import jax.numpy as jnp
import numpy as np
import pytest

from asicsim._src.numerics import (
    BlockFormat,
    FormatError,
    MacSpec,
    Scaling,
    add,
    block_scales,
    decode,
    dot,
    encode,
    get_format,
    mul,
    quantize,
)
from asicsim._src.numerics.group_quant import group_dequantize, group_quantize

# (file name, file text or bytes, fragment of the error). {dir} is the folder of the files.
FORMAT_FILES = [
    ("sat_str.toml", 'name = "x"\nkind = "float"\nspec = "e4m3"\nsaturate = "no"\n',
     "field 'saturate' = 'no' (str); allowed: true or false"),
    ("sat_int.toml", 'name = "x"\nkind = "int"\nbits = 8\nsaturate = 0\n',
     "field 'saturate' = 0 (int); allowed: true or false"),
    ("signed_str.toml", 'name = "x"\nkind = "int"\nbits = 8\nsigned = "yes"\n', "field 'signed' = 'yes'"),
    ("symmetric_str.toml", 'name = "x"\nkind = "int"\nspec = "int8"\nsymmetric = "true"\n',
     "field 'symmetric' = 'true' (str)"),
    ("subnormals_int.toml", 'name = "x"\nkind = "float"\nspec = "e4m3"\nsubnormals = 1\n',
     "field 'subnormals' = 1 (int); allowed: true or false"),
    ("has_zero_str.toml", 'name = "x"\nkind = "float"\nspec = "e4m3"\nhas_zero = "false"\n', "field 'has_zero'"),
    ("bits_str.toml", 'name = "x"\nkind = "int"\nbits = "8"\n', "field 'bits' = '8' (str); allowed: an integer"),
    ("bits_float.toml", 'name = "x"\nkind = "int"\nbits = 8.0\n', "field 'bits' = 8.0 (float); allowed: an integer"),
    ("bits_bool.toml", 'name = "x"\nkind = "int"\nbits = true\n', "field 'bits' = True (bool); allowed: an integer"),
    ("frac_float.toml", 'name = "x"\nkind = "int"\nbits = 8\nfrac_bits = 2.5\n', "field 'frac_bits' = 2.5"),
    ("exp_str.toml", 'name = "x"\nkind = "float"\nexp_bits = "4"\nman_bits = 3\n', "field 'exp_bits' = '4' (str)"),
    ("man_float.toml", 'name = "x"\nkind = "float"\nexp_bits = 4\nman_bits = 3.0\n', "field 'man_bits' = 3.0"),
    ("bias_str.toml", 'name = "x"\nkind = "float"\nspec = "e4m3"\nbias = "7"\n', "field 'bias' = '7' (str)"),
    ("nan_int.toml", 'name = "x"\nkind = "float"\nspec = "e4m3"\nnan = 1\n', "field 'nan' = 1 (int); allowed: a string"),
    ("desc_int.toml", 'name = "x"\nkind = "int"\nbits = 8\ndescription = 5\n', "field 'description' = 5"),
    ("spec_int.toml", 'name = "x"\nkind = "int"\nspec = 8\n', "field 'spec' = 8; allowed: a format name"),
    ("aliases_str.toml", 'name = "x"\nkind = "int"\nbits = 8\naliases = "y"\n', "field 'aliases' = 'y'; allowed: a list"),
    ("no_bits.toml", 'name = "x"\nkind = "int"\n', "field(s) ['bits'] missing"),
    ("e0.toml", 'name = "x"\nkind = "float"\nexp_bits = 0\nman_bits = 3\n', "exp_bits=0 (allowed 1..8)"),
    ("block_size_str.toml", 'name = "x"\nkind = "block"\nelement = "e4m3fn"\nblock_size = "32"\n',
     "field 'block_size' = '32' (str); allowed: an integer"),
    ("block_size_float.toml", 'name = "x"\nkind = "block"\nelement = "e4m3fn"\nblock_size = 32.0\n',
     "field 'block_size' = 32.0"),
    ("block_rule_int.toml", 'name = "x"\nkind = "block"\nelement = "e4m3fn"\nscale_rule = 1\n', "field 'scale_rule' = 1"),
    ("block_scale_int.toml", 'name = "x"\nkind = "block"\nelement = "e4m3fn"\nscale = 8\n', "field 'scale' = 8"),
    ("block_scale_int_fmt.toml", 'name = "x"\nkind = "block"\nelement = "e4m3fn"\nscale = "int8"\n',
     "field 'scale' = int format 'int8'; allowed: a float format"),
    ("block_of_blocks.toml", 'name = "x"\nkind = "block"\nelement = "mxfp8_e4m3"\n',
     "field 'element' = block format 'mxfp8_e4m3'; allowed: a float or integer format"),
    ("self.toml", 'name = "x"\nkind = "block"\nelement = "{dir}/self.toml"\n',
     "refers back to itself ({dir}/self.toml -> {dir}/self.toml)"),
    ("loop_a.toml", 'name = "a"\nkind = "block"\nelement = "{dir}/loop_b.toml"\n',
     "refers back to itself ({dir}/loop_a.toml -> {dir}/loop_b.toml -> {dir}/loop_a.toml)"),
    ("bad_element.toml", 'name = "x"\nkind = "block"\nelement = "e4m3q"\n', "unknown format 'e4m3q'"),
    ("latin1.toml", b'name = "x"\ndescription = "caf\xe9"\nkind = "int"\nbits = 8\n',
     "latin1.toml: not UTF-8 text (byte 0xe9 at offset 29)"),
    ("bad_toml.toml", 'name = "x\n', "not valid TOML"),
    ("block_huge.toml", 'name = "x"\nkind = "block"\nelement = "e4m3fn"\nblock_size = 1099511627776\n',
     "block format 'x': field 'block_size' = 1099511627776; allowed: an integer in 1..16777216 (2**24), "
     "or 'tensor'"),
    ("block_zero.toml", 'name = "x"\nkind = "block"\nelement = "e4m3fn"\nblock_size = 0\n',
     "field 'block_size' = 0; allowed: an integer in 1..16777216"),
]
SUPPORT = {"loop_b.toml": 'name = "b"\nkind = "block"\nelement = "{dir}/loop_a.toml"\n'}


@pytest.mark.parametrize(("file", "text", "fragment"), FORMAT_FILES, ids=[row[0] for row in FORMAT_FILES])
def test_bad_format_file(tmp_path, file, text, fragment):
    for name, body in [*SUPPORT.items(), (file, text)]:
        data = body if isinstance(body, bytes) else body.replace("{dir}", str(tmp_path)).encode()
        (tmp_path / name).write_bytes(data)
    with pytest.raises(FormatError) as err:
        get_format(str(tmp_path / file))
    message = str(err.value)
    assert message.startswith(str(tmp_path / file)), message  # the file is named first
    assert fragment.replace("{dir}", str(tmp_path)) in message, message


# (format name, fragment): the grammar with impossible values
NAMES = [
    ("e0m3", "exp_bits=0 (allowed 1..8)"),
    ("e0m0fn", "exp_bits=0 (allowed 1..8)"),
    ("float4_e0m3", "exp_bits=0"),
]


@pytest.mark.parametrize(("name", "fragment"), NAMES)
def test_bad_format_name(name, fragment):
    with pytest.raises(FormatError, match=re.escape(fragment)):
        get_format(name)


X2 = np.ones((2, 3), np.float32)
# (callable, exception class, fragment)
CALLS = [
    (lambda: quantize(X2, "int8", axis=5), ValueError, "axis=5 is out of range for a 2-d array of shape (2, 3); allowed: -2..1"),
    (lambda: quantize(X2, "int8", axis=-3), ValueError, "axis=-3 is out of range"),
    (lambda: quantize(X2, "mxfp8_e4m3", axis=2), ValueError, "axis=2 is out of range"),
    (lambda: quantize(X2, "int8", axis=2, block_size=2),
     ValueError, "axis=2 is out of range"),
    (lambda: quantize(np.float32(1.0), "int8", axis=1), ValueError, "axis=1 is out of range for a 0-d array"),
    (lambda: quantize(X2, "int8", axis=1.0), ValueError, "axis=1.0; allowed: an integer"),
    (lambda: quantize(X2, "mxfp8_e4m3", block_size=0), ValueError, "block_size=0; allowed: an integer in 1..16777216"),
    # issue 29: what is not a real number (quantize parsed '1.5', read None as NaN)
    (lambda: quantize("1.5", "bf16"), TypeError,
     "quantize: expects real numbers (a float array, a list of numbers or a Python number), got str '1.5'"),
    (lambda: quantize(None, "bf16"), TypeError, "quantize: expects real numbers (a float array, a list of numbers or a Python number), got NoneType None"),
    (lambda: quantize(True, "bf16"), TypeError, "quantize: got the boolean True; pass real numbers"),
    (lambda: quantize(1 + 2j, "bf16"), TypeError, "got complex (1+2j)"),
    (lambda: quantize(np.array([1 + 2j]), "bf16"), TypeError, "got an array of dtype complex128"),
    (lambda: quantize(["1.5", "2"], "mxfp8_e4m3"), TypeError, "got list ['1.5', '2']"),
    (lambda: quantize([1.0, None], "int8", scaling="tensor"), TypeError, "got list [1.0, None]"),
    (lambda: encode("1.5", "fp8_e4m3"), TypeError, "encode: expects real numbers"),
    (lambda: encode(None, "mxfp8_e4m3"), TypeError, "encode: expects real numbers"),
    (lambda: block_scales("1.5", "mxfp8_e4m3"), TypeError, "block_scales: expects real numbers"),
    (lambda: block_scales(np.array([1j]), "mxfp8_e4m3"), TypeError, "got an array of dtype complex128"),
    (lambda: add(1 + 2j, 1.0, "bf16"), TypeError, "add: operand a has dtype complex128"),
    (lambda: dot(["a", "b"], [1.0, 2.0]), TypeError, "quantize: expects real numbers"),
    (lambda: group_quantize("1.5", fmt="int4", group_size=2), TypeError, "group_quantize: expects real numbers"),
    # codes outside the format's bit patterns (decode wrapped them modulo 2**bits)
    (lambda: decode([300, -1], "fp8_e4m3"), ValueError,
     "decode 'float8_e4m3fn': 2 of the codes lie outside 0..255 (e.g. 300); codes are the format's 8-bit "
     "patterns as unsigned integers, as encode returns them"),
    (lambda: decode([-1], "int8"), ValueError, "decode 'int8': 1 of the codes lie outside 0..255 (e.g. -1)"),
    (lambda: decode(np.uint16([256]), "fp4"), ValueError, "outside 0..15 (e.g. 256)"),
    (lambda: decode(jnp.asarray([70000]), "bf16"), ValueError, "outside 0..65535 (e.g. 70000)"),
    (lambda: decode([2**40], "fp32"), ValueError, "outside 0..4294967295 (e.g. 1099511627776)"),
    (lambda: decode(np.uint8([1]), "mxfp8_e4m3", scales=[300]), ValueError, "1 of the scale codes lie outside 0..255"),
    (lambda: decode(np.uint16([1, 256]), "mxfp8_e4m3", scales=np.uint8([1])), ValueError, "of the codes lie outside 0..255"),
    (lambda: decode(["1"], "bf16"), TypeError, "decode expects integer codes, got list ['1']"),
    (lambda: decode(np.float32([1.0]), "bf16"), TypeError, "decode expects integer codes, got dtype float32"),
    # flags take booleans only ('no' is truthy: it saturated)
    (lambda: quantize(np.float32([1000.0]), "fp8_e4m3", saturate="no"), TypeError,
     "quantize: saturate='no' (str); allowed: True, False or None (the format's own convention)"),
    (lambda: quantize(X2, "int8", saturate=1), TypeError, "saturate=1 (int)"),
    (lambda: encode(X2, "fp8_e4m3", saturate="yes"), TypeError, "saturate='yes' (str)"),
    (lambda: mul(1.0, 2.0, "bf16", saturate="no"), TypeError, "saturate='no' (str)"),
    (lambda: Scaling(symmetric="no"), ValueError, "Scaling: symmetric='no'; allowed: True or False"),
    (lambda: group_quantize(X2, fmt="uint4", group_size=2, zero_point="no"), ValueError,
     "group quantization: zero_point='no'; allowed: True or False"),
    (lambda: MacSpec(saturate="no"), TypeError, "MacSpec saturate='no' (str); allowed: True, False or None"),
    (lambda: MacSpec(fused="no"), TypeError, "MacSpec fused='no' (str); allowed: True or False"),
    (lambda: MacSpec(order="tensorcore:4", guard_bits=1.5), TypeError, "MacSpec guard_bits=1.5 (float); allowed: an integer"),
    (lambda: MacSpec(a_fmt="int8", acc="int32", saturate=True), ValueError,
     "MacSpec saturate=True: an integer accumulator wraps or saturates as overflow='wrap' or 'saturate'"),
    # block and group sizes (10**12 was padded to its length: 24 TB asked of JAX)
    (lambda: quantize(np.ones((2, 4)), "int8", axis=1, block_size=10**12), ValueError,
     "Scaling: block_size=1000000000000; allowed: an integer in 1..16777216 (2**24) for block granularity"),
    (lambda: quantize(X2, "mxfp8_e4m3", block_size=2**30), ValueError, "block_size=1073741824; allowed: an integer in 1..16777216"),
    (lambda: Scaling(granularity="block", block_size=2**25), ValueError, "block_size=33554432; allowed"),
    (lambda: BlockFormat(name="huge", element=get_format("e4m3fn"), scale=get_format("e8m0fnu"), block_size=2**40),
     FormatError, "block format 'huge': field 'block_size' = 1099511627776; allowed: an integer in 1..16777216 (2**24)"),
    (lambda: group_quantize(X2, fmt="int4", group_size=0), ValueError, "group_size=0; allowed: an integer in 1..16777216"),
    (lambda: group_quantize(X2, fmt="int4", group_size=10**12), ValueError, "group_size=1000000000000; allowed"),
    (lambda: group_quantize(X2, fmt="int4", group_size=2.0), ValueError, "group_size=2.0; allowed"),
    (lambda: group_quantize(np.float32(1.0), fmt="int4", group_size=2), ValueError, "a 0-d array has no axis to group along"),
    (lambda: group_quantize(X2, fmt="int4", group_size=2, axis=2), ValueError,
     "axis=2 for a 2-d array of shape (2, 3); allowed: an integer in -2..1"),
    (lambda: group_dequantize(group_quantize(X2, fmt="int4", group_size=2), group_size=-1), ValueError, "group_size=-1"),
    (lambda: encode(np.float32([1.0, np.nan]), "int8"), ValueError,
     "encode to 'int8': the input holds 1 NaN value(s), which this format cannot store (it has no NaN code)"),
    (lambda: encode(np.float64([np.nan, -np.nan]), "q7.8"), ValueError, "'q7.8': the input holds 2 NaN"),
    (lambda: encode(np.float32([np.nan]), "uint4"), ValueError, "'uint4': the input holds 1 NaN"),
    (lambda: encode(np.float32([np.nan]), "float4_e2m1fn"), ValueError, "'float4_e2m1fn': the input holds 1 NaN"),
    (lambda: encode(np.float32([np.nan]), "float6_e3m2fn"), ValueError, "'float6_e3m2fn': the input holds 1 NaN"),
    (lambda: encode(np.float32([np.inf] + [0] * 40), "flex16+5"), ValueError,
     "holds 1 block(s) with NaN or inf, which this format cannot store"),
]


@pytest.mark.parametrize(("call", "error", "fragment"), CALLS, ids=[row[2][:40] for row in CALLS])
def test_bad_call(call, error, fragment):
    with pytest.raises(error) as err:
        call()
    assert fragment in str(err.value), str(err.value)
