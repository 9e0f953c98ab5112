"""The kernels a GPU runs for an operation: each Gemm, Conv, Rnn or Elementwise becomes one or more
GEMM-shaped kernels (or a streaming kernel), held as column arrays so a whole workload is priced at
once by :mod:`asicsim._src.hw.gpu_model`.

A kernel is a GEMM ``(M x K) @ (K x N)`` that one launch runs ``batch`` times side by side (a grouped
conv's groups), ``seq`` times in sequence (an RNN's time steps), or a sparse GEMM, or a streaming
elementwise kernel. Convolutions are implicit GEMMs: ``M = N P Q``, ``N = K`` filters, ``K = C R S``
forward (the data and filter gradients permute them), and their bytes are the real tensors', not the
im2col matrix's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from asicsim._src.hw.gpu_paths import PATH_ALIGN, PATH_BYTES
from asicsim._src.hw.operations import (
    RNN_CELLS,
    AllReduce,
    Conv,
    Elementwise,
    Gemm,
    OperationError,
    Rnn,
)

PASS_FACTORS = ("gemm", "conv_fwd", "conv_bwd_data", "conv_bwd_filter", "rnn_bwd_data")


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
    persistent: np.ndarray  # bool: an RNN's recurrent steps in one persistent kernel (asicsim._src.hw.gpu_rnn)
    stream_bytes: np.ndarray  # elementwise kernels: bytes streamed (M = N = K = 0)
    align: np.ndarray  # gcd of the dimensions a tensor-core path needs aligned (0: none)
    a_bytes: float
    b_bytes: float
    c_bytes: float

    @classmethod
    def build(cls, rows: list[dict], a_bytes: float, b_bytes: float, c_bytes: float) -> Kernels:
        d = dict(owner=0, M=0, N=0, K=0, batch=1, seq=1, launches=1, steps=0, calls=0, conv_calls=0,
                 max_split=64, a_elems=-1.0, b_elems=-1.0, c_elems=-1.0, a_t=False, b_t=False,
                 pass_idx=0, density=1.0, sparse=False, persistent=False, stream_bytes=0.0, align=0)
        cols = {k: np.asarray([r.get(k, v) for r in rows], dtype=np.float64) for k, v in d.items()}
        cols["sparse"] = cols["sparse"].astype(bool)
        cols["persistent"] = cols["persistent"].astype(bool)
        cols["owner"] = cols["owner"].astype(np.int64)
        return cls(**cols, a_bytes=a_bytes, b_bytes=b_bytes, c_bytes=c_bytes)


def gemm_align(op: Gemm) -> int:
    """The gcd of the leading dimensions cuBLAS checks for its tensor-core kernels (column-major,
    as DeepBench calls it): ``lda = K`` if A is transposed else ``M``, ``ldb = N`` if B is
    transposed else ``K``, ``ldc = M`` (cuBLAS documentation, "Tensor Core Usage": the leading
    dimensions must be multiples of 16 bytes / the path's element count)."""
    lda = op.K if op.a_transposed else op.M
    ldb = op.N if op.b_transposed else op.K
    return math.gcd(lda, ldb, op.M)


def op_kernels(op, i: int = 0, pass_name: str = "fwd", *, rnn_skip_input: bool = False,
               rnn_algo: str = "standard", conv_pad: int = 1, conv_layout: str = "NHWC",
               conv_chunk: int = 1) -> list[dict]:
    """The kernels of one operation (``pass_name`` selects a conv/RNN training pass).

    ``align`` is the gcd of the dimensions the library needs to be multiples of the path's
    alignment for its tensor-core kernels: a GEMM's leading dimensions (:func:`gemm_align`), a
    conv's channels per group (cuDNN's tensor-op convolutions), an RNN's hidden and input sizes.

    ``rnn_skip_input``: no input projection (cuDNN's ``CUDNN_SKIP_INPUT``, which DeepBench's RNN
    benchmark uses: the input is added to the gates as is), so only the recurrent GEMMs remain.
    ``rnn_algo``: cuDNN's algorithm for an RNN (:func:`asicsim._src.hw.gpu_rnn.rnn_algo`); a persistent
    one runs the recurrent steps in one kernel that holds the weights on chip.
    ``conv_pad``, ``conv_layout``, ``conv_chunk``: a convolution on a tensor-core path (:func:`conv_kernels`).
    """
    if isinstance(op, Gemm):
        sparse = op.sparse_format != "dense" and op.weight_sparsity > 0
        return [dict(owner=i, M=op.M, N=op.N, K=op.K, a_t=op.a_transposed, b_t=op.b_transposed,
                     density=1.0 - op.weight_sparsity, sparse=sparse, align=gemm_align(op))]
    if isinstance(op, Conv):
        return conv_kernels(op, i, pass_name, conv_pad, conv_layout, conv_chunk)
    if isinstance(op, Rnn):
        gh, h, b, t = RNN_CELLS[op.cell] * op.hidden, op.hidden, op.batch, op.steps
        x = op.input_size or h
        al = math.gcd(h, x)
        recurrent = dict(owner=i, M=b, N=gh, K=h, seq=t, launches=0, steps=t, calls=1, align=al,
                         pass_idx=PASS_FACTORS.index("rnn_bwd_data") if pass_name == "bwd_data" else 0,
                         persistent=rnn_algo != "standard")
        if pass_name == "bwd_weights":  # dW = dY^T X and dU = dY^T H over all steps at once
            dw = [dict(owner=i, M=gh, N=h, K=b * t, align=al)]
            return dw if rnn_skip_input else [dict(owner=i, M=gh, N=x, K=b * t, align=al), *dw]
        if rnn_skip_input:
            return [recurrent]
        return [dict(owner=i, M=b * t, N=gh, K=x, align=al), recurrent]  # input projection, all steps
    if isinstance(op, Elementwise):
        # distinct operands in, results out (a pooling window's re-reads hit the caches)
        return [dict(owner=i, stream_bytes=float(op.distinct_reads + op.elements),
                     launches=0 if op.on_chip else 1)]
    if isinstance(op, AllReduce):
        raise OperationError(f"{op.label}: all-reduce is not priced by the single-GPU model; allowed: "
                             "Gemm, Conv, Rnn or Elementwise (all-reduce belongs to the multi-chip model)")
    raise OperationError(f"operation {op!r}; allowed: Gemm, Conv, Rnn or Elementwise")


#: Memory layouts of a convolution's tensors: channels last (the tensor cores' own, :class:`Conv`'s
#: definition, DeepBench's tensor-core runs) or channels first (PyTorch's default memory format).
CONV_LAYOUTS = ("NHWC", "NCHW")


def conv_kernels(op: Conv, i: int, pass_name: str, pad: int = 1, layout: str = "NHWC",
                 chunk: int = 1) -> list[dict]:
    """A convolution pass as the library runs it: one implicit GEMM (``M = N P Q``, ``N = K``
    filters, ``K = C R S`` forward; the data and filter gradients permute them; the bytes are the
    real tensors', not the im2col matrix's), plus, on a tensor-core path (``pad`` > 1: the path's
    channel alignment, :data:`asicsim._src.hw.gpu_paths.PATH_ALIGN`), the transforms it needs:

    * **Channels padded**: the tensor-core kernels take channel counts that are multiples of
      ``pad`` (8 fp16/bf16, 4 tf32; NVIDIA's "Convolutional Layers User's Guide", quick-start
      checklist: "choose the number of input and output channels to be divisible by 8 (for FP16) or
      4 (for TF32) to run efficiently on Tensor Cores"), so a first layer with C = 1 or 3 runs as
      C = 8 (fp16): ``K = 8 R S``, up to 8x the math of the unpadded count. The GEMM is priced
      padded, at the aligned rate (DeepBench's ``conv_bench`` pads C and K to 8 itself before timing
      its tensor-core runs: ``code/nvidia/conv_bench.cu`` lines 564-575, DeepBench da81ba7).
    * **Layout transforms**: tensor cores read channels last; a channels-first (``"NCHW"``) tensor
      is transposed into a padded NHWC copy before the GEMM and the output back after (the same
      guide, "Tensor Layouts In Memory: NCHW vs NHWC": "choose tensor layouts in memory to avoid
      transposing input and output data"), and an NHWC tensor whose channels need padding is
      copied padded. Each such tensor (input, filter, output of the pass) is one memory-bound
      elementwise kernel that reads it and writes it (original plus padded elements), one launch
      each.

    SIMT paths (``pad`` = 1) take any channel count and either layout as is."""
    if layout not in CONV_LAYOUTS:
        raise OperationError(f"conv_layout = {layout!r}; allowed: {' | '.join(map(repr, CONV_LAYOUTS))}")
    if pad < 1:
        raise OperationError(f"conv_pad = {pad!r}; allowed: an integer >= 1 (the path's channel alignment)")
    g, n = op.groups, op.batch
    c0, k0 = op.in_channels // g, op.out_channels // g
    c, k = -(-c0 // pad) * pad, -(-k0 // pad) * pad
    rs, hw, pq = op.kernel_h * op.kernel_w, op.in_h * op.in_w, op.out_h * op.out_w
    x, w, y = n * hw * c, k * c * rs, n * pq * k  # the tensors' elements (per group), padded
    # the tensor-core kernels step through the input channels of each filter tap ``chunk`` at a time
    cc = -(-c // chunk) * chunk
    shape = {"fwd": (n * pq, k, cc * rs, x, w, y), "bwd_data": (n * hw, c, k * rs, y, w, x),
             "bwd_filter": (k, cc * rs, n * pq, y, x, w)}[pass_name]
    out = [dict(owner=i, M=shape[0], N=shape[1], K=shape[2], a_elems=shape[3], b_elems=shape[4],
                c_elems=shape[5], batch=g, conv_calls=1, align=math.gcd(c, k),
                max_split=64 if pass_name == "bwd_filter" else 1,  # implicit GEMM: no split-K
                pass_idx=PASS_FACTORS.index(f"conv_{pass_name}"))]
    if pad > 1:
        nchw = layout == "NCHW"
        for moved, padded, original in ((nchw or c != c0, x, n * hw * c0), (nchw or c != c0 or k != k0, w, k0 * c0 * rs),
                                        (nchw or k != k0, y, n * pq * k0)):
            if moved:
                out.append(dict(owner=i, stream_bytes=float((padded + original) * g)))
    return out


#: Channels a DP4A convolution takes per instruction: cuDNN's int8 convolutions run on DP4A, four
#: int8 channels per 32-bit lane (``CUDNN_DATA_INT8x4``; DeepBench's ``conv_bench`` pads int8 C to a
#: multiple of 4 for them, data/deepbench/README.md), so a C = 1 layer costs as C = 4.
DP4A_CHANNELS = 4


def conv_pad(path) -> int:
    """The channel count a path's convolutions are padded to: its alignment on the tensor cores
    (:data:`asicsim._src.hw.gpu_paths.PATH_ALIGN`), 4 on DP4A (:data:`DP4A_CHANNELS`), 1 elsewhere
    (:func:`conv_kernels`)."""
    if path.eff_class == "dp4a":
        return DP4A_CHANNELS
    return PATH_ALIGN.get(path.name, 1) if path.eff_class == "tensor" else 1


def conv_chunk(path, c) -> int:
    """Channels per filter tap a tensor-core convolution kernel takes at a time (``conv_chunk_bytes``
    of the generation over the path's operand bytes); 1 on other paths (:func:`conv_kernels`)."""
    if path.eff_class != "tensor" or "conv_chunk_bytes" not in c:
        return 1
    return max(round(c["conv_chunk_bytes"] / PATH_BYTES.get(path.name, 2)), 1)


def stored_bytes(k: Kernels) -> np.ndarray:
    """Bytes of A, B and C of each kernel (one of its ``batch`` GEMMs), each operand once."""
    def el(given, default):
        return np.where(given >= 0, given, default)
    return (el(k.a_elems, k.M * k.K) * k.a_bytes + el(k.b_elems, k.K * k.N) * k.b_bytes
            + el(k.c_elems, k.M * k.N) * k.c_bytes)
