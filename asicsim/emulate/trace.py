"""The op trace: every GEMM/convolution an emulated function runs, with its GEMM shape, operand
roles, formats and count per call — what :mod:`asicsim.hw` prices.

Recording happens while :func:`asicsim.emulate` traces a function (shapes only, nothing runs);
``lax.scan`` bodies count ``length`` times. With ``training=True`` each forward GEMM adds its two
gradient GEMMs (same MACs): ``grad-input`` (dX = dY W^T) and ``grad-weight`` (dW = X^T dY, only
where one operand is a weight).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

import pandas as pd

_ACTIVE: list[list[dict]] = []


@contextlib.contextmanager
def recording() -> Iterator[list[dict]]:
    """Collect the entries :func:`record` sees while the block runs."""
    buf: list[dict] = []
    _ACTIVE.append(buf)
    try:
        yield buf
    finally:
        _ACTIVE.pop()


def record(*, kind, shapes, out_shape, roles, params, count, policy) -> None:
    if not _ACTIVE:
        return
    M, N, K, batch = gemm_dims(kind, shapes, out_shape, params)
    if roles == ("weight", "act"):  # W @ x (Equinox's Linear): the same GEMM with the act first
        M, N, roles, shapes = N, M, ("act", "weight"), shapes[::-1]
    fmt = {r: (policy.role(r).spec.name if policy.role(r) else "float32") for r in ("act", "weight", "acc", "out")}
    _ACTIVE[-1].append({"kind": kind, "M": M, "N": N, "K": K, "batch": batch, "count": count,
                        "lhs_role": roles[0], "rhs_role": roles[1], "lhs_shape": shapes[0],
                        "rhs_shape": shapes[1], "format_lhs": fmt[roles[0]], "format_rhs": fmt[roles[1]],
                        "format_acc": fmt["acc"], "format_out": fmt["out"], "recipe": policy.name})


def gemm_dims(kind: str, shapes, out_shape, params) -> tuple[int, int, int, int]:
    """(M, N, K, batch) of a dot_general or convolution (im2col: M output pixels, N output
    channels, K window elements per group; groups and batch dims are independent GEMMs)."""
    lhs, rhs = shapes
    if kind == "gemm":
        (lc, rc), (lb, rb) = params["dimension_numbers"]
        K = math.prod(lhs[i] for i in lc)
        batch = math.prod(lhs[i] for i in lb)
        M = math.prod(lhs[i] for i in range(len(lhs)) if i not in lc and i not in lb)
        N = math.prod(rhs[i] for i in range(len(rhs)) if i not in rc and i not in rb)
        return M, N, K, batch
    dn = params["dimension_numbers"]
    groups = params["feature_group_count"] * params["batch_group_count"]
    rhs_spec, out_spec = dn.rhs_spec, dn.out_spec
    out_ch = out_shape[out_spec[1]]
    M = out_shape[out_spec[0]] * math.prod(out_shape[i] for i in out_spec[2:])
    K = rhs[rhs_spec[1]] * math.prod(rhs[i] for i in rhs_spec[2:])  # in-channels per group x window
    return M, out_ch // groups, K, groups


def trace_frame(entries: list[dict], training: bool) -> pd.DataFrame:
    rows = []
    for e in entries:
        rows.append({**e, "role": "forward"})
        if training:
            # dX = dY (M x N) times W^T (N x K); dW = X^T (K x M) times dY (M x N)
            rows.append({**e, "role": "grad-input", "M": e["M"], "N": e["K"], "K": e["N"]})
            if "weight" in (e["lhs_role"], e["rhs_role"]):
                rows.append({**e, "role": "grad-weight", "M": e["K"], "N": e["N"], "K": e["M"]})
    cols = ["role", "kind", "M", "N", "K", "batch", "count", "lhs_role", "rhs_role", "format_lhs",
            "format_rhs", "format_acc", "format_out", "lhs_shape", "rhs_shape", "recipe"]
    df = pd.DataFrame(rows, columns=cols)
    df["macs"] = df.M * df.N * df.K * df.batch * df["count"]
    return df
