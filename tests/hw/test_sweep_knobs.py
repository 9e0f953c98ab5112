"""Vectorised front ends reject bad design knobs before any work, naming the field, the value and
what is allowed (issue 31: ``rows=np.array([0, 32])`` gave "no schedule fits the buffers" after
divide-by-zero warnings; negative rows gave negative cycles)."""

from __future__ import annotations

import dataclasses
import math
import re

import numpy as np
import pytest

import asicsim as sim
from asicsim._src.hw.design_checks import DesignError
from asicsim._src.hw.scalesim_compat import scalesim_arrays
from asicsim._src.hw.sweep import gemm_sweep

SIDE = r"allowed: an integer in \[1, 65536\] PEs"
SCALE = r"allowed: a finite number in \(0, "
OPS = [sim.Gemm(64, 64, 64)]


@pytest.mark.parametrize("knobs, fragment", [
    ({"rows": np.array([0, 32])}, rf"gemm_sweep: rows = 0 \(element 0\); {SIDE}"),
    ({"rows": -4}, rf"gemm_sweep: rows = -4; {SIDE}"),
    ({"rows": math.nan}, rf"gemm_sweep: rows = nan; {SIDE}"),
    ({"rows": 2.5}, rf"gemm_sweep: rows = 2.5; {SIDE}"),
    ({"rows": True}, rf"gemm_sweep: rows = True; {SIDE}"),
    ({"rows": "32"}, rf"gemm_sweep: rows = '32'; {SIDE}"),
    ({"rows": 10**9}, rf"gemm_sweep: rows = 1000000000; {SIDE}"),
    ({"cols": np.array([[32], [0]])}, rf"gemm_sweep: cols = 0 \(element 1, 0\); {SIDE}"),
    ({"cols": np.array([16.0, math.inf])}, rf"gemm_sweep: cols = inf \(element 1\); {SIDE}"),
    ({"buffer_scale": 0}, rf"gemm_sweep: buffer_scale = 0; {SCALE}"),
    ({"buffer_scale": -1.0}, rf"gemm_sweep: buffer_scale = -1.0; {SCALE}"),
    ({"buffer_scale": math.nan}, rf"gemm_sweep: buffer_scale = nan; {SCALE}"),
    ({"buffer_scale": np.array([1.0, math.inf])}, rf"gemm_sweep: buffer_scale = inf \(element 1\); {SCALE}"),
    ({"buffer_scale": 1e-9}, r"buffer_scale x buffers.activations.capacity_kib \(256 KiB\) = 2.56e-07; "
                             r"allowed: a finite number in \[0.0009765625"),
    ({"dataflow": "rs"}, r"dataflow must be one of \('os', 'ws', 'is'\); got \['rs'\]"),
])
def test_gemm_sweep_rejects_bad_knobs(knobs, fragment):
    with np.errstate(all="raise"):  # the check comes before any arithmetic
        with pytest.raises(ValueError, match=fragment):
            gemm_sweep(OPS, "edge_int8_32x32", **knobs)


@pytest.mark.parametrize("knobs, fragment", [
    ({"rows": 0}, rf"scalesim_arrays: rows = 0; {SIDE}"),
    ({"cols": np.array([8, -1])}, rf"scalesim_arrays: cols = -1 \(element 1\); {SIDE}"),
    ({"rows": math.nan}, rf"scalesim_arrays: rows = nan; {SIDE}"),
    ({"ifmap_sram_kib": math.nan}, r"scalesim_arrays: ifmap_sram_kib = nan; allowed: an integer in \[1, "),
    ({"filter_sram_kib": 0.5}, r"scalesim_arrays: filter_sram_kib = 0.5; allowed: an integer in \[1, "),
    ({"bandwidth_words": 0}, r"scalesim_arrays: bandwidth_words = 0; allowed: an integer in \[1, 1000000\]"),
    ({"bandwidth_words": -10}, r"scalesim_arrays: bandwidth_words = -10; allowed"),
    ({"ifmap_bank_bandwidth_words": math.inf}, r"ifmap_bank_bandwidth_words = inf; allowed"),
    ({"bandwidth_mode": "AUTO"}, r"bandwidth_mode = 'AUTO'; allowed: 'CALC' or 'USER'"),
])
def test_scalesim_arrays_rejects_bad_knobs(knobs, fragment):
    args = {"rows": 8, "cols": 8, "dataflow": "os"} | knobs
    with np.errstate(all="raise"):
        with pytest.raises(ValueError, match=fragment):
            scalesim_arrays({"M": [4], "N": [4], "K": [4]}, **args)


@pytest.mark.parametrize("part, field, value", [
    ("array", "rows", 0), ("array", "cols", -3), ("dram", "bandwidth_gbps", 0.0),
    ("dram", "bandwidth_gbps", -1.0), ("dram", "bandwidth_gbps", math.nan)])
def test_cost_family_members_are_checked_when_built(part, field, value):
    """cost_family takes designs, which validate at construction: a bad member never reaches it."""
    d = sim.load_design("edge_int8_32x32")
    with pytest.raises(DesignError, match=re.escape(f"{field} = {value!r}; allowed")):
        dataclasses.replace(d, **{part: dataclasses.replace(getattr(d, part), **{field: value})})


def test_good_knobs_still_price():
    r = gemm_sweep(OPS, "edge_int8_32x32", rows=np.array([8.0, 32]), buffer_scale=np.array([[0.5], [2]]))
    assert r.cycles.shape == (2, 2, 1) and np.isfinite(r.cycles).all()
