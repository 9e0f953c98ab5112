"""The fast scaling paths against the general integer path (``scaling._scaled_groups``: the
tensor viewed as (groups, members), every element rounded by ``round_to_grid`` on its group's
shifted grid, with the same random words): stochastic rounding of MX blocks on the bits
(``mx_floor.floor_blocks_bits``), fp32-scaled and two-level (NVFP4) blocks and 2-D tiles on a
view split in place (``scaling._blocks_in_place``), and scales that put an element's value past
float32's range."""

from __future__ import annotations

import dataclasses
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracles import assert_same_bits

from asicsim._src.numerics import get_format, quantize
from asicsim._src.numerics.mx_floor import floor_blocks_bits
from asicsim._src.numerics.rounding import parse_rounding
from asicsim._src.numerics.scaling import (
    Scaling,
    _blocks_in_place,
    _scaled_groups,
    _scaled_jit,
    resolve_scaling,
)

MX_FLOATS = ["mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp6_e3m2", "mxfp4", "mxfp8_e4m3_up"]


def _blocks_of_every_kind(rng, shape):
    """Blocks along the last axis with exponents over float32's whole range (tiny blocks whose
    scale needs 2**-127, subnormal amax, amax near 2**128), float32 subnormals inside normal
    blocks, +-0, saturating elements, NaN/inf and all-zero blocks."""
    blocks = (*shape[:-1], shape[-1] // 32, 1)
    x = rng.standard_normal((*blocks[:-1], 32)) * 2.0 ** rng.integers(-150, 128, blocks)
    x = x * 2.0 ** rng.integers(-30, 1, x.shape) * (rng.random(x.shape) < 0.85) * (rng.random(blocks) < 0.97)
    x = x.reshape(shape)
    x = np.where(rng.random(shape) < 0.05, rng.choice([1e-45, -3e-42, 1.2e-38, -0.0, 3.4e38]) * rng.random(shape), x)
    x = np.where(rng.random(shape) < 0.002, rng.choice([np.nan, np.inf, -np.inf]), x)
    with np.errstate(over="ignore"):
        return x.astype(np.float32)


def _same_as_general_path(x, words, name_or_element, plan=None, rounding="sr", saturate=True, what=""):
    if plan is None:
        element, plan = resolve_scaling(get_format(name_or_element), axis=-1)
    else:
        element = name_or_element
    rnd = parse_rounding(rounding)
    got = jax.jit(lambda v, w: _scaled_jit(v, w, element, plan, rnd, saturate))(x, words)
    want = jax.jit(lambda v, w: _scaled_groups(v, w, element, plan, rnd, saturate))(x, words)
    assert_same_bits(np.asarray(got[0]), np.asarray(want[0]), np.asarray(x), what)
    np.testing.assert_array_equal(np.asarray(got[1]), np.asarray(want[1]))


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), shape=st.sampled_from([(8, 32), (64, 96), (3, 40, 64), (400, 64)]),
       name=st.sampled_from(MX_FLOATS))
def test_mx_stochastic_rounding_on_the_bits_is_the_general_paths(seed, shape, name):
    """MX stochastic rounding on the unscaled bits (every tensor size, blocks along a last axis
    the block size divides) gives the general path's bits for the same words, on blocks of every
    kind: the words' low ``d`` bits added below each element's quantum, the threshold rule
    below one quantum, the cap at ``max * 2**s``, NaN blocks. (The scaled path it replaces,
    ``pow2_scaled_flat``, rounds a float32 subnormal input after scaling it to a normal, so its
    words align to a finer grid there and its bits differ from the general path's, both
    unbiased.)"""
    rng = np.random.default_rng(seed)
    x = jnp.asarray(_blocks_of_every_kind(rng, shape))
    words = jnp.asarray(rng.integers(0, 2**32, 2), jnp.uint32)
    element, plan = resolve_scaling(get_format(name), axis=-1)
    assert floor_blocks_bits(x, element, plan, parse_rounding("sr"), True, words) is not None
    _same_as_general_path(x, words, name, what=f"{name} {shape}")


def test_mx_stochastic_rounding_on_the_bits_where_it_applies():
    """Full-word SR on MX float elements with blocks along the last axis; not SR with fewer random
    bits, not blocks along another axis or a length the block size does not divide (their words
    are drawn in the general path's (groups, block) layout), not without saturation."""
    words = jnp.zeros(2, jnp.uint32)
    element, plan = resolve_scaling(get_format("mxfp8_e4m3"), axis=-1)
    _, plan0 = resolve_scaling(get_format("mxfp8_e4m3"), axis=0)
    cases = [((4, 64), plan, "sr", True, True), ((4, 64), plan, "sr8", True, False),
             ((64, 4), plan0, "sr", True, False), ((4, 40), plan, "sr", True, False),
             ((4, 64), plan, "sr", False, False)]
    for shape, p, rounding, saturate, taken in cases:
        got = floor_blocks_bits(jnp.ones(shape, jnp.float32), element, p, parse_rounding(rounding), saturate, words)
        assert (got is not None) == taken, (shape, rounding, saturate)


def _near_float32_max():
    """Normal values, blocks scaled near 2**126, and elements near float32's max (3.4e38), where
    a scale the ``up`` or ``nearest`` rule rounds up puts ``max * 2**s`` past float32's range."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((128, 96)) * 2.0 ** rng.integers(-20, 1, (128, 96))
    x[:8] *= 2.0**126
    x[0, :6] = [3.39e38, 3.3e38, 1e38, -3.38e38, 3.4028235e38, -3.2e38]
    x[1::8, ::7] = 3.35e38
    return jnp.asarray(x.astype(np.float32))


@pytest.mark.parametrize("fmt,rule", [  # ~10-18 s each: two in the default run
    pytest.param(f, r, marks=() if (f, r) in (("float8_e4m3fn", "up"), ("int8", "nearest")) else pytest.mark.slow)
    for f in ("float8_e4m3fn", "float8_e5m2", "float6_e3m2fn", "int8") for r in ("up", "nearest")])
def test_scales_past_float32_range_give_the_general_paths_values(fmt, rule):
    """A value whose scale was rounded up from an amax near 2**128 (``max * 2**s`` past float32's
    largest finite): every path gives float32's max where saturating, else IEEE's overflow,
    +-inf (the element is within its max, so no format NaN; a wrapped integer code likewise).
    Before, the fast paths (the bits, float and flat MX paths, per-tensor and per-channel
    scales) gave +-inf where saturating; the general path gave e4m3's NaN where not, and
    2**127 for a wrapped int8 code (an exponent clamped in ``int_to_bits``)."""
    x, words = _near_float32_max(), jnp.asarray([5, 9], jnp.uint32)
    element = get_format(fmt)
    if rule == "up":  # its scale never saturates an element: 1.99 * 2**127 rounded up is 2**128
        for saturate, want in ((True, np.finfo(np.float32).max), (False, np.inf)):
            got = quantize(np.array([3.39e38, 1.0], np.float32), fmt, "rup",
                           scaling=Scaling(scale_format="e8m0", rule=rule), saturate=saturate)
            assert got[0] == np.float32(want), (saturate, got)
    for saturate, rounding, granularity, scale_format in itertools.product(
            [True, False], ["rne", "sr", "rup"], ["block", "tensor", "channel"], ["e8m0", "pow2"]):
        plan = Scaling(granularity=granularity, axis=0 if granularity == "channel" else -1,
                       block_size=32 if granularity == "block" else None, scale_format=scale_format, rule=rule)
        _same_as_general_path(x, words, element, plan, rounding, saturate,
                              f"{fmt} {rule} {granularity} {scale_format} {rounding} saturate={saturate}")


@pytest.mark.parametrize("fmt", ["int8", "int4", "float8_e4m3fn", "float4_e2m1fn"])
def test_fp32_scales_at_float32s_max_saturate_to_it(fmt):
    """fp32 scaling of a tensor whose amax is float32's max: ``s = RN(amax / max)`` can round up,
    and ``max * s`` then rounds past float32's max. Saturating, the element is float32's max
    (int8 per tensor gave +-inf), as with power-of-two scales above; not saturating, IEEE's
    +-inf stands. Per tensor, per channel, and static scaling (the same code path)."""
    from asicsim._src.numerics.static_scale import quantize_static

    top = np.finfo(np.float32).max
    x = np.array([[top, -top, 1.0, 0.5], [3.4e38, -1.0, 2.0, 0.0]], np.float32)
    for scaling in (Scaling(granularity="tensor"), Scaling(granularity="channel", axis=0)):
        got = np.asarray(quantize(x, fmt, "rne", scaling=scaling, saturate=True))
        assert np.isfinite(got).all(), (scaling, got)
        assert np.abs(got).max() <= top
    static = np.asarray(quantize_static(x, top, fmt, saturate=True))
    assert np.isfinite(static).all(), static
    loose = np.asarray(quantize(x, fmt, "rne", scaling=Scaling(granularity="tensor"), saturate=False))
    assert not np.isnan(loose).any() and np.isfinite(loose[:, 2:]).all(), loose


#: (shape, axis, block_size, across): blocks along every axis, 2-D tiles along either axis, a
#: block longer than its axis (one block: the axis itself), tiles of fewer lines than the block
FP32_BLOCKS = [((256, 384), 0, 128, 1), ((256, 384), -1, 128, 1), ((256, 384), 0, 128, 128),
               ((256, 384), 1, 128, 128), ((128, 64), 0, 32, 16), ((16, 24, 64), 1, 8, 1), ((16, 24, 64), 0, 16, 1),
               ((6, 100), 1, 128, 1), ((96,), 0, 32, 1)]


def _values_of_every_kind(rng, shape):
    """Values whose exponents span float32's whole range (tiles of subnormals, of values near
    2**128, mixed), +-0, NaN and inf."""
    x = rng.standard_normal(shape) * 2.0 ** rng.integers(-150, 128, shape) * (rng.random(shape) < 0.9)
    x = np.where(rng.random(shape) < 0.3, rng.standard_normal(shape) * 2.0 ** rng.integers(-140, -120), x)
    x = np.where(rng.random(shape) < 0.001, rng.choice([np.nan, np.inf, -np.inf, -0.0]), x)
    with np.errstate(over="ignore"):
        return x.astype(np.float32)


@settings(max_examples=24, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), case=st.sampled_from(FP32_BLOCKS),
       fmt=st.sampled_from(["float8_e4m3fn", "float4_e2m1fn", "int8", "int8 asymmetric", "nvfp4"]),
       rounding=st.sampled_from(["rne", "rtz", "rup", "rdn", "sr"]), saturate=st.booleans())
def test_blocks_in_place_are_the_general_paths(seed, case, fmt, rounding, saturate):
    """fp32-scaled blocks and 2-D tiles (DeepSeek-V3's 1x128 and 128x128) and two-level blocks
    (NVFP4's E4M3 block scales under an fp32 tensor scale), rounded on a view of the tensor split
    in place, give the general path's values and scales (in its block order), bit for bit, with
    the same random words for stochastic rounding: the same amax per block, the same arithmetic
    per element, and each element's word taken at its index in the general path's layout.
    Before, every such tensor went through the general path's transposed copy (4.6-5.6 copies
    of traffic: ``tests/test_bench_quantize_script.py``)."""
    shape, axis, block_size, across = case
    name, _, kind = fmt.partition(" ")
    if name == "nvfp4":
        element, plan = resolve_scaling(get_format(name), axis=axis)
        # NVFP4's blocks of 16, or the case's block where it is longer than its axis (one block)
        block = block_size if block_size > shape[axis] else min(block_size, 16)
        plan = dataclasses.replace(plan, block_size=block, across=min(across, 16))
    else:
        element = get_format(name)
        plan = Scaling(granularity="block", axis=axis, block_size=block_size, across=across, scale_format="fp32",
                       symmetric=kind != "asymmetric")
    x = jnp.asarray(_values_of_every_kind(np.random.default_rng(seed), shape))
    words = jnp.asarray(np.random.default_rng(seed).integers(0, 2**32, 2, dtype=np.uint32))
    assert _blocks_in_place(x, words, element, plan, parse_rounding(rounding), saturate) is not None
    _same_as_general_path(x, words, element, plan, rounding, saturate, f"{case} {fmt} {rounding} saturate={saturate}")


def test_blocks_in_place_leave_what_needs_the_general_path():
    """Power-of-two scales (their own fast paths), padded blocks and 2-D tiles of an array of
    three axes keep their paths."""
    x, words, e8 = jnp.ones((256, 100), jnp.float32), jnp.zeros(2, jnp.uint32), get_format("float8_e4m3fn")
    tiles = Scaling(granularity="block", axis=0, block_size=128, across=4, scale_format="fp32")
    assert _blocks_in_place(x, words, e8, tiles, parse_rounding("sr"), True) is not None
    padded = Scaling(granularity="block", axis=1, block_size=32, scale_format="fp32")
    assert _blocks_in_place(x, words, e8, padded, parse_rounding("rne"), True) is None
    pow2 = Scaling(granularity="block", axis=0, block_size=32, scale_format="e8m0")
    assert _blocks_in_place(x, words, e8, pow2, parse_rounding("rne"), True) is None
    assert _blocks_in_place(jnp.ones((4, 128, 128)), words, e8, tiles, parse_rounding("rne"), True) is None
