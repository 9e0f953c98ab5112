"""Lower bounds on a schedule's objective in the mapper's own counts (issue 31 item 4: what a
branch and bound over the mapper's candidates could skip).

Each floor is computed from the parts of :func:`asicsim._src.hw.counts.schedule_counts` that do not
need the array's folds (the expensive part of a measure): the DRAM transfer of the schedule and a
compute floor that holds for every schedule of the GEMM. Proof, per objective, in the model's own
terms (:mod:`asicsim._src.hw.counts`):

* ``latency`` = busy + stall. busy = ``reps (compute + fill_drain)`` with ``compute = rows_f
  cols_f streamed / mac_rate`` (``ceil(compute x density)`` when the design skips zero weights),
  and ``spatial_folds(dim, tile, side) >= dim / side``, so compute ``>= M N K / (R C mac_rate)``
  (times ``density`` when skipping) for every dataflow (``rows_f cols_f streamed`` covers ``M N K``
  in each). Single-buffered, stall = transfer. Double-buffered over ``S`` steps, stall =
  ``transfer / S + max(transfer - busy, 0) (S - 1) / S``, so busy + stall ``>= transfer`` (where
  transfer > busy: ``transfer + busy / S``; else busy itself). Hence latency ``>= max(compute
  floor, transfer)``.
* ``dram``: the schedule's DRAM bytes are cheap (no folds): the floor is the value itself.
* ``energy`` (:func:`asicsim._src.hw.pricing.schedule_energy`): every term is a non-negative count
  times a non-negative rate, so energy ``>= dram_bytes x rates.dram / vr_efficiency + cycles x
  rates.static`` with cycles ``>=`` the latency floor.
* ``balanced``: its first pass is ``latency``, its second ``energy``: each floor holds for its pass.

Rounding: the counts are sums and products of non-negative floats, each rounded once; the floors
are taken :data:`ROUNDING` below the real-valued bound, far more than the few roundings between
(``tests/hw/test_mapper_bounds.py`` checks every floor against the measured value on random
candidates of random problems).
"""

from __future__ import annotations

import numpy as np

from asicsim._src.hw.counts import ZERO_CODES, ArrayHardware, GemmCounts, GemmProblem

#: relative margin for rounding (the counts take at most a few dozen roundings of 2^-53 each)
ROUNDING = 1e-9


def compute_floor(p: GemmProblem, hw: ArrayHardware) -> np.ndarray:
    """Cycles no schedule of ``p`` on ``hw`` computes in less: ``reps M N K / (R C mac_rate)``
    (times the weights' density where the design skips zero weights)."""
    work = p.reps * p.M * p.N * p.K / (np.asarray(hw.rows, dtype=np.float64) * hw.cols * hw.mac_rate)
    if hw.zero_weights == ZERO_CODES["skip"]:
        work = work * p.density
    return work


def latency_floor(p: GemmProblem, hw: ArrayHardware, transfer) -> np.ndarray:
    """A floor on busy + stall cycles of a schedule whose DRAM transfer takes ``transfer`` cycles
    (:attr:`asicsim._src.hw.counts.GemmCounts.transfer_cycles`; module docstring)."""
    return np.maximum(compute_floor(p, hw), transfer) * (1.0 - ROUNDING)


def energy_floor(p: GemmProblem, hw: ArrayHardware, c: GemmCounts, rates) -> np.ndarray:
    """A floor on :func:`asicsim._src.hw.pricing.schedule_energy` of counts ``c`` from its DRAM bytes and
    its transfer only (``rates``: :class:`asicsim._src.hw.pricing.EnergyRates`; module docstring)."""
    dram = c.dram_bytes * rates.dram / rates.power.vr_efficiency
    return (dram + latency_floor(p, hw, c.transfer_cycles) * rates.static) * (1.0 - ROUNDING)


def floors(p: GemmProblem, hw: ArrayHardware, c: GemmCounts, rates) -> dict:
    """Per objective the floor of counts ``c`` (``balanced``: its first pass's, latency)."""
    lat = latency_floor(p, hw, c.transfer_cycles)
    return {"latency": lat, "balanced": lat, "dram": c.dram_bytes, "energy": energy_floor(p, hw, c, rates)}
