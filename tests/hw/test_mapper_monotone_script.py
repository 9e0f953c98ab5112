"""benchmarks/mapper_monotone.py's ``--grid``: larger arrays on a sweep's grid of sides, counted
against :func:`asicsim.cost` of each design point on its own."""

import dataclasses

import numpy as np
import pytest
from benchmark_scripts import load_benchmark

import asicsim as sim

BENCH = load_benchmark("mapper_monotone")


def test_worse_pairs_counts_every_pair_along_its_axis():
    """Hand-made cycles, sides 1, 2, 3 along axis 0 and two comparisons each: side 3 is slower
    than side 2 in one of them (by 1.5x) and than side 1 in none; 2 is never slower than 1."""
    cycles = np.array([[4.0, 6.0], [2.0, 4.0], [3.0, 4.0]])
    got = BENCH.worse_pairs(cycles, np.array([1, 2, 3]), 0)
    assert got == [(1, 2, 2, 0, 1.0), (1, 3, 2, 0, 1.0), (2, 3, 2, 1, 1.5)]
    # along axis 1 (sides 1, 2): every row's second column is slower
    assert BENCH.worse_pairs(cycles, np.array([1, 2]), 1) == [(1, 2, 3, 3, 2.0)]


@pytest.mark.parametrize(("small", "large", "apart"), [(2, 4, True), (3, 12, True), (4, 4, True), (3, 9, False),
                                                       (48, 56, False), (6, 12, True), (5, 15, False)])
def test_power_of_two_apart(small, large, apart):
    assert BENCH.power_of_two_apart(small, large) is apart


def test_grid_matches_each_design_point_priced_alone():
    """On a small grid (sides 2, 4, 6; two GEMMs) the counts are those of ``sim.cost`` at every
    (rows, cols, dataflow) with the design's operands bypassing unused rows and columns."""
    ops = [sim.Gemm(30, 7, 20), sim.Gemm(5, 40, 9)]
    got = BENCH.grid(step=2, top=6, ops=ops)
    d = BENCH.bypassing(sim.hw.load_design("edge_int8_32x32"))
    sides = [2, 4, 6]
    cyc = np.array([[[[sim.cost(op, dataclasses.replace(d, array=dataclasses.replace(
        d.array, rows=r, cols=c, dataflow=df)), objective="latency").cycles for op in ops]
        for df in ("os", "ws", "is")] for c in sides] for r in sides])
    one = [p for axis in (0, 1) for p in BENCH.worse_pairs(cyc, np.array(sides), axis)]
    square = BENCH.worse_pairs(cyc[[0, 1, 2], [0, 1, 2]], np.array(sides), 0)
    assert got["one side"]["comparisons"] == 2 * 3 * (3 * 3 * 2) == sum(p[2] for p in one)
    assert got["one side"]["worse"] == sum(p[3] for p in one)
    assert got["square, 2^k"]["comparisons"] == 3 * 2  # only 2 -> 4 is 2^k apart
    assert got["square, 2^k"]["worse"] + got["square, other"]["worse"] == sum(p[3] for p in square)
    np.testing.assert_allclose(got["one side"]["worst"], max(p[4] for p in one), rtol=1e-12)
