"""The DRAM bandwidth a grid of few CTAs can draw: Little's law per CTA.

A CTA of a pipelined GEMM kernel keeps ``stages - 1`` of its shared-memory stages in flight while it
computes on one (CUTLASS's multistage main loop issues ``kStages - 1`` stages ahead; a two-stage
kernel loads one while it computes the other), each stage ``(tm + tn) x k_tile`` operand elements.
With ``L`` seconds of DRAM latency a CTA can therefore draw at most

    per_cta = (stages - 1) x (tm x a_bytes + tn x b_bytes) x k_tile / L

bytes/s (Little's law: bytes in flight = bandwidth x latency), and a grid whose ``n`` concurrently
resident CTAs draw ``n x per_cta`` below the device's DRAM rate streams at that, not at the DRAM
rate (:func:`grid_dram_rate`). It binds on skinny, long-K grids with few CTAs (few tiles along N,
no split-K); a grid of one CTA per SM or more saturates DRAM on every device here.

Constants, none fitted (and none read off the held-out H200 rows):

* ``k_tile`` and ``stages`` (:data:`PIPELINES`): the tile depth and pipeline stages of CUTLASS's
  default GEMM configuration for the path's class and the generation's architecture
  (``include/cutlass/gemm/device/default_gemm_configuration.h``, NVIDIA/cutlass 044405c:
  SIMT ``GemmShape<128, 128, 8>``, 2 stages; SIMT int8 (DP4A) ``<128, 128, 32>``, 2 stages; Sm70
  tensor ops ``<128, 256, 32>``, 2 stages; Sm75 ``<128, 256, 32>`` (int8 ``<128, 256, 64>``),
  2 stages; Sm80 ``<128, 256, 64>`` (int8 the same in elements), 3 stages. Hopper and later take
  Sm80's (the file has no Sm90 entry; cuBLASLt's Hopper kernels are closed source). The tile's
  width ``tm x tn`` is the model's candidate tile (:data:`asicsim._src.hw.gpu_model.TILES`).
* ``dram_latency_cycles`` (the fit file, an assumption): 400 SM cycles, the global-memory latency
  that Table 3 of the article at PMC10448217 (Ultrasonics Sonochemistry 99, 106546, 2023,
  "Hardware features of different Nvidia GPU architectures") gives for V100, A100 and H100 alike,
  taken for every generation at its boost clock (no per-generation pointer-chase figure was at
  hand for Maxwell, Pascal and Turing).

Whether cuBLASLt runs an 8-row problem on an 8-row tile is not documented: Hopper's ``wgmma`` has
M = 64 per warpgroup and N from 8 to 256 in steps of 8 (PTX ISA, ``wgmma.mma_async`` shapes), and
Ampere's ``mma.sync`` int8 shape is m16n8k32, so an 8-wide side fits a tile only along the
instruction's N (the library swapping the operands); the model keeps its fastest-tile rule over
its menu, which holds both 8 x 256 and 256 x 8.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

#: (k_tile elements, stages) of CUTLASS's default GEMM configuration, per efficiency class and
#: architecture (module docstring); ``"int8"`` keys the 8-bit integer tensor-op configuration.
PIPELINES = {
    ("simt", "any"): (8, 2),
    ("dp4a", "any"): (32, 2),
    ("tensor", "Volta"): (32, 2),
    ("tensor", "Turing"): (32, 2),
    ("tensor_int8", "Turing"): (64, 2),
    ("tensor", "Ampere"): (64, 3),
    ("tensor_int8", "Ampere"): (64, 3),
}
_LATER = ("Hopper", "Blackwell")  # take Ampere's (Sm80) configuration


def pipeline(eff_class: str, path_name: str, architecture: str) -> tuple[int, int]:
    """(k_tile elements, stages) the path's kernels are taken to run with (:data:`PIPELINES`)."""
    if eff_class in ("simt", "dp4a"):
        return PIPELINES[(eff_class, "any")]
    arch = "Ampere" if architecture in _LATER else architecture
    if arch not in ("Volta", "Turing", "Ampere"):
        arch = "Volta"  # no tensor cores before Volta: an emulated tensor path takes the first ones'
    key = "tensor_int8" if path_name == "int8_tensor" and arch != "Volta" else "tensor"
    return PIPELINES[(key, arch)]


def per_cta_rate(tm, tn, a_bytes: float, b_bytes: float, eff_class: str, path_name: str, architecture: str,
                 clock_hz: float, c: Mapping) -> np.ndarray:
    """Bytes/s one CTA of a ``tm x tn`` tile can draw from DRAM (module docstring)."""
    k_tile, stages = pipeline(eff_class, path_name, architecture)
    in_flight = max(stages - 1, 1) * (np.asarray(tm) * a_bytes + np.asarray(tn) * b_bytes) * k_tile
    return in_flight / (c["dram_latency_cycles"] / clock_hz)


def grid_dram_rate(bw: float, concurrent_ctas, per_cta) -> np.ndarray:
    """The DRAM rate a grid streams at: ``min(bw, concurrent CTAs x per-CTA rate)``."""
    return np.minimum(bw, np.maximum(concurrent_ctas, 1.0) * per_cta)
