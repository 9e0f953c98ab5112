"""The GPU cost model: kernel times, bytes per memory level and power-capped clocks.

Every operation becomes kernels (:mod:`asicsim._src.hw.gpu_kernels`); a kernel's time at full clock is

    t_full = launches x launch_us + steps x rnn_step_us + calls x rnn_call_us + conv_calls x conv_call_us
             + seq x smax(t_compute, t_memory)

* ``t_compute``: the library picks the best of a tile menu (``TILES``, down to GEMV-like 8 x 256
  tiles) and split-K factors (``SPLITS``) where the library splits K (not implicit-GEMM forward
  and data-gradient convs, not the paths in :data:`asicsim._src.hw.gpu_paths.NO_SPLIT_K`).
  ``ceil(M/tm) ceil(N/tn) batch split`` CTAs spread over the SMs; the busiest SM runs
  ``n = ceil(CTAs / sm_count)`` of them, each doing ``2 tm tn (ceil(K/split) + cta_k_overhead)`` ops
  (K padded to the path's MMA step: tensor cores 8, DP4A 4) at the per-SM rate
  ``peak x eff / sm_count`` (``eff_<path>`` where the path has its own, e.g. int8 tensor cores,
  else ``eff_<class>``). An SM holds ``r = min(8, 128^2 / (tm tn))`` CTAs at once and
  reaches that rate only when full: with ``min(n, r)`` resident it runs at
  ``(min(n, r) / r)^occ_exp`` of it (``occ_exp = 1``: a lone small tile leaves the SM as idle as
  one full wave would). The rate is slowed by ``1 + tile_cost (128/tm + 128/tn - 2)`` for small
  tiles (less reuse per loaded operand), by a conv pass factor (``conv_fwd``,
  ``conv_bwd_data``, ``conv_bwd_filter``; on a tensor-core path ``conv_<pass>_tensor`` where the
  generation has its own) for implicit-GEMM convolutions and by ``rnn_bwd_data``
  for an RNN's recurrent data-gradient GEMMs.
* **Alignment** (:data:`asicsim._src.hw.gpu.PATH_ALIGN`): a tensor-core kernel needs the dimensions the
  library checks (:func:`asicsim._src.hw.gpu_kernels.op_kernels`: a GEMM's leading dimensions) to be
  multiples of 16 bytes (fp16/bf16: 8 elements, fp8 and int8: 16, tf32: 4); otherwise the library
  falls back to a kernel whose loads are only as wide as the dimensions' byte alignment ``v``
  (the largest power of two dividing them, in bytes): ``unaligned_eff x (v / 16)^unaligned_exp``
  of the aligned rate (the H100 set: fp16 GEMMs with M = 35, 2-byte aligned, ran at 0.13-0.16 of
  the rate, with M = 5124, 8-byte aligned, at about 0.3; H200 int8 at 8 mod 16 at about 0.4).
* **Persistent RNN** (:mod:`asicsim._src.hw.gpu_rnn`): where PyTorch picks cuDNN's persistent kernel,
  an RNN's recurrent steps run in one launch with the weights on chip: ``persist_step_us`` per step
  (a grid barrier) instead of ``rnn_step_us``, the steps' math at ``persist_eff`` of the rate of
  the SMs holding the weights, no weight bytes per step.
* **Memory levels.** ``l2_bytes``: what the SMs read from and write to L2: A once per column of
  tiles, B once per row of tiles, C once, split-K partials twice. ``dram_bytes`` (HBM/GDDR) follow
  the residency rule the systolic designs use (:mod:`asicsim._src.hw.bounds`): between operations nothing
  stays on chip, so an operation reads its inputs from DRAM and writes its outputs there once (the
  compulsory bytes); a working set over ``l2_fraction`` of L2 adds the re-reads of an L2-blocked
  schedule, ``2 M N K e / sqrt(S / e)`` bytes for ``S`` bytes of L2 and ``e`` bytes per element
  (the leading term of Smith et al.'s tight bound, which their blocked algorithm attains), never
  above ``l2_bytes``; a convolution's windows re-read its input from L2, so it moves its
  compulsory bytes (no proven conv bound has the constants, :mod:`asicsim._src.hw.bounds`). A grid of
  few CTAs streams DRAM at most at what its resident CTAs keep in flight (Little's law:
  :mod:`asicsim._src.hw.gpu_cta`). ``operands="warm"`` prices the calibration protocol instead (DeepBench and
  the H100 set time back-to-back calls on the same operands): a working set that fits stays in L2,
  moves no DRAM bytes and streams at the L2 rate, ``l2_bytes_per_sm_clock`` x SMs x clock (a
  property of the die: the H200's L2 is the H100's, whatever its HBM). DRAM streams at the
  design's published copy rate (``copy_bandwidth_gbps``) where it has one, else at ``bw_eff`` x
  the datasheet bandwidth.
* ``smax(a, b) = (a^p + b^p)^(1/p)`` with ``p = smax_p``: compute and memory overlap imperfectly;
  a tensor-core path's GEMV-like tiles (a side <= 16) stream their operands under the math, with
  their own, max-like ``p = smax_p_stream``. A matrix-vector product (M or N = 1) may instead run
  the library's GEMV kernel on any path (cuBLAS's ``gemv``: no tile, the matrix streamed once, its
  math unpadded, overlapped with ``smax_p_stream``), whichever is faster; so may an implicit-GEMM
  conv pass with a side of 1 (the data gradient of a C = 1 layer) (the H100 and H200 fp32
  GEMVs stream 512 x 500 000 at 2.9 and 4.2 TB/s, their DRAM rates, where 8-wide SIMT tiles
  priced them 1.5-2.8x slower).
* **Power cap**, per kernel: its dynamic energy ``E_dyn`` (ops x energy per op of the path, bytes x
  energy per byte of each level) over ``t_full`` is its power at full clock; when that plus static
  power (``static_fraction x TDP``) exceeds the TDP the clock drops until it fits:
  ``t = max(t_full, E_dyn / (TDP - static))``, energy per op taken constant in the clock (a linear
  DVFS rule), so energy = ``E_dyn + static x t`` and power = energy / t <= TDP under sustained load.
  A burst from idle (``sustained=False``) runs at full clock until the power averaged over
  ``power_window_s`` reaches the TDP (:mod:`asicsim._src.hw.gpu_power`).
* Energy per op: ``e_simt_pj_12nm`` x Stillmaker & Baas' node factor (12 nm -> ``process_nm``,
  shared with the systolic model) x the class ratio (``e_tensor_ratio``, ``e_dp4a_ratio``); a
  tensor-core path is further scaled by ``fp16 tensor peak / path peak`` (the same tensor cores at
  the same power: an fp8 op costs half an fp16 op, a tf32 op twice).
* Sparse GEMM (weights stored ``csr``/``bitmask``): a cuSPARSE-like kernel at ``sparse_eff`` of the
  fp32 peak on nonzero MACs and ``sparse_bw_eff`` of the bandwidth on the CSR bytes.

**Generations.** Launch floor, RNN and conv call overheads, per-step RNN overhead, CTA prologue,
tensor-core efficiency and the unaligned fallback differ by GPU generation (hardware and the
library of its day), so they are constants of the generation (``name@Hopper`` in the fit file),
fitted on that generation's measurements. A generation without its own value takes the nearest
generation's that has one (the earlier one on a tie) and the result says so in ``notes``.

Constants: ``asicsim/_src/hw/data/gpu_fit.toml`` says which were fitted (least squares on
``ln(predicted / measured)`` over DeepBench's sheets and the H100 set,
``benchmarks/gpu_calibration.py``) and which are assumptions. A design may override ``eff_simt`` /
``eff_dp4a`` / ``eff_tensor``.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from asicsim._src.hw.gpu import PATH_ALIGN, GpuDesign, PrecisionPath
from asicsim._src.hw.gpu_cta import grid_dram_rate, per_cta_rate
from asicsim._src.hw.gpu_fit import FIT_FILE as FIT_FILE  # re-exported: the model's public names
from asicsim._src.hw.gpu_fit import GENERATION_KEYS as GENERATION_KEYS
from asicsim._src.hw.gpu_fit import GENERATIONS as GENERATIONS
from asicsim._src.hw.gpu_fit import fit_table as fit_table
from asicsim._src.hw.gpu_fit import generation_constants as generation_constants
from asicsim._src.hw.gpu_fit import load_fit as load_fit
from asicsim._src.hw.gpu_kernels import PASS_FACTORS, Kernels, stored_bytes
from asicsim._src.hw.gpu_paths import NO_SPLIT_K
from asicsim._src.hw.gpu_power import CLASS_ENERGY_KEYS as CLASS_ENERGY_KEYS  # re-exported
from asicsim._src.hw.gpu_power import capped_time
from asicsim._src.hw.gpu_power import energy_per_op_pj as energy_per_op_pj
from asicsim._src.hw.gpu_power import level_energies_pj_per_byte as level_energies_pj_per_byte
from asicsim._src.hw.gpu_rnn import persistent_steps

#: (tm, tn) CTA tiles the library may choose: cuBLAS/CUTLASS-style SGEMM/HGEMM tiles, and narrow
#: GEMV-like ones for batch-1..16 shapes (cuBLAS dispatches those to gemv/"skinny" kernels).
TILES = np.array([(128, 128), (128, 64), (64, 128), (64, 64), (128, 32), (32, 128), (64, 32),
                  (32, 64), (32, 32), (8, 256), (256, 8), (16, 128), (128, 16)], dtype=np.float64)
SPLITS = np.array([1, 2, 4, 8, 16, 32], dtype=np.float64)  # split-K factors
MAX_CTAS_PER_SM = 8


def _smax(a, b, p):
    m = np.maximum(np.maximum(a, b), 1e-30)
    return m * ((a / m) ** p + (b / m) ** p) ** (1.0 / p)


def efficiency(design: GpuDesign, path: PrecisionPath, c: Mapping) -> float:
    """Achievable fraction of the path's datasheet peak: the design's own override first, then the
    path's own constant (``eff_<path>``, e.g. ``eff_int8_tensor``: a library whose kernels for one
    path reach less of its peak than the class's), else the class's (``eff_<class>``)."""
    own = getattr(design, f"eff_{path.eff_class}")
    if own is not None:
        return own
    return c.get(f"eff_{path.name}", c[f"eff_{path.eff_class}"])


def dram_rate(design: GpuDesign, c: Mapping) -> float:
    """Bytes/s DRAM streams at: the published copy rate, else ``bw_eff`` x the datasheet."""
    if design.copy_bandwidth_gbps is not None:
        return design.copy_bandwidth_gbps * 1e9
    return design.bandwidth_bytes_per_s * c["bw_eff"]


def unaligned_rate(k: Kernels, c: Mapping) -> np.ndarray:
    """The unaligned fallback's rate, a fraction of the aligned one: ``unaligned_eff`` x (the bytes
    each load can take (the largest power of two dividing the checked dimensions' byte size, at
    most 16) / 16) ^ ``unaligned_exp`` (module docstring)."""
    g = np.maximum(k.align, 1).astype(np.int64) * max(int(k.a_bytes), 1)
    return c["unaligned_eff"] * (np.minimum(g & -g, 16) / 16.0) ** c["unaligned_exp"]


def l2_rate(design: GpuDesign, c: Mapping) -> float:
    """Bytes/s the SMs stream from L2: ``l2_bytes_per_sm_clock`` x SMs x clock, a property of the
    die (the H200's L2 is the H100's), not scaled from the DRAM datasheet."""
    return c["l2_bytes_per_sm_clock"] * design.sm_count * design.clock_hz


def kernel_times(k: Kernels, design: GpuDesign, path: PrecisionPath, c: Mapping, *,
                 operands: str = "cold", sustained=True) -> dict[str, np.ndarray]:
    """Per kernel: time and its parts (seconds), DRAM and L2 bytes, ops, dynamic energy (pJ).

    ``c``: flat constants of the design's generation (:func:`generation_constants`);
    ``operands``: ``"cold"`` (the residency rule) or ``"warm"`` (repeated calls, operands in L2);
    ``sustained``: the power cap of a load much longer than the controller's window (True) or of a
    burst from idle (False), one bool or one per kernel (:mod:`asicsim._src.hw.gpu_power`).
    """
    if operands not in ("cold", "warm"):
        raise ValueError(f"operands={operands!r}; allowed: 'cold' or 'warm'")
    sus = np.asarray(sustained)
    if sus.dtype != bool or sus.ndim > 1 or (sus.ndim == 1 and len(sus) != len(k.M)):
        raise ValueError(f"sustained={sustained!r}; allowed: True, False or one bool per kernel")
    eff = efficiency(design, path, c)
    sm = design.sm_count
    align = PATH_ALIGN.get(path.name, 1)
    aligned = (k.align % align == 0) | (align == 1)
    rate = path.peak_ops_per_s * eff * np.where(aligned, 1.0, unaligned_rate(k, c))
    bw = dram_rate(design, c)
    p = c["smax_p"]
    # a pass's factor; tensor-core convolutions have their own where the generation has them
    tensor = path.eff_class == "tensor"
    factors = np.array([1.0] + [c.get(f"{f}_tensor", c[f]) if tensor and f.startswith("conv")
                                else c[f] for f in PASS_FACTORS[1:]])
    step = path.k_align
    M, N, K, B = k.M, k.N, k.K, k.batch
    gemm = (M > 0) & ~k.sparse
    ops_useful = 2.0 * M * N * K * B  # dense count per repetition
    # -- dense GEMM: tile menu x split-K, the library takes the fastest
    tm = TILES[:, 0][None, :, None]
    tn = TILES[:, 1][None, :, None]
    s = SPLITS[None, None, :]
    Mx, Nx, Kx, Bx = (v[:, None, None] for v in (M, N, K, B))
    kpad = np.ceil(np.maximum(Kx, 1) / step) * step
    ks = np.ceil(kpad / s / step) * step
    ctas = np.minimum(np.maximum(128 * 128 / (tm * tn), 1), MAX_CTAS_PER_SM)
    tiles_m, tiles_n = np.ceil(np.maximum(Mx, 1) / tm), np.ceil(np.maximum(Nx, 1) / tn)
    per_sm = np.ceil(tiles_m * tiles_n * Bx * s / sm)  # CTAs on the busiest SM
    occupancy = (np.minimum(per_sm, ctas) / ctas) ** c["occ_exp"]
    tile_eff = 1.0 / (1.0 + c["tile_cost"] * (128 / tm + 128 / tn - 2))
    factor = (np.where(k.a_t, c["layout_a_t"], 1.0) * np.where(k.b_t, c["layout_b_t"], 1.0)
              * factors[k.pass_idx.astype(int)])[:, None, None]
    rate_sm = (rate / sm)[:, None, None]
    t_comp = (per_sm * 2 * tm * tn * (ks + c["cta_k_overhead"]) / (rate_sm * tile_eff * occupancy)
              * factor)
    ideal_bytes = (stored_bytes(k) * B)[:, None, None]
    split_bytes = np.where(s > 1, 2 * s * Mx * Nx * Bx * 4.0, 0.0)
    working = ideal_bytes + split_bytes
    l2_cap = c["l2_fraction"] * design.l2_bytes
    fits = working <= l2_cap
    a_el = np.where(k.a_elems >= 0, k.a_elems, M * K)[:, None, None] * k.a_bytes
    b_el = np.where(k.b_elems >= 0, k.b_elems, K * N)[:, None, None] * k.b_bytes
    c_el = np.where(k.c_elems >= 0, k.c_elems, M * N)[:, None, None] * k.c_bytes
    l2_traffic = (a_el * tiles_n + b_el * tiles_m + c_el) * Bx + split_bytes
    e_b = max(k.a_bytes, k.b_bytes)
    blocked = 2 * Mx * Nx * Kx * Bx * e_b / np.sqrt(l2_cap / e_b) + c_el * Bx
    implicit = (k.a_elems >= 0)[:, None, None]  # a conv: no pebble-style re-read estimate (bounds.py)
    dram_big = np.where(implicit, ideal_bytes, np.maximum(ideal_bytes, np.minimum(l2_traffic, blocked)))
    # back-to-back calls, and an RNN's steps (weights and state stay in L2 between steps when they
    # fit, as the systolic lowering keeps step activations on chip), find a fitting set in L2
    warm = np.full(len(M), operands == "warm") | (k.seq > 1)
    warm3 = warm[:, None, None]
    dram = np.where(fits, np.where(warm3, 0.0, ideal_bytes), dram_big)
    # DRAM streams at most at what the resident CTAs keep in flight (Little's law, gpu_cta)
    resident = np.minimum(tiles_m * tiles_n * Bx * s, sm * ctas)
    cta_bw = per_cta_rate(tm, tn, k.a_bytes, k.b_bytes, path.eff_class, path.name, design.architecture,
                          design.clock_hz, c)
    t_mem = np.where(warm3 & fits, working / l2_rate(design, c), dram / grid_dram_rate(bw, resident, cta_bw))
    # tensor-core GEMV-like kernels (a tile side <= 16) stream their operands under the math: a
    # max-like overlap (smax_p_stream); SIMT and DP4A kernels keep the fitted smax_p
    streams = (path.eff_class == "tensor") & (np.minimum(tm, tn) <= 16)
    t_tot = _smax(t_comp, t_mem, np.where(streams, c["smax_p_stream"], p))
    max_split = k.max_split if path.name not in NO_SPLIT_K else np.ones(len(M))
    t_tot = np.where(s <= max_split[:, None, None], t_tot, np.inf)
    flat = t_tot.reshape(len(M), -1)
    best = np.argmin(flat, axis=1)

    def pick(a):
        return np.broadcast_to(a, t_tot.shape).reshape(len(M), -1)[np.arange(len(M)), best]

    busy_sms = np.minimum(tiles_m * tiles_n * Bx * s / sm, 1.0)  # share of the SMs with a CTA
    d_comp, d_mem, d_tot, d_dram, d_l2, d_fits, d_busy = (
        pick(a) for a in (t_comp, t_mem, t_tot, dram, l2_traffic, fits, busy_sms))
    # a matrix-vector product (M or N = 1: a plain GEMM, or an implicit-GEMM conv pass such as the
    # data gradient of a C = 1 layer): the library's GEMV-like kernel streams the operands once, its
    # math unpadded, under a max-like overlap (smax_p_stream) on every path
    ib, fit1 = ideal_bytes[:, 0, 0], fits[:, 0, 0]
    v_comp = ops_useful / rate
    v_mem = np.where(warm & fit1, ib / l2_rate(design, c), ib / bw)
    v_tot = _smax(v_comp, v_mem, c["smax_p_stream"])
    plain = (k.pass_idx == 0) & (k.a_elems < 0)
    gv = gemm & (np.minimum(M, N) == 1) & (k.seq == 1) & (plain | implicit[:, 0, 0]) & (v_tot < d_tot)
    d_comp, d_mem, d_tot, d_dram, d_l2, d_fits, d_busy = (np.where(gv, a, b) for a, b in (
        (v_comp, d_comp), (v_mem, d_mem), (v_tot, d_tot), (np.where(fit1 & warm, 0.0, ib), d_dram),
        (ib, d_l2), (fit1, d_fits), (1.0, d_busy)))
    # a persistent RNN kernel: weights on chip across the steps (asicsim._src.hw.gpu_rnn)
    pk = k.persistent & gemm
    if pk.any():
        p_step, p_busy = persistent_steps(M, N, K, b_el[:, 0, 0], sm, rate / sm, c)
        d_comp, d_tot, d_busy = (np.where(pk, a, b) for a, b in
                                 ((p_step, d_comp), (p_step, d_tot), (p_busy, d_busy)))
        d_mem, d_dram = np.where(pk, 0.0, d_mem), np.where(pk, 0.0, d_dram)
        d_l2 = np.where(pk, (a_el[:, 0, 0] + c_el[:, 0, 0]) * B, d_l2)  # the state in and out
        d_fits = d_fits | pk
    # cold operands: an RNN's weights come from DRAM once before its steps (its state is on chip)
    first = np.where((operands == "cold") & (k.seq > 1) & d_fits, b_el[:, 0, 0] * B, 0.0)
    # -- sparse GEMM (cuSPARSE-like CSR): nonzero MACs at sparse_eff of fp32, CSR bytes streamed
    nnz = k.density * K * N * B
    sp_ops = 2.0 * nnz * M
    sp_comp = sp_ops / (design.fp32_tflops * 1e12 * c["sparse_eff"])
    sp_bytes = nnz * (k.b_bytes + 4) + (M * K * k.a_bytes + M * N * k.c_bytes) * B
    sp_mem = sp_bytes / (design.bandwidth_bytes_per_s * c["sparse_bw_eff"])
    sp_tot = _smax(sp_comp, sp_mem, p)
    # -- elementwise streams
    st_bytes = k.stream_bytes * k.a_bytes
    st_mem = st_bytes / bw
    is_stream = M <= 0
    t_compute = np.where(gemm, d_comp, np.where(k.sparse, sp_comp, 0.0))
    t_memory = np.where(gemm, d_mem, np.where(k.sparse, sp_mem, st_mem))
    t_body = np.where(gemm, d_tot, np.where(k.sparse, sp_tot, st_mem))
    ops = np.where(k.sparse, sp_ops, ops_useful)
    ideal = np.where(is_stream, 0.0, ops / (path.peak_ops_per_s * eff))  # alignment losses are not work
    ideal = np.where(t_compute > 0, np.minimum(ideal, t_compute), ideal)  # pass factors may be < 1
    step_us = np.where(k.persistent, c["persist_step_us"], c["rnn_step_us"])
    overhead = k.launches * c["launch_us"] * 1e-6 + (
        k.steps * step_us + k.calls * c["rnn_call_us"] + k.conv_calls * c["conv_call_us"]) * 1e-6
    t_full = overhead + k.seq * t_body + first / bw
    dram_b = k.seq * np.where(gemm, d_dram, np.where(k.sparse, sp_bytes, st_bytes)) + first
    compulsory = np.where(gemm & (k.seq > 1), b_el[:, 0, 0] * B, k.seq * np.where(
        gemm, ideal_bytes[:, 0, 0], np.where(k.sparse, sp_bytes, st_bytes)))
    if operands == "warm":
        compulsory = np.zeros(len(M))  # the protocol's operands are already on chip
    l2_b = k.seq * np.where(gemm, d_l2, np.where(k.sparse, sp_bytes, st_bytes))
    per_byte = level_energies_pj_per_byte(design)
    e_ops = ops * k.seq * energy_per_op_pj(design, path, c)
    e_dram, e_l2 = dram_b * per_byte["dram"][0], l2_b * per_byte["l2"][0]
    total = capped_time(t_full, (e_ops + e_dram + e_l2) * 1e-12, design.tdp_w,
                        design.tdp_w * c["static_fraction"], c["power_window_s"], sustained)
    return {"time": total, "full_clock_time": t_full, "compute": k.seq * ideal,
            "quantized": k.seq * t_compute, "memory": k.seq * t_memory + first / bw, "overhead": overhead,
            "body": k.seq * t_body + first / bw, "dram_bytes": dram_b, "l2_bytes": l2_b,
            "compulsory_bytes": compulsory,
            "ops": ops * k.seq, "dense_ops": ops_useful * k.seq, "aligned": aligned.astype(float),
            "e_compute": e_ops, "e_dram": e_dram, "e_l2": e_l2,
            # SM-seconds busy over the body (the launch floor keeps none busy; streams and sparse
            # kernels are taken to spread over every SM)
            "sm_busy_time": k.seq * t_body * np.where(gemm, d_busy, 1.0) * (total / np.maximum(t_full, 1e-300))}
