"""GEMMs as a named GPU's tensor cores compute them (issue 33 item 5).

A recipe's ``tensor_core = "h100"`` runs every GEMM on the H100's tensor-core MAC for its
operand formats (:func:`asicsim.numerics.tensor_core`: fp8 E4M3/E5M2, fp16, bf16, tf32 inputs;
fp32 or fp16 results, per the recipe's ``acc`` role); ``[tensor_core]`` names the GPU per GEMM,
keyed by the role the GEMM writes: ``out`` (the forward GEMM), ``grad_out`` (dX) and ``wgrad``
(dW). The model then trains or evaluates with that GPU's GEMM numerics on any backend.

What a GEMM computes, as the libraries do it on the GPU:

1. each operand's **codes** and **scale** (:func:`role_codes`): the role's quantiser's own codes
   (the fp8 values ``x * sf`` cast, delayed scaling; ``x / s`` rounded, fp32 tensor and static
   scaling) and the factor that turns codes into values (``scale_inv = 1 / sf``, ``s``); an
   unscaled role's codes are its values, scale 1. The codes are computed, not recovered by a
   division of the values (which is inexact where the scale is not a power of two);
2. the tensor-core MAC on the codes (:func:`asicsim.numerics.matmul` with the GPU's preset): the
   whole K accumulated in the MMA's accumulator (Hopper fp8: 13 fraction bits), as cuBLASLt's
   fp8 GEMM with ``CUBLASLT_MATMUL_DESC_FAST_ACCUM`` (Transformer Engine's forward GEMM,
   ``use_split_accumulator=False``) does;
3. the scales applied to the fp32 result (:func:`apply_scales`): ``D = acc * (scale_a * scale_b)``,
   each product rounded to float32, as CUTLASS's fp8 epilogue computes
   ``(alpha * scale_a * scale_b) * accumulator`` (NVIDIA/cutlass ``examples/58_ada_fp8_gemm``,
   its pseudocode; cuBLASLt documents ``D = alpha * scale_A * scale_B * op(A) op(B)`` for fp8,
   cuBLAS docs "cublasLtMatmul", without the order of the products), then the ``out`` role's
   rounding (bf16 under ``fp8_hybrid``) as the epilogue's conversion.

Per-tensor scales only (``none``, ``tensor``, ``delayed``, ``static``): a per-tensor factor
commutes with the GEMM, so the library applies it after. Per-channel, per-block (MX, DeepSeek's
tiles), group scales and rotations are refused (block-scaled MMA applies its scales inside the
tensor core, which no published model describes). Not modelled: cuBLAS's split accumulation
(partial sums promoted to fp32 CUDA-core registers every N products, DeepSeek-V3's 128), which
Transformer Engine uses for its dX and dW GEMMs.
"""

from __future__ import annotations

from asicsim._src.emulate.policy import RoleSpec
from asicsim._src.emulate.role_rounding import tensor_codes
from asicsim._src.emulate.tensor_core_checks import _operand_problem
from asicsim._src.numerics.fp32_exact import fp32_mul


def role_codes(x, spec: RoleSpec, *, amax=None, words=None):
    """(codes, scale) of ``x`` rounded by role ``spec`` as a tensor core reads them: refuses a
    role the recipe's checks did not see, else :func:`~asicsim._src.emulate.role_rounding.tensor_codes`."""
    problem = _operand_problem(spec)
    if problem is not None:  # a role the recipe's checks did not see (they check the GEMMs' roles)
        raise ValueError(f"tensor_core: a GEMM operand rounded by {spec!r} needs {problem}")
    return tensor_codes(x, spec, amax=amax, words=words)


def apply_scales(d, scale_a, scale_b):
    """The GEMM's float32 result times ``scale_a * scale_b``: the two scales' product rounded to
    float32, then the result's (CUTLASS's fp8 epilogue), correctly rounded on every backend
    (subnormals kept, as the GPU's epilogue keeps them)."""
    return fp32_mul(d, fp32_mul(scale_a, scale_b))
