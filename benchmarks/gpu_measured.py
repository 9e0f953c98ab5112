"""Measured GPU kernel times as rows the GPU model can predict: DeepBench's published sheets and the
H100 set (``data/deepbench/measured/``, ``data/measured/h100/``; each README gives the protocol).

A row is a dict: ``device``, ``precision``, ``kind`` (``gemm``, ``conv_<pass>``, ``rnn_<pass>``,
``sparse_gemm``), ``ops`` and ``passes`` (what the model prices; their times add up), ``time_us``,
``flops`` (the sheet's count) and ``skip_input`` (RNN input projections left out, as DeepBench's
``rnn_bench.cu`` does with ``CUDNN_SKIP_INPUT``; the H100 set's torch layers include them) and
``sustained`` (the power cap of a sustained load, :mod:`asicsim._src.hw.gpu_power`: DeepBench's sheets
time 400 back-to-back calls per kernel, a suite run without idle gaps, and the H100's power-cap rows
are sustained runs; the H100 and H200 sets' other rows are bursts, CUDA graph replays of >= 2 ms
timed 7 times, far inside the power controller's 1 s window).

DeepBench rows: conv rows that cannot be GEMM-based are dropped (forward rows cuDNN ran as Winograd
or FFT, and any conv row whose direct-count throughput exceeds the datasheet peak of the path it is
priced on: backward and int8 rows name no algorithm). The H100 convolutions ran with
``cudnn.benchmark`` on, so the same peak rule drops Winograd/FFT choices there.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd

import asicsim as sim
from asicsim._src.hw.gpu import precision_path
from asicsim._src.hw.gpu_cost import resolve_gpu_formats

ROOT = Path(__file__).resolve().parents[1]
DEEPBENCH = ROOT / "data" / "deepbench" / "measured"
H100 = ROOT / "data" / "measured" / "h100"
H200 = ROOT / "data" / "measured" / "h200"  # held out: never in a fit (benchmarks/gpu_heldout.py)
DESIGNS = {"M40": "gpu_m40", "TitanX_Pascal": "gpu_titanx_pascal", "GTX1080Ti": "gpu_gtx1080ti",
           "P100": "gpu_p100", "V100": "gpu_v100", "T4": "gpu_t4", "H100": "gpu_h100"}
#: Devices measured but never fitted on (the held-out check).
HELD_OUT = {"H200": "gpu_h200"}
FORMATS = {"fp32": "act=fp32,weight=fp32,acc=fp32,out=fp32",
           "fp16_fp32math": "act=fp16,weight=fp16,acc=fp32,out=fp16",
           "fp16_mixed": "act=fp16,weight=fp16,acc=fp32,out=fp16",
           "fp16": "act=fp16,weight=fp16,acc=fp32,out=fp16",
           "bf16": "act=bfloat16,weight=bfloat16,acc=fp32,out=bfloat16",
           "tf32": "act=tf32,weight=tf32,acc=fp32,out=fp32",
           "fp8": "act=fp8_e4m3,weight=fp8_e4m3,acc=fp32,out=bfloat16",
           "int8": "act=int8,weight=int8,acc=int32,out=int32"}
GEMM_CONV_ALGOS = {"IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "LICIT_PRECOMP_GEMM", "GEMM"}


def design_for(device: str, precision: str):
    d = sim.load_design((DESIGNS | HELD_OUT)[device])
    if device == "T4" and precision == "int8":  # DeepBench's T4 int8 rows did not use tensor cores
        d = dataclasses.replace(d, int8_path="dp4a")
    return d


def _conv(r, n_col: str = "N", pad: int = 1) -> sim.Conv:
    """The convolution of a sheet row; ``pad``: C and K rounded up to a multiple of it (the run's own padding)."""
    c, k = int(r.C), int(getattr(r, "K_conv", getattr(r, "K", 0)))
    c, k = -(-c // pad) * pad, -(-k // pad) * pad
    return sim.Conv(int(r.H), int(r.W), c, k, int(r.R), int(r.S), stride=int(r.stride_h), stride_w=int(r.stride_w),
                    padding=int(r.pad_h), padding_w=int(r.pad_w), batch=int(getattr(r, n_col)))


#: DeepBench's ``conv_bench`` pads C and K to multiples of 8 for its tensor-core (``half``) runs and
#: stores them NHWC (``code/nvidia/conv_bench.cu`` lines 108-112 and 564-575, ``PAD_KERNELS`` on by
#: default; DeepBench commit 30c5115 of 2019-10-07 re-measured the V100 and T4 sheets with it).
#: Its int8 runs pad C (and H, W; not modelled, under 2 % of the math here) to a multiple of 4 for
#: cuDNN's DP4A kernels (data/deepbench/README.md, "Benchmark-side padding").
DEEPBENCH_CONV_PAD = {"fp16_mixed": 8, "int8": 4}


def deepbench_tensor_padding(m: int, n: int, k: int, a_t: bool, b_t: bool, precision: str) -> tuple[int, int, int]:
    """The GEMM DeepBench's ``gemm_bench`` ran for a sheet row: its tensor-core (``half``) runs pad
    the dimensions cuBLAS checks to multiples of 8 (``PAD_KERNELS`` on by default: M and K for NN
    and TN, M and N for NT, all three for TT; ``code/nvidia/gemm_bench.cu`` lines 265-300, DeepBench
    commit 30c5115 of 2019-10-07, "Patch the code base to ensure Tensor Cores to be used in more
    cases and update NVIDIA results based on this patch", which re-measured the V100 and T4
    sheets). So no sheet row ran cuBLAS's unaligned fallback; other precisions run as labelled."""
    if precision != "fp16_mixed":
        return m, n, k

    def up(x: int) -> int:
        return -(-x // 8) * 8

    if not b_t:
        return up(m), n, up(k)
    if not a_t:
        return up(m), up(n), k
    return up(m), up(n), up(k)


def deepbench_rows(data: Path = DEEPBENCH) -> list[dict]:
    rows = []
    # V100: its sheet's GEMM rows (scripts/deepbench_v100_gemm.py wrote them; Volta's own constants)
    g = pd.concat([pd.read_csv(data / f) for f in ("gemm_results.csv", "v100_gemm_results.csv")])
    for r in g.itertuples():
        m, n, k = deepbench_tensor_padding(int(r.M), int(r.N), int(r.K), bool(r.a_transposed),
                                           bool(r.b_transposed), r.precision)
        op = sim.Gemm(m, n, k, a_transposed=bool(r.a_transposed), b_transposed=bool(r.b_transposed))
        rows.append(dict(device=r.device, precision=r.precision, kind="gemm", ops=[op], passes=["fwd"],
                         time_us=r.time_us, flops=2.0 * r.M * r.N * r.K, skip_input=True, sustained=True))
    # V100: its sheet's conv rows (scripts/deepbench_v100_conv.py)
    c = pd.concat([pd.read_csv(data / f) for f in ("conv_results.csv", "v100_conv_results.csv")])
    for r in c.itertuples():
        ps = r[c.columns.get_loc("pass") + 1]  # "pass" is a keyword: no attribute access
        if ps == "fwd" and isinstance(r.fwd_algo, str) and r.fwd_algo not in GEMM_CONV_ALGOS:
            continue  # Winograd / FFT: fewer flops than the direct count
        pad = DEEPBENCH_CONV_PAD.get(r.precision, 1)
        rows.append(dict(device=r.device, precision=r.precision, kind=f"conv_{ps}", ops=[_conv(r, pad=pad)],
                         passes=[ps], time_us=r.time_us, flops=float(r.flops), skip_input=True, sustained=True,
                         layout="NHWC" if pad > 1 else "NCHW"))
    n = pd.read_csv(data / "rnn_results.csv")
    for r in n.itertuples():
        ps = r[n.columns.get_loc("pass") + 1]
        op = sim.Rnn(r.type, int(r.hidden), int(r.batch), int(r.timesteps))
        passes = ["bwd_data", "bwd_weights"] if ps == "bwd" else [ps]
        rows.append(dict(device=r.device, precision=r.precision, kind=f"rnn_{ps}", ops=[op] * len(passes),
                         passes=passes, time_us=r.time_us, flops=float(r.flops), skip_input=True, sustained=True))
    s = pd.read_csv(data / "sparse_gemm_results.csv")
    for r in s.itertuples():  # DeepBench: A (M x K) sparse; ours: weights B, so the transposed problem
        op = sim.Gemm(int(r.N), int(r.M), int(r.K), weight_sparsity=float(r.sparsity), sparse_format="csr")
        rows.append(dict(device=r.device, precision=r.precision, kind="sparse_gemm", ops=[op], passes=["fwd"],
                         time_us=r.time_us, flops=2.0 * r.M * r.N * r.K, skip_input=True, sustained=True))
    return _gemm_based(rows)


def h100_rows(data: Path = H100) -> list[dict]:
    rows = []
    g = pd.read_csv(data / "gemm.csv")
    for r in g.itertuples():
        op = sim.Gemm(int(r.M), int(r.N), int(r.K), a_transposed=bool(r.a_t), b_transposed=bool(r.b_t))
        rows.append(dict(device="H100", precision=r.precision, kind="gemm", ops=[op], passes=["fwd"],
                         time_us=r.meas_us, flops=float(r.flops), skip_input=False, sustained=False))
    c = pd.read_csv(data / "conv.csv")
    for r in c.itertuples():
        ps = r[c.columns.get_loc("pass") + 1]
        rows.append(dict(device="H100", precision=r.precision, kind=f"conv_{ps}", ops=[_conv(r, "N_conv")],
                         passes=[ps], time_us=r.meas_us, flops=float(r.flops), skip_input=False, sustained=False,
                         layout=r.layout))
    n = pd.read_csv(data / "rnn.csv")
    for r in n.itertuples():
        op = sim.Rnn(r.type, int(r.hidden), int(r.batch), int(r.timesteps))
        rows.append(dict(device="H100", precision=r.precision, kind="rnn_fwd", ops=[op], passes=["fwd"],
                         time_us=r.meas_us, flops=float(r.flops), skip_input=False, sustained=False))
    p = pd.read_csv(data / "power_cap.csv")  # sustained rates under the 700 W cap (source column)
    for r in p.itertuples():
        flops = 2.0 * r.M * r.N * r.K
        rows.append(dict(device="H100", precision=r.precision, kind="gemm_power_cap",
                         ops=[sim.Gemm(int(r.M), int(r.N), int(r.K))], passes=["fwd"],
                         time_us=flops / (r.meas_tflops * 1e6), flops=flops, skip_input=False, sustained=True))
    return _gemm_based(rows)


def h200_rows(data: Path = H200) -> list[dict]:
    """The H200 set (held out). fp8 and int8 ran through ``torch._scaled_mm``/``torch._int_mm``
    (README): row-major ``C[M, N] = A[M, K] @ B[K, N]`` with B column-major, whatever
    ``a_t``/``b_t`` say. cuBLASLt (column-major) sees that as ``C^T = B^T A^T``: an ``N x M``
    output with leading dimension N, both operands with leading dimension K, i.e. the GEMM
    ``(N, M, K)`` with its first operand transposed; priced as that (the same flops and bytes; the
    README's refusals, "N not a multiple of 8", are on that output's leading dimension)."""
    rows = []
    g = pd.read_csv(data / "gemm.csv")
    for r in g.itertuples():
        if r.precision in ("fp8", "int8"):
            op = sim.Gemm(int(r.N), int(r.M), int(r.K), a_transposed=True, b_transposed=False)
        else:
            op = sim.Gemm(int(r.M), int(r.N), int(r.K), a_transposed=bool(r.a_t), b_transposed=bool(r.b_t))
        rows.append(dict(device="H200", precision=r.precision, kind="gemm", ops=[op], passes=["fwd"],
                         time_us=r.meas_us, flops=float(r.flops), skip_input=False, sustained=False))
    n = pd.read_csv(data / "rnn.csv")
    for r in n.itertuples():
        op = sim.Rnn(r.type, int(r.hidden), int(r.batch), int(r.timesteps))
        rows.append(dict(device="H200", precision=r.precision, kind="rnn_fwd", ops=[op], passes=["fwd"],
                         time_us=r.meas_us, flops=float(r.flops), skip_input=False, sustained=False))
    return rows


def all_rows() -> list[dict]:
    return deepbench_rows() + h100_rows()


def _gemm_based(rows: list[dict]) -> list[dict]:
    """Drop conv rows faster than the datasheet peak of their path on the direct flop count: not a
    GEMM-based algorithm (Winograd/FFT; for T4 int8, tensor cores), whatever the sheet says."""
    out = []
    for r in rows:
        if r["kind"].startswith("conv"):
            d = design_for(r["device"], r["precision"])
            peak = precision_path(d, resolve_gpu_formats(d, FORMATS[r["precision"]])).peak_ops_per_s
            if r["flops"] / (r["time_us"] * 1e-6) > peak:
                continue
        out.append(r)
    return out
