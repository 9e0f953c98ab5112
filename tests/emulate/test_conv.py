"""Convolutions as im2col GEMMs (asicsim._src.emulate.conv): the same values as XLA's convolution for
every layout, padding, stride, dilation and grouping; under emulation, the GEMM's treatment."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from float_gemm import gamma
from jax import lax

from asicsim._src.emulate.conv import conv_as_gemm

CASES = [
    # (lhs shape, rhs shape, dimension numbers, strides, padding, lhs dilation, rhs dilation, fg, bg)
    ((2, 9, 3), (3, 3, 4), ("NWC", "WIO", "NWC"), (1,), [(1, 1)], (1,), (1,), 1, 1),
    ((2, 3, 11), (4, 3, 2), ("NCW", "OIW", "NCW"), (2,), [(0, 3)], (1,), (2,), 1, 1),
    ((2, 7, 6, 4), (3, 2, 4, 5), ("NHWC", "HWIO", "NHWC"), (2, 1), [(1, 0), (-1, 2)], (1, 2), (1, 1), 1, 1),
    ((2, 4, 7, 6), (6, 2, 3, 3), ("NCHW", "OIHW", "NCHW"), (1, 2), [(1, 1), (1, 1)], (1, 1), (2, 1), 2, 1),
    ((1, 8, 6), (3, 2, 6), ("NWC", "WIO", "NWC"), (1,), [(2, 2)], (2,), (1,), 3, 1),
    ((4, 10, 3), (3, 3, 6), ("NWC", "WIO", "NWC"), (1,), [(0, 0)], (1,), (1,), 1, 2),
    ((2, 5, 3), (3, 3, 2), ("NWC", "WIO", "CWN"), (3,), [(0, 0)], (1,), (1,), 1, 1),
    ((2, 2, 3), (3, 3, 2), ("NWC", "WIO", "NWC"), (1,), [(0, 0)], (1,), (1,), 1, 1),  # empty output
]


@pytest.mark.parametrize("case", CASES, ids=range(len(CASES)))
def test_conv_as_gemm_matches_xla_convolution(case):
    lhs_shape, rhs_shape, specs, strides, padding, lhs_dil, rhs_dil, fg, bg = case
    rng = np.random.default_rng(0)
    lhs = jnp.asarray(rng.integers(-4, 5, lhs_shape).astype(np.float32))
    rhs = jnp.asarray(rng.integers(-4, 5, rhs_shape).astype(np.float32))
    dn = lax.conv_dimension_numbers(lhs_shape, rhs_shape, specs)
    params = dict(window_strides=strides, padding=padding, lhs_dilation=lhs_dil, rhs_dilation=rhs_dil,
                  dimension_numbers=dn, feature_group_count=fg, batch_group_count=bg)
    want = lax.conv_general_dilated(lhs, rhs, **params, precision=lax.Precision.HIGHEST)
    patches, kernel, gemm_dn, finish = conv_as_gemm(lhs, rhs, params)
    got = finish(lax.dot_general(patches, kernel, gemm_dn, precision=lax.Precision.HIGHEST))
    assert got.shape == want.shape
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))  # small integers: exact sums


def test_patches_keep_inf_and_nan_in_place():
    """Slicing, not an identity-kernel convolution (0 * inf would put NaN in every patch)."""
    lhs = jnp.asarray(np.array([[[1.0], [np.inf], [2.0], [3.0], [4.0]]], np.float32))
    dn = lax.conv_dimension_numbers(lhs.shape, (2, 1, 1), ("NWC", "WIO", "NWC"))
    params = dict(window_strides=(1,), padding=[(0, 0)], lhs_dilation=(1,), rhs_dilation=(1,),
                  dimension_numbers=dn, feature_group_count=1, batch_group_count=1)
    patches = conv_as_gemm(lhs, jnp.ones((2, 1, 1)), params)[0]
    assert np.isinf(np.asarray(patches)).sum() == 2 and not np.isnan(np.asarray(patches)).any()


def _jax_patches(x, taps):
    """im2col of a 1-D convolution (NWC, 'SAME'), built independently of asicsim: JAX's own
    ``conv_general_dilated_patches`` (channel-major K) reordered to taps-major K, (N * L, K)."""
    n, length, c = x.shape
    p = lax.conv_general_dilated_patches(x, (taps,), (1,), "SAME", dimension_numbers=("NWC", "WIO", "NWC"),
                                         precision=lax.Precision.HIGHEST)
    return jnp.swapaxes(p.reshape(n, length, c, taps), -1, -2).reshape(n * length, taps * c)


def _conv_model(x, w):
    return lax.conv_general_dilated(x, w, (1,), "SAME", dimension_numbers=("NWC", "WIO", "NWC"))


# mxfp4 and the tensor core (~4 s each) run in the slow step; the default run keeps one block
# format and one bit-exact order
@pytest.mark.parametrize("recipe", ["mxfp8", pytest.param("mxfp4", marks=pytest.mark.slow), "fp8_wang2018",
                                    pytest.param("tensorcore_fp16", marks=pytest.mark.slow)])
def test_emulated_conv_is_the_emulated_im2col_gemm(recipe):
    """Under block scaling (MX: blocks along K = taps x channels, the gradient GEMMs' operands
    rounded afresh along their own K) and under bit-exact MAC orders (Wang's fp16 chunk-64
    accumulation, the V100 tensor core), an emulated convolution gives the bits of the same
    model written as an explicit GEMM on patches made outside the emulation: forward bit for bit,
    dW bit for bit under a bit-exact MAC order; dX (the patches' gradient taken back through JAX's
    own im2col: col2im sums the taps in float32, in an order neither side fixes) to float32
    rounding. Under the ``fast`` order (MX) the two dW GEMMs are float32 GEMMs of different
    layouts (the convolution's dW^T = dY^T P, JAX's transpose of the GEMM P^T dY), summed in the
    order the host's kernel takes for each (issue 29 item 23): within float32's bound for any
    order (:mod:`float_gemm`), then one ulp of wgrad's bf16."""
    from asicsim._src.emulate import emulate, load_recipe

    rng = np.random.default_rng(1)
    x = jnp.asarray(rng.standard_normal((3, 10, 24)).astype(np.float32))  # K = 3 x 24 = 72 > 64
    w = jnp.asarray(rng.standard_normal((3, 24, 5)).astype(np.float32) * 0.3)
    head = jnp.arange(5.0)[None, None, :]

    def conv_loss(w, x):
        return jnp.sum(jnp.tanh(_conv_model(x, w)) * head)

    def gemm_loss(w, p):
        return jnp.sum(jnp.tanh((p @ w.reshape(-1, 5)).reshape(3, 10, 5)) * head)

    conv, gemm = emulate(conv_loss, recipe), emulate(gemm_loss, recipe)
    p, back = jax.vjp(lambda x: _jax_patches(x, 3), x)
    assert not np.array_equal(np.asarray(emulate(lambda w, x: _conv_model(x, w), recipe)(w, x)),
                              np.asarray(_conv_model(x, w)))  # the recipe does round
    np.testing.assert_array_equal(np.asarray(jax.jit(conv)(w, x)), np.asarray(jax.jit(gemm)(w, p)))
    gw, gx = jax.jit(jax.grad(conv, argnums=(0, 1)))(w, x)
    rw, rp = jax.jit(jax.grad(gemm, argnums=(0, 1)))(w, p)
    if load_recipe(recipe).mac_spec() is not None:  # our arithmetic: one order on every host
        np.testing.assert_array_equal(np.asarray(gw), np.asarray(rw))
    else:
        # |float32 dW - exact| <= gamma_K sum_k |P_q[k, i]| |dY_q[k, j]| on each side; an MX-rounded
        # element is at most 1.25 x its block's largest magnitude (half an ulp of fp4's 1-bit
        # significand; the dW GEMM blocks each column of P along k), and |dY| <= max|head| (tanh' <= 1)
        k = p.shape[0]
        col_max = np.abs(np.asarray(p, np.float64)).max(0)
        bound = 2 * gamma(k, 2.0**-24) * k * 1.25**2 * float(jnp.max(head)) * col_max
        gw64, rw64 = np.asarray(gw, np.float64), np.asarray(rw, np.float64)
        # wgrad rounds each to bf16: half an ulp each, 2**-8 (1 + 2**-8) of the larger at most
        ulp = 2.0**-7 * (1 + 2.0**-8) * np.maximum(np.abs(gw64), np.abs(rw64))
        assert np.all(np.abs(gw64 - rw64) <= bound.reshape(3, 24, 1) + ulp)
        assert np.mean(gw64 == rw64) > 0.95
    np.testing.assert_allclose(np.asarray(gx), np.asarray(back(rp)[0]), rtol=1e-6, atol=1e-7)
