"""The one chunk of a network on one design point measured in groups of its GEMMs (issue 31
item 4): :func:`asicsim._src.hw.mapper_shapes.distinct` leaves each GEMM its distinct candidates
first and pads the rest of its column with copies of them up to the most any GEMM has (ResNet-50
on edge_int8_32x32: 22 K distinct of 46 K pairs, one GEMM with 1,934 of a mean 920). Here the
GEMMs, sorted by their distinct candidates, are cut into groups, and each group is measured and
searched over its own GEMMs and its most distinct candidates only.

Every figure is the one chunk's: each count and the search are element-wise (a GEMM's column is
measured and chosen from on its own values), and a column cut at its ``firsts`` loses only
copies, which never win (equal measures, later in the column and in the search order: the
search takes the first least). ``tests/hw/test_mapper_fast.py`` holds it bit for bit."""

from __future__ import annotations

import dataclasses

import numpy as np

from asicsim._src.hw import mapper_passes as passes
from asicsim._src.hw.count_inputs import ArrayHardware, GemmProblem
from asicsim._src.hw.mapper_shapes import FIELDS

#: a group costs about this many (candidate, GEMM) pairs of measuring more than its pairs (the
#: calls around its arrays); the groups are those that minimise pairs plus this per group
GROUP_PAIRS = 2048
#: measuring in groups is on (off: the one chunk as it is; the tests compare both)
ENABLED = True


def groups(firsts: np.ndarray) -> list[np.ndarray]:
    """The GEMMs (indices) in groups of similar ``firsts`` minimising the pairs measured plus
    :data:`GROUP_PAIRS` per group (dynamic programming over the GEMMs sorted by ``firsts``)."""
    by = np.argsort(firsts, kind="stable")
    f = np.asarray(firsts)[by]
    n = f.size
    cost, cut = [0.0] + [np.inf] * n, [0] * (n + 1)
    for j in range(1, n + 1):  # cost[j]: the first j GEMMs in groups, the last group i..j-1
        for i in range(j):
            c = cost[i] + GROUP_PAIRS + float(f[j - 1]) * (j - i)
            if c < cost[j]:
                cost[j], cut[j] = c, i
    out, j = [], n
    while j > 0:
        out.append(by[cut[j]:j])
        j = cut[j]
    return out[::-1]


def _cut(v, idx: np.ndarray, n: int):
    """``v`` over GEMMs ``idx`` of ``n`` (its last axis where that is theirs)."""
    return v[..., idx] if isinstance(v, np.ndarray) and v.ndim and v.shape[-1] == n else v


def _sliceable(v, n: int) -> bool:
    """Whether ``v`` holds one value or one per GEMM (a 1-D element axis of ``n``)."""
    if isinstance(v, tuple | list):
        return all(_sliceable(x, n) for x in v)
    if isinstance(v, dict):
        return all(_sliceable(x, n) for x in v.values())
    return np.size(v) == 1 or np.shape(v) == (n,)


def sliceable(p: GemmProblem, hw: ArrayHardware, shape) -> bool:
    """Whether the elements of ``shape`` are GEMMs along one axis that :func:`subset` can cut."""
    return len(shape) == 1 and all(_sliceable(getattr(x, f.name), shape[0]) for x in (p, hw)
                                   for f in dataclasses.fields(x))


def subset(p: GemmProblem, hw: ArrayHardware, g: np.ndarray, n: int) -> tuple:
    """``(p, hw)`` over GEMMs ``g`` of ``n`` (:func:`sliceable` ones)."""
    pg = dataclasses.replace(p, **{f.name: _cut(getattr(p, f.name), g, n) for f in dataclasses.fields(p)
                                   if f.name != "off_chip"},
                             off_chip={o: _cut(np.asarray(v), g, n) for o, v in p.off_chip.items()})
    hg = dataclasses.replace(hw, rows=_cut(hw.rows, g, n), cols=_cut(hw.cols, g, n),
                             dataflow=_cut(hw.dataflow, g, n), capacity=tuple(_cut(c, g, n) for c in hw.capacity),
                             dram_bytes_per_cycle=_cut(hw.dram_bytes_per_cycle, g, n))
    return pg, hg


def search_in_groups(p: GemmProblem, hw: ArrayHardware, chunk, shape, score_energy, choose):
    """``choose(measured, shape)`` (the one-chunk search: ``((score, second), fields)``) of ``chunk``
    measured in :func:`groups` of its GEMMs, put back in GEMM order; None where it does not
    apply (off, a grid, no ``firsts``, one group, or an energy not cut by GEMM)."""
    firsts = getattr(chunk, "firsts", None)
    if not ENABLED or firsts is None or len(shape) != 1 or shape[0] < 2:
        return None
    n = shape[0]
    parts = groups(firsts)
    if len(parts) < 2 or not sliceable(p, hw, shape):
        return None
    energies = [None if score_energy is None else score_energy.at(g, n) if hasattr(score_energy, "at") else False
                for g in parts]
    if any(e is False for e in energies) or (score_energy is not None and any(e is None for e in energies)):
        return None
    score, second = np.empty(n), np.empty(n)
    fields = [np.empty(n) for _ in FIELDS]
    for g, se in zip(parts, energies, strict=True):
        k = int(np.max(firsts[g]))
        pg, hg = subset(p, hw, g, n)
        cg = passes.Chunk(*(np.asarray(getattr(chunk, f))[:k, g] for f in FIELDS), order=chunk.order[:k, g])
        (s, t), best = choose([(cg, passes.measures(pg, hg, cg, se))], (g.size,))
        score[g], second[g] = s, t
        for out, v in zip(fields, best, strict=True):
            out[g] = v
    return (score, second), fields
