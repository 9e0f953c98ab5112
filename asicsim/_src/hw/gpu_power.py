"""A GPU's energy per op and per byte (:func:`energy_per_op_pj`, :func:`level_energies_pj_per_byte`,
as :mod:`asicsim._src.hw.gpu_model` describes them), and its power cap over time: sustained load or a burst.

The board keeps its power within the TDP by lowering the clock (:func:`asicsim._src.hw.power.power_capped_time`:
``t_cap = max(t_full, E_dyn / (TDP - static))``), but it enforces the limit on power *averaged over a
window* (``power_window_s``; NVML's ``nvmlDeviceGetPowerUsage`` reports "power averaged over 1 sec
interval" on Ampere (except GA100) and newer GPUs, the figure the power-limit controller compares with
the limit). So:

* ``sustained=True`` (a training run, any load much longer than the window): the window is full of the
  load, the clock sits where power = TDP: ``t = t_cap``.
* ``sustained=False`` (a burst from idle: a benchmark's few-ms timing loop, an inference request): the
  window average starts at the static power ``P_s`` and, at full-clock power ``P_f``, reaches the TDP
  after ``t* = window x (TDP - P_s) / (P_f - P_s)``. A kernel shorter than ``t*`` runs at full clock;
  a longer one runs ``t*`` at full clock and the rest of its work at the capped rate:
  ``t = t* + t_cap (1 - t* / t_full)``.

Measured: the H100's 8192^3 fp16 and fp8 GEMMs under sustained load run at the cap (662 and 1248
TFLOP/s, ``data/measured/h100/power_cap.csv``); the H200's bf16 GEMMs in the protocol's bursts (CUDA
graph replays of >= 2 ms) reach 760-804 TFLOP/s (``data/measured/h200/README.md``), uncapped.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

import numpy as np

from asicsim._src.hw.energy import dram_energy_pj_per_bit
from asicsim._src.hw.gpu import GPU_MEM_TYPES, GpuDesign, PrecisionPath
from asicsim._src.hw.node_scaling import energy_factor
from asicsim._src.hw.power import power_capped_time
from asicsim._src.hw.sram_banks import buffer_access_energy_pj

#: Energy per op of each efficiency class relative to an fp32 SIMT FMA op (see the fit file).
CLASS_ENERGY_KEYS = {"simt": None, "dp4a": "e_dp4a_ratio", "tensor": "e_tensor_ratio"}


def energy_per_op_pj(design: GpuDesign, path: PrecisionPath, c: Mapping) -> float:
    """Dynamic energy of one op (2 per MAC) on ``path`` (:mod:`asicsim._src.hw.gpu_model`, "Energy per op"),
    times the path's own ``e_<path>_scale`` of its generation where board power was measured on that
    path (Hopper's fp32 SIMT and int8 tensor cores: ``data/measured/h100/power_path.csv``)."""
    key = CLASS_ENERGY_KEYS[path.eff_class]
    ratio = (c[key] if key else 1.0) * c.get(f"e_{path.name}_scale", 1.0)  # a path's own, where measured
    if path.eff_class == "tensor" and design.fp16_tensor_tflops:
        ratio *= design.fp16_tensor_tflops * 1e12 / path.peak_ops_per_s
    return c["e_simt_pj_12nm"] * energy_factor(design.process_nm, 12.0)[0] * ratio


@functools.cache  # a design is frozen and hashable; the SRAM model is costly to redo per call
def level_energies_pj_per_byte(design: GpuDesign) -> dict[str, tuple[float, str]]:
    """pJ per byte moved at each memory level, with the source of each figure."""
    e_dram = dram_energy_pj_per_bit(GPU_MEM_TYPES[design.mem_type])
    l2_pj, l2_src = buffer_access_energy_pj(design.l2_mib * 1024, None, 1, design.process_nm)
    return {"dram": (8 * e_dram.pj, f"{e_dram.pj:g} pJ/bit ({e_dram.source})"),
            "l2": (8 * l2_pj, f"{l2_pj:.3g} pJ/bit ({l2_src})")}


def capped_time(t_full, dynamic_j, tdp_w: float, static_w: float, window_s: float, sustained=True):
    """Seconds per kernel under the power cap (module docstring); ``sustained`` a bool or one per
    kernel."""
    t_full = np.asarray(t_full, dtype=np.float64)
    t_cap = power_capped_time(t_full, dynamic_j, tdp_w, static_w)
    dyn_w = np.asarray(dynamic_j, dtype=np.float64) / np.maximum(t_full, 1e-300)  # P_f - P_s
    budget = tdp_w - static_w
    with np.errstate(divide="ignore", invalid="ignore"):
        t_star = np.where((dyn_w > budget) & (budget > 0), window_s * budget / np.where(dyn_w > 0, dyn_w, 1.0), np.inf)
        burst = np.where(t_full <= t_star, t_full, t_star + t_cap * (1.0 - t_star / t_full))
    return np.where(np.asarray(sustained, dtype=bool), t_cap, burst)
