"""Issue 29 item 10: fp32 scales from tiny and huge amax, every granularity, against an exact
``fractions.Fraction`` reference written from the definition (element grids from ml_dtypes).

The definition (``asicsim._src.numerics.fp32_scale``): ``s = amax / max`` rounded to nearest float32,
or up where that is a subnormal below the quotient; ``y = x / s`` rounded to nearest float32,
``|y|`` capped at ``max`` where ``|x| <= amax``; ``q`` = ``y`` rounded onto the element in the
requested mode; the value ``q * s`` rounded to nearest float32. Before the fix a tensor of amax
7.79e-43 onto fp8_e4m3 gave NaN (its scale rounded down to 2**-149), and a normal scale rounded
down by one float32 ulp gave NaN/inf under ``rup``/``rdn`` and a wrapped integer without
saturation, for about one tensor in ten."""

from __future__ import annotations

import math
from fractions import Fraction

import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from asicsim._src.emulate.policy import RoleSpec
from asicsim._src.emulate.role_rounding import round_role
from asicsim._src.numerics import Scaling, block_scales, get_format, quantize
from asicsim._src.numerics.static_scale import quantize_static

F32_MAX = float(np.finfo(np.float32).max)
# amax from the smallest subnormal to the largest float: the issue's 7.79e-43, scales around
# float32's smallest normal for each format, and the amax whose nearest scale is one ulp low
AMAX = [2.0**-149, 3 * 2.0**-149, 7.79e-43, 1e-40, 0.9 * 2.0**-126, 2.0**-126, 448 * 2.0**-126 * 0.99,
        448 * 2.0**-126, 127 * 2.0**-126 * 1.01, 1e-30, 1.0, 1.2544111, 1.1756556, 1.7972680, 3e38, F32_MAX]
FORMATS = ["float8_e4m3fn", "float8_e5m2", "float4_e2m1fn", "bfloat16", "float16", "int8", "int4"]
MODES = ["rne", "rup", "rdn", "rtz"]
# the default run's share (each pair compiles its own kernels); the rest is marked slow
CORE = {("float8_e4m3fn", "rup"), ("int8", "rdn"), ("bfloat16", "rne"), ("float4_e2m1fn", "rtz")}
CASES = [pytest.param(f, m, marks=() if (f, m) in CORE else pytest.mark.slow) for f in FORMATS for m in MODES]


def _floor_log2(v: Fraction) -> int:
    e = v.numerator.bit_length() - v.denominator.bit_length()
    return e - 1 if Fraction(2) ** e > v else e


def _round(v: Fraction, quantum: Fraction, mode: str) -> Fraction:
    """``v`` rounded to a multiple of ``quantum`` in ``mode`` (signed)."""
    n, rem = divmod(v, quantum)  # floor
    if rem:
        up = {"rup": True, "rdn": False, "rtz": v < 0,
              "rne": 2 * rem > quantum or (2 * rem == quantum and n % 2 == 1)}[mode]
        n += up
    return n * quantum


def to_f32(v: Fraction, mode: str = "rne"):
    """A real rounded to float32 (subnormals kept; beyond the largest float: inf)."""
    if v == 0:
        return Fraction(0)
    r = _round(v, Fraction(2) ** (max(_floor_log2(abs(v)), -126) - 23), mode)
    return math.copysign(math.inf, v) if abs(r) >= 2**128 else r


def onto_element(y: Fraction, fmt: str, mode: str) -> Fraction:
    """A float32 value rounded onto the element (it is within the element's range here)."""
    spec = get_format(fmt)
    if spec.kind == "int":
        q = _round(y, Fraction(1), mode)
    else:
        fi = ml_dtypes.finfo(np.float16 if fmt == "float16" else getattr(ml_dtypes, fmt))
        q = Fraction(0) if y == 0 else _round(y, Fraction(2) ** (max(_floor_log2(abs(y)), fi.minexp) - fi.nmant), mode)
    assert abs(q) <= Fraction(spec.max), (fmt, mode, y, q)
    return q


def reference_scale(amax: float, fmt: str) -> Fraction:
    if amax == 0:
        return Fraction(1)
    q = Fraction(amax) / Fraction(get_format(fmt).max)
    s = to_f32(q)
    return s if s >= Fraction(2) ** -126 else to_f32(q, "rup")


def reference(x: np.ndarray, amax: float, fmt: str, mode: str) -> np.ndarray:
    """Scaled values of the float32 elements of ``x`` (all within ``amax``)."""
    s, top = reference_scale(amax, fmt), Fraction(get_format(fmt).max)
    out = []
    for v in x.astype(np.float64).tolist():
        y = to_f32(Fraction(v) / s)
        y = max(-top, min(top, y))  # |x| <= amax: capped at max
        out.append(float(to_f32(onto_element(y, fmt, mode) * s)))
    return np.array(out, np.float32)


def tensor_with_amax(amax: float, n: int = 24, seed: int = 0) -> np.ndarray:
    """float32 elements within ``amax``: +-amax itself, fractions of it, the smallest subnormals."""
    rng = np.random.default_rng(seed)
    a = np.float32(amax)
    x = (a * rng.uniform(-1, 1, n).astype(np.float32)).astype(np.float32)
    x[:2] = [a, -a]
    tiny = np.float32([2.0**-149, -3 * 2.0**-149, 2.0**-130])
    x[2:5] = np.where(np.abs(tiny) <= a, tiny, 0)
    return x


def _same_values(got, want, what):
    got = np.asarray(got)
    assert not np.isnan(got).any(), (what, got)
    bad = got != want
    assert not bad.any(), (what, got[bad][:4], want[bad][:4])


@pytest.mark.parametrize(("fmt", "mode"), CASES)
def test_per_tensor_scales_from_tiny_to_huge_amax(fmt, mode):
    for i, amax in enumerate(AMAX):
        x = tensor_with_amax(amax, seed=i)
        got = quantize(x, fmt, mode, scaling="tensor", saturate=False)
        _same_values(got, reference(x, float(np.float32(amax)), fmt, mode), (fmt, mode, amax))
        scale = np.asarray(block_scales(x, fmt, scaling="tensor"))
        assert Fraction(float(scale[0])) == reference_scale(float(np.float32(amax)), fmt), (fmt, amax)


def _columns(seed: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """(n, len(AMAX)) with column j of amax AMAX[j], and the float32 amax of each column."""
    x = np.stack([tensor_with_amax(a, seed=seed + j) for j, a in enumerate(AMAX)], axis=1)
    return x, np.abs(x).max(axis=0)


def _reference_columns(x, amax, fmt, mode):
    return np.stack([reference(x[:, j], float(amax[j]), fmt, mode) for j in range(x.shape[1])], axis=1)


@pytest.mark.parametrize(("fmt", "mode"), CASES)
@pytest.mark.parametrize("granularity", ["channel", "block", "static"])
def test_per_channel_block_and_static_scales_from_tiny_to_huge_amax(fmt, mode, granularity):
    x, amax = _columns()
    if granularity == "channel":
        got = quantize(x, fmt, mode, scaling=Scaling(granularity="channel", axis=1), saturate=False)
        want = _reference_columns(x, amax, fmt, mode)
    elif granularity == "block":  # blocks of 8 down each column: three per column, each its own amax
        got = quantize(x, fmt, mode, scaling=Scaling(granularity="block", axis=0, block_size=8), saturate=False)
        want = np.concatenate([_reference_columns(x[k:k + 8], np.abs(x[k:k + 8]).max(axis=0), fmt, mode)
                               for k in range(0, x.shape[0], 8)])
    else:  # static: a given amax per column, broadcast along the rows
        got = quantize_static(x, amax, fmt, mode, saturate=False)
        want = _reference_columns(x, amax, fmt, mode)
    _same_values(got, want, (fmt, mode, granularity))


def test_the_issue_example_and_amax_zero_and_inf():
    x = np.float32([-7.79e-43, 6e-43])
    got = np.asarray(quantize(x, "fp8_e4m3", scaling="tensor"))
    assert not np.isnan(got).any()
    np.testing.assert_array_equal(got, reference(x, 7.79e-43, "float8_e4m3fn", "rne"))
    # amax 0: scale 1, zeros stay zeros; an inf in the group: its scale and values are NaN
    both = np.float32([[0.0, 1.0], [-0.0, np.inf]])
    got = np.asarray(quantize(both, "int8", scaling="channel"))
    assert got[:, 0].tolist() == [0, 0] and np.isnan(got[:, 1]).all()
    assert np.isnan(np.asarray(quantize(both, "int8", scaling="tensor"))).all()
    assert np.asarray(block_scales(both[:, :1], "int8", scaling="tensor")).tolist() == [1.0]
    # static: amax 0 is a scale of 1; amax inf or NaN makes every value NaN
    got = np.asarray(quantize_static(np.float32([[3.0, -2.4], [1.0, 0.0], [1.0, 0.0]]), np.float32([[0], [np.inf], [np.nan]]),
                                     "int8"))
    assert got[0].tolist() == [3.0, -2.0] and np.isnan(got[1:]).all()


def test_static_int8_scaling_of_infinities_saturates():
    # the issue: RoleSpec("int8", scaling="static"), amax 4, gave NaN for +-inf on CPU
    x = jnp.asarray([1, -2, np.inf, -np.inf, 3], jnp.float32)
    got = np.asarray(round_role(x, RoleSpec("int8", scaling="static"), amax=jnp.float32(4)))
    s = np.float32(4) / np.float32(127)  # TensorRT's scale, numpy float32 arithmetic
    want = (np.clip(np.rint(np.asarray(x) / s), -128, 127) * s).astype(np.float32)
    np.testing.assert_array_equal(got, want)
    assert np.isfinite(got).all() and got[2] == np.float32(127) * s
    # a static amax in float32's subnormal range is an estimate, not "no estimate" (XLA:CPU's
    # float compare read it as 0 and scaled by the tensor's own amax)
    tiny = np.float32(1e-41)
    y = np.asarray(round_role(jnp.asarray([1e-41, -5e-42], jnp.float32), RoleSpec("int8", scaling="static"),
                              amax=jnp.asarray(tiny * 2)))
    np.testing.assert_array_equal(y, reference(np.float32([1e-41, -5e-42]), float(tiny * 2), "int8", "rne"))


@pytest.mark.parametrize(("scale_format", "granularity"), [
    pytest.param(f, g, marks=() if (f, g) == ("e8m0", "block") else pytest.mark.slow)
    for f in ("pow2", "e8m0") for g in ("tensor", "channel", "block")])
def test_power_of_two_up_rule_never_overflows_at_any_amax(scale_format, granularity):
    """The same question for power-of-two scales: the ``up`` rule's scale keeps every element
    within the max at any amax (a tiny amax clamps the exponent up, never down). The last two
    columns' amax (3e38, float32's max) can round up onto the element's grid to 2**128, which
    float32 holds only as inf (IEEE's overflow): there no NaN is asked."""
    x, _ = _columns()
    x = x[:, 3] if granularity == "tensor" else x
    plan = Scaling(granularity=granularity, axis=0 if granularity == "block" else 1, block_size=8,
                   scale_format=scale_format, rule="up")
    for fmt in ("float8_e4m3fn", "float4_e2m1fn", "int8"):
        for mode in ("rup", "rdn"):
            got = np.asarray(quantize(x, fmt, mode, scaling=plan, saturate=False))
            assert not np.isnan(got).any(), (fmt, mode, granularity)
            assert np.isfinite(got if granularity == "tensor" else got[:, :-2]).all(), (fmt, mode, granularity)


@pytest.mark.parametrize(("call", "fragment"), [
    (lambda: quantize_static(np.ones(3, np.float32), np.ones(4, np.float32), "int8"), "amax of shape (4,)"),
    (lambda: quantize_static(np.ones(3, np.float32), np.ones((2, 3), np.float32), "int8"), "amax of shape (2, 3)"),
    (lambda: quantize_static(np.ones(3, np.float32), 1.0, "int8", saturate="no"), "saturate='no'"),
    (lambda: quantize_static(np.ones(3, np.float32), 1.0, "int8", "sr"), "pass words"),
])
def test_static_scaling_bad_inputs(call, fragment):
    with pytest.raises(ValueError, match=None) as err:
        call()
    assert fragment in str(err.value), str(err.value)


def test_static_scaling_of_a_block_format_is_its_own_block_scaling():
    # RoleSpec("mxfp8", scaling="static") is accepted: MX brings its own scales
    x = np.random.default_rng(4).standard_normal(64).astype(np.float32)
    np.testing.assert_array_equal(quantize_static(x, 3.0, "mxfp8"), quantize(x, "mxfp8"))
