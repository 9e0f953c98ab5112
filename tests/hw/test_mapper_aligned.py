"""The array-aligned twin of a candidate (asicsim/_src/hw/tiles.py ``aligned``): each spatial dimension
of the array's tile cut to a multiple of the array side and, where that is one side and one fold,
to the least tile of its trip count. Checked on the mapper's own candidates of random small
problems against the plain cut to a multiple of the array side, written here from the twin's
definition, and on the case that showed it: a larger array (operands bypassing unused rows)
slower than a smaller one."""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from test_mapper_search import _bypassing, model, small_design

import asicsim as sim
import asicsim._src.hw.mapper_candidates as mapper_candidates
import asicsim._src.hw.mapper_passes as passes
from asicsim._src.hw.counts import ACTIVATIONS, IS, OS, OUTPUTS, WEIGHTS, Schedule, schedule_counts
from asicsim._src.hw.tiles import aligned, element_shape, valid


def plain_cut(hw, s: Schedule) -> Schedule:
    """``s`` with each spatial dimension of the array's tile cut down to a multiple of the array
    side it maps to (ws: Kt rows, Na columns; os: Ma rows, Na columns; is: Kt rows, Ma columns)
    where it spans one, the block's side with it where the block's side is the tile's."""
    R, C, df = hw.rows, hw.cols, hw.dataflow
    Ma = s.Mt if s.Ma is None else s.Ma
    Na = s.Nt if s.Na is None else s.Na

    def cut(x, side):
        return np.where(x >= side, np.floor(x / side) * side, x)

    Ma = np.where(df == OS, cut(Ma, R), np.where(df == IS, cut(Ma, C), Ma))
    Kt = np.where(df == OS, s.Kt, cut(s.Kt, R))
    Na = np.where(df == IS, Na, cut(Na, C))
    with_m = (s.family == OUTPUTS) | (s.family == WEIGHTS)
    with_n = (s.family == OUTPUTS) | (s.family == ACTIVATIONS)
    return dataclasses.replace(s, Mt=np.where(with_m, Ma, s.Mt), Nt=np.where(with_n, Na, s.Nt), Kt=Kt, Ma=Ma, Na=Na)


def stacked_candidates(p, hw) -> Schedule:
    shape = element_shape(p, hw)
    with np.errstate(divide="ignore", invalid="ignore"):
        blocks = mapper_candidates.candidates(p, hw)
    return passes._stack(blocks, shape, [passes._lead(b, len(shape)) for b in blocks])


def counts(p, hw, s):
    with np.errstate(divide="ignore", invalid="ignore"):
        return schedule_counts(p, hw, dataclasses.replace(s, family=np.maximum(s.family, 0)))


@settings(max_examples=40, deadline=None)
@given(M=st.integers(1, 300), N=st.integers(1, 300), K=st.integers(1, 300), R=st.integers(1, 12),
       C=st.integers(1, 12), df=st.sampled_from(["os", "ws", "is"]), bypass=st.booleans(),
       kib=st.sampled_from([1, 4, 64]))
def test_one_fold_twin_is_the_least_of_its_trips_and_never_slower(M, N, K, R, C, df, bypass, kib):
    """Against the plain cut, on every candidate the mapper lists: the same DRAM bytes, folds,
    SRAM reads and stall-free compute, no more busy cycles (fill/drain and reloads of fewer rows
    or columns) and in the space wherever the plain cut is; and the twin is in the space wherever
    its candidate is (before, a weights-family twin cut its ``Ma`` without its ``Mt`` sliver and
    left the space: :func:`~asicsim._src.hw.tiles.valid` wants them equal)."""
    d = small_design(R, C, df, [kib * 1024] * 3)
    d = _bypassing(d) if bypass else d
    p, hw, _ = model(sim.Gemm(M, N, K), d)
    s = stacked_candidates(p, hw)
    twin, ref = aligned(p, hw, s), plain_cut(hw, s)
    ok_twin, ok_ref, ok_base = valid(p, hw, twin), valid(p, hw, ref), valid(p, hw, s)
    assert np.all(ok_twin >= ok_ref)
    assert np.all(ok_twin >= ok_base)
    a, b = counts(p, hw, twin), counts(p, hw, ref)
    both = ok_twin & ok_ref
    for field in ("dram_bytes", "folds", "cycles_compute", "sram_ifmap_reads", "sram_filter_reads", "sram_psum_reads",
                  "tiles_m", "tiles_n", "tiles_k"):
        x, y = np.broadcast_to(getattr(a, field), both.shape), np.broadcast_to(getattr(b, field), both.shape)
        assert np.array_equal(x[both], y[both]), field
    busy_a = np.broadcast_to(a.busy_cycles, both.shape)[both]
    busy_b = np.broadcast_to(b.busy_cycles, both.shape)[both]
    assert np.all(busy_a <= busy_b)


def test_a_larger_array_runs_the_smaller_arrays_tile():
    """ResNet-18's Conv4_s (1x1, stride 2: M 196, N 256, K 128) on edge_int8_32x32 as os with 8
    columns, operands bypassing unused rows: 40 rows fold M in 5 tiles of 40 rows; 48 rows took
    5 tiles of 48 (fill/drain 2 x 48 + 8 - 2 = 102 cycles against 86), 20,682.75 cycles against
    20,666.75. The one-fold twin of 48 is 40 rows, the least with 5 trips: equal now."""
    d = sim.hw.load_design("edge_int8_32x32")
    d = _bypassing(d)
    op = sim.Conv(28, 28, 128, 256, 1, 1, stride=2)
    cycles = [sim.cost(op, dataclasses.replace(d, array=dataclasses.replace(d.array, rows=r, cols=8, dataflow="os")),
                       objective="latency").cycles for r in (40, 48)]
    assert cycles == [20666.75, 20666.75]
