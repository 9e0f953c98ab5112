"""CTC loss, greedy decoding and error rates (asicsim._src.workloads.ctc) against optax, brute force
enumeration and hand calculations."""

from __future__ import annotations

import itertools
import math
from collections import deque

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from asicsim._src.workloads.ctc import (
    cer,
    ctc_loss,
    edit_distance,
    error_rate,
    greedy_decode,
    transcripts,
    wer,
)


def _random_case(seed, b=5, t=14, k=7, n=6):
    rng = np.random.default_rng(seed)
    logits = jnp.asarray(3 * rng.normal(size=(b, t, k)), jnp.float32)
    lengths = rng.integers(1, t + 1, b).astype(np.int32)
    lengths[0] = t
    labels = np.full((b, n), -1, np.int32)
    for i in range(b):
        m = int(rng.integers(0, min(n, (lengths[i] + 1) // 2) + 1))
        labels[i, :m] = rng.integers(1, k, m)
    labels[0, :3] = [2, 2, 5]  # a repeat: needs a blank between
    return logits, lengths, labels


def _optax(logits, lengths, labels):
    pad = (jnp.arange(logits.shape[1])[None] >= jnp.asarray(lengths)[:, None]).astype(jnp.float32)
    labels = jnp.asarray(labels)
    return optax.ctc_loss(logits, pad, jnp.maximum(labels, 0), (labels < 0).astype(jnp.float32))


def test_equals_optax_loss_and_gradient():
    logits, lengths, labels = _random_case(0, b=16)
    np.testing.assert_allclose(ctc_loss(logits, lengths, labels), _optax(logits, lengths, labels), rtol=2e-6)
    g = jax.grad(lambda z: jnp.sum(ctc_loss(z, lengths, labels)))(logits)
    g_ref = jax.grad(lambda z: jnp.sum(_optax(z, lengths, labels)))(logits)
    np.testing.assert_allclose(g, g_ref, rtol=1e-5, atol=1e-6)
    padded = np.arange(logits.shape[1])[None] >= lengths[:, None]
    assert padded.any() and float(jnp.max(jnp.abs(g[padded]))) == 0.0  # padding frames: no gradient


def _collapse(path, blank=0):
    out = [c for i, c in enumerate(path) if (i == 0 or c != path[i - 1])]
    return [c for c in out if c != blank]


@pytest.mark.parametrize("labels,frames", [([1, 2], 4), ([1, 1], 4), ([2], 3), ([], 3), ([1, 2, 1], 5), ([1, 1], 2)])
def test_brute_force_sum_over_alignments(labels, frames):
    """-log of the summed probability of every frame-wise path that collapses to the labels
    (Graves 2006, eq. 2-3), by enumerating all K**T paths; frames past ``frames`` are padding."""
    k, t = 3, 5
    rng = np.random.default_rng(len(labels) * 10 + frames)
    logits = rng.normal(size=(t, k))
    p = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    total = sum(math.prod(p[i, c] for i, c in enumerate(path))
                for path in itertools.product(range(k), repeat=frames) if _collapse(list(path)) == labels)
    padded = np.full((1, 4), -1, np.int32)
    padded[0, :len(labels)] = labels
    got = float(ctc_loss(jnp.asarray(logits[None], jnp.float32), np.array([frames]), padded)[0])
    if total == 0:  # [1, 1] in 2 frames: impossible (needs 3); the loss is about -LOG_EPSILON
        assert got > 1e4
    else:
        assert got == pytest.approx(-math.log(total), rel=1e-5)


def test_hand_cases():
    logp = np.log(np.array([[0.5, 0.3, 0.2], [0.1, 0.6, 0.3]], np.float32))
    z = jnp.asarray(logp[None])
    # one frame, label [1]: p(1) = 0.3
    assert float(ctc_loss(z[:, :1], np.array([1]), np.array([[1]]))[0]) == pytest.approx(-math.log(0.3), rel=1e-6)
    # two frames, no label: both blank, 0.5 * 0.1
    assert float(ctc_loss(z, np.array([2]), np.array([[-1]]))[0]) == pytest.approx(-math.log(0.05), rel=1e-6)
    # two frames, label [1]: (1,1) + (0,1) + (1,0) = 0.3*0.6 + 0.5*0.6 + 0.3*0.1
    assert float(ctc_loss(z, np.array([2]), np.array([[1]]))[0]) == pytest.approx(-math.log(0.51), rel=1e-6)


def test_no_gemm_in_the_loss():
    """optax forms the emission log-probs with an einsum (a dot_general the emulator would round
    as a GEMM); this loss gathers them."""
    logits, lengths, labels = _random_case(0)
    prims = {e.primitive.name for e in jax.make_jaxpr(ctc_loss)(logits, lengths, labels).jaxpr.eqns}
    ref = {e.primitive.name for e in jax.make_jaxpr(_optax)(logits, lengths, labels).jaxpr.eqns}
    assert "dot_general" in ref and "dot_general" not in prims


def test_greedy_decode_hand():
    best = np.array([[1, 1, 0, 1, 2, 2, 0, 3], [0, 0, 2, 0, 2, 2, 1, 1]])
    logits = jax.nn.one_hot(jnp.asarray(best), 4)
    assert greedy_decode(logits, np.array([8, 8])) == [[1, 1, 2, 3], [2, 2, 1]]
    assert greedy_decode(logits, np.array([4, 6])) == [[1, 1], [2, 2]]  # frames past the length ignored
    assert greedy_decode(logits, np.array([0, 1])) == [[], []]


def _bfs_distance(a: str, b: str, alphabet: str) -> int:
    """Fewest single-character insertions, deletions or substitutions turning a into b, by
    breadth-first search over strings (no dynamic programme)."""
    seen, queue = {a}, deque([(a, 0)])
    while queue:
        s, d = queue.popleft()
        if s == b:
            return d
        nxt = {s[:i] + s[i + 1:] for i in range(len(s))}
        nxt |= {s[:i] + c + s[i:] for i in range(len(s) + 1) for c in alphabet}
        nxt |= {s[:i] + c + s[i + 1:] for i in range(len(s)) for c in alphabet}
        for n in nxt - seen:
            seen.add(n)
            queue.append((n, d + 1))
    raise AssertionError("unreachable")


def test_edit_distance_against_search():
    rng = np.random.default_rng(0)
    for _ in range(60):
        a = "".join(rng.choice(list("ab"), int(rng.integers(0, 4))))
        b = "".join(rng.choice(list("abc"), int(rng.integers(0, 4))))
        assert edit_distance(a, b) == _bfs_distance(a, b, "abc"), (a, b)


def test_edit_distance_hand():
    assert edit_distance("kitten", "sitting") == 3
    assert edit_distance("flaw", "lawn") == 2
    assert edit_distance("", "abc") == 3 and edit_distance("abc", "") == 3
    assert edit_distance(["the", "cat"], ["the", "bat", "sat"]) == 2


def test_error_rates_are_corpus_sums():
    assert cer(["the cat"], ["the bat"]) == pytest.approx(1 / 7)
    assert wer(["the cat"], ["the bat"]) == pytest.approx(1 / 2)
    # summed edits / summed lengths (1 / 5), not the mean of per-utterance rates (0.25)
    assert cer(["ab", "cde"], ["a", "cde"]) == pytest.approx(1 / 5)
    assert cer(["abc"], [""]) == 1.0  # an empty transcript: chance
    with pytest.raises(ValueError, match="empty"):
        error_rate([""], ["a"])
    with pytest.raises(ValueError, match="2 references but 1"):
        error_rate(["a", "b"], ["a"])


def test_transcripts():
    assert transcripts(np.array([[2, 1, 3, -1], [-1, -1, -1, -1]]), "_ ab") == ["a b", ""]
