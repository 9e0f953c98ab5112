"""Per-element random bits for stochastic rounding, fast enough to fuse into the rounding kernel.

``jax.random`` generates about 40 M values/s on a CPU core, far slower than rounding itself.
:func:`hash_bits` is a counter-based generator on 32-bit lanes: word ``i`` is Wellons'
``triple32`` (hash-prospector, ``triple32``: shifts 17, 11, 15, 14 and multipliers 0xED5AD4BB,
0xAC4C1B51, 0x31848BAB; a bijection of uint32 with the least bias its search found) of
``i + words[0]``, with ``words[1]`` XORed in after the first multiply, the two 32-bit words drawn
once from the key. It is three 32-bit multiplies and a few shifts and XORs per element, fuses into
the same XLA kernel, and is reproducible from the key: same key and shape, same bits; word ``i``
does not depend on the shape. Beyond 2**32 elements each 2**32-word chunk has its own
``words[1]`` (the chunk's index mixed in), the first chunk's being the key's.

Why these ops: SplitMix64 (issue 16's choice) needs two 64-bit multiplies per word, which XLA:CPU
does not vectorise to its advantage and a GPU runs as several 32-bit multiplies; with 512-bit
vectors on an AVX-512 CPU the 32-bit generator makes stochastic rounding about twice as fast
(benchmarks/RESULTS.md, "Stochastic rounding's words on 32-bit lanes"). Its licence: the same
independent battery SplitMix64 passed (dieharder, ``benchmarks/rng_battery.py``: no test failed
on one tensor's words, on derived streams interleaved, or on per-step tensors) and the chi-square
tests of ``tests/numerics/test_random.py``. It replaced SplitMix64, which replaced Wellons'
``lowbias32`` applied to ``i + seed``, whose neighbouring words were dependent (chi-square of the
top bytes of words i and i+1..4 over 2**24 words, three keys: z = 9-46; numpy's PCG64: |z| <= 1),
which moved SR decisions by 1-3 % (issue 16, item 17).

Within a tensor the words are distinct (a bijection of the counter). Streams of seeds (a, b) and
(a', b') are shifted copies of each other only where b = b' (the shift is a - a'): for the
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


def _lowbias32(x, xor_shift, mul):
    """Wellons' ``lowbias32`` (a bijection of uint32 with good avalanche) in the given ops."""
    x = mul(xor_shift(x, 16), _C1)
    x = mul(xor_shift(x, 15), _C2)
    return xor_shift(x, 16)


def _mix(x):
    """:func:`_lowbias32` of uint32 ``x`` in ``lax`` ops (it runs at every derived stream, and a
    ``jax.numpy`` op costs a few times a ``lax`` one to trace)."""
    return _lowbias32(x, lambda v, s: jax.lax.bitwise_xor(v, jax.lax.shift_right_logical(v, np.uint32(s))),
                      jax.lax.mul)


def _mix_int(x: int) -> int:
    """:func:`_lowbias32` of a Python int (its value modulo 2**32), on the host."""
    return _lowbias32(x & 0xFFFFFFFF, lambda v, s: v ^ (v >> s), lambda v, c: v * int(c) & 0xFFFFFFFF)


_ROUNDS = (0x9E3779B9, 0x7F4A7C15, 0xD1B54A33)


def derive(words: jax.Array, tag) -> jax.Array:
    """Seed words of an independent stream, child ``tag`` (int or integer array) of ``words``.

    A few fusable integer ops instead of threefry ``fold_in`` + ``bits`` (on XLA:CPU each of
    those is a separate rolled loop of small kernels, most of the ops of an emulated SR step).
    A 3-round Feistel network on the 64 seed bits, each round keyed by ``tag``: for a given tag,
    a bijection of the parent words (distinct parents, distinct children); for a given parent,
    children of different tags are unrelated. An array of tags gives stacked words, (*tag.shape, 2).
    A Python int tag's round keys are computed on the host.
    """
    if isinstance(tag, (int, np.integer)):
        keys = [np.uint32(_mix_int(int(tag) + c)) for c in _ROUNDS]
    else:
        t = jnp.asarray(tag).astype(jnp.uint32)
        keys = [_mix(t + np.uint32(c)) for c in _ROUNDS]
    left, right = words[0], words[1]
    for k in keys:
        left, right = right, left ^ _mix(right ^ k)
    return jnp.stack([left, right], axis=-1)


_T1, _T2, _T3 = np.uint32(0xED5AD4BB), np.uint32(0xAC4C1B51), np.uint32(0x31848BAB)  # triple32's
_CHUNK_BITS = 32  # a counter chunk is 2**32 words (the uint32 counter's range)


def triple32_keyed(i, w0, w1):
    """Word of counter ``i`` (uint32) for seed words ``w0``, ``w1`` (module docstring)."""
    x = i + w0
    x = (x ^ (x >> np.uint32(17))) * _T1 ^ w1
    x = (x ^ (x >> np.uint32(11))) * _T2
    x = (x ^ (x >> np.uint32(15))) * _T3
    return x ^ (x >> np.uint32(14))


def hash_bits(words: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    """uint32 random bits of ``shape`` from the two seed words (fuses into the caller's kernel):
    word ``i`` (row-major) is :func:`triple32_keyed` of ``i`` (module docstring)."""
    size = int(np.prod(shape, dtype=np.int64))
    # A buffer of their own: fused, the ``derive`` chains that made the words (~30 ops per level)
    # ran once per element (a conv im2col rounding: 46 instead of 1 ns per element).
    words = computed_once(words)
    if size <= 1 << _CHUNK_BITS:
        return triple32_keyed(jax.lax.iota(jnp.uint32, size), words[0], words[1]).reshape(shape)
    with enable_x64(True):  # 64-bit counters for the chunk index only; callers keep their mode
        i = jax.lax.iota(jnp.uint64, size)
        lo = (i & np.uint64((1 << _CHUNK_BITS) - 1)).astype(jnp.uint32)
        chunk = (i >> np.uint64(_CHUNK_BITS)).astype(jnp.uint32)
    return triple32_keyed(lo, words[0], words[1] ^ _mix(chunk)).reshape(shape)


def host_bits64(words: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """uint64 random bits on the host (for the float64 path), reproducible from the seed words."""
    seed = [int(w) for w in np.asarray(words, dtype=np.uint32)]
    rng = np.random.Generator(np.random.Philox(key=seed))
    return rng.integers(0, np.iinfo(np.uint64).max, size=shape, dtype=np.uint64, endpoint=True)
