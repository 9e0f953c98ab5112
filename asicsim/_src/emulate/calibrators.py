"""Calibrators of static activation scales (offline, numpy): from a histogram of |x| to the amax
a static scale is set from, as NVIDIA's pytorch-quantization ``calib/histogram.py`` computes it
(the library TensorRT's QAT/PTQ toolkit ships; its entropy method is TensorRT's
``IInt8EntropyCalibrator2``, Migacz, "8-bit Inference with TensorRT", GTC 2017):

``percentile``  the edge of the first bin where the cumulative fraction reaches ``p / 100``
                (``_compute_amax_percentile``: ``searchsorted(cumsum(hist / total), p / 100)``).
``mse``         among the bin centres from ``start_bin`` on, the amax whose fake quantization
                (``round(x * maxbound / amax)`` clamped, half to even) of the histogram's centres
                has the least count-weighted squared error (``_compute_amax_mse``; the first of equal
                minima, as ``np.argmin``).
``entropy``     for every ``i`` from ``start_bin`` to the number of bins, the reference
                distribution ``hist[:i]`` (outliers folded into bin ``i - 1``, bin 0 set to bin 1's
                count) against its quantization into ``2**(bits-1)`` levels (each level's count
                spread evenly over its non-empty bins); the amax is the left edge of bin ``i`` with
                the least KL divergence (the *last* of equal minima) (``_compute_amax_entropy``).

The histogram here has a fixed range ``[0, amax]`` from a first, max-calibration pass over the
same batches (pytorch-quantization instead sizes its bins from the first batch and appends bins
of that width when a later batch exceeds them); with one batch the two are the same histogram.
"""

from __future__ import annotations

import numpy as np

NUM_BINS = 2048  # TensorRT's and pytorch-quantization's default
START_BIN = 128


def histogram(absx: np.ndarray, amax: float, bins: int = NUM_BINS) -> np.ndarray:
    """Counts of ``absx`` (>= 0) in ``bins`` equal bins over [0, amax] (the last bin closed, as
    ``np.histogram``)."""
    absx = np.asarray(absx, np.float64).ravel()
    if amax <= 0:
        return np.bincount(np.zeros(absx.size, np.int64), minlength=bins).astype(np.int64)
    return np.histogram(absx, bins=bins, range=(0.0, float(amax)))[0].astype(np.int64)


def channel_histograms(absx: np.ndarray, amax: np.ndarray, bins: int = NUM_BINS) -> np.ndarray:
    """(C, bins) counts of ``absx`` (..., C) per channel, each over [0, amax[c]]."""
    x = np.asarray(absx, np.float64).reshape(-1, absx.shape[-1])
    a = np.asarray(amax, np.float64)
    idx = np.floor(x / np.where(a > 0, a, 1.0) * bins).astype(np.int64)
    idx = np.clip(np.where(a > 0, idx, 0), 0, bins - 1)
    out = np.zeros((x.shape[1], bins), np.int64)
    np.add.at(out, (np.broadcast_to(np.arange(x.shape[1]), x.shape), idx), 1)
    return out


def edges(amax: float, bins: int) -> np.ndarray:
    return np.linspace(0.0, float(amax), bins + 1)


def amax_percentile(hist: np.ndarray, amax: float, percentile: float) -> float:
    """The amax that keeps ``percentile`` % of the counts (see the module doc)."""
    hist = np.asarray(hist, np.float64)
    total = hist.sum()
    if total == 0 or amax <= 0:
        return float(amax)
    idx = int(np.searchsorted(np.cumsum(hist / total), percentile / 100))
    e = edges(amax, hist.size)
    return float(e[min(idx, hist.size)])


def fake_quant(x: np.ndarray, amax: float, num_bits: int, unsigned: bool) -> np.ndarray:
    """pytorch-quantization's ``fake_tensor_quant``: ``round(x * maxbound / amax)`` clamped to
    the integer range, times ``amax / maxbound`` (round half to even, as ``torch.round``)."""
    maxbound = 2.0 ** (num_bits - 1 + int(unsigned)) - 1.0
    minbound = 0.0 if unsigned else -maxbound - 1.0
    scale = maxbound / amax
    return np.clip(np.round(x * scale), minbound, maxbound) / scale


def amax_mse(hist: np.ndarray, amax: float, num_bits: int = 8, unsigned: bool = False,
             stride: int = 1, start_bin: int = START_BIN) -> float:
    """The bin centre (from ``start_bin``) minimising the count-weighted squared quantization
    error of the centres (see the module doc)."""
    counts = np.asarray(hist, np.float64)
    e = edges(amax, counts.size)
    centers = (e[1:] + e[:-1]) / 2
    cand = np.arange(start_bin, centers.size, stride)
    if cand.size == 0 or amax <= 0:
        return float(amax)
    errs = [np.mean((fake_quant(centers, centers[i], num_bits, unsigned) - centers) ** 2 * counts) for i in cand]
    return float(centers[cand[int(np.argmin(errs))]])


def _kl(p: np.ndarray, q: np.ndarray) -> float:
    """scipy.stats.entropy(p, q): both normalised; inf where q = 0 < p, and where either is
    empty (scipy gives NaN there, which pytorch-quantization's argmin would then pick)."""
    if p.sum() <= 0 or q.sum() <= 0:
        return float("inf")
    p = p / p.sum()
    q = q / q.sum()
    nz = p > 0
    if np.any(q[nz] == 0):
        return float("inf")
    return float(np.sum(p[nz] * np.log(p[nz] / q[nz])))


def amax_entropy(hist: np.ndarray, amax: float, num_bits: int = 8, unsigned: bool = False,
                 stride: int = 1, start_bin: int = START_BIN) -> float:
    """The amax of least KL divergence between the clipped histogram and its quantization
    (TensorRT's entropy calibration; see the module doc)."""
    bins = np.asarray(hist, np.float64).copy()
    if bins.size < 2 or amax <= 0 or bins.sum() == 0:
        return float(amax)
    bins[0] = bins[1]
    nlevels = 1 << (num_bits - 1 + int(unsigned))
    e = edges(amax, bins.size)
    best, best_i = np.inf, None
    for i in range(start_bin, bins.size + 1, stride):
        # level of each of the first i bins: np.digitize(range(i), linspace(0, i, nlevels + 1)) - 1
        level = np.digitize(np.arange(i), np.linspace(0, i, nlevels + 1)) - 1
        ref = bins[:i].copy()
        nonempty = ref != 0
        sums = np.bincount(level[nonempty], weights=ref[nonempty], minlength=nlevels + 1)
        used = np.bincount(level[nonempty], minlength=nlevels + 1)
        q = np.where(nonempty, sums[level] / np.maximum(used[level], 1), 0.0)
        ref[-1] += bins[i:].sum()
        d = _kl(ref, q)
        if d <= best:  # the last of equal minima
            best, best_i = d, i
    return float(e[best_i]) if best_i is not None else float(amax)


def amax_from_histogram(method: str, hist: np.ndarray, amax: float, *, num_bits: int, unsigned: bool,
                        percentile: float) -> float:
    if method == "percentile":
        return amax_percentile(hist, amax, percentile)
    if method == "mse":
        return amax_mse(hist, amax, num_bits, unsigned)
    if method == "entropy":
        return amax_entropy(hist, amax, num_bits, unsigned)
    raise ValueError(f"calibration method {method!r}: one of percentile, mse, entropy (max needs no histogram)")
