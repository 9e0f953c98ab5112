"""What fits the buffers: the bytes a schedule's tiles take per buffer under any split of a shared
buffer (:func:`asicsim._src.hw.residency.buffer_rows`, with the tensors kept on chip), the largest tile that fits beside others (closed form), the tiles the mapper enumerates
(the least tile of every trip count), a schedule's array-aligned twin, and the distinct GEMMs of
a problem (a network repeats its shapes: each is searched once). Used by
:mod:`asicsim._src.hw.mapper`; the model of a schedule's cost is :mod:`asicsim._src.hw.counts`."""

from __future__ import annotations

import dataclasses

import numpy as np

from asicsim._src.hw.counts import (
    ACTIVATIONS,
    IS,
    OS,
    OUTPUTS,
    WEIGHTS,
    WS,
    ArrayHardware,
    GemmCounts,
    GemmProblem,
    Schedule,
    fold_sides,
)
from asicsim._src.hw.residency import buffer_rows as buffer_rows  # the mapper's
from asicsim._src.hw.whole_tiles import whole_tile_scales


def _floor(x):
    return np.floor(np.where(np.isfinite(x), x, 1e18))


def most(dim: int, t: list, rows: list, db, D, ps=(None, None)):
    """The largest tile along ``dim`` (0 M, 1 N, 2 K) that fits beside the other two of ``t``, at
    most ``D``; below 1 when none does. ``ps``: the partial-sum tile's rows and columns where fixed
    (None or NaN: the tile's own)."""
    m, n, k = (0.0 if x is None else x for x in t)  # t[dim] is what is sought
    # True: the partial-sum tile follows the tile along that side (False: fixed), else per element
    fm, fn = (True if x is None else _all_or_none(np.isnan(x)) for x in ps)
    pm = m if fm is True else (ps[0] if fm is False else np.where(fm, m, ps[0]))
    pn = n if fn is True else (ps[1] if fn is False else np.where(fn, n, ps[1]))
    best = D
    for a, b, c, budget in rows:
        u = budget / np.where(db, 2.0, 1.0)
        if dim == 0:
            coef, const = a * k + _where(fm, lambda c=c: c * pn, 0.0), b * k * n + _where(fm, 0.0, lambda c=c: c * pm * pn)
        elif dim == 1:
            coef, const = b * k + _where(fn, lambda c=c: c * pm, 0.0), a * m * k + _where(fn, 0.0, lambda c=c: c * pm * pn)
        else:
            coef, const = a * m + b * n, c * pm * pn
        # a buffer the sought tile takes nothing of still bounds it: none fits where the rest overflows
        free = np.where(const <= u * (1 + 1e-12), np.inf, -1.0)
        room = np.where(coef > 0, (u - const) / np.where(coef > 0, coef, 1.0), free)
        best = np.minimum(best, _floor(room))
    return best


def _all_or_none(mask):
    """``mask`` as True or False where it holds one value everywhere (a fast path), else itself."""
    return True if mask.all() else (False if not mask.any() else mask)


def _where(cond, yes, no):
    """``np.where(cond, yes, no)`` with a callable branch computed only where ``cond`` can take it
    (``cond`` True or False: that branch alone, the same values)."""
    if cond is True or cond is False:
        v = yes if cond else no
        return v() if callable(v) else v
    return np.where(cond, *(v() if callable(v) else v for v in (yes, no)))


def most_sub(t: list, other, rows: list, db, cap):
    """The most rows (columns) of the partial-sum tile beside ``other`` columns (rows) that fit
    with the tiles ``t``, at most ``cap``."""
    m, n, k = t
    best = cap
    for a, b, c, budget in rows:
        u = budget / np.where(db, 2.0, 1.0)
        room = u - a * m * k - b * k * n
        free = np.where(room >= -1e-12 * u, np.inf, -1.0)
        if isinstance(c, float) and c == 0.0:  # no partial sums here: c * other > 0 nowhere
            best = np.minimum(best, free)
            continue
        best = np.minimum(best, np.where(c * other > 0, _floor(room / np.where(c * other > 0, c * other, 1.0)), free))
    return best


def fits(s: Schedule, rows: list, pad=(1.0, 1.0)) -> np.ndarray:
    """Whether the tiles of ``s`` fit every buffer (:func:`buffer_rows`). ``pad``: what the A and B
    tiles' bytes are multiplied by where they are stored as whole array-sized tiles
    (:func:`padded`)."""
    Ma = s.Mt if s.Ma is None else s.Ma
    Na = s.Nt if s.Na is None else s.Na
    ok = (s.Mt >= 1) & (s.Nt >= 1) & (s.Kt >= 1) & (Ma >= 1) & (Na >= 1) & (Ma <= s.Mt) & (Na <= s.Nt)
    for a, b, c, budget in rows:
        used = a * s.Mt * s.Kt * pad[0] + b * s.Kt * s.Nt * pad[1] + c * Ma * Na
        ok = ok & (used * np.where(s.double_buffered, 2.0, 1.0) <= budget * (1 + 1e-12))
    return ok


def padded(hw: ArrayHardware, s: Schedule) -> tuple:
    """``(A, B)``: what the stationary operand's tile bytes are multiplied by where the design
    stores it in whole array-sized tiles (``array.whole_tiles``, :mod:`asicsim._src.hw.whole_tiles`):
    its block ``Kt x Nt`` (ws; is: ``Kt x Mt``) takes ``ceil(Kt / R) R`` rows by the array's
    tile's folds of ``C`` columns, as one pass over it moves from DRAM; 1 otherwise."""
    Ma = s.Mt if s.Ma is None else s.Ma
    Na = s.Nt if s.Na is None else s.Na
    return whole_tile_scales(hw.whole_tiles, hw.dataflow == WS, hw.dataflow == IS, hw.rows, hw.cols,
                             s.Mt, s.Nt, s.Kt, Ma, Na, s.Kt)


def trip_tiles(D, ndim: int) -> np.ndarray:
    """Every tile that is the smallest with its trip count (a leading axis before ``ndim`` element
    axes; repeats allowed): ``ceil(D / t)`` and ``t`` for ``t <= sqrt(D)``."""
    D = np.asarray(D, dtype=np.float64)
    q = int(np.ceil(np.sqrt(np.max(D)))) if D.size else 1
    t = np.arange(1, q + 1, dtype=np.float64).reshape((q,) + (1,) * ndim)
    return np.concatenate([np.ceil(D / t), np.minimum(t, D)])


def trip_min(t, D):
    """The least tile with the trip count of ``t`` (same trips, less space)."""
    return np.where(t >= 1, np.ceil(D / np.ceil(D / np.maximum(t, 1))), t)


def element_shape(p: GemmProblem, hw: ArrayHardware) -> tuple:
    """The shape every count broadcasts to: design axes and GEMMs."""
    return np.broadcast_shapes(*(np.shape(x) for x in (p.M, p.N, p.K, p.a_bytes, p.b_bytes, p.acc_bytes,
                                                        p.out_bytes, p.a_footprint, p.reps, *p.off_chip.values(),
                                                        hw.rows, hw.cols, hw.dataflow, *hw.capacity)))


def aligned(p: GemmProblem, hw: ArrayHardware, s: Schedule) -> Schedule:
    """``s`` with each spatially unrolled dimension of the array's tile cut to a multiple of the
    array side it maps to (ws: Kt rows, Na columns; os: Ma rows, Na columns; is: Kt rows, Ma
    columns), where it spans at least one side: no fold runs partly empty. A tile cut to one
    side, where a fold is the array's side (``s`` folds no smaller there), is then the least with
    that trip count over its dimension (:func:`trip_min`; not where the design moves whole array
    tiles, which a smaller tile pads): the same trips, one fold a tile, in fewer rows (columns),
    so the same folds, DRAM bytes and SRAM reads and no more fill/drain or reload cycles. Where
    the array's tile is its block's side, the block is cut with it (outputs: both; weights: the
    ``Mt`` sliver, which is its ``Ma``; activations: the ``Nt`` sliver), so the twin stays in the
    space (:func:`valid`). Smaller tiles, so still feasible."""
    df = hw.dataflow
    fr, fc = fold_sides(hw, s)

    def cut(x, side, dim, fold):
        k = np.floor(x / side)
        one = side if hw.whole_tiles else np.where(fold >= side, trip_min(side, dim), side)
        return np.where(k >= 2, k * side, np.where(k == 1, one, x))

    R, C = hw.rows, hw.cols
    Ma = s.Mt if s.Ma is None else s.Ma
    Na = s.Nt if s.Na is None else s.Na
    Ma = np.where(df == OS, cut(Ma, R, p.M, fr), np.where(df == IS, cut(Ma, C, p.M, fc), Ma))
    Kt = np.where(df == OS, s.Kt, cut(s.Kt, R, p.K, fr))
    Na = np.where(df == IS, Na, cut(Na, C, p.N, fc))
    with_m = (s.family == OUTPUTS) | (s.family == WEIGHTS)
    with_n = (s.family == OUTPUTS) | (s.family == ACTIVATIONS)
    return Schedule(s.family, np.where(with_m, Ma, s.Mt), np.where(with_n, Na, s.Nt), Kt, s.double_buffered,
                    s.psum_spill, Ma, Na, s.streamed, s.tile_share, s.fold_rows, s.fold_cols)


def valid(p: GemmProblem, hw: ArrayHardware, s: Schedule) -> np.ndarray:
    """Whether ``s`` is in the space: its tiles fit (:func:`fits`; stored as whole array-sized
    tiles where the design says so, :func:`padded`) and it cuts K outside the
    outputs family only where partial sums may go to DRAM (the outputs leave through it)."""
    rows = {sp: buffer_rows(p, hw, sp, s.streamed, s.tile_share, s.double_buffered)
            for sp in ((False, True) if hw.layout.psum_spill is not None else (False,))}
    pad = padded(hw, s)
    ok = fits(s, rows[False], pad)
    if True in rows:
        ok = np.where(s.psum_spill, fits(s, rows[True], pad), ok)
    cut_k = (s.family != OUTPUTS) & (s.Kt < p.K)
    Ma = s.Mt if s.Ma is None else s.Ma
    Na = s.Nt if s.Na is None else s.Na
    # the outputs family's block is the array's tile; the others split only their resident block
    whole = np.where(s.family == OUTPUTS, (Ma == s.Mt) & (Na == s.Nt),
                     np.where(s.family == WEIGHTS, Ma == s.Mt, Na == s.Nt))
    return ok & whole & (s.family >= 0) & (~cut_k | np.asarray(p.off_chip["ofmap"], dtype=bool))


def distinct_gemms(p: GemmProblem, hw: ArrayHardware) -> tuple:
    """``(q, inverse)``: the distinct GEMMs of ``p`` (a network repeats its shapes) and, for each
    GEMM of ``p``, its row in ``q``; ``(p, None)`` where the design's fields vary along the GEMM
    axis or nothing repeats. :func:`spread_counts` maps ``q``'s counts back."""
    fields = [p.M, p.N, p.K, p.a_bytes, p.b_bytes, p.acc_bytes, p.out_bytes, p.a_footprint, p.reps,
              p.shared_weights, p.density, *(p.off_chip[k] for k in sorted(p.off_chip))]
    n = max(np.size(f) for f in fields)
    if n < 2 or any(np.ndim(f) > 1 for f in fields) or any(np.shape(x)[-1:] not in ((), (1,)) for x in (
            hw.rows, hw.cols, hw.dataflow, hw.dram_bytes_per_cycle, *hw.capacity)):
        return p, None
    rows = np.stack([np.broadcast_to(np.asarray(f, dtype=np.float64), (n,)) for f in fields], axis=1)
    uniq, first, inverse = np.unique(rows, axis=0, return_index=True, return_inverse=True)
    if len(uniq) == n:
        return p, None
    take = lambda v: np.broadcast_to(v, (n,))[first] if np.ndim(v) == 1 else v  # noqa: E731
    q = GemmProblem(*(take(getattr(p, f.name)) for f in dataclasses.fields(GemmProblem) if f.name != "off_chip"),
                    off_chip={k: take(v) for k, v in p.off_chip.items()})
    return q, inverse.reshape(-1)


def spread_counts(c: GemmCounts, inverse) -> GemmCounts:
    """The counts of every GEMM from those of the distinct ones (:func:`distinct_gemms`)."""
    if inverse is None:
        return c
    m = int(inverse.max()) + 1

    def spread(v):
        v = np.asarray(v)
        return v[..., inverse] if v.ndim and v.shape[-1] == m else v

    return GemmCounts(**{f.name: spread(getattr(c, f.name)) for f in dataclasses.fields(GemmCounts)})
