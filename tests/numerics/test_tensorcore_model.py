"""The parameterised tensor-core block: fast kernel against the Fraction model, each feature's
effect on a hand-worked example, ``c=`` in ``dot``/``matmul``, and bad input.

Hand-worked values: ``W`` = acc fraction bits + guard bits; an addend is truncated onto
``2**(e_max - W)`` (see asicsim/_src/numerics/tensorcore.py).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from asicsim._jax_compat import enable_x64
from asicsim._src.numerics import get_format, tensor_core
from asicsim._src.numerics.exact64 import round64
from asicsim._src.numerics.mac import MacSpec
from asicsim._src.numerics.mac_ref import dot_ref
from asicsim._src.numerics.matmul import dot, matmul
from asicsim._src.numerics.tc_presets import source, supported
from asicsim._src.numerics.tensorcore import fast_rounding, round_ieee

X = np.ldexp


def same_bits(got, want) -> bool:
    got, want = np.asarray(got, np.float32), np.asarray(want, np.float64).astype(np.float32)
    return bool(((got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))).all())


def both(mac, a, b, c=None) -> float:
    """One dot product through the kernel and the Fraction model; they must agree."""
    mac = MacSpec.parse(mac)
    a, b = np.asarray([a], np.float64), np.asarray(b, np.float64)[:, None]
    cc = None if c is None else np.full((1, 1), c)
    got = np.asarray(matmul(a, b, mac, c=cc), np.float32)[0, 0]
    want = dot_ref(a, b, mac, c=cc)[0, 0]
    assert same_bits(got, want), (mac, got, want)
    return float(got)


FP32_TC = "a=fp32,acc=fp32,order=tensorcore:4,acc_rounding=rtz"


def test_operands_exponent_aligns_at_the_sum_of_operand_exponents():
    """1.5 * 1.5 = 2.25 aligns at 2**0 (operands) rather than 2**1 (product): a -2**-23 product
    survives truncation (quantum 2**-23) and the rtz result is 2.25 - 2**-22, not 2.25."""
    a, b = [1.5, X(1, -11)], [1.5, -X(1, -12)]
    assert both(f"{FP32_TC},a=fp16,tc_exponent=operands", a, b) == 2.25 - X(1, -22)
    assert both(f"{FP32_TC},a=fp16,tc_exponent=product", a, b) == 2.25


def test_sticky_bit_rounds_up_what_truncation_lost():
    """guard 1: quantum 2**-24; 1.25 * 2**-24 keeps 2**-24 plus a sticky half quantum: 1 + 1.5 *
    2**-24 rounds (rne) up to 1 + 2**-23; without it 1 + 2**-24 is a tie, rounded to even 1."""
    spec = "a=fp32,acc=fp32,order=tensorcore:4,acc_rounding=rne,guard_bits=1"
    a, b = [1.0, 1.25 * X(1, -24)], [1.0, 1.0]
    assert both(f"{spec},tc_sticky=true", a, b) == 1 + X(1, -23)
    assert both(spec, a, b) == 1.0


def test_minimum_alignment_exponent_truncates_small_blocks():
    """Products 2**-100 and 2**-122: quantum 2**-123 keeps both; tc_min_exp=-90 makes it 2**-113."""
    a, b = [X(1, -50), X(1, -61)], [X(1, -50), X(1, -61)]
    assert both(FP32_TC, a, b) == X(1, -100) + X(1, -122)
    assert both(f"{FP32_TC},tc_min_exp=-90", a, b) == X(1, -100)


def test_negative_guard_bits_keep_fewer_bits():
    """guard -10 on fp32: 13 fraction bits at alignment: 1 + 2**-14 loses its small part."""
    assert both(FP32_TC, [1.0, X(1, -14)], [1.0, 1.0]) == 1 + X(1, -14)
    assert both(f"{FP32_TC},guard_bits=-10", [1.0, X(1, -14)], [1.0, 1.0]) == 1.0


def test_subnormal_flushing():
    sub16 = X(1, -20)  # an fp16 subnormal
    assert both(f"{FP32_TC},a=fp16", [sub16], [1.0]) == sub16
    assert both(f"{FP32_TC},a=fp16,tc_flush=in", [sub16], [1.0]) == 0.0
    tiny = [X(1, -70), X(1, -70)]  # 2**-140: an fp32 subnormal result
    assert both(FP32_TC, tiny[:1], tiny[1:]) == X(1, -140)
    assert both(f"{FP32_TC},tc_flush=out", tiny[:1], tiny[1:]) == 0.0
    assert both(f"{FP32_TC},tc_flush=out", [1.0], [0.0], c=X(1, -130)) == 0.0  # c flushed too


def test_product_limit_overflows_before_the_sum():
    """2**130 - 2**130 is 0 in exact arithmetic; with the product limit (>= 2**128) both signs
    overflow: NaN; one sign: inf of that sign."""
    a, b = [X(1, 100), X(1, 100)], [X(1, 30), -X(1, 30)]
    spec = "a=bf16,acc=fp32,order=tensorcore:4,acc_rounding=rtz"
    assert both(spec, a, b) == 0.0
    assert np.isnan(both(f"{spec},tc_product_limit=true", a, b))
    assert both(f"{spec},tc_product_limit=true", a[:1], b[:1]) == -np.inf * -1


def test_late_c_is_added_after_the_products():
    """c = 1 and three 2**-24 products: aligned with c (quantum 2**-23) they are lost; added late
    their exact sum 1.5 * 2**-23 meets c in one rounding: rtz 1 + 2**-23, rne 1 + 2**-22."""
    a, b = [X(1, -12)] * 3, [X(1, -12)] * 3
    assert both(f"{FP32_TC},a=fp16", a, b, c=1.0) == 1.0
    assert both(f"{FP32_TC},a=fp16,tc_late_c=rtz", a, b, c=1.0) == 1 + X(1, -23)
    assert both(f"{FP32_TC},a=fp16,tc_late_c=rtz,acc_rounding=rne", a, b, c=1.0) == 1 + X(1, -22)


def test_hopper_fp8_accumulator_keeps_13_fraction_bits():
    """H100 fp8: c = 1 + 2**-20 (fp32) meets the 13-bit alignment: 1 (the e8m13 accumulator)."""
    mac = tensor_core("h100", "fp8_e4m3")
    assert both(mac, [0.0], [1.0], c=1 + X(1, -20)) == 1.0
    assert both(mac, [1.0, X(1, -9)], [1.0, X(1, -5)]) == 1.0  # 2**-14 is lost

    assert both(mac, [1.0, X(1, -9)], [1.0, X(1, -4)]) == 1 + X(1, -13)
    assert "models/H100TC.m" in source("h100", "fp8_e4m3") and "b12b5a7" in source("h100", "fp16")


def test_c_is_taken_as_the_output_format():
    """An fp16 result reads C as fp16 (rounded to nearest): 1 + 2**-11 + 2**-20 becomes 1 + 2**-10."""
    mac = tensor_core("a100", "fp16", out="fp16")
    assert both(mac, [0.0], [0.0], c=1 + X(1, -11) + X(1, -20)) == 1 + X(1, -10)


INF = np.inf
SPECIAL_BLOCKS = [  # (a, b, c, expected): inf/NaN addends give the IEEE sum, not a rounded one
    ([INF, 1.0], [1.0, 1.0], None, INF),  # not clamped to the largest finite by rtz
    ([-INF, 1.0], [1.0, 1.0], 5.0, -INF),
    ([INF, -INF], [1.0, 1.0], None, np.nan),
    ([INF, 2.0], [0.0, 1.0], None, np.nan),  # inf * 0
    ([1.0, 2.0], [1.0, 1.0], -INF, -INF),
    ([1.0], [1.0], np.nan, np.nan),
    ([INF, 1.0, 1.0, 1.0, 1.0, -1.0], [1.0] * 6, None, INF),  # a later block starts from inf
    ([-0.0, -0.0], [1.0, 1.0], -0.0, -0.0),  # an exact zero: -0 only if every addend is -0
    ([-0.0, -0.0], [1.0, 1.0], None, 0.0),
    ([1.0, -1.0], [1.0, 1.0], -0.0, 0.0),
    ([-X(1, -14), -X(1, -14)], [X(1, -14), X(1, -10)], -0.0, None),  # tiny negatives, truncated
]


@pytest.mark.parametrize("preset", [("v100", "fp16", "fp32"), ("a100", "tf32", "fp32"),
                                    ("h100", "fp16", "fp16"), ("b200", "fp8_e5m2", "fp32")])
@pytest.mark.parametrize("a, b, c, want", SPECIAL_BLOCKS)
def test_special_and_zero_blocks(preset, a, b, c, want):
    """Blocks with inf/NaN addends or exact-zero sums: the kernel (which reads them off its
    scaled sum) and the Fraction model agree, with the sign of zeros and infinities."""
    got = both(tensor_core(*preset), a, b, c)
    if want is None:
        return
    assert (np.isnan(got) and np.isnan(want)) or (got == want and np.signbit(got) == np.signbit(want)), got


@pytest.mark.parametrize("acc", ["fp32", "fp16", "bf16", "e8m13", "e5m2"])
def test_fast_block_rounding_equals_round64(acc):
    """The block's fast rounding (round_ieee) gives round64's bits on values near every
    rounding boundary: integers of up to 30 bits (ties, carries) at exponents across the range,
    the subnormals and overflow included, in every mode and with and without saturation."""
    spec = get_format(acc)
    rng = np.random.default_rng(7)
    ints = rng.integers(0, 2**30, 20000) >> rng.integers(0, 30, 20000)
    exps = rng.integers(spec.emin - spec.man_bits - 8, spec.emax + 3, 20000) - 29
    vals = np.ldexp(ints.astype(np.float64), exps) * rng.choice([-1.0, 1.0], 20000)
    vals[:4] = [0.0, -0.0, spec.max, -spec.smallest_normal]
    with enable_x64(True):
        x = jnp.asarray(vals)
        for rnd in ("rne", "rtz", "rup", "rdn"):
            for sat in (None, True):
                assert fast_rounding(spec, rnd, sat)
                fast = np.asarray(round_ieee(x, spec, rnd, sat)).view(np.uint64)
                slow = np.asarray(round64(x, spec, rnd, sat)).view(np.uint64)
                bad = np.flatnonzero(fast != slow)
                assert bad.size == 0, (rnd, sat, vals[bad[:3]])


FORMATS = ["fp16", "bf16", "tf32", "fp8_e4m3", "fp8_e5m2"]
ACCS = ["fp32", "fp16", "bf16", "e8m13"]


@st.composite
def tc_specs(draw):
    acc = draw(st.sampled_from(ACCS))
    man = get_format(acc).man_bits
    return MacSpec(
        a_fmt=draw(st.sampled_from(FORMATS)), b_fmt=draw(st.sampled_from(FORMATS)), acc=acc,
        order=f"tensorcore:{draw(st.integers(1, 33))}",
        acc_rounding=draw(st.sampled_from(["rne", "rtz", "rup", "rdn"])),
        guard_bits=draw(st.integers(-man, min(20, 43 - man))),
        tc_exponent=draw(st.sampled_from(["product", "operands"])),
        tc_min_exp=draw(st.one_of(st.none(), st.integers(-140, 4))),
        tc_sticky=draw(st.booleans()), tc_flush=draw(st.sampled_from(["none", "in", "out", "both"])),
        tc_product_limit=draw(st.booleans()),
        tc_late_c=draw(st.sampled_from([None, "rtz", "rne"])),
        out=draw(st.sampled_from([None, "fp32"])),
    )


def _kernel_matches_fraction_model(mac, seed, spread, scale):
    rng = np.random.default_rng(seed)
    k = int(rng.integers(0, 70))
    a = rng.standard_normal((3, k)) * 2.0 ** rng.integers(-spread, spread + 1, (3, k)) * 2.0 ** (scale // 2)
    b = rng.standard_normal((k, 4)) * 2.0 ** rng.integers(-spread, spread + 1, (k, 4)) * 2.0 ** (scale // 2)
    if k > 2:
        b[1] = -b[0] * a[0, 0] / np.where(a[0, 1] == 0, 1, a[0, 1])  # some cancellation
        a[2] = -0.0
    c = rng.standard_normal((3, 4)) * 2.0 ** rng.integers(-spread, spread + 1, (3, 4)) * 2.0**scale
    c[0, 0] = -0.0
    for cc in (None, c):
        got = matmul(a, b, mac, c=cc)
        assert same_bits(got, dot_ref(a, b, mac, c=cc)), (mac, cc is None)


EXAMPLE = dict(mac=tc_specs(), seed=st.integers(0, 2**31 - 1), spread=st.integers(0, 40),
               scale=st.integers(-140, 60))


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**EXAMPLE)
def test_kernel_matches_fraction_model(mac, seed, spread, scale):
    """Random blocks of every option: the float64 kernel and the Fraction model agree bit for bit
    (values spread over ``spread`` binades around ``2**scale``: subnormals, overflow, cancellation;
    each example compiles a kernel, so few here and many in the slow test below)."""
    _kernel_matches_fraction_model(mac, seed, spread, scale)


@pytest.mark.experiment  # 60 examples of the Fraction model: the longest numerics test
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**EXAMPLE)
def test_kernel_matches_fraction_model_many(mac, seed, spread, scale):
    _kernel_matches_fraction_model(mac, seed, spread, scale)


@pytest.mark.parametrize("order", ["sequential", "chunk:5", "folded:3", "tree", "tensorcore:4"])
@pytest.mark.parametrize("acc", ["fp32", "bf16"])
def test_c_starts_every_order(order, acc):
    """``c=`` is the initial accumulator of every exact order (a tree adds it at the root); the
    kernel and the model agree, and c = 0 changes nothing but zero signs."""
    rng = np.random.default_rng(3)
    a, b, c = rng.standard_normal((3, 13)), rng.standard_normal((13, 4)), rng.standard_normal((3, 4))
    mac = MacSpec(a_fmt="bf16", acc=acc, order=order, out="fp16")
    assert same_bits(dot(a, b, mac, c=c), dot_ref(a, b, mac, c=c))
    assert same_bits(matmul(a[None], b, mac, c=c[0]), dot_ref(a, b, mac, c=np.broadcast_to(c[0], (3, 4)))[None])
    assert np.array_equal(np.asarray(dot(a, b, mac, c=0.0)), np.asarray(dot(a, b, mac)))


def test_dot_c_shapes():
    v = np.arange(1.0, 5.0)
    mac = "a=fp32,acc=fp32"
    assert float(dot(v, v, mac, c=0.5)) == 30.5
    assert np.asarray(dot(np.ones((2, 4)), v, mac, c=[1.0, 2.0])).tolist() == [11.0, 12.0]
    assert float(dot(v[:0], v[:0], mac, c=2.0)) == 2.0  # an empty sum plus c


BAD = [
    (lambda: MacSpec(order="sequential", tc_sticky=True), "tc_sticky: tensorcore:k options"),
    (lambda: MacSpec(order="tensorcore:4", tc_exponent="sum"), "tc_exponent='sum': allowed product, operands"),
    (lambda: MacSpec(order="tensorcore:4", tc_flush="all"), "tc_flush='all': allowed none, in, out, both"),
    (lambda: MacSpec(order="tensorcore:4", guard_bits=-24), "acc man_bits + guard_bits = -1; allowed 0..43"),
    (lambda: MacSpec(order="tensorcore:4", tc_min_exp=1000), "tc_min_exp=1000: allowed -400..400"),
    (lambda: MacSpec(order="tensorcore:4", tc_sticky=1), "tc_sticky=1 (int); allowed: True or False"),
    (lambda: MacSpec(order="tensorcore:4", tc_late_c="sr"), "stochastic MAC rounding is not supported"),
    (lambda: MacSpec.parse("order=tensorcore:4,tc_min_exp=low"), "tc_min_exp='low' is not an integer"),
    (lambda: MacSpec.parse("gpu=v100,a=bf16"), "no published model; supported (gpu/a/out, b = a): v100/float16"),
    (lambda: MacSpec.parse("gpu=h100"), "gpu=h100 needs the input format"),
    (lambda: tensor_core("h100", "fp8_e4m3", out="fp16"), "h100/float8_e4m3fn/float32"),
    (lambda: tensor_core("h100", "fp16", b_fmt="bf16"), "b='bf16'"),
    (lambda: tensor_core("mi300", "fp16"), "gpu='mi300'"),
    (lambda: tensor_core("h100", "nonsense"), "a='nonsense'"),
    (lambda: dot(np.ones((2, 3)), np.ones((3, 2)), "a=fp32", c=np.ones(3)), "c= has shape (3,); the result's shape is (2, 2)"),
    (lambda: dot(np.ones(3), np.ones(3), "a=int8,acc=int32", c=1), "c= needs a float accumulator"),
]


@pytest.mark.parametrize("make, fragment", BAD, ids=[b[1][:40] for b in BAD])
def test_bad_input_is_refused_clearly(make, fragment):
    with pytest.raises((ValueError, TypeError)) as e:
        make()
    assert fragment in str(e.value)


def test_supported_lists_forty_presets():
    assert len(supported()) == 40 and "h100/float8_e4m3fn/float32" in supported()
    for line in supported():  # each preset's text form reads back as the same MAC
        mac = tensor_core(*line.split("/"))
        assert MacSpec.parse(str(mac)) == mac
        assert MacSpec.parse("gpu={},a={},out={}".format(*line.split("/"))) == mac
