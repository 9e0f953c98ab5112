"""The MAC model: fast kernels against the scalar reference, bit for bit, plus known facts.

Every exact order (sequential, folded, chunk, tree, tensorcore) is compared with
``asicsim._src.numerics.mac_ref.dot_ref`` (Python Fractions, the order followed literally) on data
chosen to hit both fast paths (float32 where provably exact, float64 otherwise): ordinary
values, the accumulator's subnormal range, cancellation to zero, overflow to inf/NaN and a wide
exponent spread. Results are compared as float32 bit patterns (so the sign of zero counts);
any NaN matches any NaN.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import asicsim
from asicsim._src.numerics import fast32, get_format
from asicsim._src.numerics.mac import MacSpec
from asicsim._src.numerics.mac_ref import dot_ref, tensorcore_block
from asicsim._src.numerics.matmul import dot, matmul

M, K, N = 3, 13, 4  # K = 13 leaves a tail for folded/chunk/tensorcore and an odd tree level


def assert_same_bits(got, want, context=""):
    got = np.asarray(got, np.float32)
    want = np.asarray(want, np.float64).astype(np.float32)  # exact: want holds format values
    same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
    if not same.all():
        i = tuple(np.argwhere(~same)[0])
        raise AssertionError(f"{context}: at {i} got {got[i]!r} want {want[i]!r}")


def datasets(acc: str, seed: int = 0) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Operand pairs (M, K) x (K, N) that stress the accumulator ``acc``."""
    rng = np.random.default_rng(seed)
    spec = get_format(acc)

    def normal():
        return rng.standard_normal((M, K)), rng.standard_normal((K, N))

    def scaled(center: float, lo: int, hi: int):
        a = rng.standard_normal((M, K)) * center * 2.0 ** rng.integers(lo, hi, (M, K))
        b = rng.standard_normal((K, N)) * center * 2.0 ** rng.integers(lo, hi, (K, N))
        return a, b

    a, b = normal()
    half = K // 2
    a[:, half : 2 * half] = a[:, :half]
    b[half : 2 * half] = -b[:half]  # pairs of products cancel exactly
    b[-1] = -0.0
    a[0, :] = -0.0  # row 0: all products are signed zeros
    cancel = (a, b)
    return {
        "normal": normal(),
        "subnormal": scaled(np.sqrt(spec.smallest_normal), -6, 2),
        "cancel": cancel,
        "overflow": scaled(np.sqrt(spec.max), -1, 2),
        "spread": scaled(1.0, -20, 20),
    }


ACCS = ["fp32", "bf16", "fp16", "e5m2"]
ORDERS = ["sequential", "chunk:5", "tree", "tensorcore:4"]


@pytest.mark.parametrize("rounding", ["rne", "rtz"])
@pytest.mark.parametrize("acc", ACCS)
@pytest.mark.parametrize("order", ORDERS)
def test_orders_match_scalar_reference(order, acc, rounding):
    mac = MacSpec(a_fmt="bf16", acc=acc, order=order, acc_rounding=rounding)
    for name, (a, b) in datasets(acc).items():
        a32, b32 = a.astype(np.float32), b.astype(np.float32)
        assert_same_bits(dot(a32, b32, mac), dot_ref(a32, b32, mac), f"{mac} {name}")


@pytest.mark.parametrize(
    "spec",
    [
        "a=fp32,acc=fp32,acc_rounding=rup",
        "a=fp32,acc=fp32,acc_rounding=rdn",
        "a=fp32,acc=bf16,acc_rounding=rna",
        "a=bf16,acc=fp32,acc_rounding=rup",  # float32 path, directed fp32 accumulation
        "a=bf16,acc=bf16,acc_rounding=rdn",
        "a=fp16,acc=fp32,order=folded:4,out=bf16",
        "a=bf16,acc=fp16,fused=false",  # product rounded to fp16, then added
        "a=fp32,acc=fp32,fused=false,product=e5m2,product_rounding=rtz,order=tree",
        "a=e4m3fn,b=e5m2,acc=fp16,order=folded:3,acc_rounding=rtz,saturate=true",
        "a100",
    ],
)
def test_more_macs_match_scalar_reference(spec):
    mac = MacSpec.parse(spec)
    for name, (a, b) in datasets(str(mac.spec("acc").name), seed=1).items():
        a32, b32 = a.astype(np.float32), b.astype(np.float32)
        assert_same_bits(dot(a32, b32, mac), dot_ref(a32, b32, mac), f"{spec} {name}")


def test_both_float_paths_are_exercised():
    """The float32 path is taken on ordinary data, float64 near underflow or overflow."""
    mac = MacSpec.parse("a=bf16,acc=bf16")
    data = datasets("bf16")
    q = lambda x: asicsim.quantize(x.astype(np.float32), "bf16")  # noqa: E731
    assert bool(fast32.safe(q(data["normal"][0]), q(data["normal"][1]), mac))
    assert not bool(fast32.safe(q(data["subnormal"][0]), q(data["subnormal"][1]), mac))
    assert not bool(fast32.safe(q(data["overflow"][0]), q(data["overflow"][1]), mac))
    assert fast32.eligible(mac) and not fast32.eligible(MacSpec.parse("a=fp32,acc=bf16"))


@settings(max_examples=25, deadline=None)
@given(
    data=st.lists(
        st.floats(-1e4, 1e4, width=32, allow_subnormal=True), min_size=2 * 7 + 7 * 2, max_size=2 * 7 + 7 * 2
    ),
    mac=st.sampled_from(["a=bf16,acc=bf16,order=chunk:3", "a=fp16,acc=fp16,acc_rounding=rtz"]),
)
def test_hypothesis_matches_scalar_reference(data, mac):
    x = np.array(data, np.float32)
    a, b = x[:14].reshape(2, 7), x[14:].reshape(7, 2)
    assert_same_bits(dot(a, b, mac), dot_ref(a, b, mac), mac)


# --- saturate: every float rounding of the MAC ----------------------------------------------------

NAN, INF = float("nan"), float("inf")
# (mac, a, b, with saturate=True, with each format's own convention), worked out by hand
SATURATING = [
    ("a=e4m3fn,acc=fp32", [[1000.0, 1.0]], [[1.0], [1.0]], 449.0, NAN),  # operand: 448 + 1
    ("a=e4m3,acc=fp32", [[-1000.0, 1.0]], [[1.0], [1.0]], -239.0, -INF),  # IEEE-like: max 240, inf
    ("a=fp16,acc=fp32,fused=false,product=e4m3fn", [[20.0]], [[30.0]], 448.0, NAN),  # product 600
    ("a=fp16,acc=fp16", [[60000.0, 60000.0]], [[1.0], [1.0]], 65504.0, INF),  # a sum of 120000
    ("a=fp16,acc=fp16,order=tree", [[-60000.0, -60000.0]], [[1.0], [1.0]], -65504.0, -INF),
    ("a=fp32,acc=fp32,out=e4m3fn", [[1000.0]], [[1.0]], 448.0, NAN),  # the out rounding
]


@pytest.mark.parametrize(("mac", "a", "b", "saturated", "own"), SATURATING, ids=[r[0] for r in SATURATING])
def test_saturate_covers_operands_products_accumulator_and_out(mac, a, b, saturated, own):
    """Issue 29: MacSpec(saturate=True) rounded 1000 onto e4m3fn as NaN before the product. It
    saturates every rounding now (the formats' own convention is unchanged under None), and the
    Fraction reference agrees."""
    a, b = np.array(a, np.float32), np.array(b, np.float32)
    for sat, want in ((True, saturated), (None, own)):
        spec = MacSpec.parse(f"{mac},saturate={sat}")
        got = float(dot(a, b, spec)[0, 0])
        assert got == want or (np.isnan(got) and np.isnan(want)), (mac, sat, got, want)
        assert_same_bits(dot(a, b, spec), dot_ref(a, b, spec), f"{spec} vs dot_ref")


@pytest.mark.parametrize("mac", ["a=e4m3fn,b=e5m2,acc=fp16", "a=e4m3fn,acc=bf16,fused=false,product=e5m2",
                                 "a=e5m2,acc=e5m2,order=chunk:3", "a=e4m3,acc=fp16,order=tensorcore:4"])
def test_saturate_matches_scalar_reference(mac):
    """Data that overflows the operand formats (up to 2**17), the products and the accumulator,
    against the Fraction reference: every result finite (the conventions without saturate are
    held to the reference by the tests above)."""
    rng = np.random.default_rng(5)
    a = (rng.standard_normal((3, 9)) * 2.0 ** rng.integers(0, 18, (3, 9))).astype(np.float32)
    b = (rng.standard_normal((9, 4)) * 2.0 ** rng.integers(0, 18, (9, 4))).astype(np.float32)
    spec = MacSpec.parse(f"{mac},saturate=true")
    got = dot(a, b, spec)
    assert_same_bits(got, dot_ref(a, b, spec), str(spec))
    assert np.isfinite(np.asarray(got)).all()


@pytest.mark.parametrize("mac", ["a=fp32,acc=fp32", "a=bf16,acc=bf16", "a=fp16,acc=fp16,order=tree",
                                 "a=bf16,acc=fp32,order=fast", "v100", "a=fp32,acc=fp32,out=e4m3fn"])
def test_nan_results_are_one_nan_on_every_host(mac):
    """inf - inf inside a dot is NaN; its sign was the host's (x86 makes -NaN, a GPU +NaN), so the
    same MAC gave other bits on a CPU than on a GPU: every NaN result is the positive quiet NaN."""
    a, b = np.float32([[np.inf, -np.inf, 1.0]]), np.float32([[1.0], [1.0], [-np.nan]])
    for x, y in ((a[:, :2], b[:2]), (a[:, 2:], b[2:])):  # inf - inf, and a -NaN operand
        assert np.asarray(dot(x, y, mac)).view(np.uint32)[0, 0] == 0x7FC00000, mac


# --- integer MACs --------------------------------------------------------------------------------


@pytest.mark.parametrize("overflow", ["wrap", "saturate"])
@pytest.mark.parametrize("order", ["sequential", "chunk:4", "tree"])
def test_int8_macs(order, overflow):
    rng = np.random.default_rng(2)
    a = rng.integers(-128, 128, (M, 40)).astype(np.float32)
    b = rng.integers(-128, 128, (40, N)).astype(np.float32)
    b[:, 0] = a[0]  # row 0 . column 0 is large: overflows int16
    mac = MacSpec(a_fmt="int8", acc="int16", order=order, overflow=overflow)
    got = dot(a, b, mac)
    assert got.dtype == jnp.int32
    np.testing.assert_array_equal(np.asarray(got), dot_ref(a, b, mac))
    exact = a.astype(np.int64) @ b.astype(np.int64)
    assert exact[0, 0] > 32767
    if overflow == "wrap":  # modular arithmetic: order does not matter
        np.testing.assert_array_equal(np.asarray(got), (exact + 2**15) % 2**16 - 2**15)


def test_int32_wraps_like_two_complement():
    a = np.full((1, 64), 127.0, np.float32)
    b = np.full((64, 1), 127.0, np.float32)
    big = np.full((1, 2**17 + 1), -128.0, np.float32)
    wrap = dot(big, big.T, "a=int8,acc=int32,overflow=wrap")
    sat = dot(big, big.T, "a=int8,acc=int32,overflow=saturate")
    assert int(wrap[0, 0]) == (2**14 * (2**17 + 1) + 2**31) % 2**32 - 2**31
    assert int(sat[0, 0]) == 2**31 - 1
    assert int(dot(a, b, "a=int8,acc=int32")[0, 0]) == 64 * 127 * 127
    u = np.full((1, 4), 255.0, np.float32)
    wrapped = dot(u, u.T, "a=uint8,acc=uint16,overflow=wrap")
    assert wrapped.dtype == jnp.uint32 and int(wrapped[0, 0]) == 4 * 255 * 255 % 2**16
    assert int(dot(u, u.T, "a=uint8,acc=uint16,overflow=saturate")[0, 0]) == 2**16 - 1


# --- tensor cores (Fasi, Higham, Mikaitis & Pranesh 2021) ----------------------------------------

V100 = MacSpec.parse("v100")
A100 = MacSpec.parse("a100")


def _tc(a, b, mac):
    a = np.array([a], np.float32)
    b = np.array(b, np.float32)[:, None]
    got = float(dot(a, b, mac)[0, 0])
    assert_same_bits(np.float32(got), dot_ref(a, b, mac)[0, 0], str(mac))
    return got


def test_tensorcore_final_rounding_is_toward_zero():
    """1*1 + 1*1 + (3*2**-12)*(2**-11) = 2 + 1.5*2**-22.

    All addends align to e_max = 0 with quantum 2**-23, so nothing is truncated; the exact block
    sum 2 + 3*2**-23 needs 25 bits. Round-toward-zero (V100) gives 2 + 2**-22; an IEEE fp32 RNE
    FMA chain would give 2 + 2**-21 (1.5 ulp rounds to the even 2 ulp).
    """
    a, b = [1, 1, 3 * 2.0**-12, 0], [1, 1, 2.0**-11, 0]
    assert _tc(a, b, V100) == 2 + 2.0**-22
    assert _tc(a, b, "a=fp16,acc=fp32") == 2 + 2.0**-21


def test_tensorcore_alignment_truncates_small_products():
    """1 + 3 * 2**-24 (each 2**-24 = 2**-12 * 2**-12, exact fp16 products).

    V100 (no guard bits): aligned to 2**0 with quantum 2**-23, each 2**-24 is shifted out and
    lost: result 1. A100 (1 guard bit, quantum 2**-24) keeps them: 1 + 1.5*2**-23, rounded
    toward zero to 1 + 2**-23. An fp32 RNE chain summing the small products first gives the
    correctly rounded 1 + 2**-22.
    """
    t = 2.0**-12
    a, b = [1, t, t, t], [1, t, t, t]
    assert _tc(a, b, V100) == 1.0
    assert _tc(a, b, A100) == 1 + 2.0**-23
    assert _tc(a[::-1], b[::-1], "a=fp16,acc=fp32") == 1 + 2.0**-22


def test_tensorcore_accumulator_takes_part_in_alignment():
    """K = 8 on V100: block 1 gives c = 1; block 2 is c + 4 * 2**-24.

    c sets e_max = 0, so the four 2**-24 products are truncated away: 1. Had the block summed
    its products first (4 * 2**-24 = 2**-22) and then added c, it would give 1 + 2**-22.
    """
    t = 2.0**-12
    a, b = [1, 0, 0, 0, t, t, t, t], [1, 0, 0, 0, t, t, t, t]
    assert _tc(a, b, V100) == 1.0
    assert _tc(a, b, "a=fp16,acc=fp32,order=chunk:4") == 1 + 2.0**-22


def test_tensorcore_products_are_exact():
    """(1 + 2**-10)**2 = 1 + 2**-9 + 2**-20 needs 21 bits: kept exactly in fp32 (an fp16
    product would round it to 1 + 2**-9)."""
    x = 1 + 2.0**-10
    assert _tc([x, 0, 0, 0], [x, 0, 0, 0], V100) == 1 + 2.0**-9 + 2.0**-20
    assert _tc([x], [x], "a=fp16,acc=fp32,fused=false,product=fp16") == 1 + 2.0**-9


def test_tensorcore_block_reference_signs_and_specials():
    fp32 = get_format("fp32")
    assert tensorcore_block(0.0, [-0.0, -0.0], fp32, 0, "rtz") == 0.0
    assert np.signbit(tensorcore_block(-0.0, [-0.0, -0.0], fp32, 0, "rtz"))
    assert np.isnan(tensorcore_block(0.0, [np.inf, -np.inf], fp32, 0, "rtz"))
    assert tensorcore_block(1.0, [-(2.0**-24)] * 3, fp32, 0, "rtz") == 1.0  # sign-magnitude truncation


# --- behaviour ---------------------------------------------------------------------------------


def test_bf16_sequential_accumulation_stalls_chunking_does_not():
    """Summing 1.0 4096 times: a bf16 accumulator stalls at 256 (256 + 1 is a tie, rounds to even
    256), as ml_dtypes' README warns; chunk:32 sums 32s (exact) and 32-multiples stay exact up to
    4096 (bf16 spacing there is 16)."""
    ones = np.ones(4096, np.float32)
    assert float(dot(ones, ones, "a=bf16,acc=bf16,order=sequential")) == 256.0
    assert float(dot(ones, ones, "a=bf16,acc=bf16,order=chunk:32")) == 4096.0
    assert float(dot(ones, ones, "a=bf16,acc=fp32")) == 4096.0


def test_fast_order_is_close_not_exact():
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((8, 64)).astype(np.float32), rng.standard_normal((64, 5)).astype(np.float32)
    got = np.asarray(dot(a, b, "a=bf16,acc=fp32,order=fast,out=bf16"))
    qa = np.asarray(asicsim.quantize(a, "bf16"), np.float64)
    qb = np.asarray(asicsim.quantize(b, "bf16"), np.float64)
    np.testing.assert_allclose(got, qa @ qb, rtol=2**-7, atol=1e-5)
    assert np.array_equal(got, np.asarray(asicsim.quantize(got, "bf16")))
    ia = np.arange(-6, 6, dtype=np.float32).reshape(3, 4)
    assert np.array_equal(np.asarray(dot(ia, ia.T, "a=int8,acc=int32,order=fast")), ia @ ia.T)


def test_shapes_like_jnp_dot_and_matmul():
    rng = np.random.default_rng(4)
    ints = lambda *s: rng.integers(-8, 8, s).astype(np.float32)  # noqa: E731  exact everywhere
    v, w, m, n = ints(6), ints(6), ints(3, 6), ints(6, 2)
    mac = "a=bf16,acc=fp32"
    for x, y in ((v, w), (m, v), (v, n), (m, n)):
        got = dot(x, y, mac)
        assert got.dtype == jnp.float32 and got.shape == np.dot(x, y).shape
        np.testing.assert_array_equal(np.asarray(got), np.dot(x, y))
    batch_a, batch_b = ints(2, 1, 3, 6), ints(5, 6, 2)
    got = matmul(batch_a, batch_b, mac)
    np.testing.assert_array_equal(np.asarray(got), np.matmul(batch_a, batch_b))
    with pytest.raises(ValueError, match="contracting"):
        dot(m, m, mac)
    empty = dot(np.zeros((2, 0), np.float32), np.zeros((0, 3), np.float32), "a=bf16,acc=bf16")
    assert empty.shape == (2, 3) and not np.asarray(empty).any()


EMPTY_MACS = ["a=bf16,acc=fp32", "a=int8,acc=int32"] + [  # ~1.2 s each: two stay in the default run
    pytest.param(m, marks=pytest.mark.slow) for m in ("a=fp32,acc=fp32,order=tree", "a=fp16,acc=fp32,order=chunk:3",
                                                      "v100", "a=bf16,acc=fp32,order=fast", "a=e4m3fn,acc=fp16,out=e4m3fn")]
EMPTY_SHAPES = [((2, 0), (0, 3)), ((0, 2), (2, 3)), ((2, 3), (3, 0)), ((4, 2, 0), (0, 3)), ((0, 2, 0), (0, 0, 3)),
                ((1, 0, 2), (2, 2)), ((0,), (0,)), ((2, 0), (0,))]


@pytest.mark.parametrize("mac", EMPTY_MACS)
def test_empty_operands_give_numpys_shape_and_zeros(mac):
    """An empty contraction is a sum of no products: +0 (matmul raised ZeroDivisionError on
    (2, 0) x (0, 3), as on any empty M, N or K, reshaping with -1)."""
    for sa, sb in EMPTY_SHAPES:
        a, b = np.ones(sa, np.float32), np.ones(sb, np.float32)
        want = np.matmul(a, b)
        for f in (matmul, dot):
            if f is dot and max(len(sa), len(sb)) > 2:
                continue
            got = np.asarray(f(a, b, mac))
            assert got.shape == want.shape, (f.__name__, sa, sb, got.shape)
            assert np.array_equal(got, want) and not np.signbit(got).any(), (f.__name__, sa, sb)


def test_jit_static_and_x64_untouched():
    mac = MacSpec.parse("a=bf16,b=bf16,acc=fp32,order=sequential")
    assert hash(mac) == hash(MacSpec.parse(str(mac))) and mac == MacSpec.parse(str(mac))
    f = jax.jit(dot, static_argnames="mac")
    x = np.arange(4, dtype=np.float32)
    assert float(f(x, x, mac=mac)) == 14.0
    assert not jax.config.jax_enable_x64
    assert f(x, x, mac=mac).dtype == jnp.float32


# --- the spec ----------------------------------------------------------------------------------


def test_parse_presets_and_text_round_trip():
    mac = MacSpec.parse("a=bf16,b=fp16,acc=fp32,order=chunk:32,out=bf16,rounding=rtz")
    assert (mac.order_kind, mac.order_size, mac.acc_rounding) == ("chunk", 32, "rtz")
    assert MacSpec.parse(str(mac)) == mac
    v100 = MacSpec.parse("v100")
    assert (v100.order, v100.acc_rounding, v100.guard_bits) == ("tensorcore:4", "rtz", 0)
    assert MacSpec.parse("a100,acc_rounding=rne").acc_rounding == "rne"
    assert MacSpec().spec("out") == get_format("fp32")


@pytest.mark.parametrize(
    "text, message",
    [
        ("order=zigzag", "unknown order"),
        ("order=folded:0", "size must be >= 1"),
        ("order=chunk", "needs a size"),
        ("order=tree:4", "takes no size"),
        ("acc=fp99", "acc='fp99'"),
        ("a=mxfp8_e4m3", "block formats"),
        ("a=bf16,acc=int32", "integer accumulator"),
        ("product=bf16", "fused=True"),
        ("rounding=sr", "stochastic"),
        ("overflow=clip", "overflow"),
        ("colour=red", "cannot read"),
        ("fused=maybe", "not a boolean"),
        ("order=tensorcore:4,guard_bits=40", "guard_bits"),
        ("b100", "unknown preset"),
        ("a=int8,acc=int32,saturate=true", "an integer accumulator wraps or saturates as overflow="),
    ],
)
def test_bad_specs_are_refused_clearly(text, message):
    with pytest.raises(ValueError, match=message):
        MacSpec.parse(text)


@pytest.mark.parametrize("acc", ["bf16", "fp32", "fp16"])
def test_signed_zeros_and_underflow(acc):
    """The accumulator starts at +0: +0 + (-0) = +0 except under rdn (IEEE 754 6.3); a nonzero
    sum that rounds to zero keeps its sign; fp32 keeps subnormal sums (XLA's float32 would
    flush them)."""
    bits = lambda x: int(np.asarray(x, np.float32).view(np.uint32))  # noqa: E731
    neg0 = np.array([-0.0], np.float32)
    one = np.array([1.0], np.float32)
    assert bits(dot(neg0, one, f"a=bf16,acc={acc}")) == 0
    assert bits(dot(neg0, one, f"a=bf16,acc={acc},order=chunk:2")) == 0
    assert bits(dot(neg0, one, f"a=bf16,acc={acc},rounding=rdn")) == 0x80000000
    tiny = np.array([2.0**-75], np.float32)  # product -2**-150: below every format's grid
    assert bits(dot(-tiny, tiny, f"a=bf16,acc={acc}")) == 0x80000000
    # chunked: the chunk sum is -0, and the accumulator then adds +0 + (-0) = +0
    assert bits(dot(-tiny, tiny, f"a=bf16,acc={acc},order=chunk:2")) == 0
    small = np.array([2.0**-70, 2.0**-70], np.float32)  # sum 2**-139: an fp32 subnormal
    want = {"fp32": 2.0**-139, "bf16": 0.0, "fp16": 0.0}[acc]
    assert float(dot(small, small, f"a=bf16,acc={acc}")) == want


@pytest.mark.parametrize("order", ["sequential", "chunk:20"])
def test_long_fp32_accumulation_matches_reference(order):
    """K = 45: the float32 RNE path runs 16 steps per loop pass, then a tail of 13."""
    rng = np.random.default_rng(6)
    mac = MacSpec(a_fmt="bf16", acc="fp32", order=order)
    a = rng.standard_normal((2, 45)).astype(np.float32) * np.float32(2.0**20)
    b = rng.standard_normal((45, 3)).astype(np.float32)
    b[:, 0] = 2.0 ** rng.integers(-30, 0, 45)  # wide dynamic range: many inexact additions
    a[1, 20:40] = a[1, :20]
    b[20:40, 1] = -b[:20, 1]
    assert_same_bits(dot(a, b, mac), dot_ref(a, b, mac), str(mac))


def test_batched_matmul_matches_reference_per_batch():
    """One safety check covers the whole batch: a batch mixing ordinary and underflowing
    operands must still match the scalar model element by element."""
    mac = MacSpec.parse("a=bf16,acc=bf16,order=chunk:4")
    data = datasets("bf16", seed=7)
    a = np.stack([data["normal"][0], data["subnormal"][0]]).astype(np.float32)
    b = np.stack([data["normal"][1], data["subnormal"][1]]).astype(np.float32)
    got = matmul(a, b, mac)
    assert got.shape == (2, M, N)
    for i in range(2):
        assert_same_bits(got[i], dot_ref(a[i], b[i], mac), f"batch {i}")
    assert_same_bits(matmul(a[:1], b[:1], mac)[0], dot_ref(a[0], b[0], mac), "normal alone")


def test_fp32_operands_and_out_are_not_rounded_again():
    """float32 values on fp32 operands / fp32 out are kept bit for bit (odd mantissas and
    subnormals too; ``fast`` runs XLA's float32 dot, which flushes subnormals)."""
    x = np.array([1 + 2.0**-23, -(1 + 3 * 2.0**-23), 3 * 2.0**-149], np.float32)
    one = np.ones(1, np.float32)
    u32 = lambda v: np.asarray(v, np.float32).view(np.uint32)  # noqa: E731
    np.testing.assert_array_equal(u32(dot(x[:, None], one, "a=fp32,acc=fp32")), u32(x))
    np.testing.assert_array_equal(u32(dot(x[:2, None], one, "a=fp32,acc=fp32,order=fast")), u32(x[:2]))
    got = dot(one[:, None], x[None], "a=bf16,b=fp32,acc=fp32,out=fp32,fused=false,product=fp32")
    np.testing.assert_array_equal(u32(got[0]), u32(x))
