"""The GPU cost model: a roofline with achievable peaks, tile/wave quantization, L2 residency, a
launch floor, RNN per-step overhead, power-capped clocks and energy bounded by TDP x time.

Every operation becomes one or more *kernels*; a kernel is a GEMM ``(M x K) @ (K x N)`` that one
launch runs ``batch`` times side by side (a grouped conv's groups), ``seq`` times in sequence (an
RNN's time steps), or a sparse GEMM, or a streaming elementwise kernel. A kernel's time is

    t = launches x launch_us + steps x rnn_step_us + calls x rnn_call_us + conv_calls x conv_call_us
        + seq x smax(t_compute, t_memory)

* ``t_compute``: the library picks the best of a tile menu (``TILES``, down to GEMV-like 8 x 256
  tiles) and split-K factors (``SPLITS``; implicit-GEMM forward and data-gradient convs do not split
  K). ``ceil(M/tm) ceil(N/tn) batch split`` CTAs run in waves of ``sm_count x ctas_per_sm``, each
  doing ``2 tm tn (ceil(K/split) + cta_k_overhead)`` ops (K padded to the path's alignment: tensor
  cores 8, DP4A 4; ``cta_k_overhead``: a CTA's prologue and epilogue in K-steps) at the per-SM rate
  ``peak x eff_<class> x clock_scale / sm_count``, slowed by ``1 + tile_cost (128/tm + 128/tn - 2)``
  for small tiles (less reuse per loaded operand), by ``layout_a_t`` / ``layout_b_t`` for transposed
  operands, by a conv pass factor (``conv_fwd``, ``conv_bwd_data``, ``conv_bwd_filter``) for
  implicit-GEMM convolutions (``M = N P Q``, ``N = K`` filters, ``K = C R S`` forward) and by
  ``rnn_bwd_data`` for an RNN's recurrent data-gradient GEMMs.
* ``t_memory``: the ideal bytes (each operand once, in its format; a conv's real tensors, not the
  im2col matrix) plus split-K partial sums, at
  ``bw_eff`` x the datasheet bandwidth; a working set that fits in ``l2_fraction`` of L2 is served
  from L2 at ``l2_bw_ratio`` x DRAM bandwidth, as in DeepBench's back-to-back calls (and then
  counts no DRAM bytes).
* ``smax(a, b) = (a^p + b^p)^(1/p)`` with ``p = smax_p``: compute and memory overlap imperfectly.
* ``clock_scale``: power cap. Dynamic power at boost is ``e_op x achievable ops/s`` with
  ``e_op = e_simt_pj_12nm x node factor(12 nm -> process_nm) x class ratio`` (the node factor is
  Stillmaker & Baas' energy curve, :mod:`asicsim.hw.node_scaling`, shared with the systolic
  model); static power is
  ``static_fraction x TDP``; when the sum exceeds TDP the clock (and the rate) scales by
  ``(TDP - static) / dynamic`` (energy per op taken constant in the clock, a linear DVFS rule).
* Sparse GEMM (weights stored ``csr``/``bitmask``): a cuSPARSE-like kernel at ``sparse_eff`` of the
  fp32 peak on nonzero MACs and ``sparse_bw_eff`` of the bandwidth on the CSR bytes.

Energy: ``compute = ops x e_op`` (same constants as the power cap), ``dram = bytes x pJ/bit`` of
the memory kind (:func:`asicsim.hw.energy.dram_energy_pj_per_bit`), ``l2 = L2 bytes x`` the SRAM
energy per bit of an L2-sized buffer in default banks at the node
(:func:`asicsim.hw.sram_banks.buffer_access_energy_pj`), ``static = static_fraction x TDP x t``; the sum is
capped at ``TDP x t`` by scaling the dynamic parts (a chip cannot draw more than its TDP).

Result (:class:`asicsim.hw.cost.CostResult`): ``pes`` x ``clock_hz`` is the path's datasheet peak
MAC rate, so ``utilization`` is achieved / datasheet; ``cycles_compute`` = the useful work at the
achievable (power-capped) rate, ``cycles_fill_drain`` = launch and call overheads plus tile, wave and
alignment losses, ``cycles_stall`` = memory time beyond the quantized compute; ``bound`` is
``bandwidth`` when memory time exceeds the quantized compute and the overheads, else ``occupancy``
when the time is over twice the ideal, else ``compute``. ``formats["path"]`` names the precision
path and ``sources["compute"]`` why. Times are those of back-to-back calls (DeepBench's protocol).

Constants: ``asicsim/hw/data/gpu_fit.toml`` says which were fitted (least squares on
``ln(predicted / measured)`` over DeepBench's measured sheets, ``benchmarks/gpu_calibration.py``)
and which are assumptions. A design may override ``eff_simt`` / ``eff_dp4a`` / ``eff_tensor``.
"""

from __future__ import annotations

import functools
import math
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from asicsim._files import read_text_file
from asicsim.hw.energy import dram_energy_pj_per_bit
from asicsim.hw.gpu import GPU_MEM_TYPES, GpuDesign, PrecisionPath, default_formats, precision_path
from asicsim.hw.node_scaling import energy_factor
from asicsim.hw.operations import (
    RNN_CELLS,
    AllReduce,
    Conv,
    Elementwise,
    Gemm,
    OperationError,
    Rnn,
)
from asicsim.hw.sram_banks import buffer_access_energy_pj

FIT_FILE = Path(__file__).parent / "data" / "gpu_fit.toml"
#: (tm, tn) CTA tiles the library may choose: cuBLAS/CUTLASS-style SGEMM/HGEMM tiles, and narrow
#: GEMV-like ones for batch-1..16 shapes (cuBLAS dispatches those to gemv/"skinny" kernels).
TILES = np.array([(128, 128), (128, 64), (64, 128), (64, 64), (128, 32), (32, 128), (64, 32),
                  (32, 64), (32, 32), (8, 256), (256, 8), (16, 128), (128, 16)], dtype=np.float64)
SPLITS = np.array([1, 2, 4, 8, 16, 32], dtype=np.float64)  # split-K factors
MAX_CTAS_PER_SM = 8
PASS_FACTORS = ("gemm", "conv_fwd", "conv_bwd_data", "conv_bwd_filter", "rnn_bwd_data")
#: Energy per op of each efficiency class relative to an fp32 SIMT FMA op (assumptions, see fit file).
CLASS_ENERGY_KEYS = {"simt": None, "dp4a": "e_dp4a_ratio", "tensor": "e_tensor_ratio"}


@functools.cache
def _load_fit_file(path: str) -> tuple[tuple[str, float], ...]:
    table = tomllib.loads(read_text_file(path))  # not UTF-8: a TextFileError naming the file
    return tuple((k, float(v["value"])) for k, v in table["constants"].items())


def load_fit(path: str | Path | None = None) -> dict[str, float]:
    """The model constants {name: value} from ``gpu_fit.toml`` (or another file written like it)."""
    return dict(_load_fit_file(str(path or FIT_FILE)))


def fit_table(path: str | Path | None = None) -> dict[str, dict]:
    """The whole fit file: per constant its value, how it was obtained and its bounds."""
    return tomllib.loads(read_text_file(path or FIT_FILE))["constants"]


@dataclass
class Kernels:
    """Column arrays, one element per kernel; ``owner`` is the operation index it belongs to."""

    owner: np.ndarray
    M: np.ndarray
    N: np.ndarray
    K: np.ndarray
    batch: np.ndarray  # independent GEMMs in one launch
    seq: np.ndarray  # sequential repetitions (RNN steps)
    launches: np.ndarray
    steps: np.ndarray  # RNN step overheads
    calls: np.ndarray  # RNN call overheads
    conv_calls: np.ndarray  # conv call overheads
    max_split: np.ndarray  # largest split-K the kernel may use
    a_elems: np.ndarray  # elements of A, B, C actually stored (conv); -1: M*K, K*N, M*N
    b_elems: np.ndarray
    c_elems: np.ndarray
    a_t: np.ndarray
    b_t: np.ndarray
    pass_idx: np.ndarray  # index into PASS_FACTORS
    density: np.ndarray  # nonzero fraction of the weights (sparse kernels)
    sparse: np.ndarray  # bool: sparse (CSR) kernel
    stream_bytes: np.ndarray  # elementwise kernels: bytes streamed (M = N = K = 0)
    a_bytes: float
    b_bytes: float
    c_bytes: float

    @classmethod
    def build(cls, rows: list[dict], a_bytes: float, b_bytes: float, c_bytes: float) -> Kernels:
        d = dict(owner=0, M=0, N=0, K=0, batch=1, seq=1, launches=1, steps=0, calls=0, conv_calls=0, max_split=64, a_elems=-1.0, b_elems=-1.0, c_elems=-1.0,
                 a_t=False, b_t=False,
                 pass_idx=0, density=1.0, sparse=False, stream_bytes=0.0)
        cols = {k: np.asarray([r.get(k, v) for r in rows], dtype=np.float64) for k, v in d.items()}
        cols["sparse"] = cols["sparse"].astype(bool)
        cols["owner"] = cols["owner"].astype(np.int64)
        return cls(**cols, a_bytes=a_bytes, b_bytes=b_bytes, c_bytes=c_bytes)


def op_kernels(op, i: int = 0, pass_name: str = "fwd", *, rnn_skip_input: bool = False) -> list[dict]:
    """The kernels of one operation (``pass_name`` selects a conv/RNN training pass).

    ``rnn_skip_input``: no input projection (cuDNN's ``CUDNN_SKIP_INPUT``, which DeepBench's RNN
    benchmark uses: the input is added to the gates as is), so only the recurrent GEMMs remain.
    """
    if isinstance(op, Gemm):
        sparse = op.sparse_format != "dense" and op.weight_sparsity > 0
        return [dict(owner=i, M=op.M, N=op.N, K=op.K, a_t=op.a_transposed, b_t=op.b_transposed,
                     density=1.0 - op.weight_sparsity, sparse=sparse)]
    if isinstance(op, Conv):
        g, n = op.groups, op.batch
        c, k = op.in_channels // g, op.out_channels // g
        rs, hw, pq = op.kernel_h * op.kernel_w, op.in_h * op.in_w, op.out_h * op.out_w
        x, w, y = n * hw * c, k * c * rs, n * pq * k  # the tensors' elements (per group)
        # implicit GEMM: the im2col matrix is never stored, so the bytes are the real tensors'
        shape = {"fwd": (n * pq, k, c * rs, x, w, y), "bwd_data": (n * hw, c, k * rs, y, w, x),
                 "bwd_filter": (k, c * rs, n * pq, y, x, w)}[pass_name]
        return [dict(owner=i, M=shape[0], N=shape[1], K=shape[2], a_elems=shape[3], b_elems=shape[4],
                     c_elems=shape[5], batch=g, conv_calls=1,
                     max_split=64 if pass_name == "bwd_filter" else 1,  # implicit GEMM: no split-K
                     pass_idx=PASS_FACTORS.index(f"conv_{pass_name}"))]
    if isinstance(op, Rnn):
        gh, h, b, t = RNN_CELLS[op.cell] * op.hidden, op.hidden, op.batch, op.steps
        x = op.input_size or h
        recurrent = dict(owner=i, M=b, N=gh, K=h, seq=t, launches=0, steps=t, calls=1,
                         pass_idx=PASS_FACTORS.index("rnn_bwd_data") if pass_name == "bwd_data" else 0)
        if pass_name == "bwd_weights":  # dW = dY^T X and dU = dY^T H over all steps at once
            dw = [dict(owner=i, M=gh, N=h, K=b * t)]
            return dw if rnn_skip_input else [dict(owner=i, M=gh, N=x, K=b * t), *dw]
        if rnn_skip_input:
            return [recurrent]
        return [dict(owner=i, M=b * t, N=gh, K=x), recurrent]  # input projection for all steps
    if isinstance(op, Elementwise):
        # distinct operands in, results out (a pooling window's re-reads hit the caches)
        return [dict(owner=i, stream_bytes=float(op.distinct_reads + op.elements),
                     launches=0 if op.on_chip else 1)]
    if isinstance(op, AllReduce):
        raise OperationError(f"{op.label}: all-reduce is not priced by the single-GPU model; allowed: "
                             "Gemm, Conv, Rnn or Elementwise (all-reduce belongs to the multi-chip model)")
    raise OperationError(f"operation {op!r}; allowed: Gemm, Conv, Rnn or Elementwise")


def stored_bytes(k: Kernels) -> np.ndarray:
    """Bytes of A, B and C of each kernel (one of its ``batch`` GEMMs), each operand once."""
    def el(given, default):
        return np.where(given >= 0, given, default)
    return (el(k.a_elems, k.M * k.K) * k.a_bytes + el(k.b_elems, k.K * k.N) * k.b_bytes
            + el(k.c_elems, k.M * k.N) * k.c_bytes)


def _smax(a, b, p):
    m = np.maximum(np.maximum(a, b), 1e-30)
    return m * ((a / m) ** p + (b / m) ** p) ** (1.0 / p)


def clock_scale(design: GpuDesign, path: PrecisionPath, fit: Mapping) -> float:
    """Sustained rate / boost rate under the TDP cap (1 when the chip stays under TDP)."""
    dyn = _energy_per_op_pj(design, path, fit) * 1e-12 * path.peak_ops_per_s * _eff(design, path, fit)
    static = fit["static_fraction"] * design.tdp_w
    return float(min(1.0, (design.tdp_w - static) / dyn)) if dyn > 0 else 1.0


def _eff(design: GpuDesign, path: PrecisionPath, fit: Mapping) -> float:
    own = getattr(design, f"eff_{path.eff_class}")
    return own if own is not None else fit[f"eff_{path.eff_class}"]


def _energy_per_op_pj(design: GpuDesign, path: PrecisionPath, fit: Mapping) -> float:
    key = CLASS_ENERGY_KEYS[path.eff_class]
    ratio = fit[key] if key else 1.0
    return fit["e_simt_pj_12nm"] * energy_factor(design.process_nm, 12.0)[0] * ratio


def kernel_times(k: Kernels, design: GpuDesign, path: PrecisionPath, fit: Mapping) -> dict[str, np.ndarray]:
    """Per kernel: total time and its parts (seconds), DRAM and L2 bytes, useful ops."""
    scale = clock_scale(design, path, fit)
    eff = _eff(design, path, fit)
    sm = design.sm_count
    rate_sm = path.peak_ops_per_s * eff * scale / sm  # ops/s per SM at 128x128 tiles
    bw = design.bandwidth_bytes_per_s
    p = fit["smax_p"]
    launch = fit["launch_us"] * 1e-6
    factors = np.array([1.0] + [fit[f] for f in PASS_FACTORS[1:]])
    align = path.k_align
    M, N, K, B = k.M, k.N, k.K, k.batch
    gemm = (M > 0) & ~k.sparse
    ops_useful = 2.0 * M * N * K * B  # dense count per repetition
    # -- dense GEMM: tile menu x split-K, the library takes the fastest
    tm = TILES[:, 0][None, :, None]
    tn = TILES[:, 1][None, :, None]
    s = SPLITS[None, None, :]
    Mx, Nx, Kx, Bx = (v[:, None, None] for v in (M, N, K, B))
    kpad = np.ceil(np.maximum(Kx, 1) / align) * align
    ks = np.ceil(kpad / s / align) * align
    ctas = np.minimum(np.maximum(128 * 128 / (tm * tn), 1), MAX_CTAS_PER_SM)
    tiles = np.ceil(np.maximum(Mx, 1) / tm) * np.ceil(np.maximum(Nx, 1) / tn) * Bx * s
    waves = np.ceil(tiles / (sm * ctas))
    tile_eff = 1.0 / (1.0 + fit["tile_cost"] * (128 / tm + 128 / tn - 2))
    layout = (np.where(k.a_t, fit["layout_a_t"], 1.0) * np.where(k.b_t, fit["layout_b_t"], 1.0)
              * factors[k.pass_idx.astype(int)])[:, None, None]
    t_comp = waves * ctas * 2 * tm * tn * (ks + fit["cta_k_overhead"]) / (rate_sm * tile_eff) * layout
    ideal_bytes = stored_bytes(k) * B
    split_bytes = np.where(s > 1, 2 * s * Mx * Nx * Bx * 4.0, 0.0)
    working = ideal_bytes[:, None, None] + split_bytes
    resident = working <= fit["l2_fraction"] * design.l2_bytes
    mem_bw = np.where(resident, bw * fit["l2_bw_ratio"], bw * fit["bw_eff"])
    t_mem = working / mem_bw
    t_tot = _smax(t_comp, t_mem, p)
    t_tot = np.where(s <= k.max_split[:, None, None], t_tot, np.inf)
    flat = t_tot.reshape(len(M), -1)
    best = np.argmin(flat, axis=1)
    pick = lambda a: np.broadcast_to(a, t_tot.shape).reshape(len(M), -1)[np.arange(len(M)), best]  # noqa: E731
    d_comp, d_mem, d_tot = pick(t_comp), pick(t_mem), pick(t_tot)
    d_res, d_work = pick(resident), pick(working)
    d_tile = best // len(SPLITS)
    d_split = SPLITS[best % len(SPLITS)]
    # -- sparse GEMM (cuSPARSE-like CSR): nonzero MACs at sparse_eff of fp32, CSR bytes streamed
    nnz = k.density * K * N * B
    sp_ops = 2.0 * nnz * M
    sp_comp = sp_ops / (design.fp32_tflops * 1e12 * scale * fit["sparse_eff"])
    sp_bytes = nnz * (k.b_bytes + 4) + (M * K * k.a_bytes + M * N * k.c_bytes) * B
    sp_mem = sp_bytes / (bw * fit["sparse_bw_eff"])
    sp_tot = _smax(sp_comp, sp_mem, p)
    # -- elementwise streams
    st_mem = k.stream_bytes * k.a_bytes / (bw * fit["bw_eff"])
    is_stream = M <= 0
    t_compute = np.where(gemm, d_comp, np.where(k.sparse, sp_comp, 0.0))
    t_memory = np.where(gemm, d_mem, np.where(k.sparse, sp_mem, st_mem))
    t_body = np.where(gemm, d_tot, np.where(k.sparse, sp_tot, st_mem))
    ideal = np.where(k.sparse, sp_ops, ops_useful) / (path.peak_ops_per_s * eff * scale)
    ideal = np.where(is_stream, 0.0, ideal)
    ideal = np.where(t_compute > 0, np.minimum(ideal, t_compute), ideal)  # pass factors may be < 1
    overhead = k.launches * launch + (k.steps * fit["rnn_step_us"] + k.calls * fit["rnn_call_us"]
                                      + k.conv_calls * fit["conv_call_us"]) * 1e-6
    total = overhead + k.seq * t_body
    dram = np.where(gemm, np.where(d_res, 0.0, d_work), np.where(k.sparse, sp_bytes, k.stream_bytes * k.a_bytes))
    l2 = np.where(gemm & d_res, d_work, 0.0)
    return {"time": total, "compute": k.seq * ideal,
            "quantized": k.seq * t_compute, "memory": k.seq * t_memory, "overhead": overhead,
            "body": k.seq * t_body, "dram_bytes": k.seq * dram, "l2_bytes": k.seq * l2,
            "ops": np.where(k.sparse, sp_ops, ops_useful) * k.seq, "dense_ops": ops_useful * k.seq,
            "tile": d_tile, "split": d_split, "clock_scale": np.full(len(M), scale)}


def resolve_gpu_formats(design: GpuDesign, formats=None) -> dict:
    """Format specs per role for a GPU: fp32 unless given; ``out`` defaults to ``act``."""
    from asicsim.hw.cost import parse_formats
    from asicsim.numerics import get_format

    given = parse_formats(formats)  # an ``emulate`` key is moot: every format has a precision path
    f = default_formats()
    f = {r: get_format(given[r]) if r in given else v for r, v in f.items() if r != "out"}
    f["out"] = get_format(given["out"]) if "out" in given else f["act"]
    return f


def gpu_cost_many(ops: Sequence, design: GpuDesign, formats=None, *, fit: Mapping | None = None,
                  passes: Sequence[str] | None = None, rnn_skip_input: bool = False) -> list:
    """Price operations on a GPU design; one :class:`asicsim.hw.cost.CostResult` per operation.

    ``passes`` (one per op, default ``"fwd"``) selects a conv pass (``fwd``, ``bwd_data``,
    ``bwd_filter``) or an RNN pass (``fwd``, ``bwd_data``, ``bwd_weights``) for the calibration
    against DeepBench's training sheets; ``rnn_skip_input`` drops RNN input projections (DeepBench).
    """
    from asicsim.hw.cost import CostResult

    fit = dict(load_fit() if fit is None else fit)
    fmts = resolve_gpu_formats(design, formats)
    path = precision_path(design, fmts)
    passes = list(passes) if passes is not None else ["fwd"] * len(ops)
    rows = [r for i, (op, ps) in enumerate(zip(ops, passes, strict=True)) for r in op_kernels(op, i, ps, rnn_skip_input=rnn_skip_input)]
    n = len(ops)
    if not rows:
        return []
    by = {r: fmts[r].storage_bits / 8 for r in ("act", "weight", "out")}  # memory words: tf32 is 4 bytes
    kern = Kernels.build(rows, by["act"], by["weight"], by["out"])
    t = kernel_times(kern, design, path, fit)
    sums = {key: np.bincount(kern.owner, weights=np.asarray(v, dtype=np.float64), minlength=n)
            for key, v in t.items() if key not in ("tile", "split", "clock_scale")}
    pes_exact = path.peak_ops_per_s / 2 / design.clock_hz  # peak MACs per cycle of the path
    pes = max(round(pes_exact), 1)
    clock = design.clock_hz * pes_exact / pes  # so that pes x clock_hz is the path's peak exactly
    e_op = _energy_per_op_pj(design, path, fit)
    mem = GPU_MEM_TYPES[design.mem_type]
    e_dram = dram_energy_pj_per_bit(mem)
    l2_pj, l2_src = buffer_access_energy_pj(design.l2_mib * 1024, None, 1, design.process_nm)
    static_w = fit["static_fraction"] * design.tdp_w
    scale = float(t["clock_scale"][0])
    eff = _eff(design, path, fit)
    names = {r: f.name for r, f in fmts.items()} | {"path": path.name}
    sources_base = {
        "compute": f"{e_op:.3g} pJ/op = e_simt_pj_12nm (gpu_fit.toml) x {path.eff_class} ratio x node "
                   f"{energy_factor(design.process_nm, 12.0)[1]}",
        "dram": f"{e_dram.pj:g} pJ/bit ({e_dram.source})",
        "l2": f"{l2_pj:.3g} pJ/bit ({l2_src})",
        "static": f"static_fraction x TDP = {static_w:.3g} W x time (gpu_fit.toml)",
    }
    out = []
    for i, op in enumerate(ops):
        time_s = sums["time"][i]
        ideal, quant = sums["compute"][i], sums["quantized"][i]
        body, overhead = sums["body"][i], sums["overhead"][i]
        stall = max(body - quant, 0.0)
        fill = time_s - ideal - stall
        mem = sums["memory"][i]
        if mem > quant and mem >= overhead:
            bound = "bandwidth"  # moving the bytes takes longer than the (quantized) math
        elif time_s > 2 * ideal:
            bound = "occupancy"  # launch floor, tile/wave losses: under half the achievable peak
        else:
            bound = "compute"
        dram_b, l2_b = sums["dram_bytes"][i], sums["l2_bytes"][i]
        time_s = float(time_s)
        e = {"compute": sums["ops"][i] * e_op, "dram": dram_b * 8 * e_dram.pj, "l2": l2_b * 8 * l2_pj,
             "static": static_w * time_s * 1e12}
        src = dict(sources_base)
        cap = design.tdp_w * time_s * 1e12
        if sum(e.values()) > cap:
            k_dyn = (cap - e["static"]) / (e["compute"] + e["dram"] + e["l2"])
            for key in ("compute", "dram", "l2"):
                e[key] *= k_dyn
                src[key] += f"; x {k_dyn:.3f} to stay within TDP x time"
        e = {k: float(v) for k, v in e.items()}
        macs = sums["dense_ops"][i] / 2
        performed = sums["ops"][i] / 2
        kinds = op_kernels(op, i, passes[i], rnn_skip_input=rnn_skip_input)
        dram_b, l2_b = float(dram_b), float(l2_b)
        traffic = {"dram_bytes": dram_b, "l2_bytes": l2_b, "array_bytes": 0.0,
                   "dram_transfer_cycles": float(sums["memory"][i] * clock)}
        share = _operand_shares(op, fmts, kinds)
        for operand, (rd, wr) in share.items():
            traffic[f"dram.{operand}.reads_bytes"] = dram_b * rd
            traffic[f"dram.{operand}.writes_bytes"] = dram_b * wr
            bytes_el = by["act"] if operand == "ifmap" else by["weight"] if operand == "filter" else by["out"]
            traffic[f"dram.{operand}.reads"] = dram_b * rd / bytes_el
            traffic[f"dram.{operand}.writes"] = dram_b * wr / bytes_el
        src["compute"] = (f"path {path.name}: {path.why}; achievable x{eff:.3f}, power-cap clock "
                          f"x{scale:.3f}; " + src["compute"])
        out.append(CostResult(
            operation=op.label, kind=op.kind, design=design.name, formats=names, pes=pes, clock_hz=clock,
            cycles_compute=float(ideal * clock), cycles_fill_drain=float(max(fill, 0.0) * clock),
            cycles_stall=float(stall * clock), macs=float(macs), macs_performed=float(performed),
            mapping_efficiency=float(ideal / quant) if quant > 0 else math.nan,
            vector_ops=float(getattr(op, "elements", 0) * getattr(op, "ops_per_element", 0)),
            traffic=traffic, energy_pj=e, sources=src, bound=bound))
    return out


def _operand_shares(op, fmts: dict, kinds: list[dict]) -> dict[str, tuple[float, float]]:
    """Fractions of an operation's DRAM bytes that are ifmap/filter reads and ofmap writes."""
    a, b, c = (fmts[r].storage_bits / 8 for r in ("act", "weight", "out"))
    if isinstance(op, Elementwise):
        tot = op.distinct_reads + op.elements
        return {"ifmap": (op.distinct_reads / tot, 0.0), "filter": (0.0, 0.0), "ofmap": (0.0, op.elements / tot)}
    ia = sum(r.get("a_elems", r["M"] * r["K"]) * r.get("batch", 1) for r in kinds) * a
    fb = sum(r.get("b_elems", r["K"] * r["N"]) * r.get("batch", 1) * r.get("density", 1.0) for r in kinds) * b
    oc = sum(r.get("c_elems", r["M"] * r["N"]) * r.get("batch", 1) for r in kinds) * c
    tot = ia + fb + oc or 1.0
    return {"ifmap": (ia / tot, 0.0), "filter": (fb / tot, 0.0), "ofmap": (0.0, oc / tot)}
