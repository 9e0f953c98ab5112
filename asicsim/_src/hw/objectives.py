"""What a schedule is chosen for: the mapper's objectives, and the default one.

:mod:`asicsim._src.hw.mapper` picks one schedule per GEMM for an objective:

* ``balanced`` (the default everywhere: :func:`asicsim.cost`, ``cost_many``, ``cost_table``,
  ``gemm_sweep``, ``cost_family``, workload pricing, sweeps, ``asicsim cost``): the least energy
  among the schedules within :data:`BALANCED_SLACK` (5 %) of the fastest schedule's cycles. It is
  never more than 5 % slower than ``latency`` and never uses more energy than ``latency``'s schedule.
* ``energy``: the least energy (DRAM, SRAM, partial-sum adds, static), whatever the time.
* ``latency``: the fewest cycles (busy and stall). A GPU's model always takes its fastest kernel
  (:data:`FASTEST`), so under ``latency`` both sides of a systolic/GPU ratio are at their fastest.
* ``dram``: the fewest DRAM bytes.

Why ``balanced`` and why 5 %: measured on the shipped designs (``asicsim cost --objective all``;
``tests/hw/golden/inputs/Resnet18.csv``, SCALE-Sim's unpadded 21 layers of ResNet-18; AlexNet from
``tests/hw/golden/inputs/alexnet.csv``; whole network, time and total board energy, with the
board's idle power priced, :mod:`asicsim._src.hw.power`):

=============================== ======================= ========================== ===================================
design, network                 ``latency``             ``balanced`` (5 %)         ``energy``
=============================== ======================= ========================== ===================================
edge_int8_32x32, ResNet-18      2,331 us, 3,080 uJ      2,347 us, 2,919 uJ (-5 %)  2,571 us (1.10x), 2,806 uJ (-9 %)
edge_int8_32x32, AlexNet        1,073 us, 1,206 uJ      1,092 us, 1,179 uJ (-2 %)  1,407 us (1.31x), 1,055 uJ (-13 %)
=============================== ======================= ========================== ===================================

(Issue 31's search; before it: ResNet-18 2,357 us and 3,316 uJ, 2,361 us and 2,957 uJ, 2,568 us and
2,839 uJ; AlexNet 1,107 us and 1,258 uJ, 1,107 us and 1,239 uJ, 1,486 us and 1,107 uJ. Every
objective's own figure improved.)

Before the board's idle power was priced (only 0.1 x peak MAC power was static), ``energy`` took
1.57x (ResNet-18), 1.68x (AlexNet) and 1.73x (ZigZag's ResNet-18 layers) the fastest time for the
last 13-26 % of energy, idling half the array (utilization 0.84 -> 0.48). Idle power now pulls
``energy`` towards fast schedules, but it still trades 31 % more time on AlexNet for 13 %: no
user would pick it as the schedule to compare with a GPU running its fastest kernel.
On ``tpu_v1``, ``dc_bf16_128x128``, ``fp8_128x128`` and ``scalesim_google`` the three objectives
choose the same schedules for these networks. The trade is lumpy: the schedules a few percent
slower than the fastest save nothing the ones within 0.2 % do not; a slack of 2 %, 5 % or 10 %
gives the same figures above, 25 % would trade 9-14 % more time for 1-17 % less energy. The
energy-delay product was the other candidate: it bounds nothing (it takes a 1.4x slower schedule
whenever it saves more than 29 % of the energy: a 128x1024x1024 GEMM on edge_int8_32x32 runs 189 us
and 281 uJ at its fastest, 266 us and 167 uJ at least energy), so a ratio under it mixes a slower
accelerator with a GPU at its fastest. ``asicsim cost --objective all`` prints every objective's
time, energy, DRAM bytes and utilization side by side.
"""

from __future__ import annotations

#: What the mapper minimises (module docstring); ``balanced`` is the default everywhere.
OBJECTIVES = ("balanced", "energy", "dram", "latency")
DEFAULT_OBJECTIVE = "balanced"
#: ``balanced``: schedules within this fraction of the fastest schedule's cycles compete on energy.
BALANCED_SLACK = 0.05
#: What a GPU result is scheduled for: its model takes the fastest kernel (no DVFS model beyond
#: its power cap), whatever objective the systolic side was mapped for.
FASTEST = "fastest"


def check_objective(objective) -> str:
    """``objective`` if the mapper knows it, else a ValueError naming the allowed ones."""
    if not isinstance(objective, str) or objective not in OBJECTIVES:
        raise ValueError(f"objective {objective!r}: allowed: {' | '.join(OBJECTIVES)} "
                         f"(default {DEFAULT_OBJECTIVE})")
    return objective
