"""Operations the cost model prices: GEMM, convolution, RNN time steps, elementwise work.

Frozen, validated specs. Convolutions and RNN steps are lowered to GEMMs here (im2col, as SCALE-Sim
does), so the cost model only knows GEMMs and elementwise work; elementwise work and the all-reduce
are in :mod:`asicsim._src.hw.unlowered_operations` (re-exported here), the shared checks in
:mod:`asicsim._src.hw.operation_checks`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from asicsim._src.hw import limits as lim
from asicsim._src.hw.conv_windows import conv_ifmap_read_elems
from asicsim._src.hw.operation_checks import SPARSE_FORMATS as SPARSE_FORMATS
from asicsim._src.hw.operation_checks import OperationError as OperationError
from asicsim._src.hw.operation_checks import check_int, check_lowered, check_sparsity
from asicsim._src.hw.unlowered_operations import ELEMENTWISE_WORK as ELEMENTWISE_WORK
from asicsim._src.hw.unlowered_operations import AllReduce as AllReduce
from asicsim._src.hw.unlowered_operations import Elementwise as Elementwise

RNN_CELLS = {"vanilla": 1, "gru": 3, "lstm": 4}  # gates: GEMM output columns per hidden unit
# elementwise operations per hidden unit per step: vanilla bias add + tanh; GRU 3 bias adds,
# 2 sigmoids, 1 tanh, r*h, (1-z), z*h, (1-z)*n, add = 11; LSTM 4 bias adds, 3 sigmoids, 2 tanh,
# f*c, i*g, add, o*tanh(c) = 13
RNN_ELEMENTWISE_OPS = {"vanilla": 2, "gru": 11, "lstm": 13}
CSR_POINTER_BITS = 32


@dataclass(frozen=True)
class GemmLowering:
    """What the systolic model sees: ``reps`` sequential GEMMs ``(M x K) @ (K x N)``."""

    M: int
    N: int
    K: int
    reps: int = 1
    shared_weights: bool = False  # the repetitions reuse one weight matrix (RNN steps)
    ifmap_elems: int | None = None  # ifmap elements its windows read per repetition (conv); None: M * K
    activations_on_chip: bool = False  # the ifmap/ofmap never leave the chip (RNN hidden state)


@dataclass(frozen=True)
class Gemm:
    """``C[M, N] = A[M, K] @ B[K, N]``: A is the activation (ifmap), B the weight (filter)."""

    M: int
    N: int
    K: int
    weight_sparsity: float = 0.0  # fraction of zero weights
    sparse_format: str = "dense"  # how B is stored: dense, bitmask (1 bit per position) or CSR
    a_transposed: bool = False  # memory layouts (BLAS 'T'/'N', as DeepBench lists them): they
    b_transposed: bool = False  # change GPU library speed, not the systolic model's counts
    name: str = ""
    kind: str = field(default="gemm", init=False)

    def __post_init__(self) -> None:
        for k in "MNK":
            check_int("gemm", k, getattr(self, k))
        check_sparsity("gemm", self.weight_sparsity, self.sparse_format)
        for k in ("a_transposed", "b_transposed"):
            if not isinstance(getattr(self, k), bool):
                raise OperationError(f"gemm: {k} = {getattr(self, k)!r}; allowed: true or false")
        check_lowered("gemm", self.lower())

    def lower(self) -> list[GemmLowering]:
        return [GemmLowering(self.M, self.N, self.K)]

    @property
    def label(self) -> str:
        return self.name or f"gemm {self.M}x{self.N}x{self.K}"


@dataclass(frozen=True)
class Conv:
    """2-D convolution on an NHWC ifmap, lowered to GEMM by im2col.

    ``padding``: pixels added on every side, or "valid" (0) or "same" (output size ceil(H/stride)).
    ``stride_w`` / ``padding_w``: the width's own, when it differs from the height's (DeepBench).
    ``groups``: channel groups (``groups = in_channels = out_channels`` is depthwise); each group is
    its own GEMM ``M = batch * out_h * out_w``, ``N = out_channels / groups``,
    ``K = kernel_h * kernel_w * in_channels / groups``.
    """

    in_h: int
    in_w: int
    in_channels: int
    out_channels: int
    kernel_h: int
    kernel_w: int
    stride: int = 1
    padding: int | str = 0
    batch: int = 1
    groups: int = 1
    weight_sparsity: float = 0.0
    sparse_format: str = "dense"
    stride_w: int | None = None  # None: ``stride``
    padding_w: int | str | None = None  # None: ``padding``
    name: str = ""
    kind: str = field(default="conv", init=False)

    def __post_init__(self) -> None:
        for k in ("in_h", "in_w", "in_channels", "out_channels", "kernel_h", "kernel_w", "stride",
                  "batch", "groups"):
            check_int("conv", k, getattr(self, k))
        if self.stride_w is not None:
            check_int("conv", "stride_w", self.stride_w)
        for k in ("padding", "padding_w"):
            p = getattr(self, k)
            if k == "padding_w" and p is None:
                continue
            if not (p in ("valid", "same") or lim.OP_PADDING.ok(p)):
                raise OperationError(f"conv: {k} = {p!r}; allowed: 'valid', 'same' or "
                                     f"{lim.OP_PADDING.allowed()}")
        for k in ("in_channels", "out_channels"):
            if getattr(self, k) % self.groups:
                raise OperationError(f"conv: {k} = {getattr(self, k)} is not a multiple of groups = "
                                     f"{self.groups}; allowed: channels divisible by groups")
        check_sparsity("conv", self.weight_sparsity, self.sparse_format)
        if self.out_h < 1 or self.out_w < 1:
            raise OperationError(f"conv: kernel {self.kernel_h}x{self.kernel_w} larger than the padded "
                                 f"ifmap {self.in_h}x{self.in_w} (padding {self.padding!r}); allowed: "
                                 "a kernel that fits")
        check_lowered("conv", self.lower())

    @staticmethod
    def _out(size: int, kernel: int, stride: int, padding: int | str) -> int:
        if padding == "same":
            return math.ceil(size / stride)
        pad = 0 if padding == "valid" else padding
        return (size + 2 * pad - kernel) // stride + 1

    @property
    def out_h(self) -> int:
        return self._out(self.in_h, self.kernel_h, self.stride, self.padding)

    @property
    def out_w(self) -> int:
        stride = self.stride if self.stride_w is None else self.stride_w
        padding = self.padding if self.padding_w is None else self.padding_w
        return self._out(self.in_w, self.kernel_w, stride, padding)

    def lower(self) -> list[GemmLowering]:
        g = self.groups
        return [GemmLowering(
            M=self.batch * self.out_h * self.out_w, N=self.out_channels // g,
            K=self.kernel_h * self.kernel_w * self.in_channels // g, reps=g,
            ifmap_elems=conv_ifmap_read_elems(self))]

    @property
    def label(self) -> str:
        return self.name or (f"conv {self.in_h}x{self.in_w}x{self.in_channels}->{self.out_channels} "
                             f"k{self.kernel_h}x{self.kernel_w} s{self.stride}"
                             + (f" g{self.groups}" if self.groups > 1 else ""))


@dataclass(frozen=True)
class Rnn:
    """``steps`` time steps of a vanilla/GRU/LSTM layer (DeepBench's RNN kernels).

    Lowered to the input projection for all steps at once (``batch * steps`` rows), then one
    recurrent GEMM per step whose weights stay resident on chip across steps when they fit
    (Baidu's persistent RNN) and are re-fetched when they do not; the hidden state stays on chip.
    The gate nonlinearities run on the vector unit (:data:`RNN_ELEMENTWISE_OPS` per hidden unit).
    """

    cell: str
    hidden: int
    batch: int
    steps: int
    input_size: int | None = None  # None: the hidden size
    weight_sparsity: float = 0.0
    sparse_format: str = "dense"
    name: str = ""
    kind: str = field(default="rnn", init=False)

    def __post_init__(self) -> None:
        if self.cell not in RNN_CELLS:
            raise OperationError(f"rnn: cell = {self.cell!r}; allowed: {' | '.join(RNN_CELLS)}")
        for k in ("hidden", "batch", "steps"):
            check_int("rnn", k, getattr(self, k))
        if self.input_size is not None:
            check_int("rnn", "input_size", self.input_size)
        check_sparsity("rnn", self.weight_sparsity, self.sparse_format)
        check_lowered("rnn", self.lower())

    def lower(self) -> list[GemmLowering]:
        g, h = RNN_CELLS[self.cell], self.hidden
        x = self.input_size or h
        return [GemmLowering(self.batch * self.steps, g * h, x),
                GemmLowering(self.batch, g * h, h, reps=self.steps, shared_weights=True,
                             activations_on_chip=True)]

    def elementwise(self) -> Elementwise:
        return Elementwise(self.batch * self.hidden * self.steps, RNN_ELEMENTWISE_OPS[self.cell],
                           inputs=RNN_CELLS[self.cell], on_chip=True, work="rnn_gates")

    @property
    def label(self) -> str:
        return self.name or f"{self.cell} h{self.hidden} b{self.batch} t{self.steps}"


Operation = Gemm | Conv | Rnn | Elementwise


def weight_store_bits(weight_bits: float, sparsity: float, fmt: str, K: int, N: int) -> float:
    """Stored bits per dense weight position of a ``K x N`` weight matrix.

    dense: every position; bitmask: nonzeros plus one mask bit per position; CSR (rows = the N
    output columns): nonzeros with a ``ceil(log2 K)``-bit column index each, plus one 32-bit row
    pointer per row and one more.
    """
    density = 1.0 - sparsity
    if fmt == "dense":
        return weight_bits
    if fmt == "bitmask":
        return density * weight_bits + 1.0
    index_bits = max(1, math.ceil(math.log2(K)))
    return density * (weight_bits + index_bits) + CSR_POINTER_BITS * (N + 1) / (N * K)
