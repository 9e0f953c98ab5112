"""The Triton kernels a function lowers to for CUDA, verified: a check that runs on any host.

Pallas lowers a kernel to Triton's MLIR dialect without verifying it; XLA's Triton compiler does,
on a GPU. Parsing the lowered module with the dialect loaded runs the same verifier here, so a
kernel that cannot compile fails on a CPU too. It reads jaxlib's private MLIR bindings (tests and
benchmarks/kernel_sass.py use it; nothing in the library does).
"""

from __future__ import annotations

import jax


def triton_kernels(fn, *args) -> list[str]:
    """Lower ``fn(*args)`` for CUDA and parse each Triton kernel it holds with the Triton dialect
    loaded (MLIR's verifier runs on every op); the kernels' text, in lowering order."""
    from jax._src.interpreters import mlir as jax_mlir
    from jax._src.lib import triton
    from jax._src.lib.mlir import ir

    module = jax.jit(fn).trace(*args).lower(lowering_platforms=("cuda",)).compiler_ir("stablehlo")
    blobs = []

    def walk(op):
        for region in op.regions:
            for block in region.blocks:
                for child in block.operations:
                    if child.operation.name == "stablehlo.custom_call":
                        blobs.append(child.attributes["mhlo.backend_config"]["ir"].value_bytes)
                    walk(child.operation)

    walk(module.operation)
    ctx = jax_mlir.make_ir_context()
    triton.dialect.register_dialect(ctx)
    with ctx:
        return [ir.Module.parse(blob).operation.get_asm(enable_debug_info=False) for blob in blobs]

