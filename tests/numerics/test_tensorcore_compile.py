"""Compile size of chained tensor-core GEMMs (issue 37): the blocks of a GEMM read operands made
by cheap elementwise ops (the previous GEMM's blocks, a ReLU); XLA must compute them once, not
fuse them again into every block's slice (asicsim/_src/numerics/tensorcore.py, ``_unroll``).
Measured on the previous code (benchmarks/RESULTS.md): two chained 4-block GEMMs compiled to
3.7x one GEMM's optimised HLO text, the tiny transformer's gradient under tensorcore_fp16 to
30 MB; now 1.9x, 6.3 MB."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from asicsim._src.numerics.matmul import matmul


def _hlo_chars(fn, *args) -> int:
    return len(jax.jit(fn).lower(*args).compile().as_text())


def test_chained_tensor_core_gemms_compile_to_about_twice_one():
    """K = 16 on the V100 preset: 4 blocks of 4 products per GEMM. The second GEMM's operand is
    a ReLU of the first one's output; two GEMMs should cost about two GEMMs of code (2.5x allows
    for the ReLU and the second GEMM's own rounding; the previous code gave 3.7x)."""
    rng = np.random.default_rng(0)
    x, w1, w2 = (jnp.asarray(rng.standard_normal(s), jnp.float32) for s in ((8, 16), (16, 16), (16, 8)))
    one = _hlo_chars(lambda x, w: matmul(x, w, "v100"), x, w1)
    two = _hlo_chars(lambda x, w1, w2: matmul(jnp.maximum(matmul(x, w1, "v100"), 0.0) * 0.5, w2, "v100"),
                     x, w1, w2)
    assert two < 2.5 * one, (one, two, two / one)
