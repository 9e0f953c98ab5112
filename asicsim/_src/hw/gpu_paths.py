"""The precision paths a GPU design executes natively, and the one an operation's formats take.

A *path* is a data path with a datasheet peak: the operand types it reads from memory, the
accumulators it produces and its efficiency class (:data:`NATIVE_PATHS`). A design executes a path
when the datasheet gives its peak (the design files say it: "an omitted peak = the chip has no such
path"; ``bf16_tensor`` and ``int8_path`` pick the bf16 and int8 variants), and every CUDA GPU has
cuBLAS's fp32-math entry point (``cublasSgemmEx``: fp16, bf16 or int8 storage, fp32 math).
:func:`native_modes` lists a design's paths; :func:`precision_path` picks one:

1. **Natively** when a path reads both operands and produces the accumulator: each requested
   operand format *is* one of the path's operand types by value and by storage (every value of
   the request is a value of the type, stored in as many bits: tf32 in fp32 words), or is an
   integer of at most 8 bits on an 8-bit integer path (sign or zero extension, as an int8 MAC
   takes int4); the requested accumulator embeds in one the path produces
   (:func:`asicsim._src.numerics.embed.embeds`). The fastest such path wins.

   A GPU reads memory in its library's types, so a narrower float is not free: fp8 on a chip
   without FP8 tensor cores needs a conversion kernel of its own (PTX's fp8 conversions,
   ``cvt.*.e4m3x2``/``e5m2x2``, need sm_89: Ada and Hopper; PTX ISA 8.x, "cvt"), and OCP MX
   block formats run on the tensor cores only on Blackwell (``tcgen05.mma`` with block scales;
   NVIDIA Blackwell architecture technical brief, 2024).
2. Else **emulated** only if the caller asks: ``emulate=S`` (a number ``S >= 1``) runs the MACs at
   ``1/S`` of the design's fastest peak (:attr:`~asicsim._src.hw.gpu.GpuDesign.peak_tops`), in that
   path's efficiency class, as on a systolic design (:mod:`asicsim._src.hw.native`). ``emulate=auto``
   (exact integer digit passes) is derived for systolic integer modes only.

Anything else raises :class:`~asicsim._src.hw.operations.OperationError` naming the design's paths.
"""

from __future__ import annotations

from dataclasses import dataclass

from asicsim._src.hw.native import EMULATE_AUTO, parse_emulate
from asicsim._src.hw.operations import OperationError
from asicsim._src.numerics import get_format
from asicsim._src.numerics.embed import embeds
from asicsim._src.numerics.formats import BlockFormat, Format, IntFormat

#: Efficiency classes: the fitted achievable fraction of the datasheet peak is per class.
PATH_CLASS = {"fp32": "simt", "fp16_half2": "simt", "fp16_fp32math": "simt",
              "bf16_fp32math": "simt", "int8_fp32math": "simt", "tf32_tensor": "tensor",
              "fp16_tensor": "tensor", "fp8_tensor": "tensor", "mxfp8_tensor": "tensor",
              "int8_tensor": "tensor", "int8_dp4a": "dp4a"}
#: K (reduction) granularity of each path: tensor-core MMA fragments take K in steps of 8 fp16 /
#: 16 int8 / 32 fp8 bytes-wise (CUDA WMMA shapes m16n16k16: K padded to 16 for 16-bit inputs; we use
#: 8, the cuBLAS alignment rule of the DeepBench era, "K multiple of 8"); DP4A takes 4 int8 per
#: instruction; SIMT kernels take any K.
K_ALIGN = {"simt": 1, "dp4a": 4, "tensor": 8}
#: Elements the library needs every leading dimension to be a multiple of for its tensor-core
#: kernels (:func:`asicsim._src.hw.gpu_kernels.gemm_align`): 16 bytes, i.e. 4 tf32, 8 fp16/bf16, 16 fp8
#: or int8 (cuBLAS documentation, section 2.1.11 "Tensor Core Usage": 16-byte aligned pointers and
#: leading dimensions; NVIDIA/cutlass issue #75: tensor-core kernels need 128-bit aligned
#: accesses). Measured: H100 fp16/bf16 off multiples of 8 ran up to 6x slower than padded
#: (data/measured/h100/README.md); H200 int8 GEMMs whose output leading dimension is 8 mod 16 run
#: at 230-290 TOPS where the same sizes at 0 mod 16 reach 580-720 (data/measured/h200/gemm.csv).
#: MX fp8 assumed as fp8. Other paths take any size.
PATH_ALIGN = {"tf32_tensor": 4, "fp16_tensor": 8, "fp8_tensor": 16, "mxfp8_tensor": 16, "int8_tensor": 16}
#: Bytes per operand element of each tensor-core path (16 bytes = :data:`PATH_ALIGN` elements).
PATH_BYTES = {name: 16 // n for name, n in PATH_ALIGN.items()}
#: Paths whose library kernels take no split-K (the K loop of a CTA runs to the end): cuBLASLt's
#: int8 kernels as torch._int_mm calls them (data/measured/h200/gemm.csv: an int8 GEMM 8 x 512 x
#: 500 000 takes 2.24 ms and 8 x 1024 x 500 000 the same, twice the bytes in the same time: the CTAs
#: along N run side by side, each streaming all of K; a split-K kernel would spread K over the SMs).
NO_SPLIT_K = frozenset({"int8_tensor"})

_E4M3, _E5M2 = "fp8_e4m3", "fp8_e5m2"
_MX = ("mxfp8_e4m3", "mxfp8_e5m2")
_INT8 = ("int8", "uint8")


@dataclass(frozen=True)
class PathMode:
    """One native path: its name, the (act, weight) operand types it reads, the accumulators it
    produces, the design field holding its peak and why the chip has it."""

    name: str
    pairs: tuple[tuple[str, str], ...]
    accs: tuple[str, ...]
    peak_field: str
    source: str

    @property
    def eff_class(self) -> str:
        return PATH_CLASS[self.name]

    @property
    def label(self) -> str:
        ops = "; ".join(f"{get_format(a).name} x {get_format(b).name}" for a, b in self.pairs)
        return f"{self.name} ({ops} -> {' or '.join(get_format(c).name for c in self.accs)})"


def _pairs(xs, ys=None) -> tuple[tuple[str, str], ...]:
    return tuple((x, y) for x in xs for y in (xs if ys is None else ys))


_SGEMMEX = "cuBLAS cublasSgemmEx: 16-bit or int8 storage, fp32 math (any CUDA GPU)"
#: Every path of the model, in the order the design fields enable them.
NATIVE_PATHS = (
    PathMode("fp32", (("fp32", "fp32"),), ("fp32",), "fp32_tflops", "fp32 FMA on the SIMT cores"),
    PathMode("tf32_tensor", (("tf32", "tf32"),), ("fp32",), "tf32_tflops", "TF32 tensor cores (Ampere on)"),
    PathMode("fp16_tensor", (("fp16", "fp16"),), ("fp32", "fp16"), "fp16_tensor_tflops",
             "FP16 tensor cores (Volta on), fp32 or fp16 accumulation"),
    PathMode("fp16_tensor", (("bf16", "bf16"),), ("fp32",), "fp16_tensor_tflops",
             "BF16 tensor cores at the fp16 rate (bf16_tensor: Ampere on)"),
    PathMode("fp16_half2", (("fp16", "fp16"),), ("fp16",), "fp16_nontensor_tflops",
             "half2 SIMT arithmetic (P100), fp16 accumulation"),
    PathMode("fp8_tensor", ((_E4M3, _E4M3), (_E4M3, _E5M2), (_E5M2, _E4M3)), ("fp32",), "fp8_tflops",
             "FP8 tensor cores (Ada, Hopper on); cuBLASLt takes E4M3 x E4M3 and mixed E4M3/E5M2, "
             "not E5M2 x E5M2, with CUBLAS_COMPUTE_32F (cuBLAS documentation, cublasLtMatmul FP8 types)"),
    PathMode("mxfp8_tensor", _pairs(_MX), ("fp32",), "fp8_tflops",
             "MX FP8 block formats (E8M0 scale per 32 elements) on the tensor cores at the fp8 rate "
             "(mxfp8_tensor: Blackwell)"),
    PathMode("int8_tensor", _pairs(_INT8), ("int32",), "int8_tops", "INT8 tensor cores (int8_path = 'tensor')"),
    PathMode("int8_dp4a", _pairs(_INT8), ("int32",), "fp32_tflops",
             "DP4A, 4 int8 MACs per lane per cycle = 4 x fp32_tflops (int8_path = 'dp4a', sm_61 on)"),
    PathMode("fp16_fp32math", (("fp16", "fp16"),), ("fp32",), "fp32_tflops", _SGEMMEX),
    PathMode("bf16_fp32math", (("bf16", "bf16"),), ("fp32",), "fp32_tflops", _SGEMMEX),
    PathMode("int8_fp32math", (("int8", "int8"),), ("fp32",), "fp32_tflops", _SGEMMEX),
)


@dataclass(frozen=True)
class PrecisionPath:
    """The path the model prices an operation on: name, its datasheet peak and efficiency class."""

    name: str
    peak_ops_per_s: float  # datasheet dense peak (ops = 2 x MACs), at the boost clock
    eff_class: str  # "simt" | "dp4a" | "tensor"
    why: str  # one line: which peak and why this path

    @property
    def k_align(self) -> int:
        return K_ALIGN[self.eff_class]


def native_modes(design) -> tuple[PathMode, ...]:
    """The paths ``design`` executes natively (module docstring), fastest first."""
    def has(m: PathMode) -> bool:
        if m.name == "fp16_tensor" and m.pairs[0][0] == "bf16":
            return bool(design.bf16_tensor and design.fp16_tensor_tflops)
        if m.name == "mxfp8_tensor":
            return bool(design.mxfp8_tensor and design.fp8_tflops)
        if m.name in ("int8_tensor", "int8_dp4a"):
            return design.int8_path == m.name.removeprefix("int8_")
        return bool(getattr(design, m.peak_field))
    return tuple(sorted((m for m in NATIVE_PATHS if has(m)), key=lambda m: -peak_of(design, m)))


def peak_of(design, mode: PathMode) -> float:
    """The datasheet dense peak of ``mode`` on ``design``, in ops/s."""
    per = 4.0 if mode.name == "int8_dp4a" else 1.0
    return per * getattr(design, mode.peak_field) * 1e12


def _reads(requested: Format, native: str) -> bool:
    """Whether a path reading ``native`` takes ``requested`` as it is stored (module docstring)."""
    t = get_format(native)
    if isinstance(requested, IntFormat) and isinstance(t, IntFormat) and t.bits == 8:
        return requested.bits <= 8  # integer codes sign- or zero-extended (a fixed-point scale set aside)
    if isinstance(requested, BlockFormat) or isinstance(t, BlockFormat):
        return (isinstance(requested, BlockFormat) and isinstance(t, BlockFormat)
                and requested.element == t.element and requested.scale == t.scale
                and requested.block_size == t.block_size)  # the scale rule is software's choice
    return requested.storage_bits == t.storage_bits and embeds(requested, t)


def _runs(mode: PathMode, a: Format, b: Format, acc: Format) -> bool:
    return (any(_reads(a, x) and _reads(b, y) for x, y in mode.pairs)
            and any(embeds(acc, get_format(c)) for c in mode.accs))


def precision_path(design, formats: dict, emulate=None) -> PrecisionPath:
    """The path ``formats`` (role -> Format; ``act``, ``weight``, ``acc``) run on ``design``, or
    their emulation at a stated slowdown (module docstring); an OperationError names the design's
    paths when neither applies."""
    emulate = parse_emulate(emulate)
    a, w, acc = formats["act"], formats["weight"], formats["acc"]
    modes = native_modes(design)
    for m in modes:  # fastest first
        if _runs(m, a, w, acc):
            peak = peak_of(design, m)
            why = (f"{m.peak_field}{' x 4' if m.name == 'int8_dp4a' else ''} ({m.source}; "
                   f"act={a.name} x weight={w.name} -> acc={acc.name})")
            return PrecisionPath(m.name, peak, m.eff_class, why)
    want = f"act={a.name} x weight={w.name} -> acc={acc.name}"
    fastest = modes[0]
    if isinstance(emulate, float):
        return PrecisionPath("emulated", peak_of(design, fastest) / emulate, fastest.eff_class,
                             f"emulated {want} at a stated slowdown of {emulate:g} vs the fastest path "
                             f"({fastest.name}, {fastest.peak_field})")
    why = ("emulate=auto derives a slowdown only on a systolic design's integer modes; state one, "
           "e.g. emulate=4" if emulate == EMULATE_AUTO else
           "or ask for software emulation: emulate=S (your slowdown S >= 1 vs the fastest path)")
    raise OperationError(
        f"GPU {design.name!r} does not execute {want}; its native paths: "
        + "; ".join(m.label for m in modes)
        + ". Integers of at most 8 bits run on the 8-bit integer paths and an accumulator whose "
          "every value is a value of the path's also runs; " + why)
