"""The op trace: every GEMM/convolution an emulated function runs, with its GEMM shape, operand
roles, formats and count per call — what :mod:`asicsim.hw` prices — the Hadamard transforms of
operands a recipe rotates (:mod:`.rotation_trace`), and, when asked, the elementwise work around
them (see :func:`record_elementwise`).

Recording happens while :func:`asicsim.emulate` traces a function (shapes only, nothing runs);
``lax.scan`` bodies count ``length`` times. With ``training=True`` each forward GEMM adds its two
gradient GEMMs (same MACs): ``grad-input`` (dX = dY W^T) and ``grad-weight`` (dW = X^T dY, only
where one operand is a weight). A GEMM of integer operands (int8 x int8 -> int32, as a model
quantized for serving runs it) is the user's exact arithmetic: recorded in its own dtypes'
formats (``int8``, ``int8``, accumulator and output ``int32``), with no gradient GEMMs.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

import numpy as np
import pandas as pd

from asicsim._src.emulate.elementwise_trace import ELEMENTWISE_COLUMNS, elementwise_entries
from asicsim._src.emulate.policy import ATTENTION_ROLES
from asicsim._src.emulate.rotation_trace import rotation_rows, rotation_work
from asicsim._src.emulate.vector_roles import role_of

_ACTIVE: list[list[dict]] = []
_ELEMENTWISE: list[bool] = []  # per active recording: collect elementwise work too


@contextlib.contextmanager
def recording(elementwise: bool = False) -> Iterator[list[dict]]:
    """Collect the entries :func:`record` (and, with ``elementwise``, :func:`record_elementwise`)
    sees while the block runs."""
    buf: list[dict] = []
    _ACTIVE.append(buf)
    _ELEMENTWISE.append(elementwise)
    try:
        yield buf
    finally:
        _ACTIVE.pop()
        _ELEMENTWISE.pop()


def trace_active() -> bool:
    """Is an op trace being recorded (:func:`recording`)?"""
    return bool(_ACTIVE)


def record_elementwise(eqn, count: int, policy) -> None:
    """Record the elementwise work of one equation of the user's program (the interpreter calls
    this for every equation it does not emulate itself; see :mod:`.elementwise_trace`)."""
    if not (_ACTIVE and _ELEMENTWISE[-1]):
        return
    fmt = {r: (policy.role(r).spec.name if policy.role(r) else "float32")
           for r in ("act", "acc", "out", "grad", "grad_out")}
    for e in elementwise_entries(eqn, count):
        # an op a vector role rounds reads and writes that role's format (vector_roles.py), its
        # backward too; otherwise the forward's act/out and the backward's grad/grad_out
        role = role_of(e["primitive"])
        spec = policy.role(role) if role is not None else None
        lhs, out = (spec.spec.name, spec.spec.name) if spec is not None else (fmt["act"], fmt["out"])
        blhs, bout = (spec.spec.name, spec.spec.name) if spec is not None else (fmt["grad"], fmt["grad_out"])
        _ACTIVE[-1].append({**e, "N": 1, "batch": 1, "lhs_role": "act", "rhs_role": "", "lhs_shape": (),
                            "rhs_shape": (), "format_lhs": lhs, "format_rhs": "",
                            "format_acc": fmt["acc"], "format_out": out, "recipe": policy.name, "weight_path": "",
                            "format_lhs_bwd": blhs, "format_out_bwd": bout, "tensor_core": ""})


def record(*, kind, shapes, out_shape, roles, params, count, policy, formats=None, path="") -> None:
    """Record one GEMM or convolution; ``formats``: its (lhs, rhs, acc, out) formats where they
    are its own, not the recipe's roles' (an integer GEMM, :func:`dtype_formats`; it has no
    gradient GEMMs); ``path``: its weight operand's leaf path (``weight_path``, as layer rules
    match it: ``<act>`` for none), which pricing uses to find a pruned weight's sparsity."""
    if not _ACTIVE:
        return
    M, N, K, batch = gemm_dims(kind, shapes, out_shape, params)
    fmt = {r: (policy.role(r).spec.name if policy.role(r) else "float32")
           for r in {"act", "weight", "acc", "out", *roles}}
    lhs, rhs, acc, out = formats or (fmt[roles[0]], fmt[roles[1]], fmt["acc"], fmt["out"])
    if roles == ("weight", "act"):  # W @ x (Equinox's Linear): the same GEMM with the act first
        M, N, roles, shapes, lhs, rhs = N, M, ("act", "weight"), shapes[::-1], rhs, lhs
    _ACTIVE[-1].append({"kind": kind, "M": M, "N": N, "K": K, "batch": batch, "count": count,
                        "lhs_role": roles[0], "rhs_role": roles[1], "lhs_shape": shapes[0],
                        "rhs_shape": shapes[1], "format_lhs": lhs, "format_rhs": rhs,
                        "format_acc": acc, "format_out": out, "recipe": policy.name, "weight_path": path or "",
                        "grad_formats": {} if formats else gradient_formats(policy, roles),
                        "backward": formats is None, **tensor_core_columns(policy, formats is None),
                        "rotations": {} if formats else rotation_work(policy, roles, M, N, K)})


def tensor_core_columns(policy, emulated: bool = True) -> dict:
    """The GPU whose tensor cores run a GEMM (``tensor_core``, "" for none) and its gradient
    GEMMs (``grad-input`` writes ``grad_out``, ``grad-weight`` writes ``wgrad``)."""
    def gpu(role):
        return (policy.tensor_core_gpu(role) or "") if emulated else ""

    return {"tensor_core": gpu("out"), "grad_tensor_core": {"grad-input": gpu("grad_out"),
                                                            "grad-weight": gpu("wgrad")}}


def dtype_formats(eqn) -> tuple[str, str, str, str]:
    """(lhs, rhs, acc, out) formats of a GEMM that runs in its operands' own dtypes (an integer
    GEMM: int8 x int8 accumulated in its int32 result; into a float result, in float32)."""
    lhs, rhs = (np.dtype(v.aval.dtype).name for v in eqn.invars[:2])
    out = np.dtype(eqn.outvars[0].aval.dtype)
    return lhs, rhs, out.name if np.issubdtype(out, np.integer) else "float32", out.name


def gradient_formats(policy, roles) -> dict[str, tuple[str, str, str, str]]:
    """(lhs, rhs, acc, out) formats of a GEMM's two gradient GEMMs under the GEMM's own policy
    (a layer rule's, the first/last layer's): ``grad-input`` dX = dY W^T reads the cotangent as
    ``grad_dx`` and the other operand as ``<role>_dx`` and writes ``grad_out``; ``grad-weight``
    dW = X^T dY reads ``<role>_dw`` and ``grad_dw`` and writes ``wgrad`` (each role falling back
    as :class:`~asicsim._src.emulate.policy.Policy` says)."""
    def name(role):
        spec = policy.role(role)
        return spec.spec.name if spec is not None else "float32"

    roles = tuple("act" if r in ATTENTION_ROLES else r for r in roles)  # forward-only roles
    other = roles[1] if roles[0] == "act" else roles[0]  # the operand beside the activation
    return {"grad-input": (name("grad_dx"), name(f"{other}_dx"), name("acc"), name("grad_out")),
            "grad-weight": (name(f"{roles[0]}_dw"), name("grad_dw"), name("acc"), name("wgrad"))}


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


def _grad_formats(entry: dict, role: str) -> dict[str, str]:
    """The format columns of a GEMM's gradient GEMM ``role``, as :func:`record` stored them."""
    grads = entry.get("grad_formats", {})
    if role not in grads:
        return {}
    return dict(zip(("format_lhs", "format_rhs", "format_acc", "format_out"), grads[role], strict=True))


def trace_frame(entries: list[dict], training: bool) -> pd.DataFrame:
    """One row per GEMM and role; elementwise entries (``kind`` "elementwise") are summed over
    equal shapes into one row each, and with ``training`` mirrored by a ``grad-input`` row of
    the same work — an estimate: the VJP of an elementwise op is about as much elementwise work
    as the op (relu's is a compare and select, tanh's ``g (1 - y^2)``, a max-pool's a
    select-and-scatter over the same windows); JAX's own backward jaxpr is not interpreted."""
    rows = []
    for e in entries:
        if e["kind"] == "elementwise":
            continue
        rows.append({**e, "role": "forward"})
        if training and e["backward"]:  # an integer GEMM has no gradient
            # dX = dY (M x N) times W^T (N x K); dW = X^T (K x M) times dY (M x N)
            rows.append({**e, "role": "grad-input", "M": e["M"], "N": e["K"], "K": e["N"],
                         **_grad_formats(e, "grad-input"), "tensor_core": e["grad_tensor_core"]["grad-input"]})
            if "weight" in (e["lhs_role"], e["rhs_role"]):
                rows.append({**e, "role": "grad-weight", "M": e["K"], "N": e["N"], "K": e["M"],
                             **_grad_formats(e, "grad-weight"),
                             "tensor_core": e["grad_tensor_core"]["grad-weight"]})
    cols = ["role", "kind", "M", "N", "K", "batch", "count", "lhs_role", "rhs_role", "format_lhs",
            "format_rhs", "format_acc", "format_out", "lhs_shape", "rhs_shape", "recipe", "tensor_core",
            "weight_path"]
    df = pd.DataFrame(rows, columns=cols)
    df["macs"] = df.M * df.N * df.K * df.batch * df["count"]
    ew = [e for e in entries if e["kind"] == "elementwise"]
    rot = pd.DataFrame(rotation_rows(entries, training))  # the Hadamard transforms of rotated operands
    if not ew and not len(rot):
        return df
    parts = [df, rot]
    if ew:
        keys = [c for c in (*cols, *ELEMENTWISE_COLUMNS, "format_lhs_bwd", "format_out_bwd")
                if c not in ("role", "count", "lhs_shape", "rhs_shape")]
        ew = pd.DataFrame(ew).groupby(keys, sort=False, as_index=False)["count"].sum()
        ew = ew.assign(role="forward", macs=0, lhs_shape=[()] * len(ew), rhs_shape=[()] * len(ew))
        bwd = ew.assign(role="grad-input", format_lhs=ew["format_lhs_bwd"], format_out=ew["format_out_bwd"])
        parts += [ew] + ([bwd] if training else [])
    return pd.concat([p for p in parts if len(p)], ignore_index=True)[[*cols, "macs", *ELEMENTWISE_COLUMNS]]
