"""Connectionist temporal classification: the loss, greedy decoding, and character / word error rates.

:func:`ctc_loss` is the forward algorithm of Graves et al. 2006 ("Connectionist temporal
classification", ICML, section 4.1) over the blank-extended label sequence
``l' = (blank, l1, blank, l2, ..., lU, blank)``, in log space and float32. It computes the same
loss as ``optax.ctc_loss`` but reads each frame's label log-probabilities with a gather
(``take_along_axis``): optax forms them as ``einsum('btk,bnk->btn', logprobs, one_hot(labels))``,
a ``dot_general`` that :func:`asicsim.emulate` would round as a GEMM in the recipe's formats,
though it only selects entries. Impossible states hold :data:`LOG_EPSILON` (optax's default
``log_epsilon``, a finite stand-in for log 0 that keeps gradients finite).

:func:`greedy_decode` is best-path decoding (Graves 2006, section 3.2: the most probable label
at each frame, then repeats merged and blanks removed), :func:`prefix_beam_search` /
:func:`beam_decode` prefix search with a beam (which sums a labelling's alignments, so it can
find a labelling no single best path spells); :func:`error_rate` is the corpus error
rate Deep Speech 2 reports (Amodei et al. 2016, arXiv:1512.02595, section 3.1): Levenshtein edits
summed over utterances divided by the summed reference lengths, over characters (CER) or
whitespace-separated words (WER).
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

#: log of an impossible state (optax.ctc_loss's default ``log_epsilon``)
LOG_EPSILON = -1e5


def ctc_loss(logits, logit_lengths, labels, blank: int = 0):
    """Per-utterance negative log-likelihood ``-log p(labels | logits)``, shape (B,).

    ``logits`` (B, T, K); ``logit_lengths`` (B,) int: frames of each utterance (frames past it
    are ignored); ``labels`` (B, L) int, padded with any negative value after each
    utterance's labels (which must not contain ``blank``)."""
    logp = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
    b, t, _ = logp.shape
    labels = jnp.asarray(labels, jnp.int32)
    n_labels = jnp.sum(labels >= 0, axis=1)
    real = jnp.where(labels >= 0, labels, blank)
    s = 2 * labels.shape[1] + 1
    ext = jnp.full((b, s), blank, jnp.int32).at[:, 1::2].set(real)  # l'
    # a skip from s-2 to s is allowed onto a label that differs from the label two back
    prev2 = jnp.pad(ext[:, :-2], ((0, 0), (2, 0)), constant_values=blank)
    skip = (ext != blank) & (ext != prev2)
    emit = jnp.take_along_axis(logp, jnp.broadcast_to(ext[:, None, :], (b, t, s)), axis=2)  # (B, T, S)
    neg = jnp.float32(LOG_EPSILON)

    def shift(a, k):
        return jnp.pad(a[:, :-k], ((0, 0), (k, 0)), constant_values=neg)

    def step(alpha, xs):
        e, live = xs  # (B, S), (B,)
        a = jnp.logaddexp(alpha, shift(alpha, 1))
        a = jnp.where(skip, jnp.logaddexp(a, shift(alpha, 2)), a) + e
        return jnp.where(live[:, None], a, alpha), None

    # alpha before the first frame: all mass on a virtual state left of l'_1, so that frame 0
    # may start in l'_1 (blank) or l'_2 (the first label), as Graves 2006 eq. 6-7
    alpha0 = jnp.full((b, s), neg).at[:, 0].set(0.0)
    live = jnp.arange(t)[:, None] < jnp.asarray(logit_lengths)[None, :]
    alpha, _ = lax.scan(step, alpha0, (jnp.swapaxes(emit, 0, 1), live))
    ends = jnp.stack([2 * n_labels, jnp.maximum(2 * n_labels - 1, 0)], axis=1)
    last = jnp.take_along_axis(alpha, ends, axis=1)
    last = last.at[:, 1].set(jnp.where(n_labels > 0, last[:, 1], neg))
    return -jnp.logaddexp(last[:, 0], last[:, 1])


def greedy_decode(logits, lengths, blank: int = 0) -> list[list[int]]:
    """Best-path decoding: the argmax label of each of an utterance's ``lengths[i]`` frames,
    repeats merged, then blanks removed (so ``a blank a`` is ``aa``, ``a a`` is ``a``)."""
    best = np.asarray(jnp.argmax(logits, axis=-1))
    out = []
    for row, n in zip(best, np.asarray(lengths), strict=True):
        row = row[: int(n)]
        keep = np.ones(len(row), bool)
        keep[1:] = row[1:] != row[:-1]
        out.append([int(c) for c in row[keep] if c != blank])
    return out


def _log_softmax(logits) -> np.ndarray:
    z = np.asarray(logits, np.float64)
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def prefix_beam_search(logits, lengths, beam: int | None = 8, blank: int = 0) -> list[tuple[list[int], float]]:
    """CTC prefix beam search (Graves 2012, "Supervised Sequence Labelling with Recurrent Neural
    Networks", section 7.5; Hannun et al. 2014, arXiv:1408.2873, Algorithm 1, without a language
    model): per utterance the labelling and its log-probability, summed over the alignments that
    survived the beam.

    Each prefix keeps two log-probabilities, of its alignments ending in a blank and in its last
    label; a frame extends every prefix by a blank (same prefix), by its last label (same prefix
    from the label-ending mass, a longer one from the blank-ending mass: ``a blank a`` is ``aa``)
    or by any other label, and then the ``beam`` most probable prefixes are kept. In float64 on
    the host. ``beam=None`` keeps every prefix: the search is then exact (the most probable
    labelling and its probability, Graves 2006 eq. 3), at a cost exponential in the frames."""
    if beam is not None and (isinstance(beam, bool) or not isinstance(beam, int) or beam < 1):
        raise ValueError(f"prefix_beam_search: beam = {beam!r}: allowed: an integer >= 1, or None (no pruning)")
    logp = _log_softmax(logits)
    labels = np.array([c for c in range(logp.shape[-1]) if c != blank])
    out = []
    for row, n in zip(logp, np.asarray(lengths), strict=True):
        beams: dict[tuple, tuple[float, float]] = {(): (0.0, -np.inf)}  # prefix -> (blank, label) log p
        for lp in row[: int(n)]:
            nxt: dict[tuple, list[float]] = {}

            def add(prefix, which, value, nxt=nxt):
                cur = nxt.setdefault(prefix, [-np.inf, -np.inf])
                cur[which] = np.logaddexp(cur[which], value)

            for prefix, (pb, pl) in beams.items():
                total = np.logaddexp(pb, pl)
                add(prefix, 0, total + lp[blank])
                last = prefix[-1] if prefix else None
                for c, ext in zip(labels, total + lp[labels], strict=True):
                    if c == last:
                        add(prefix, 1, pl + lp[c])  # the label repeated: the same prefix
                        add((*prefix, int(c)), 1, pb + lp[c])  # after a blank: a new label
                    else:
                        add((*prefix, int(c)), 1, ext)
            ranked = sorted(nxt.items(), key=lambda kv: -np.logaddexp(*kv[1]))
            beams = {k: (v[0], v[1]) for k, v in (ranked if beam is None else ranked[:beam])}
        best, (pb, pl) = max(beams.items(), key=lambda kv: np.logaddexp(*kv[1]))
        out.append(([int(c) for c in best], float(np.logaddexp(pb, pl))))
    return out


def beam_decode(logits, lengths, beam: int = 8, blank: int = 0) -> list[list[int]]:
    """:func:`prefix_beam_search`'s labellings alone (as :func:`greedy_decode` gives them)."""
    return [labels for labels, _ in prefix_beam_search(logits, lengths, beam, blank)]


def edit_distance(ref: Sequence, hyp: Sequence) -> int:
    """Levenshtein distance (insertions, deletions, substitutions, each cost 1) between two
    sequences, by the Wagner-Fischer dynamic programme, one row at a time."""
    prev = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        cur = [i] + [0] * len(hyp)
        for j, h in enumerate(hyp, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (r != h))
        prev = cur
    return prev[-1]


def error_rate(refs: Sequence[Sequence], hyps: Sequence[Sequence]) -> float:
    """Summed edit distances over summed reference lengths (a corpus error rate; may exceed 1)."""
    if len(refs) != len(hyps):
        raise ValueError(f"error_rate: {len(refs)} references but {len(hyps)} hypotheses")
    total = sum(len(r) for r in refs)
    if total == 0:
        raise ValueError("error_rate: the references are all empty (the rate is undefined)")
    return sum(edit_distance(r, h) for r, h in zip(refs, hyps, strict=True)) / total


def cer(refs: Sequence[str], hyps: Sequence[str]) -> float:
    """Character error rate of transcripts (strings)."""
    return error_rate(list(refs), list(hyps))


def wer(refs: Sequence[str], hyps: Sequence[str]) -> float:
    """Word error rate of transcripts (strings split at whitespace)."""
    return error_rate([r.split() for r in refs], [h.split() for h in hyps])


def transcripts(ids, vocab: str) -> list[str]:
    """Label rows (lists, or an (N, L) array padded with negatives) as strings over ``vocab``."""
    return ["".join(vocab[int(c)] for c in row if int(c) >= 0) for row in ids]
