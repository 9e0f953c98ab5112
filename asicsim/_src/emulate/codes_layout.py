"""The layout of exported codes (:mod:`.export`): a GEMM operand as its canonical (N, K) matrix
and back, per-tile scale grids spread over it, and element values as stored codes (integers k
of value ``k * 2**-frac_bits``; float bit patterns as ml_dtypes stores them) and back."""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from asicsim._src.numerics import get_format
from asicsim._src.numerics.codec import _encode_float_jit, decode
from asicsim._src.numerics.formats import FormatError
from asicsim._src.numerics.grid_rounding import mul_pow2


def canonical(x, axes: Sequence[int]):
    """``x`` as the (N, K) matrix of its GEMM view (``axes`` contracted, flattened in order)."""
    keep = [i for i in range(x.ndim) if i not in axes]
    moved = jnp.transpose(x, [*keep, *axes])
    n = int(np.prod([x.shape[i] for i in keep], dtype=np.int64))
    return moved.reshape(n, -1)


def from_canonical(c, shape: tuple[int, ...], axes: Sequence[int]):
    """The inverse of :func:`canonical` for a tensor of ``shape``."""
    keep = [i for i in range(len(shape)) if i not in axes]
    perm = [*keep, *axes]
    return jnp.transpose(c.reshape([shape[i] for i in perm]), np.argsort(perm))


def spread(grid, tile: tuple[int, int], nk: tuple[int, int]):
    """A per-tile grid repeated over the (N, K) elements it scales."""
    g = jnp.repeat(jnp.repeat(jnp.asarray(grid), tile[0], axis=0), tile[1], axis=1)
    return g[: nk[0], : nk[1]]


def to_codes(q, element) -> np.ndarray:
    """Element values (float32, on the format's grid) as integer codes or float bit patterns."""
    if element.kind == "float":
        return np.asarray(_encode_float_jit(jnp.asarray(q, jnp.float32), element))
    k = np.asarray(mul_pow2(jnp.asarray(q, jnp.float32), element.frac_bits)).astype(np.int64)
    for dt in (np.uint8, np.uint16, np.uint32) if element.min >= 0 else (np.int8, np.int16, np.int32):
        if np.iinfo(dt).min <= element.min * 2**element.frac_bits and element.max * 2**element.frac_bits <= np.iinfo(dt).max:
            return k.astype(dt)
    raise ValueError(f"export: {element.name}: codes wider than 32 bits")


def element_name(element) -> str:
    """A name :func:`~asicsim.numerics.get_format` resolves to ``element``'s values (an MX
    format's inline element, such as MXINT8's, by the format grammar: ``q1.6``)."""
    try:
        if get_format(element.name) == element:
            return element.name
    except FormatError:
        pass
    if element.kind == "int":
        i = element.bits - element.frac_bits - (1 if element.signed else 0)
        return f"{'' if element.signed else 'u'}q{i}.{element.frac_bits}" if element.frac_bits else \
            f"{'' if element.signed else 'u'}int{element.bits}"
    raise ValueError(f"export: element format {element.name!r} has no catalog or grammar name")


def element_values(codes, element) -> jax.Array:
    """float32 values of ``codes`` (integers, or float bit patterns decoded as ml_dtypes does)."""
    fmt = get_format(element)
    if fmt.kind == "float":
        return decode(np.asarray(codes), fmt)
    return mul_pow2(jnp.asarray(np.asarray(codes), jnp.float32), -fmt.frac_bits)
