"""Seed-word derivation for stochastic rounding (``derive``, ``seed_words``): reproducible,
distinct streams for distinct tags, parents and keys, and uniform-looking bits."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from asicsim.numerics.random import derive, hash_bits, key_words, seed_words


def _pairs(words) -> set[tuple[int, int]]:
    return {(int(a), int(b)) for a, b in np.asarray(words).reshape(-1, 2)}


def test_derive_is_reproducible_and_scalar_or_array_tags_agree():
    w = key_words(jax.random.key(0))
    np.testing.assert_array_equal(derive(w, 5), derive(w, 5))
    stacked = derive(w, jnp.arange(8))
    assert stacked.shape == (8, 2)
    for i in range(8):
        np.testing.assert_array_equal(stacked[i], derive(w, i))
    np.testing.assert_array_equal(derive(w, jnp.int32(5)), derive(w, 5))


def test_derive_gives_distinct_words_per_tag_and_parent():
    parents = derive(key_words(jax.random.key(1)), jnp.arange(64))  # 64 related parents
    children = jax.vmap(lambda p: derive(p, jnp.arange(64)))(parents)  # 4096 children
    assert len(_pairs(children)) == 64 * 64
    assert not _pairs(children) & _pairs(parents)
    # related parents (differing in one bit) give unrelated children: about half the bits flip
    a = derive(jnp.array([0, 0], jnp.uint32), 3)
    b = derive(jnp.array([0, 1], jnp.uint32), 3)
    flips = bin(int(a[0] ^ b[0])).count("1") + bin(int(a[1] ^ b[1])).count("1")
    assert 16 <= flips <= 48


def test_seed_words_differ_per_key_without_threefry():
    words = [seed_words(jax.random.key(s)) for s in range(32)]
    assert len(_pairs(jnp.stack(words))) == 32
    np.testing.assert_array_equal(seed_words(jax.random.key(3)), seed_words(jax.random.key_data(jax.random.key(3))))
    jaxpr = str(jax.make_jaxpr(seed_words)(jax.random.key(3)))
    assert "threefry" not in jaxpr and "random_bits" not in jaxpr


def test_hashed_bits_of_derived_streams_look_uniform_and_independent():
    w = seed_words(jax.random.key(7))
    a = np.asarray(hash_bits(derive(w, 0), (1 << 16,)), np.float64) / 2.0**32
    b = np.asarray(hash_bits(derive(w, 1), (1 << 16,)), np.float64) / 2.0**32
    for u in (a, b):
        assert abs(u.mean() - 0.5) < 0.01 and abs(u.var() - 1 / 12) < 0.005
    assert abs(np.corrcoef(a, b)[0, 1]) < 0.02
