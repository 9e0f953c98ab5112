"""Per-element random bits for stochastic rounding, fast enough to fuse into the rounding kernel.

``jax.random`` generates about 40 M values/s on a CPU core, far slower than rounding itself.
:func:`hash_bits` is SplitMix64 (Steele, Lea & Flood, "Fast splittable pseudorandom number
generators", OOPSLA 2014; Vigna's reference ``splitmix64.c``) read as a counter-based generator:
word ``i`` is the top half of ``mix64(seed + (i + 1) * gamma)``, the seed being the two 32-bit
words drawn once from the key. Its authors report SplitMix64 passing TestU01 BigCrush; it is a
handful of 64-bit integer ops per element, fuses into the same XLA kernel, and is reproducible
from the key: same key and shape, same bits.

It replaced Wellons' ``lowbias32`` applied to ``i + seed``, whose neighbouring words were
dependent (chi-square of the top bytes of words i and i+1..4 over 2**24 words, three keys:
z = 9-46; numpy's PCG64: |z| <= 1), which moved SR decisions by 1-3 % (issue 16, item 17).

Streams of seeds s and s' are the same sequence shifted by (s' - s) / gamma mod 2**64: for the
pseudo-random seeds :func:`derive` and :func:`key_words` give, two streams of n words overlap
with probability about 2n / 2**64 (2**-39 for 2**24-element tensors).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..._jax_compat import enable_x64
from .fusion import computed_once

_C1 = np.uint32(0x7FEB352D)
_C2 = np.uint32(0x846CA68B)


def key_words(key) -> jax.Array:
    """Two uint32 words derived from a ``jax.random`` key (typed or raw uint32[2])."""
    if key is None:
        raise ValueError(
            "stochastic rounding needs a key: pass key=jax.random.key(seed) "
            "(the same key gives the same random bits)"
        )
    return jax.random.bits(key, (2,), jnp.uint32)


def seed_words(key) -> jax.Array:
    """uint32[2] seed words mixed from a key's raw data by :func:`derive`, with no threefry call
    (for per-step keys inside a jitted training loop; :func:`key_words` draws them by threefry)."""
    data = jax.random.key_data(key) if jnp.issubdtype(key.dtype, jax.dtypes.prng_key) else key
    data = jnp.asarray(data).reshape(-1).astype(jnp.uint32)
    words = derive(data[:2], 0x5EED)
    for i in range(2, data.size - 1, 2):  # key implementations with more than two words
        words = derive(words ^ data[i:i + 2], i)
    return words


def _mix(x):
    """Wellons' ``lowbias32``: a bijection of uint32 with good avalanche."""
    x = x ^ (x >> np.uint32(16))
    x = x * _C1
    x = x ^ (x >> np.uint32(15))
    x = x * _C2
    return x ^ (x >> np.uint32(16))


def derive(words: jax.Array, tag) -> jax.Array:
    """Seed words of an independent stream, child ``tag`` (int or integer array) of ``words``.

    A few fusable integer ops instead of threefry ``fold_in`` + ``bits`` (on XLA:CPU each of
    those is a separate rolled loop of small kernels, most of the ops of an emulated SR step).
    A 3-round Feistel network on the 64 seed bits, each round keyed by ``tag``: for a given tag,
    a bijection of the parent words (distinct parents, distinct children); for a given parent,
    children of different tags are unrelated. An array of tags gives stacked words, (*tag.shape, 2).
    """
    t = jnp.asarray(tag).astype(jnp.uint32)
    left, right = words[0], words[1]
    for c in (0x9E3779B9, 0x7F4A7C15, 0xD1B54A33):
        left, right = right, left ^ _mix(right ^ _mix(t + np.uint32(c)))
    return jnp.stack([left, right], axis=-1)


_GAMMA = np.uint64(0x9E3779B97F4A7C15)  # SplitMix64's constants (splitmix64.c)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def hash_bits(words: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    """uint32 random bits of ``shape`` from the two seed words (fuses into the caller's kernel):
    the top 32 bits of SplitMix64's output ``i + 1`` from seed ``words[0] << 32 | words[1]``."""
    size = int(np.prod(shape, dtype=np.int64))
    # A buffer of their own: fused, the ``derive`` chains that made the words (~30 ops per level)
    # ran once per element (a conv im2col rounding: 46 instead of 1 ns per element).
    words = computed_once(words)
    with enable_x64(True):  # 64-bit lanes inside the kernel only; callers keep their mode
        seed = (words[0].astype(jnp.uint64) << np.uint64(32)) | words[1].astype(jnp.uint64)
        z = seed + (jax.lax.iota(jnp.uint64, size) + np.uint64(1)) * _GAMMA
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        z = z ^ (z >> np.uint64(31))
        return (z >> np.uint64(32)).astype(jnp.uint32).reshape(shape)


def host_bits64(words: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """uint64 random bits on the host (for the float64 path), reproducible from the seed words."""
    seed = [int(w) for w in np.asarray(words, dtype=np.uint32)]
    rng = np.random.Generator(np.random.Philox(key=seed))
    return rng.integers(0, np.iinfo(np.uint64).max, size=shape, dtype=np.uint64, endpoint=True)
