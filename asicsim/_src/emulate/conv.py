"""A convolution as the im2col GEMM an accelerator runs: patches x reshaped kernel.

``asicsim.emulate`` carries every ``conv_general_dilated`` out this way, so a convolution gets
what a GEMM gets: its operands block-scaled along the GEMM's contraction axis K (the window taps
times the input channels, as OCP MX blocks a GEMM's K), each gradient GEMM's operands rounded
afresh along its own K, and the bit-exact MAC orders. K runs over the window taps, then over the
input channels fastest: SCALE-Sim's operand matrix, which ``asicsim.hw`` prices, orders a filter
the same way (its trace records a convolution's K as window x channels).

The patches are strided slices of the padded input (exact: no arithmetic touches a value, so
inf/NaN stay where they are); their gradient is JAX's own (pads and adds: the col2im).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax


def conv_as_gemm(lhs: jax.Array, rhs: jax.Array, params) -> tuple[jax.Array, jax.Array, tuple, Callable]:
    """(patches, kernel, dot_general dimension numbers, finish) such that
    ``finish(dot_general(patches, kernel, dn))`` is ``conv_general_dilated(lhs, rhs, **params)``.

    ``params`` are the primitive's (window_strides, padding as (low, high) pairs, lhs_dilation,
    rhs_dilation, dimension_numbers as ConvDimensionNumbers, feature_group_count,
    batch_group_count). Grouped convolutions (either count) become a batched GEMM, one batch
    entry per group. The GEMM's operands: patches (groups, batch, *out spatial, taps, channels)
    and kernel (groups, taps, channels, out features).
    """
    lhs_spec, rhs_spec, out_spec = params["dimension_numbers"]
    nd = len(lhs_spec) - 2
    window = tuple(rhs.shape[d] for d in rhs_spec[2:])
    patches = _patches(lhs, window, params, lhs_spec)  # (N, *out, T, C)
    n, out, taps, c = patches.shape[0], patches.shape[1:-2], patches.shape[-2], patches.shape[-1]
    kernel = jnp.transpose(rhs, (*rhs_spec[2:], rhs_spec[1], rhs_spec[0]))  # (*window, I, O)
    o = kernel.shape[-1]
    kernel = kernel.reshape(taps, kernel.shape[-2], o)
    fg, bg = params["feature_group_count"], params["batch_group_count"]
    if fg > 1:  # input channels and output features split into fg groups (group-major)
        patches = jnp.moveaxis(patches.reshape(n, *out, taps, fg, c // fg), -2, 0)
    elif bg > 1:  # the batch and the output features split into bg groups (group-major)
        patches = patches.reshape(bg, n // bg, *out, taps, c)
    else:
        patches = patches[None]
    groups = patches.shape[0]
    kernel = jnp.moveaxis(kernel.reshape(taps, kernel.shape[1], groups, o // groups), 2, 0)
    p = patches.ndim
    dn = (((p - 2, p - 1), (1, 2)), ((0,), (0,)))

    def finish(y: jax.Array) -> jax.Array:
        # (groups, batch, *out, O / groups) -> (batch, *out, O) -> the output layout
        y = jnp.moveaxis(y, 0, -2)
        y = y.reshape(*y.shape[:-2], y.shape[-2] * y.shape[-1])
        perm = [0] * (nd + 2)
        perm[out_spec[0]], perm[out_spec[1]] = 0, nd + 1
        for i, d in enumerate(out_spec[2:]):
            perm[d] = 1 + i
        return jnp.transpose(y, perm)

    return patches, kernel, dn, finish


def _patches(x: jax.Array, window: tuple[int, ...], params, lhs_spec) -> jax.Array:
    """im2col: (N, *out spatial, taps, C), the taps in row-major order of the window."""
    x = jnp.transpose(x, (lhs_spec[0], *lhs_spec[2:], lhs_spec[1]))  # (N, *spatial, C)
    strides, rhs_dilation = params["window_strides"], params["rhs_dilation"]
    config = [(0, 0, 0),
              *[(lo, hi, d - 1) for (lo, hi), d in zip(params["padding"], params["lhs_dilation"], strict=True)],
              (0, 0, 0)]
    xp = lax.pad(x, np.zeros((), x.dtype), config)
    spatial = xp.shape[1:-1]
    out = [max(0, (size - (w - 1) * d - 1) // s + 1)
           for size, w, d, s in zip(spatial, window, rhs_dilation, strides, strict=True)]
    if 0 in out:
        return jnp.zeros((x.shape[0], *out, int(np.prod(window)), x.shape[-1]), x.dtype)
    taps = []
    for offsets in itertools.product(*(range(w) for w in window)):
        start = [k * d for k, d in zip(offsets, rhs_dilation, strict=True)]
        limit = [b + (m - 1) * s + 1 for b, m, s in zip(start, out, strides, strict=True)]
        taps.append(lax.slice(xp, (0, *start, 0), (xp.shape[0], *limit, xp.shape[-1]), (1, *strides, 1)))
    return jnp.stack(taps, axis=-2)
