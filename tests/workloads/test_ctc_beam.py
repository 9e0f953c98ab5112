"""CTC prefix beam search (asicsim._src.workloads.ctc.prefix_beam_search) against a brute-force
oracle: every frame-wise path of a tiny alphabet enumerated, the probabilities of the paths that
collapse to the same labelling summed (Graves 2006, eq. 2-3), the labelling with the largest sum
being the exact most probable one."""

from __future__ import annotations

import itertools
import math
from collections import defaultdict

import numpy as np
import pytest

from asicsim._src.workloads.ctc import beam_decode, greedy_decode, prefix_beam_search


def _collapse(path, blank=0):
    out = [c for i, c in enumerate(path) if i == 0 or c != path[i - 1]]
    return tuple(c for c in out if c != blank)


def _labelling_probs(logits, frames) -> dict:
    """labelling -> exact probability, by enumerating all K**frames paths (fractions-free but in
    float64 over at most 4**6 paths)."""
    p = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    sums: dict = defaultdict(float)
    for path in itertools.product(range(p.shape[-1]), repeat=frames):
        sums[_collapse(path)] += math.prod(p[t, c] for t, c in enumerate(path))
    return sums


def _no_pruning_beam(k: int, t: int) -> int:
    """Every prefix of at most t labels over k - 1 labels: a beam that never prunes."""
    return sum((k - 1) ** n for n in range(t + 1))


@pytest.mark.parametrize("seed,k,t,frames", [(0, 3, 5, 5), (1, 3, 6, 4), (2, 4, 5, 5), (3, 3, 6, 6),
                                             (4, 4, 4, 4), (5, 2, 6, 6)])
def test_wide_beam_finds_the_most_probable_labelling(seed, k, t, frames):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(t, k)) * 1.5
    probs = _labelling_probs(logits, frames)
    best = max(probs, key=probs.get)
    for beam in (None, _no_pruning_beam(k, frames)):
        (labels, logp), = prefix_beam_search(logits[None], np.array([frames]), beam=beam)
        assert tuple(labels) == best
        assert logp == pytest.approx(math.log(probs[best]), rel=1e-12, abs=1e-12)


def test_pruned_scores_are_lower_bounds_and_batches_are_independent():
    rng = np.random.default_rng(7)
    logits = rng.normal(size=(3, 6, 4)) * 2
    lengths = np.array([6, 4, 5])
    for beam in (1, 2, 3):
        got = prefix_beam_search(logits, lengths, beam=beam)
        for i, (labels, logp) in enumerate(got):
            exact = _labelling_probs(logits[i], int(lengths[i]))[tuple(labels)]
            assert logp <= math.log(exact) + 1e-12  # pruned alignments only lose mass
            assert prefix_beam_search(logits[i:i + 1], lengths[i:i + 1], beam=beam)[0] == (labels, logp)


def test_beam_finds_what_the_best_path_misses():
    """Two frames of p(blank) = 0.4, p(a) = 0.35, p(b) = 0.25: the best path is blank blank
    (empty, 0.16), but "a" collects (a a) + (a blank) + (blank a) = 0.1225 + 0.14 + 0.14 = 0.4025."""
    logits = np.log(np.array([[[0.4, 0.35, 0.25], [0.4, 0.35, 0.25]]]))
    assert greedy_decode(logits, np.array([2])) == [[]]
    (labels, logp), = prefix_beam_search(logits, np.array([2]), beam=2)
    assert labels == [1] and logp == pytest.approx(math.log(0.4025), rel=1e-12)
    assert beam_decode(logits, np.array([2]), beam=2) == [[1]]


def test_repeats_need_a_blank_and_empty_utterances():
    # a a with a blank between (a, blank, a) is "aa"; without (a, a, a) is "a"
    certain = np.log(np.eye(3)[[1, 0, 1]] * 0.999 + 0.0005)
    assert beam_decode(certain[None], np.array([3]), beam=4) == [[1, 1]]
    merged = np.log(np.eye(3)[[1, 1, 1]] * 0.999 + 0.0005)
    assert beam_decode(merged[None], np.array([3]), beam=4) == [[1]]
    assert prefix_beam_search(merged[None], np.array([0]), beam=4) == [([], 0.0)]


@pytest.mark.parametrize("beam,fragment", [(0, "beam = 0"), (-2, "beam = -2"), (2.5, "beam = 2.5"),
                                           (True, "beam = True")])
def test_bad_beams_are_named(beam, fragment):
    with pytest.raises(ValueError, match=fragment):
        prefix_beam_search(np.zeros((1, 2, 3)), np.array([2]), beam=beam)
