"""The stochastic-rounding words against an independent battery: a few dieharder tests (Brown's
dieharder 3.31, Debian package ``dieharder``; its raw-stdin generator ``-g 200``) on the words
quantize consumes, and the same tests failing a weak stream so the check can fail.

The fuller battery and its figures: benchmarks/rng_battery.py and the issue 37 item 5 entry of
benchmarks/RESULTS.md. dieharder calls a p-value FAILED below 1e-6 (and above 1 - 1e-6); three
tests on two streams fail a good generator with probability about 1e-5."""

from __future__ import annotations

import shutil
import subprocess

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from asicsim._src.numerics.random import derive, hash_bits, key_words, seed_words

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("dieharder") is None, reason="dieharder is not installed"),
]
# diehard_birthdays, diehard_count_1s_str, diehard_runs: ~13-19 Mi words each, a few s each.
TESTS = (0, 8, 15)
N = 1 << 25  # words per stream: more than any of TESTS reads


def _dieharder(words: np.ndarray, test: int) -> list[float]:
    """p-values of dieharder test ``test`` run on ``words`` (raw little-endian uint32)."""
    proc = subprocess.Popen(["dieharder", "-g", "200", "-d", str(test)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        proc.stdin.write(np.ascontiguousarray(words, "<u4").tobytes())
    except (BrokenPipeError, OSError):  # dieharder read what it needed and exited
        pass
    out = proc.communicate(timeout=120)[0].decode()
    ps = [float(f[4]) for f in (line.split("|") for line in out.splitlines())
          if len(f) == 6 and f[4].strip().replace(".", "", 1).isdigit()]
    assert ps, out  # each test prints at least one result line
    return ps


def _verdicts(words: np.ndarray) -> dict[int, list[float]]:
    return {t: _dieharder(words, t) for t in TESTS}


def _failed(ps: dict[int, list[float]]) -> list:
    return [(t, p) for t, v in ps.items() for p in v if not 1e-6 <= p <= 1 - 1e-6]


def test_one_tensors_words_pass_dieharder():
    """Words 0..2**25 of one tensor, element order (as quantize's SR reads them)."""
    words = np.asarray(hash_bits(key_words(jax.random.key(0)), (N,)))
    ps = _verdicts(words)
    assert not _failed(ps), ps


def test_derived_streams_interleaved_pass_dieharder():
    """32 derived streams (per-site children of one key) interleaved element by element: word i
    of stream 0, 1, ..., 31, then word i + 1; dependence across streams becomes dependence
    between neighbours."""
    ws = derive(seed_words(jax.random.key(3)), jnp.arange(32))
    words = np.stack([np.asarray(hash_bits(w, (N // 32,))) for w in ws], axis=1).ravel()
    ps = _verdicts(words)
    assert not _failed(ps), ps


def test_the_battery_fails_a_counter_stream():
    """The check can fail: a counter (i + seed) and a Weyl sequence (i * golden ratio + seed),
    whose words are uniform over a period but not independent, fail the same tests."""
    i = np.arange(N, dtype=np.uint32)
    for words in (i + np.uint32(12345), i * np.uint32(0x9E3779B9) + np.uint32(12345)):
        assert _failed(_verdicts(words))
