"""The public numerics at their boundary (issue 29): big-endian arrays, Python scalars and blocks
longer than their axis are read as what they are, at every entry point.

Bad inputs (strings, None, codes out of range, non-boolean flags, absurd block sizes) are in
``test_numerics_bad_inputs.py``.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

from asicsim._src.numerics import (
    BlockFormat,
    add,
    block_scales,
    decode,
    dot,
    encode,
    fma,
    get_format,
    matmul,
    quantize,
)
from asicsim._src.numerics.group_quant import group_round

VALUES = [1.0, 3.14159, -2.5e-3, 1e-40, np.inf, -np.nan, 65504.0, -1000.0]
FINITE = [1.0, 3.14159, -2.5e-3, 0.75, -7.0, 100.0, 0.0, -1000.0]

# (name, call on a float array of 8 elements)
VALUE_CALLS = [
    ("quantize bf16", lambda x: quantize(x, "bf16")),
    ("quantize fp8_e4m3 rtz", lambda x: quantize(x, "fp8_e4m3", "rtz")),
    ("quantize e5m2 sr", lambda x: quantize(x, "fp8_e5m2", "sr", key=jax.random.key(3))),
    ("quantize fp32", lambda x: quantize(x, "fp32")),
    ("quantize q7.8", lambda x: quantize(x, "q7.8")),
    ("quantize int8 per tensor", lambda x: quantize(x, "int8", scaling="tensor")),
    ("quantize mxfp8_e4m3", lambda x: quantize(x.reshape(2, 4), "mxfp8_e4m3")),
    ("encode float8_e4m3fn", lambda x: encode(x, "float8_e4m3fn")),
    ("encode mxfp8_e4m3", lambda x: encode(x, "mxfp8_e4m3")[0]),
    ("block_scales mxfp8_e4m3", lambda x: block_scales(x, "mxfp8_e4m3")),
    ("add bf16", lambda x: add(x, x, "bf16")),
    ("fma fp16", lambda x: fma(x, x, x, "fp16")),
    ("dot", lambda x: dot(x, x, "a=bf16,acc=fp32")),
    ("matmul", lambda x: matmul(x.reshape(2, 4), x.reshape(4, 2), "a=fp16,acc=fp32")),
]
BIG_ENDIAN = [">f4", ">f8", ">f2"]


def bits(v) -> np.ndarray:
    v = np.asarray(v)
    return v.view(np.uint32) if v.dtype == np.float32 else v


@pytest.mark.parametrize("dtype", BIG_ENDIAN)
@pytest.mark.parametrize(("name", "call"), VALUE_CALLS, ids=[c[0] for c in VALUE_CALLS])
def test_big_endian_values_read_as_native(name, call, dtype):
    """``quantize(np.array([1.0, 3.14159], '>f4'), 'bf16')`` gave [9.18e-41, -9.6e9]: the bits were
    read in native order. Every entry point gives a big-endian array's bits as the native one's."""
    values = FINITE if name in ("dot", "matmul", "fma fp16") else VALUES
    with np.errstate(over="ignore", invalid="ignore"):  # (float32 values: the ops take no others)
        native = np.array(values, np.float32).astype(np.dtype(dtype).newbyteorder("="))
    big = native.astype(dtype)
    assert not big.dtype.isnative
    np.testing.assert_array_equal(bits(call(big)), bits(call(native)), err_msg=f"{name} {dtype}")


def test_big_endian_known_values_and_codes():
    got = np.asarray(quantize(np.array([1.0, 3.14159], ">f4"), "bf16"))
    np.testing.assert_array_equal(got, [1.0, 3.140625])
    codes = np.array([0x3F80, 0xC049, 0x7FC0], ">u2")  # bf16 codes of 1.0, -3.140625, NaN
    got = np.asarray(decode(codes, "bf16"))
    np.testing.assert_array_equal(got[:2], [1.0, -3.140625])
    assert np.isnan(got[2])
    c, s = encode(np.float32(FINITE).reshape(2, 4), "mxfp8_e4m3")
    want = np.asarray(decode(c, "mxfp8_e4m3", scales=s))
    np.testing.assert_array_equal(np.asarray(decode(np.asarray(c).astype(">u2"), "mxfp8_e4m3",
                                                    scales=np.asarray(s).astype(">u2"))), want)


def test_group_quantization_big_endian_and_long_groups():
    """Big-endian input reads as native; a group longer than its axis is one group of the axis
    (not padded to 2**24 elements)."""
    x = np.array(FINITE, np.float32).reshape(2, 4)
    want = np.asarray(group_round(x, fmt="int4", group_size=4))
    np.testing.assert_array_equal(np.asarray(group_round(x.astype(">f4"), fmt="int4", group_size=4)), want)
    np.testing.assert_array_equal(np.asarray(group_round(x, fmt="int4", group_size=1 << 24)), want)


SCALARS = [1.5, 3, np.float32(1.5), np.float64(1.5), np.float16(1.5), np.array(1.5), np.array(1.5, ">f4")]


@pytest.mark.parametrize("fmt, kw", [("bf16", {}), ("int8", {}), ("fp4", {}), ("mxfp8_e4m3", {}), ("mxint8", {}),
                                     ("flex16+5", {}), ("int8", {"scaling": "tensor"}),
                                     ("fp8_e4m3", {"scaling": "channel"}), ("int8", {"axis": 0, "block_size": 4})])
def test_scalars_keep_shape_in_every_format(fmt, kw):
    """A Python float into an MX format gave shape (1,) (np.float32 gave ()): every scalar is ()."""
    for x in SCALARS:
        got = quantize(x, fmt, **kw)
        assert got.shape == (), (fmt, kw, type(x), got.shape)
        assert float(got) == float(quantize(np.float32(x), fmt, **kw)), (fmt, kw, x)


def test_a_block_longer_than_its_axis_is_one_block():
    """A block size beyond the axis is one block of the axis (padding it to ``block_size``
    elements asked JAX for 24 TB at 10**12): the same values as a block of the axis' length, and
    encode's codes are grouped by the axis' length."""
    x = (np.arange(30, dtype=np.float32).reshape(3, 10) - 12.5) * 0.37
    e4m3, e8m0 = get_format("e4m3fn"), get_format("e8m0fnu")
    wide = BlockFormat(name="wide", element=e4m3, scale=e8m0, block_size=1 << 20)
    exact = BlockFormat(name="exact", element=e4m3, scale=e8m0, block_size=10)
    np.testing.assert_array_equal(np.asarray(quantize(x, wide)), np.asarray(quantize(x, exact)))
    codes, scales = encode(x, wide)
    assert codes.shape == (3, 10) and scales.shape == (3,)
    np.testing.assert_array_equal(np.asarray(decode(codes, wide, scales=scales, shape=x.shape)),
                                  np.asarray(quantize(x, wide)))
    np.testing.assert_array_equal(np.asarray(quantize(x, "int8", axis=0, block_size=1 << 24)),
                                  np.asarray(quantize(x, "int8", axis=0, block_size=3)))


@pytest.mark.parametrize("shape", [(0, 8), pytest.param((2, 0), marks=pytest.mark.slow),
                                   pytest.param((0, 0), marks=pytest.mark.slow)])  # ~4.5 s each
def test_group_quantization_of_empty_arrays(shape):
    """(0, 8) raised ZeroDivisionError (a reshape with -1 and no rows): empty in, empty out."""
    x = np.zeros(shape, np.float32)
    assert group_round(x, fmt="int4", group_size=4).shape == shape
    assert group_round(x, fmt="uint4", group_size=4, zero_point=True, axis=0).shape == shape
