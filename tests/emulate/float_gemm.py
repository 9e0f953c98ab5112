"""What a float32 GEMM promises whatever order it sums in.

Two float32 GEMMs of the same operands agree bit for bit only where the library happens to sum
them in the same order: XLA and BLAS pick a kernel per shape, layout and host CPU (vector width,
blocking of K), so ``x @ w`` and ``(w.T @ x.T).T`` differ by a few ulp on some hosts and not on
others (issue 29 item 23). What holds for every order is the inner-product bound
``|fl(a . b) - a . b| <= gamma_K |a| . |b|``, ``gamma_K = K u / (1 - K u)``, u = 2**-24 (Higham,
*Accuracy and Stability of Numerical Algorithms*, 2nd ed., section 3.1: "for any order of
evaluation"; a fused multiply-add only removes roundings). Tests of our arithmetic (the rounded
operands, a bit-exact MAC order) stay bit for bit; a GEMM whose order the library chooses is
checked against this bound around the exact (float64) product of the same operands.
"""

from __future__ import annotations

import numpy as np


def gamma(k: int, unit_roundoff: float) -> float:
    return k * unit_roundoff / (1 - k * unit_roundoff)


def float32_gemm_bound(a, b) -> tuple[np.ndarray, np.ndarray]:
    """(exact product, bound on |float32 GEMM - exact|) of 2-D ``a @ b`` for any summation order;
    the float64 reference's own error (gamma_K in double) is added to the bound."""
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    k = a64.shape[-1]
    exact = a64 @ b64
    return exact, (gamma(k, 2.0**-24) + gamma(k, 2.0**-53)) * (np.abs(a64) @ np.abs(b64))


def assert_float32_gemm(got, a, b) -> None:
    """``got`` is ``a @ b`` summed in float32 in some order: within the bound of the exact product."""
    exact, bound = float32_gemm_bound(a, b)
    err = np.abs(np.asarray(got, np.float64) - exact)
    worst = np.unravel_index(np.argmax(err - bound), err.shape)
    assert np.all(err <= bound), (f"not a float32 GEMM of these operands: |got - exact| = {err[worst]:.3g} > "
                                  f"bound {bound[worst]:.3g} at {worst}")
