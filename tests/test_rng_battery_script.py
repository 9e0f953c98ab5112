"""``benchmarks/rng_battery.py`` tests the words quantize's SR consumes: its numpy triple32_keyed
is ``hash_bits`` (written from hash-prospector's triple32, an independent reference), its streams
lay those words out as stated, and its check rejects a generator that is not the shipped one."""

import jax
import numpy as np
import pytest
from benchmark_scripts import load_benchmark

from asicsim._src.numerics.random import derive, hash_bits, key_words, seed_words

pytestmark = pytest.mark.slow  # 66 s on the loaded 2-core box (eager derive/hash_bits compiles)


@pytest.fixture(scope="module")
def battery():
    return load_benchmark("rng_battery")


def test_numpy_triple32_keyed_is_hash_bits(battery):
    battery.check_shipped(0)
    battery.check_shipped(5)
    w = np.array([0, 0], np.uint32)  # seed words 0: plain triple32, which fixes 0
    assert battery.triple32_keyed(w, np.arange(1, dtype=np.uint64))[0] == 0
    w = np.array([7, 11], np.uint32)  # the second chunk: words[1] ^ lowbias32(1)
    i = np.array([(1 << 32) + 3], np.uint64)
    moved = np.array([7, 11 ^ int(battery._lowbias32(np.array([1], np.uint32))[0])], np.uint32)
    assert battery.triple32_keyed(w, i)[0] == battery.triple32_keyed(moved, np.array([3], np.uint64))[0]


def test_the_check_rejects_another_generator(battery):
    battery.triple32_keyed, shipped = battery.lowbias32_keyed, battery.triple32_keyed
    try:
        with pytest.raises(AssertionError, match="not asicsim's hash_bits"):
            battery.check_shipped(0)
    finally:
        battery.triple32_keyed = shipped


def test_streams_are_quantizes_words(battery):
    """``tensor``: one tensor's words in element order, chunk after chunk; ``derived``: word i of
    derive(w, 0..63) in turn; ``steps``: whole per-step tensors, the counter restarting."""
    chunk = 1 << 12
    tensor = battery.chunks(battery.triple32_keyed, "tensor", 1, chunk)
    got = np.concatenate([next(tensor), next(tensor)])
    np.testing.assert_array_equal(got, hash_bits(key_words(jax.random.key(1)), (2 * chunk,)))
    derived = next(battery.chunks(battery.triple32_keyed, "derived", 2, chunk))
    ws = derive(seed_words(jax.random.key(2)), np.arange(64))
    for t in (0, 1, 63):
        np.testing.assert_array_equal(derived[t::64], hash_bits(ws[t], (chunk // 64,)))
    steps = battery.chunks(battery.triple32_keyed, "steps", 0, 1 << 17)
    first = next(steps)
    for s in (0, 1):
        want = hash_bits(derive(seed_words(jax.random.key(s)), 7), (1 << 16,))
        np.testing.assert_array_equal(first[s << 16:(s + 1) << 16], want)
