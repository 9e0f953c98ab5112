"""``benchmarks/rng_battery.py`` tests the words quantize's SR consumes: its numpy SplitMix64 is
``hash_bits`` (written from splitmix64.c's definition, an independent reference), its streams lay
those words out as stated, and its check rejects a generator that is not the shipped one."""

import jax
import numpy as np
import pytest
from benchmark_scripts import load_benchmark

from asicsim._src.numerics.random import derive, hash_bits, key_words, seed_words

pytestmark = pytest.mark.slow  # 66 s on the loaded 2-core box (eager derive/hash_bits compiles)


@pytest.fixture(scope="module")
def battery():
    return load_benchmark("rng_battery")


def test_numpy_splitmix64_is_hash_bits(battery):
    battery.check_shipped(0)
    battery.check_shipped(5)
    w = np.array([0, 0], np.uint32)  # splitmix64.c from x = 0: 0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4
    np.testing.assert_array_equal(battery.splitmix64(w, np.arange(2, dtype=np.uint64)), [0xE220A839, 0x6E789E6A])


def test_the_check_rejects_another_generator(battery):
    battery.splitmix64, shipped = battery.splitmix64_1mul, battery.splitmix64
    try:
        with pytest.raises(AssertionError, match="not asicsim's hash_bits"):
            battery.check_shipped(0)
    finally:
        battery.splitmix64 = shipped


def test_streams_are_quantizes_words(battery):
    """``tensor``: one tensor's words in element order, chunk after chunk; ``derived``: word i of
    derive(w, 0..63) in turn; ``steps``: whole per-step tensors, the counter restarting."""
    chunk = 1 << 12
    tensor = battery.chunks(battery.splitmix64, "tensor", 1, chunk)
    got = np.concatenate([next(tensor), next(tensor)])
    np.testing.assert_array_equal(got, hash_bits(key_words(jax.random.key(1)), (2 * chunk,)))
    derived = next(battery.chunks(battery.splitmix64, "derived", 2, chunk))
    ws = derive(seed_words(jax.random.key(2)), np.arange(64))
    for t in (0, 1, 63):
        np.testing.assert_array_equal(derived[t::64], hash_bits(ws[t], (chunk // 64,)))
    steps = battery.chunks(battery.splitmix64, "steps", 0, 1 << 17)
    first = next(steps)
    for s in (0, 1):
        want = hash_bits(derive(seed_words(jax.random.key(s)), 7), (1 << 16,))
        np.testing.assert_array_equal(first[s << 16:(s + 1) << 16], want)
