"""An independent battery for the stochastic-rounding words: dieharder on the stream SR consumes.

``quantize(..., "sr", key=k)`` rounds element ``i`` of a tensor with word ``i`` of
``hash_bits(key_words(k), shape)`` (asicsim/_src/numerics/random.py). This script writes those
words, as raw little-endian uint32, into ``dieharder -g 200`` (its raw stdin generator) and
prints each test's p-value and verdict. Generators (numpy, written from their definitions):

- ``triple32_keyed``: the shipped one (asicsim/_src/numerics/random.py): Wellons' ``triple32``
  (hash-prospector; constants 0xED5AD4BB, 0xAC4C1B51, 0x31848BAB, shifts 17, 11, 15, 14) of
  ``i + words[0]``, with ``words[1]`` XORed in after the first multiply (beyond 2**32 words, each
  2**32-word chunk XORs lowbias32 of its index into ``words[1]``). Checked against asicsim's
  ``hash_bits`` before any test runs (the stream IS quantize's).
- ``splitmix64``: the generator before it (Steele, Lea & Flood 2014; Vigna's ``splitmix64.c``):
  word i is the top half of mix64(seed + (i + 1) * 0x9E3779B97F4A7C15), seed = words[0] << 32 |
  words[1].
- ``splitmix64_1mul``: SplitMix64 with one multiply fewer ((z ^ z >> 30) * M1; z ^ z >> 27),
  the fastest reduced-round variant tried in the i37-cpu entry of benchmarks/RESULTS.md.
- ``lowbias32_keyed``: ``triple32_keyed``'s keying (first chunk) with Wellons' 2-multiply ``lowbias32`` (0x21F0AAAD, 0x735A2D97).
- ``lowbias32``: the generator SplitMix64 replaced (issue 16: lowbias32 of ``i + words[0]``
  with the 0x7FEB352D / 0x846CA68B constants), and ``counter`` (``i + words[0]``): weak
  controls, which show the battery can fail a generator.

Streams (``--stream``): ``tensor`` (one tensor's words in element order, counter from 0, seed
words from ``key_words(jax.random.key(seed))``); ``derived`` (64 streams ``derive(w, t)``
interleaved element by element: word i of stream 0, of stream 1, ...; cross-stream dependence
shows up as dependence between neighbours); ``steps`` (2**16-word tensors, one per training
step, from ``derive(seed_words(jax.random.key(step)), 7)``, concatenated; the counter restarts
at 0 in each tensor, as it does in a training loop).

    python benchmarks/rng_battery.py [--gen splitmix64 ...] [--stream tensor derived steps]
        [--tests 0 2 4 ...] [--seed 0]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time

import numpy as np

U32, U64 = np.uint32, np.uint64
GAMMA, M1, M2 = U64(0x9E3779B97F4A7C15), U64(0xBF58476D1CE4E5B9), U64(0x94D049BB133111EB)
# "Good" tests of dieharder 3.31.1 (dieharder -l) that fit a few minutes a stream on one core.
TESTS = (0, 2, 3, 4, 8, 10, 13, 15, 101, 102, 205)  # 17 (GCD) alone took minutes


def splitmix64(w, i):
    seed = (U64(w[0]) << U64(32)) | U64(w[1])
    z = seed + (i.astype(U64) + U64(1)) * GAMMA
    z = (z ^ (z >> U64(30))) * M1
    z = (z ^ (z >> U64(27))) * M2
    return ((z ^ (z >> U64(31))) >> U64(32)).astype(U32)


def splitmix64_1mul(w, i):
    seed = (U64(w[0]) << U64(32)) | U64(w[1])
    z = seed + (i.astype(U64) + U64(1)) * GAMMA
    z = (z ^ (z >> U64(30))) * M1
    return ((z ^ (z >> U64(27))) >> U64(32)).astype(U32)


def _lowbias32(x):
    x = (x ^ (x >> U32(16))) * U32(0x7FEB352D)
    x = (x ^ (x >> U32(15))) * U32(0x846CA68B)
    return x ^ (x >> U32(16))


def triple32_keyed(w, i):
    i = i.astype(U64)
    x = (i & U64(0xFFFFFFFF)).astype(U32) + U32(w[0])
    x = (x ^ (x >> U32(17))) * U32(0xED5AD4BB) ^ (U32(w[1]) ^ _lowbias32((i >> U64(32)).astype(U32)))
    x = (x ^ (x >> U32(11))) * U32(0xAC4C1B51)
    x = (x ^ (x >> U32(15))) * U32(0x31848BAB)
    return x ^ (x >> U32(14))


def lowbias32_keyed(w, i):
    x = i.astype(U32) + U32(w[0])
    x = (x ^ (x >> U32(16))) * U32(0x21F0AAAD) ^ U32(w[1])
    x = (x ^ (x >> U32(15))) * U32(0x735A2D97)
    return x ^ (x >> U32(15))


def lowbias32(w, i):
    x = i.astype(U32) + U32(w[0])
    x = (x ^ (x >> U32(16))) * U32(0x7FEB352D)
    x = (x ^ (x >> U32(15))) * U32(0x846CA68B)
    return x ^ (x >> U32(16))


def counter(w, i):
    return i.astype(U32) + U32(w[0])


GENERATORS = {f.__name__: f for f in (triple32_keyed, splitmix64, splitmix64_1mul, lowbias32_keyed,
                                      lowbias32, counter)}


def chunks(gen, stream: str, seed: int, chunk: int = 1 << 22):
    """Endless uint32 chunks of ``gen``'s words laid out as ``stream`` (module docstring)."""
    import jax

    from asicsim._src.numerics.random import derive, key_words, seed_words

    if stream == "tensor":
        w = np.asarray(key_words(jax.random.key(seed)))
        start = 0
        while True:
            yield gen(w, np.arange(start, start + chunk, dtype=np.uint64))
            start += chunk
    elif stream == "derived":
        ws = np.asarray(derive(seed_words(jax.random.key(seed)), np.arange(64)))
        per, start = chunk // 64, 0
        while True:
            i = np.arange(start, start + per, dtype=np.uint64)
            yield np.stack([gen(w, i) for w in ws], axis=1).ravel()
            start += per
    elif stream == "steps":
        step, n = seed << 20, 1 << 16
        while True:
            keys = jax.vmap(lambda s: derive(seed_words(jax.random.key(s)), 7))(np.arange(step, step + chunk // n))
            i = np.arange(n, dtype=np.uint64)
            yield np.concatenate([gen(w, i) for w in np.asarray(keys)])
            step += chunk // n
    else:
        raise ValueError(f"stream={stream!r}: expected one of tensor, derived, steps")


def check_shipped(seed: int = 0) -> None:
    """The numpy ``triple32_keyed`` is asicsim's ``hash_bits`` (the battery tests quantize's words)."""
    import jax

    from asicsim._src.numerics.random import hash_bits, key_words

    w = key_words(jax.random.key(seed))
    got = np.asarray(hash_bits(w, (1 << 20,)))
    want = triple32_keyed(np.asarray(w), np.arange(1 << 20, dtype=np.uint64))
    if not np.array_equal(got, want):
        raise AssertionError("benchmarks/rng_battery.py's triple32_keyed is not asicsim's hash_bits")


def dieharder(words, tests, extra=()) -> list[dict]:
    """Run dieharder tests ``tests`` (numbers, ``dieharder -l``) on the chunks ``words`` yields;
    one row per result line: test, ntup, p-value, assessment (PASSED / WEAK / FAILED)."""
    exe = shutil.which("dieharder")
    if exe is None:
        raise RuntimeError("dieharder is not installed (Debian: apt-get install dieharder)")
    rows = []
    for d in tests:
        proc = subprocess.Popen([exe, "-g", "200", "-d", str(d), *extra], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        try:
            for c in words:
                proc.stdin.write(c.astype("<u4").tobytes())
        except (BrokenPipeError, OSError):  # dieharder read what it needed and exited
            pass
        out = proc.communicate()[0].decode()
        for line in out.splitlines():
            f = [s.strip() for s in line.split("|")]
            if len(f) == 6 and f[4].replace(".", "", 1).isdigit():
                rows.append({"test": f[0], "ntup": int(f[1]), "p": float(f[4]), "verdict": f[5]})
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gen", nargs="+", default=list(GENERATORS), choices=list(GENERATORS))
    p.add_argument("--stream", nargs="+", default=["tensor", "derived", "steps"])
    p.add_argument("--tests", nargs="+", type=int, default=list(TESTS))
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    check_shipped(a.seed)
    print(f"dieharder -g 200 -d <test>, seed {a.seed}, tests {a.tests}", flush=True)
    for gen in a.gen:
        for stream in a.stream:
            t = time.perf_counter()
            rows = []
            for d in a.tests:  # a fresh stream per test (dieharder's own -g 200 way)
                rows += dieharder(chunks(GENERATORS[gen], stream, a.seed), [d])
            n = {v: sum(r["verdict"] == v for r in rows) for v in ("PASSED", "WEAK", "FAILED")}
            worst = min(rows, key=lambda r: min(r["p"], 1 - r["p"]))
            print(f"| {gen} | {stream} | {n['PASSED']} | {n['WEAK']} | {n['FAILED']} | "
                  f"{worst['test']} (ntup {worst['ntup']}) p={worst['p']:.6f} | "
                  f"{time.perf_counter() - t:.0f} s |", flush=True)
            print("    p: " + ", ".join(f"{r['test']}{'/' + str(r['ntup']) if r['ntup'] else ''} {r['p']:.4f}"
                                     + ("" if r["verdict"] == "PASSED" else f" {r['verdict']}") for r in rows),
                  file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
