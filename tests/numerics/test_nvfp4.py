"""NVFP4 (two-level block format) against Transformer Engine's reference quantizer, bit for bit.

The oracle is a numpy float32 transcription of, from NVIDIA/TransformerEngine at commit
d0067d0da6cb01811b8072a7d304f0e00344ce2b:

* ``transformer_engine/pytorch/custom_recipes/reference_nvfp4.py``:
  ``NVFP4QuantizerRef._quantize_blockwise_reference`` (the default path: ``pow_2_scales=False``,
  no 4over6, not row-scaled; tiles 1x16 and 16x16), the global amax of ``_quantize``
  (``torch.max(torch.abs(row_input))``) and ``cast_to_fp4x2`` / ``cast_from_fp4x2`` (codes unpacked:
  one code per element instead of two per byte);
* ``transformer_engine/common/cast/nvfp4/dequantize_nvfp4.cuh``: ``dequantize_fp4_kernel``,
  ``final_scale = float(scale) * amax * (1.0f / (6.0f * 448))``, ``out = value * final_scale``.

Each torch float32 operation is the same IEEE float32 operation in numpy; ``.to(float8_e4m3fn)``
is ml_dtypes' cast (round to nearest even; values are clamped to +-448 first).

Two documented differences. ``cast_to_fp4x2`` maps a scaled value of -0.0 (an input of -0.0, or
a tiny negative input whose float32 product with the encode scale underflows) to code 0 (+0: its
test ``x >= 0.0`` holds for -0.0); asicsim keeps the sign (-0.0), as IEEE rounding and the
hardware cast ``cvt.rn.satfinite.e2m1x2.f32`` do: the tests compare such zeros by value. And where
the dequantize kernel's ``float(scale) * amax`` overflows float32 (tensor amax above ~7.6e35) it
returns inf or NaN; asicsim returns the finite value, checked within 2 ulps of the exact one.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from asicsim._src.numerics import get_format, quantize
from asicsim._src.numerics.scaling import Scaling, block_scales
from asicsim._src.numerics.two_level import two_level_parts

F32 = np.float32
FP4_VALUES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0], F32)


def cast_to_fp4(x):
    """TE's ``cast_to_fp4x2``, one code per element (the comparisons copied in their order)."""
    r = np.zeros(x.shape, np.uint8)
    r[(x >= 0.0) & (x <= 0.25)] = 0
    r[(x > 0.25) & (x < 0.75)] = 1
    r[(x >= 0.75) & (x <= 1.25)] = 2
    r[(x > 1.25) & (x < 1.75)] = 3
    r[(x >= 1.75) & (x <= 2.5)] = 4
    r[(x > 2.5) & (x < 3.5)] = 5
    r[(x >= 3.5) & (x <= 5.0)] = 6
    r[x > 5.0] = 7
    r[(x >= -0.25) & (x < -0.0)] = 8
    r[(x < -0.25) & (x > -0.75)] = 9
    r[(x <= -0.75) & (x >= -1.25)] = 10
    r[(x < -1.25) & (x > -1.75)] = 11
    r[(x <= -1.75) & (x >= -2.5)] = 12
    r[(x < -2.5) & (x > -3.5)] = 13
    r[(x <= -3.5) & (x >= -5.0)] = 14
    r[x < -5.0] = 15
    return r


def te_quantize(x, tile_len_y=1, tile_len_x=16):
    """``_quantize_blockwise_reference`` (pow_2_scales=False) with the global amax of ``_quantize``:
    (fp4 codes, decode scales as float32, global amax)."""
    m, n = x.shape
    global_amax = np.max(np.abs(x)).astype(F32)
    if tile_len_y == 16:
        blocks = x.reshape(m // 16, 16, n // 16, 16).transpose(0, 2, 1, 3)
        block_amax = np.max(np.abs(blocks), axis=(-1, -2))
        vec_max = np.repeat(block_amax, 16, axis=0)[..., None]
    else:
        vec_max = np.max(np.abs(x.reshape(m, n // tile_len_x, tile_len_x)), axis=-1, keepdims=True).astype(F32)
    xb = x.reshape(m, n // tile_len_x, tile_len_x)
    fp4_max, e4m3_max, global_e4m3_max = F32(6.0), F32(448.0), F32(448.0)
    fmax = F32(np.finfo(F32).max)
    with np.errstate(divide="ignore", over="ignore"):
        global_encode_scale = (global_e4m3_max * fp4_max) / global_amax
    global_encode_scale = np.minimum(global_encode_scale, fmax)
    if global_encode_scale == F32(0.0):
        global_encode_scale = F32(1.0)
    global_decode_scale = F32(1.0) / global_encode_scale
    multiplier = global_encode_scale * (F32(1.0) / fp4_max)  # torch.reciprocal
    with np.errstate(over="ignore"):
        decode_scale = vec_max * multiplier
    decode_scale = np.minimum(decode_scale, fmax)
    decode_scale = np.clip(decode_scale, -e4m3_max, e4m3_max)
    decode_scale = decode_scale.astype(ml_dtypes.float8_e4m3fn).astype(F32)
    with np.errstate(divide="ignore", over="ignore"):
        encode_scale = np.minimum(F32(1.0) / (decode_scale * global_decode_scale), fmax)
        scaled_x = xb * encode_scale
    clipped = np.clip(scaled_x, -fp4_max, fp4_max).reshape(m, n)
    return cast_to_fp4(clipped), decode_scale[..., 0], global_amax, (clipped == 0) & np.signbit(clipped)


def te_dequantize(codes, decode_scale, amax, tile_len_x=16):
    """``dequantize_fp4_kernel`` (E4M3_MAX = 448), float32 output."""
    factor_inv = F32(1.0) / (F32(6.0) * F32(448))
    with np.errstate(over="ignore", invalid="ignore"):
        final_scale = (decode_scale * amax) * factor_inv
        return FP4_VALUES[codes] * np.repeat(final_scale, tile_len_x, axis=-1)


def _check(x, tile_len_y=1):
    x = np.asarray(x, F32)
    codes, scales, amax, neg_zero = te_quantize(x, tile_len_y)
    want = te_dequantize(codes, scales, amax)
    if tile_len_y == 1:
        got = np.asarray(quantize(x, "nvfp4"))
        q, got_scales, got_amax = two_level_parts(x, "nvfp4")
    else:
        plan = Scaling(granularity="block", block_size=16, across=16,
                       block_scale=get_format("float8_e4m3fn"), tensor_scale=True)
        got = np.asarray(quantize(x, "float4_e2m1fn", scaling=plan))
        q, got_scales, got_amax = two_level_parts(x, "float4_e2m1fn", scaling=plan)
        # one scale per 16x16 tile in quantize's order; TE repeats each tile's scale on its 16 rows
        m, n = x.shape
        got_scales = np.repeat(np.asarray(got_scales).reshape(m // 16, n // 16), 16, axis=0)
    # neg_zero: a scaled value of -0.0, which TE's table gives code 0 (+0): compared by value
    assert np.asarray(got_amax).view(np.uint32) == amax.view(np.uint32)
    np.testing.assert_array_equal(np.asarray(got_scales).reshape(scales.shape).view(np.uint32),
                                  scales.view(np.uint32))
    want_q = FP4_VALUES[codes]
    q = np.asarray(q)
    assert np.array_equal(np.where(neg_zero, 0, q.view(np.uint32)), np.where(neg_zero, 0, want_q.view(np.uint32)))
    # where TE's kernel overflows (scale * amax > float32 max: inf, 0 * inf = NaN), asicsim stays
    # finite: compared with the exact product instead, within 2 ulps
    overflow = ~np.isfinite(want)
    assert np.isfinite(got).all()
    bad = (got.view(np.uint32) != want.view(np.uint32)) & ~(neg_zero & (got == 0) & (want == 0)) & ~overflow
    assert not bad.any(), (x[bad][:8], got[bad][:8], want[bad][:8])
    if overflow.any():
        exact = (want_q.astype(np.float64) * np.repeat(scales.astype(np.float64), 16, axis=-1)
                 * np.float64(amax) / 2688.0)[overflow]
        assert np.all(np.abs(got[overflow] - exact) <= 2 * np.spacing(np.abs(exact).astype(F32)).astype(np.float64))


def _finite_bf16() -> np.ndarray:
    """Every finite bfloat16 value (2**16 patterns less the infinities and NaNs) as float32."""
    v = (np.arange(2**16, dtype=np.uint32) << 16).view(F32)
    return v[np.isfinite(v)]


# every check runs on (64, 64) tensors: one compilation per path (a few seconds each)
SHAPE = (64, 64)


def test_nvfp4_matches_te_on_every_bfloat16_value():
    """Exhaustive over the 2**16 bfloat16 inputs: sorted by magnitude into 16 tensors (each its
    own tensor amax, each block of like magnitudes), and shuffled into 16 more (each block mixing
    magnitudes: block scales underflow to 0 and saturate)."""
    v = _finite_bf16()
    pad = np.zeros(2**16 - v.size, F32)
    ordered = np.concatenate([v[np.argsort(np.abs(v), kind="stable")], pad])
    shuffled = np.random.default_rng(0).permutation(np.concatenate([v, pad]))
    for t in (*ordered.reshape(-1, *SHAPE), *shuffled.reshape(-1, *SHAPE)):
        _check(t)


def test_nvfp4_matches_te_on_every_scale_code_and_element_boundary():
    """Every finite E4M3 block scale code, each block holding the E2M1 rounding boundaries
    (midpoints and grid points, one float32 ulp either side, both signs) times the scale, under
    tensor amaxes that make the tensor scale 1 (2688), and inexact ones."""
    scales = np.arange(1, 127, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(F32)
    marks = np.array([0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0, 6.0], F32)
    near = np.concatenate([marks, np.nextafter(marks, F32(0)), np.nextafter(marks, F32(np.inf))])
    near = np.concatenate([near, -near, np.zeros(12, F32)])  # 84 -> 96 elements: 6 blocks
    rows = np.zeros((128, 96), F32)
    rows[:126] = scales[:, None] * near[None, :]
    for top in (F32(2688.0), F32(1000.0), F32(3.0e-3), F32(7.7e30)):
        for t in (rows * (top / F32(2688.0))).reshape(-1, *SHAPE):  # blocks of 16 stay whole
            t[0, 0] = top  # the tensor amax
            _check(t)


@settings(max_examples=40, deadline=None)
@given(st.integers(-150, 127), st.integers(0, 40), st.integers(0, 2**32 - 1), st.booleans())
def test_nvfp4_matches_te_on_random_tensors(lo, spread, seed, tiles):
    """Random tensors whose magnitudes span 2**lo .. 2**(lo + spread) (capped at 2**127),
    subnormals included; 1x16 blocks, and 16x16 tiles (TE's weight quantization)."""
    rng = np.random.default_rng(seed)
    e = np.minimum(rng.integers(lo, lo + spread + 1, SHAPE), 127)
    x = (rng.uniform(1, 2, SHAPE) * np.exp2(e.astype(np.float64)) * rng.choice([-1, 1], SHAPE)).astype(F32)
    x[rng.random(SHAPE) < 0.05] = 0
    _check(x, tile_len_y=16 if tiles else 1)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nvfp4_non_finite_makes_the_tensor_nan(bad):
    """A NaN or inf anywhere: the tensor amax and so every value is NaN (never a wrong number)."""
    x = np.ones((2, 32), F32)
    x[1, 5] = bad
    assert np.isnan(np.asarray(quantize(x, "nvfp4"))).all()


@pytest.mark.parametrize("scale", ["float8_e4m3fn", pytest.param("bfloat16", marks=pytest.mark.slow),
                                   pytest.param("float32", marks=pytest.mark.slow),
                                   pytest.param("float16", marks=pytest.mark.slow)])
def test_block_scale_formats_are_any_float_format(scale):
    """fp8 E4M3 elements in blocks of 32 under an E4M3, bf16, fp32 or (with a tensor scale) fp16
    block scale, against a numpy float32 reference of the same definition (the module's, TE's
    arithmetic with the tensor scale 1): d = round(min(amax * (1/448), S)), enc = min(1/d, max),
    q = round(clip(x * enc, +-448)), value q * d."""
    from asicsim._src.numerics.formats import BlockFormat

    rng = np.random.default_rng(3)
    x = (rng.standard_normal((8, 64)) * np.exp2(rng.integers(-60, 60, (8, 1)))).astype(F32)
    x[0, :32] = 1e-30  # a block whose scale underflows E4M3 (d = 0, enc = float32 max)
    tensor = scale == "float16"  # with a tensor scale above it
    fmt = BlockFormat(name=f"fp8_{scale}", element=get_format("float8_e4m3fn"), scale=get_format(scale),
                      block_size=32, tensor_scale=get_format("float32") if tensor else None)
    assert fmt.two_level
    got = np.asarray(quantize(x, fmt)).reshape(-1, 32)
    blocks = x.reshape(-1, 32)
    amax = np.abs(blocks).max(axis=1, keepdims=True)
    dtype = {"float8_e4m3fn": ml_dtypes.float8_e4m3fn, "bfloat16": ml_dtypes.bfloat16, "float32": F32,
             "float16": np.float16}[scale]
    smax = F32(get_format(scale).max)
    if tensor:
        t_amax = F32(np.abs(x).max())
        with np.errstate(over="ignore"):  # 2**127 * 448: inf, capped below (as TE caps it)
            g = np.minimum(F32(smax * F32(448)) / t_amax, F32(np.finfo(F32).max))
        g_dec, mult = F32(1) / g, g * (F32(1) / F32(448))
    else:
        g_dec, mult = F32(1), F32(1) / F32(448)
    with np.errstate(over="ignore"):  # an overflow to inf is capped at S, as TE caps it
        d = np.minimum(amax * mult, smax).astype(dtype).astype(F32)
    with np.errstate(divide="ignore", over="ignore"):
        enc = np.minimum(F32(1) / (d * g_dec), F32(np.finfo(F32).max))
        y = np.clip(blocks * enc, -448, 448)
        final = (d * t_amax) * (F32(1) / (smax * F32(448))) if tensor else d
    q = y.astype(ml_dtypes.float8_e4m3fn).astype(F32)
    want = q * final
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    np.testing.assert_array_equal(np.asarray(block_scales(x, fmt)), d[:, 0])


@pytest.mark.parametrize(("fields", "message"), [
    ({"scale": "float8_e8m0fnu", "tensor_scale": "float32"}, "overflows float32"),
    ({"scale": "bfloat16", "tensor_scale": "float32"}, "overflows float32"),
    ({"tensor_scale": "int8"}, "field 'tensor_scale'"),
    ({"tensor_scale": 1.0}, "field 'tensor_scale' = 1.0"),
])
def test_bad_two_level_block_formats(fields, message, tmp_path):
    """Table-driven: a tensor scale whose arithmetic overflows float32, or that is not a float
    format, is refused when a format file is loaded, naming the file and the field."""
    from asicsim._src.numerics.catalog import load_format_file
    from asicsim._src.numerics.formats import FormatError

    table = {"name": "bad", "kind": "block", "element": "float4_e2m1fn", "scale": "float8_e4m3fn",
             "block_size": 16, **fields}
    path = tmp_path / "bad.toml"
    path.write_text("".join(f"{k} = {v!r}\n".replace("'", '"') for k, v in table.items()))
    with pytest.raises(FormatError, match=message) as err:
        load_format_file(path)
    assert "bad.toml" in str(err.value)


def test_two_level_formats_have_no_codes_through_encode():
    """encode/decode would drop the tensor scale: they refuse, naming the function that gives
    the parts (they used to take every block scale for a power of two)."""
    from asicsim._src.numerics import decode, encode

    x = np.ones((2, 32), F32)
    for call in (lambda: encode(x, "nvfp4"), lambda: decode(np.zeros((2, 32), np.uint8), "nvfp4", scales=np.zeros(4))):
        with pytest.raises(ValueError, match="two_level_parts"):
            call()


@pytest.mark.slow  # compiles five operand layouts: ~12 s on 2 busy cores
def test_nvfp4_recipe_is_te_nvfp4_block_scaling():
    """The shipped ``nvfp4`` recipe: a Dense kernel (in, out), contracted along axis 0 forward and
    axis 1 for dgrad, rounds bit for bit as TE's 2-D (16x16) weight quantization of its (out, in)
    matrix; activations per 1x16 block; the wgrad operands rotated (16) and gradients rounded
    stochastically (TE's NVFP4BlockScaling defaults)."""
    import jax.numpy as jnp

    from asicsim._src.emulate import load_recipe, round_role

    pol = load_recipe("nvfp4")
    w = np.random.default_rng(5).standard_normal((64, 48)).astype(F32)
    codes, scales, amax, _ = te_quantize(np.ascontiguousarray(w.T), tile_len_y=16)
    want = te_dequantize(codes, scales, amax).T
    for axis in (0, 1):
        got = np.asarray(round_role(jnp.asarray(w), pol["weight"], axis=axis))
        assert np.array_equal(got, want)  # by value: TE's table writes +0 for a scaled -0.0
    x = np.random.default_rng(6).standard_normal((32, 64)).astype(F32)
    codes, scales, amax, _ = te_quantize(x)
    assert np.array_equal(np.asarray(round_role(jnp.asarray(x), pol["act"], axis=1)), te_dequantize(codes, scales, amax))
    roles = {r: pol.role(r) for r in ("act_dw", "grad_dw", "grad_dx", "weight_dx")}
    assert roles["act_dw"].rotation == roles["grad_dw"].rotation == 16 and roles["grad_dx"].rotation is None
    assert roles["grad_dw"].rounding == roles["grad_dx"].rounding == "sr" and roles["weight_dx"].tile == (16, 16)


def test_nvfp4_catalog_entry():
    fmt = get_format("nvfp4")
    assert (fmt.element.name, fmt.scale.name, fmt.block_size, fmt.tensor_scale.name) == (
        "float4_e2m1fn", "float8_e4m3fn", 16, "float32")
    assert fmt.bits == 4.5 and fmt.two_level
