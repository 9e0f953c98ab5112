"""A KV cache quantized once, when written: the keys and values of a causal LM's past tokens as
codes and scales, read back by one multiplication (never rounded again).

:class:`KVCacheSpec` says how: ``format`` ``fp32`` (no rounding), ``bf16`` (a cast), ``fp8_e4m3``
(OCP E4M3, ``float8_e4m3fn``, max 448) or ``int8`` (symmetric, codes in [-128, 127]);
``granularity`` of the scale (fp8/int8 only):

``token``  one scale per token and head (a ``head_dim`` vector), from that vector's amax when it is
           written: vLLM's dynamic per-token-head KV quantization, KIVI's per-token value scales
``head``   one scale per sequence and head, from the amax over the prompt when the prompt is written
           (prefill); later tokens use it, a larger one saturating (fp8 to +-448, int8 to
           [-128, 127]): the per-head scales of vLLM's fp8 KV cache (there calibrated offline,
           here measured on the prompt)

A scale is ``amax / max`` (448 for E4M3, 127 for int8) rounded to nearest float32 (correctly
rounded, :func:`asicsim._src.numerics.exact_div.divide`; 1 where amax is 0; a subnormal quotient is
rounded up, as :mod:`asicsim._src.numerics.fp32_scale` does), the code is ``x / scale`` (a correctly
rounded float32 quotient) rounded to nearest even onto the format, saturating; reading gives
``code * scale`` in float32. The codes are stored in their own dtype (``float8_e4m3fn``,
``int8``, ``bfloat16``), the scales in float32.

References: vLLM's ``kv_cache_dtype = "fp8_e4m3"`` (docs "Quantized KV Cache": K and V quantized
as the cache is written, with per-tensor or per-head scales); Transformer Engine's FP8 attention
(fp8 K/V with a scale per tensor); Liu et al. 2024, KIVI (per-channel keys, per-token values).
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from asicsim._src.numerics import get_format, quantize
from asicsim._src.numerics.exact_div import divide
from asicsim._src.numerics.fp32_exact import scale_up_if_subnormal

FORMATS = {"fp32": jnp.float32, "bf16": jnp.bfloat16, "fp8_e4m3": jnp.float8_e4m3fn, "int8": jnp.int8}
SCALED = ("fp8_e4m3", "int8")
GRANULARITIES = ("token", "head")


@dataclass(frozen=True)
class KVCacheSpec:
    """How a KV cache stores K and V (module docstring); checked at construction."""

    format: str = "fp32"
    granularity: str = "token"

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise ValueError(f"KVCacheSpec: format={self.format!r}; allowed: {list(FORMATS)}")
        if self.granularity not in GRANULARITIES:
            raise ValueError(f"KVCacheSpec: granularity={self.granularity!r}; allowed: {list(GRANULARITIES)}")

    @property
    def scaled(self) -> bool:
        return self.format in SCALED

    @property
    def name(self) -> str:
        return f"{self.format}/{self.granularity}" if self.scaled else self.format

    @classmethod
    def parse(cls, text: str) -> KVCacheSpec:
        """``fp8_e4m3/token``, ``int8/head``, ``bf16``, ``fp32`` (a scaled format alone: per token)."""
        fmt, _, gran = str(text).partition("/")
        return cls(fmt, gran or "token")


def kv_scale(amax, fmt: str) -> jax.Array:
    """The float32 scale of a group of amax ``amax`` (float32 >= 0) for ``fmt``: ``amax / max``
    rounded to nearest (up where subnormal), 1 where amax is 0."""
    amax = jnp.asarray(amax, jnp.float32)
    return jnp.where(amax == 0, np.float32(1), scale_up_if_subnormal(amax, get_format(fmt).max))


def encode(x, scale, fmt: str) -> jax.Array:
    """Codes of float32 ``x`` (scale broadcastable against it; ignored for fp32/bf16): ``x / scale``
    rounded to nearest even onto ``fmt``, saturating, in ``fmt``'s storage dtype."""
    x = jnp.asarray(x, jnp.float32)
    if fmt not in SCALED:
        return x.astype(FORMATS[fmt])
    q = quantize(divide(x, jnp.broadcast_to(scale, x.shape)), fmt, "rne", saturate=True)
    return q.astype(FORMATS[fmt])  # on the format's grid: the cast is exact


def decode(codes, scale, fmt: str) -> jax.Array:
    """float32 values of stored ``codes``: ``code * scale`` (fp32/bf16: the values themselves)."""
    v = codes.astype(jnp.float32)
    return v * scale if fmt in SCALED else v


def _amax(x, axes) -> jax.Array:
    return jnp.max(jnp.abs(x.astype(jnp.float32)), axis=axes, keepdims=True)


def empty_cache(spec: KVCacheSpec, layers: int, batch: int, context: int, heads: int, head_dim: int) -> dict:
    """A cache of ``context`` positions per layer: ``k``, ``v`` codes (batch, context, heads,
    head_dim) and their ``k_scale``, ``v_scale`` (batch, context | 1, heads, 1), all zero (scale 1)."""
    codes = jnp.zeros((batch, context, heads, head_dim), FORMATS[spec.format])
    scales = jnp.ones((batch, context if spec.granularity == "token" else 1, heads, 1), jnp.float32)
    layer = {"k": codes, "v": codes, "k_scale": scales, "v_scale": scales}
    return {f"block{i}": dict(layer) for i in range(layers)}


def write(spec: KVCacheSpec, layer: dict, k, v, start) -> dict:
    """``layer``'s cache with k and v (batch, t, heads, head_dim) quantized once into positions
    ``start .. start + t - 1``; per-head scales are set when ``start`` is 0 (the prompt)."""
    out = dict(layer)
    for name, x in (("k", k), ("v", v)):
        scale = layer[f"{name}_scale"]
        if spec.scaled and spec.granularity == "token":
            new = kv_scale(_amax(x, (3,)), spec.format)  # (batch, t, heads, 1)
            scale = jax.lax.dynamic_update_slice(scale, new, (0, start, 0, 0))
            own = new
        elif spec.scaled:  # head: from the prompt, kept for later tokens
            scale = jnp.where(start == 0, kv_scale(_amax(x, (1, 3)), spec.format), scale)
            own = scale
        else:
            own = None
        out[f"{name}_scale"] = scale
        out[name] = jax.lax.dynamic_update_slice(layer[name], encode(x, own, spec.format), (0, start, 0, 0))
    return out


def read(spec: KVCacheSpec, layer: dict) -> tuple[jax.Array, jax.Array]:
    """(K, V) of every position as float32 (batch, context, heads, head_dim), decoded from the codes."""
    return (decode(layer["k"], layer["k_scale"], spec.format), decode(layer["v"], layer["v_scale"], spec.format))
