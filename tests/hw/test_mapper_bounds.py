"""The mapper's objective floors (asicsim/_src/hw/mapper_bounds.py) never exceed the measured value:
random schedules (valid or not) of random GEMMs and convs on random small designs, every
objective, measured with the model's own counts and the pipeline's energy."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_mapper_search import model as search_model

import asicsim as sim
from asicsim._src.hw import ArraySpec, BufferSpec, DramSpec, PESpec, SystolicDesign
from asicsim._src.hw.cost import resolve_formats
from asicsim._src.hw.counts import Schedule, schedule_counts
from asicsim._src.hw.mapper_bounds import floors
from asicsim._src.hw.objectives import OBJECTIVES
from asicsim._src.hw.pricing import energy_rates


def design(R, C, df, caps, kept, gbps, static_w):
    bufs = tuple(BufferSpec(name=n, holds=(n,), capacity_kib=c / 1024)
                 for n, c in zip(("ifmap", "filter", "ofmap"), caps, strict=True))
    holds = tuple(k for k in ("ifmap", "filter", "ofmap") if k not in kept)
    return SystolicDesign(name="b", technology_nm=45, clock_mhz=1000, static_power_w=static_w,
                          array=ArraySpec(rows=R, cols=C, dataflow=df),
                          pe=PESpec(a_format="int8", b_format="int8", acc_format="int32"), buffers=bufs,
                          dram=DramSpec(kind="DDR4", bandwidth_gbps=gbps, holds=holds or ("filter",)))


def model(op, d):
    """test_mapper_search's problem, hardware and energy score for ``op`` on ``d``, and the rates."""
    p, hw, score = search_model(op, d)
    return p, hw, energy_rates(d, resolve_formats(d, None)), score


dims = st.integers(1, 300)


@settings(max_examples=60, deadline=None)
@given(M=dims, N=dims, K=dims, conv=st.booleans(), R=st.integers(1, 64), C=st.integers(1, 64),
       df=st.sampled_from(("os", "ws", "is")), caps=st.tuples(*[st.integers(64, 1 << 18)] * 3),
       kept=st.sets(st.sampled_from(("ifmap", "ofmap"))), gbps=st.floats(0.5, 512),
       static_w=st.sampled_from((0.0, 0.5)), seed=st.integers(0, 2**32 - 1))
def test_floors_never_exceed_the_measured_value(M, N, K, conv, R, C, df, caps, kept, gbps, static_w, seed):
    op = sim.Conv(max(3, M % 40), max(3, N % 40), max(1, K % 64), N, 3, 3, padding=1) if conv else sim.Gemm(M, N, K)
    d = design(R, C, df, caps, kept, gbps, static_w)
    p, hw, rates, score = model(op, d)
    rng = np.random.default_rng(seed)
    n = 200
    Mp, Np, Kp = (float(np.max(x)) for x in (p.M, p.N, p.K))

    def tile(D):
        return np.floor(rng.uniform(1, D + 1, n))

    Mt, Nt, Kt = tile(Mp), tile(Np), tile(Kp)
    s = Schedule(rng.integers(0, 3, n).astype(np.float64), Mt, Nt, Kt, rng.random(n) < 0.5, np.False_,
                 np.floor(rng.uniform(1, Mt + 1)), np.floor(rng.uniform(1, Nt + 1)),
                 rng.choice([0.0, 1.0, 4.0, 5.0], n), rng.choice([1.0, 0.25, 1 / 16], n))
    c = schedule_counts(p, hw, s)
    measured = {"latency": c.busy_cycles + c.cycles_stall, "dram": c.dram_bytes, "energy": score(c)}
    measured["balanced"] = measured["latency"]  # its first pass; the second is energy's
    bound = floors(p, hw, c, rates)
    for objective in OBJECTIVES:
        got, floor = np.broadcast_arrays(measured[objective], bound[objective])
        assert np.all(floor <= got), (objective, floor[floor > got], got[floor > got])
    # and the floors bind somewhere: not a bound of zero
    assert np.any(bound["latency"] > 0)


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_floor_of_the_chosen_schedule(objective):
    """The mapper's own choice on catalogued designs: the floor is at most its value, and the
    latency floor is within the array's fill/drain and reloads of it on a large GEMM."""
    from asicsim._src.hw import load_design
    from asicsim._src.hw.mapper import best_counts

    d = load_design("edge_int8_32x32")
    p, hw, rates, score = model(sim.Gemm(1024, 1024, 1024), d)
    c = best_counts(p, hw, objective, score)
    measured = {"latency": c.busy_cycles + c.cycles_stall, "dram": c.dram_bytes, "energy": score(c)}
    measured["balanced"] = measured["latency"]
    bound = floors(p, hw, c, rates)
    assert np.all(bound[objective] <= measured[objective])
    assert np.all(bound["latency"] >= 0.5 * measured["latency"])
