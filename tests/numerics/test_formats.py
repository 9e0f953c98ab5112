"""Format specs, the name grammar, the TOML catalog and their errors."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import jax
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracles import gfloat_info, ml_type

from asicsim._src.numerics import (
    BlockFormat,
    FloatFormat,
    FormatError,
    IntFormat,
    aliases,
    catalog,
    get_format,
    quantize,
)
from asicsim._src.numerics.catalog import catalog_dir, load_format_file, parse_name

FLOATS = {n: s for n, s in catalog().items() if s.kind == "float"}
FINFO = ["bits", "max", "min", "smallest_normal", "smallest_subnormal", "tiny", "eps", "nmant", "nexp", "machep", "minexp", "maxexp"]


@pytest.mark.parametrize("name", [n for n in FLOATS if ml_type(n) is not None] + ["float32"])
def test_finfo_matches_ml_dtypes(name):
    spec = FLOATS[name]
    info = np.finfo(np.float32) if name == "float32" else ml_dtypes.finfo(ml_type(name))
    for attr in FINFO:
        assert getattr(spec, attr) == pytest.approx(float(getattr(info, attr)), rel=0, abs=0), attr


def test_well_known_values():
    assert get_format("fp8_e4m3").max == 448 and get_format("e4m3").max == 240
    assert get_format("fp8_e5m2").max == 57344 and get_format("e5m2fnuz").max == 57344
    assert get_format("e4m3fnuz").max == 240 and get_format("e4m3b11fnuz").max == 30
    assert get_format("fp4").max == 6 and get_format("fp6_e2m3").max == 7.5 and get_format("fp6_e3m2").max == 28
    assert get_format("tf32").max == get_format("fp32").max / 1.0 * (1 - 2.0**-11) / (1 - 2.0**-24)
    assert get_format("e8m0fnu").max == 2.0**127 and get_format("e8m0fnu").smallest_normal == 2.0**-127
    assert get_format("int8").min == -128 and get_format("q7.8").eps == 2.0**-8 and get_format("q1.14").max == 2 - 2.0**-14
    assert get_format("uq4.4").max == 16 - 2.0**-4 and get_format("uint4").min == 0
    assert get_format("mxint8").element.min == -127 / 64  # symmetric, as MX requires
    assert get_format("mxfp8").bits == 8.25


# --- grammar ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "grammar, canonical",
    [
        ("e4m3fn", "float8_e4m3fn"),
        ("float8_e4m3fn", "float8_e4m3fn"),
        ("E4M3FN", "float8_e4m3fn"),
        ("e4m3", "float8_e4m3"),
        ("e5m2", "float8_e5m2"),
        ("e5m10", "float16"),
        ("e8m7", "bfloat16"),
        ("e8m23", "float32"),
        ("e8m10", "tf32"),
        ("e2m1fn", "float4_e2m1fn"),
        ("e3m2fn", "float6_e3m2fn"),
        ("e4m3b11fnuz", "float8_e4m3b11fnuz"),
        ("e4m3fnuzb11", "float8_e4m3b11fnuz"),
        ("e8m0fnu", "float8_e8m0fnu"),
        ("ocp_e4m3", "float8_e4m3fn"),
        ("bf16", "bfloat16"),
        ("half", "float16"),
        ("q7.8", "q7.8"),
        ("int8", "int8"),
    ],
)
def test_grammar_names_resolve_to_catalog(grammar, canonical):
    assert get_format(grammar) is catalog()[canonical]


def test_grammar_conventions():
    ieee, fn, fnuz = parse_name("e4m3"), parse_name("e4m3fn"), parse_name("e4m3fnuz")
    assert (ieee.nan, ieee.bias, ieee.has_inf) == ("ieee", 7, True)
    assert (fn.nan, fn.bias, fn.has_inf, fn.has_nan) == ("ones", 7, False, True)
    assert (fnuz.nan, fnuz.bias) == ("negzero", 8)
    assert parse_name("e2m3fn").nan == "none" and not parse_name("e2m3fn").has_nan  # < 8 bits: no NaN
    e8m0 = parse_name("e8m0fnu")
    assert (e8m0.signed, e8m0.has_zero, e8m0.subnormals, e8m0.bits) == (False, False, False, 8)
    assert parse_name("e5m2b20").bias == 20 and parse_name("e5m2b20").grammar_name == "e5m2b20"
    assert parse_name("uq3.4") == IntFormat(name="uq3.4", bits=7, signed=False, frac_bits=4)
    assert parse_name("q3.4").bits == 8
    assert get_format("e6m5").bits == 12 and get_format("e6m5").name == "e6m5"


@st.composite
def grammar_formats(draw):
    e = draw(st.integers(2, 8))
    m = draw(st.integers(0, 10))
    suffix = draw(st.sampled_from(["", "fn", "fnuz", "fnu"]))
    if suffix == "" and m == 0:
        suffix = "fn"
    bits = e + m + (suffix != "fnu")
    nan = {"": "ieee", "fnuz": "negzero"}.get(suffix, "ones" if bits >= 8 else "none")
    top = (1 << e) - 1 - (nan == "ieee") - (nan == "ones" and m == 0)
    pure_exponent = suffix == "fnu" and m == 0
    bias = draw(st.integers(max(0, top - 127), 149 if pure_exponent else 150 - m))
    return get_format(f"e{e}m{m}{suffix}b{bias}")


@settings(max_examples=200, deadline=None)
@given(grammar_formats())
def test_any_format_properties_vs_gfloat(spec):
    fi = gfloat_info(spec)
    assert spec.bits == fi.bits
    assert spec.max == fi.max
    if spec.subnormals:
        assert spec.smallest_subnormal == fi.smallest_subnormal
    if spec.man_bits > 0 or spec.has_zero:
        assert spec.smallest_normal == fi.smallest_normal
    assert spec.eps == fi.eps
    if spec.signed or spec.has_zero:
        assert spec.min == fi.min
    else:
        assert spec.min == spec.smallest_normal == fi.smallest  # e8m0-like: no zero
    assert math.floor(math.log2(spec.max)) == fi.emax
    again = get_format(spec.grammar_name)  # the name it prints parses back to the same numbers
    assert dataclasses.replace(again, name=spec.name) == spec


def test_specs_are_hashable_jit_static_arguments():
    spec = get_format("e4m3fn")
    f = jax.jit(lambda x, s: quantize(x, s), static_argnums=1)
    np.testing.assert_array_equal(np.asarray(f(np.float32([1.06]), spec)), [1.0])
    assert len({spec, get_format("float8_e4m3fn"), get_format("fp8_e4m3")}) == 1
    with pytest.raises(AttributeError):
        spec.bias = 3  # frozen


# --- catalog ---------------------------------------------------------------------------------------


def test_catalog_contents():
    cat = catalog()
    for name in [
        "float32", "float16", "bfloat16", "tf32", "float8_e4m3fn", "float8_e5m2", "float8_e4m3",
        "float8_e3m4", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e4m3b11fnuz", "float8_e8m0fnu",
        "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn", "int8", "uint8", "int4", "q7.8", "q1.14",
        "mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp6_e3m2", "mxfp4", "mxint8",
    ]:
        assert name in cat, name
    for name, spec in cat.items():
        assert spec.name == name
        assert spec.kind in ("float", "int", "block")
    assert all(get_format(alias) is cat[canonical] for alias, canonical in aliases().items())


def test_every_catalog_file_loads():
    files = sorted(catalog_dir().glob("*.toml"))
    assert len(files) == len(catalog())
    for path in files:
        spec = load_format_file(path)
        assert spec == catalog()[spec.name]


def test_mx_blocks():
    for name in ["mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp6_e3m2", "mxfp4", "mxint8"]:
        spec = get_format(name)
        assert isinstance(spec, BlockFormat)
        assert spec.block_size == 32 and spec.scale is get_format("float8_e8m0fnu") and spec.scale_rule == "floor"


def test_toml_file(tmp_path: Path):
    path = tmp_path / "my8.toml"
    path.write_text('name = "my8"\nkind = "float"\nspec = "e4m3"\nbias = 9\nsaturate = true\n')
    spec = get_format(str(path))
    assert isinstance(spec, FloatFormat) and spec.bias == 9 and spec.saturate
    assert float(quantize(np.float32(1e9), spec)) == spec.max  # its own overflow convention
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "bad"\nkind = "float"\nspec = "e4m3"\nmantissa = 2\n')
    with pytest.raises(FormatError, match=r"unknown field\(s\) \['mantissa'\]"):
        get_format(bad)
    bad.write_text('name = "bad"\nkind = "complex"\n')
    with pytest.raises(FormatError, match="field 'kind' = 'complex'"):
        get_format(bad)
    bad.write_text("name = \n")
    with pytest.raises(FormatError, match="not valid TOML"):
        get_format(bad)
    with pytest.raises(FormatError, match="does not exist"):
        get_format(tmp_path / "missing.toml")


# --- errors ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, hint",
    [("bfloat61", "'bfloat16'"), ("flaot16", "'float16'"), ("mxfp9", "'mxfp8'"), ("float8_e4m3f", "'float8_e4m3fn'")],
)
def test_unknown_names_suggest(name, hint):
    with pytest.raises(FormatError, match=f"unknown format '{name}'; did you mean .*{hint}"):
        get_format(name)


@pytest.mark.parametrize(
    "name, message",
    [
        ("e9m3", r"exp_bits=9 \(allowed 1..8\)"),
        ("e5m24", r"man_bits=24 \(allowed 0..23\)"),
        ("e8m3b100", r"spans 2\*\*-102 .. 2\*\*154, outside what the float32"),
        ("e5m2b200", r"outside what the float32"),
        ("float8_e5m3", "prefix says 8 bits but e5m3 signed has 9"),
        ("e4m3b3fnb4", "bias is given twice"),
        ("e5m0", "no NaN code"),
        ("e1m3", "no normal numbers"),
        ("q30.10", r"bits=41 \(allowed 2..32\)"),
        ("int1", r"bits=1 \(allowed 2..32\)"),
        ("int64", r"bits=64 \(allowed 2..32\)"),
    ],
)
def test_impossible_parameters(name, message):
    with pytest.raises(FormatError, match=message):
        get_format(name)


def test_bad_spec_objects():
    with pytest.raises(FormatError, match="nan='inf'"):
        FloatFormat(name="x", exp_bits=4, man_bits=3, bias=7, nan="inf")
    with pytest.raises(FormatError, match=r"field 'block_size' = 0; allowed: an integer in 1\.\.16777216"):
        BlockFormat(name="b", element=get_format("fp4"), scale=get_format("e8m0fnu"), block_size=0)
    # issue 34: an E4M3 block scale is no longer refused (two-level block formats, NVFP4)
    assert BlockFormat(name="b", element=get_format("fp4"), scale=get_format("e4m3fn")).two_level
    with pytest.raises(FormatError, match="format must be a name, a path or a spec, got int"):
        get_format(8)
