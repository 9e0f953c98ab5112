"""The tensor-core presets against the test vectors of the authors' own suite.

Every vector below is transcribed from github.com/north-numerical-computing/
tensor-cores-numerical-behavior (Fasi, Mikaitis; commit 9dae3fc), the suite behind Fasi, Higham,
Mikaitis & Pranesh, "Numerical behavior of NVIDIA tensor cores", PeerJ CS 7:e330 (2021):
``tc_test_numerics-V100.cu`` for the ``v100`` preset, ``tc_test_numerics-T4-A100-binary16.cu``
and ``tc_test_numerics-A100-bf16.cu`` for ``a100`` with fp16 and with bf16 inputs. The expected
values are the suite's own (its ``printpass`` conditions), not ours. Each vector is one
``wmma_init_run`` in binary32-accumulator mode: a 16-term dot product (all nonzero terms in
the first four) plus c. The suite's binary16-accumulator vectors are not here: there the
hardware rounds the fp32 block result to fp16 with round-to-nearest, which MacSpec's ``acc``
does not model.

Where the suite's C code overwrites ``pass`` (so a failing run would go unnoticed), each run is
checked on its own here. Each vector runs through the fast kernel (``tensorcore.block_fma``) and
the scalar Fraction model (``mac_ref.tensorcore_block``), block by block as the preset's order
says; both must give the suite's value.
"""

from __future__ import annotations

import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from asicsim._jax_compat import enable_x64
from asicsim._src.numerics.mac import MacSpec
from asicsim._src.numerics.scalar import round_float
from asicsim._src.numerics.tc_ref import block_ref
from asicsim._src.numerics.tensorcore import block_fma, operand_exponents

X = np.ldexp  # X(1, -24) == 2**-24, as the suite writes ldexp(1., -24)
BELOW1 = 1 - X(1, -24)  # nextafterf(1, 0)
C_CARRY = 1 + X(1, -22) + X(1, -23)
NONZERO = "nonzero"  # the suite checks only ``h_c[0] != 0``


def _vectors(tiny, below1_in, sum_a):
    """The binary32-mode runs shared by the three files: (item, c, a, b, expected).

    ``tiny`` is the small b operand of items B3/B4/D2 (fp16: the smallest subnormal 2**-24;
    bf16: 2**-24), ``below1_in`` the input format's largest value below 1, ``sum_a`` the a
    operand of the small products (V100: 1, A100: 0.5)."""
    p = below1_in * below1_in  # exact product of the "products are exact" item
    v = [
        ("B1 products exact", 0.0, [below1_in], [below1_in], p),
        ("B1 products exact x4", 0.0, [below1_in] * 4, [below1_in] * 4, 4 * p),
        ("B3 accumulated in binary32", 1.0, [sum_a] * 4, [tiny] * 4, 1.0),
    ]
    for j in range(4):  # B4: the largest term may be in any position
        a, b = [sum_a] * 4, [tiny] * 4
        a[j], b[j] = 1.0, 1.0
        v.append((f"B4 sum starts from largest, j={j}", X(1, -24), a, b, 1.0))
    v += [
        ("C1 round-down for positive values", 0.0, [1.0] * 4, [2.0, X(3, -24), 0, 0], 2.0),
        ("C2 round-up for negative values", 0.0, [1.0] * 4, [-2.0, -X(3, -24), 0, 0], -2.0),
        ("D2 normalization in addition", BELOW1, [1.0] * 4, [X(1, -24)] * 4, 1 + X(1, -23)),
    ]
    for i in range(4):  # D4 the carry-out bits, c = 1 + 2**-22 + 2**-23
        b = [1.0] * 4
        b[i] = X(1, -23)
        v.append((f"D4 carry out, i={i}", C_CARRY, [1.0] * 4, b, 4 + X(1, -21)))
    v += [
        ("D4 third carry bit", 1.875, [1.0] * 4, [1.0, 1.5, 1.75, 1.875], 8.0),
        ("D4 round-down in normalization", C_CARRY, [1.0] * 4, [1.0] * 4, 5.0),
        ("D4 round-up in normalization", -C_CARRY, [1.0] * 4, [-1.0] * 4, -5.0),
    ]
    return v


# V100 file: A (subnormals), B, C, D; D1 and D3 expect the no-extra-bit results.
V100 = [
    ("A binary16 subnormal input", 0.0, [X(1, -24)], [4.0], X(1, -22)),
    ("A binary32 subnormal c", X(1, -149), [], [], X(1, -149)),
    ("A binary16 subnormal output", 0.0, [X(1, -14)], [0.5], NONZERO),
    ("A binary16 subnormal output, c", -X(1, -15), [X(1, -14)], [1.0], NONZERO),
    *_vectors(X(1, -24), 1 - X(1, -11), 1.0),
    ("D1 extra alignment bits", -BELOW1, [1.0], [1.0], X(1, -23)),
    ("D3 normalization in subtraction", -1 + X(1, -24), [1.0, 1.0], [1.0, -X(1, -24)], X(1, -23)),
]
# T4-A100 binary16 file: as V100 but D1 and D3 expect one extra bit and B3/B4 use a = 0.5.
A100_FP16 = [
    *V100[:4],
    *_vectors(X(1, -24), 1 - X(1, -11), 0.5),
    ("D1 extra alignment bits", -BELOW1, [1.0], [1.0], X(1, -24)),
    ("D3 normalization in subtraction", -1 + X(1, -24), [1.0, 1.0], [1.0, -X(1, -24)], 0.0),
]
# A100 bf16 file: its own subnormal items; B1 with bf16's 1 - 2**-8.
A100_BF16 = [
    ("A bfloat16 subnormal input", 0.0, [X(1, -133)], [X(1, 7)], X(1, -126)),
    ("A binary32 subnormal c", X(1, -149), [], [], X(1, -149)),
    ("A binary32 subnormal output", 0.0, [X(1, -126)], [0.5], X(1, -127)),
    ("A binary32 subnormal output, c", -X(1, -127), [X(1, -126)], [1.0], X(1, -127)),
    *_vectors(X(1, -24), 1 - X(1, -8), 0.5),
    *A100_FP16[-2:],
]
# D5: the dot product is not monotonic: the run with the larger c gives the smaller result.
MONOTONIC = {  # (a, b, c_small, c_large)
    "v100": ([1.0] * 4, [X(1, -24)] * 4, BELOW1, 1.0),
    "a100": ([0.5] * 4, [X(1, -24)] * 3 + [X(3, -24)], BELOW1, 1.0),
}
CASES = [("v100", "fp16", v) for v in V100] + [("a100", "fp16", v) for v in A100_FP16] + [
    ("a100,a=bf16,b=bf16", "bf16", v) for v in A100_BF16
]
IN_DTYPE = {"fp16": np.float16, "bf16": ml_dtypes.bfloat16}


def _run(preset: str, fmt: str, c: float, a: list, b: list) -> float:
    """``c + a . b`` over 16 terms through the preset's blocks, fast kernel and Fraction model."""
    mac = MacSpec.parse(preset)
    for x in (*a, *b):  # the inputs are exact in the input format, as the suite's are
        assert float(IN_DTYPE[fmt](x)) == x, (x, fmt)
    assert np.float32(c) == c
    a, b = a + [0.0] * (16 - len(a)), b + [0.0] * (16 - len(b))
    k = mac.order_size
    fast = ref = c
    with enable_x64(True):
        col = lambda v: jnp.asarray(v, jnp.float64)[:, None]  # noqa: E731  (k, 1)
        for start in range(0, 16, k):
            ab, bb = a[start : start + k], b[start : start + k]
            ea = operand_exponents(col(ab), mac.spec("a_fmt"))
            eb = operand_exponents(col(bb), mac.spec("b_fmt"))
            fast = float(block_fma(jnp.full((1, 1), fast, jnp.float64), col(ab), col(bb), ea, eb, mac)[0, 0])
            ref = block_ref(ref, ab, bb, mac)
    assert np.float64(fast).view(np.uint64) == np.float64(ref).view(np.uint64), (fast, ref)
    return fast


@pytest.mark.parametrize("preset, fmt, vector", CASES, ids=[f"{p.split(',')[0]}-{f}-{v[0]}" for p, f, v in CASES])
def test_preset_passes_suite_vector(preset, fmt, vector):
    _, c, a, b, expected = vector
    got = _run(preset, fmt, c, a, b)
    if expected == NONZERO:
        assert got != 0
    else:
        assert got == expected, (got, expected)


@pytest.mark.parametrize("preset, fmt", [("v100", "fp16"), ("a100", "fp16"), ("a100,a=bf16,b=bf16", "bf16")])
def test_preset_dot_product_is_not_monotonic(preset, fmt):
    a, b, c_small, c_large = MONOTONIC[preset.split(",")[0]]
    assert _run(preset, fmt, c_large, a, b) < _run(preset, fmt, c_small, a, b)


# The suite's binary16-mode runs (V100.cu and T4-A100-binary16.cu alike): c and d are fp16; the
# block sum is formed as in binary32 mode and stored to fp16 rounded to nearest (the suite's "Accum.
# is rounded to nearest (binary16 mode)" item), which is MacSpec's ``out=fp16,out_rounding=rne``.
FP16_MODE = [
    ("A binary16 subnormal input", 0.0, [X(1, -24)], [4.0], X(1, -22)),
    ("A binary16 subnormal output", 0.0, [X(1, -14)], [0.5], X(1, -15)),  # the suite: != 0
    ("A binary16 subnormal output, c", -X(1, -15), [X(1, -14)], [1.0], X(1, -15)),  # != 0
    ("B products exact", 0.0, [1 - X(1, -11)] * 2, [1 - X(1, -11), X(1, -11)],
     1 - X(1, -10) + X(1, -11)),
    ("C accumulator rounded to nearest", 0.0, [X(1, -24)] * 2, [0.5, 0.25], X(1, -24)),
]


@pytest.mark.parametrize("preset", ["v100", "a100"])
@pytest.mark.parametrize("vector", FP16_MODE, ids=[v[0] for v in FP16_MODE])
def test_preset_passes_suite_binary16_mode_vector(preset, vector):
    _, c, a, b, expected = vector
    mac = MacSpec.parse(f"{preset},out=fp16,out_rounding=rne")
    got = round_float(_run(f"{preset},out=fp16,out_rounding=rne", "fp16", c, a, b), mac.spec("out"),
                      mac.final_rounding)
    assert got == expected, (got, expected)
