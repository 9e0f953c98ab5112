"""Rows: the numbering of GEMM sites that delayed scaling's amax history, static (calibrated)
scales, ``[first_last]`` and :func:`asicsim._src.emulate.layer_report.layer_report` share.

A *row* is one GEMM or convolution of one layer. Transformer Engine keeps one amax history per
module (``transformer_engine.pytorch.module.base.TransformerEngineBaseModule.fp8_meta``: each
``Linear`` its own ``amax_history``), so a GEMM that stands for several layers needs several rows:

* a **layer scan** -- a ``lax.scan`` with a weight among its scanned inputs ``xs`` (Flax's
  ``nn.scan`` with ``variable_axes={"params": 0}``, a ``lax.scan`` over stacked weights, the usual
  way to write a deep transformer) -- is numbered as if unrolled: a body of ``k`` rows in a scan of
  length ``n`` takes ``k * n`` rows, iteration ``t`` (in execution order: ``reverse`` scans run
  ``xs[n-1]`` first) rows ``t*k .. t*k+k-1`` of the block; nested layer scans multiply;
* a **time scan** -- a scan whose weights are constants of the body (an RNN cell applied at every
  step: one module) -- keeps one row per body GEMM, its amax the largest over the iterations;
* a ``while_loop`` body keeps one row per GEMM (its trip count is not static), as a time scan;
* every branch of a ``cond`` has rows of its own; nested calls (``jit``, ``remat``, a user's
  ``custom_vjp``) are numbered as if inlined.

Which scans are layer scans is decided by the same weight provenance the interpreter uses
(:mod:`.provenance`: leaves of the ``weights`` argument and whatever reshapes, slices or casts them
without reading data; an embedding lookup by token ids is data), so this count and the
interpreter's numbering agree.
"""

from __future__ import annotations

import jax.numpy as jnp
from jax.extend import core as jcore

from asicsim._jax_compat import scan_operand_counts
from asicsim._src.emulate.provenance import (
    STRUCTURAL,
    input_data,
    loop_data,
    moves_weight,
    operand_data,
)

__all__ = ["CALLS", "CUSTOM", "GEMMS", "REMAT", "STRUCTURAL", "count_rows", "is_gemm", "is_integer_gemm",
           "is_layer_scan", "scan_parts"]

# kept in step with interpreter.py (the interpreter imports them from here)
CALLS = frozenset({"pjit", "jit", "closed_call", "core_call", "remat", "checkpoint", "remat2", "custom_lin"})
REMAT = frozenset({"remat", "checkpoint", "remat2"})  # jax.checkpoint: emulated inside a checkpoint of its own
CUSTOM = frozenset({"custom_vjp_call", "custom_vjp_call_jaxpr", "custom_jvp_call"})  # a user's derivative rule


GEMMS = ("dot_general", "conv_general_dilated")


def is_gemm(eqn) -> bool:
    """A float dot_general or convolution: an emulated GEMM site. A GEMM of two integer (or
    bool) operands is not, whatever its result type (int8 x int8 -> int32 as AQT serves, or ->
    float32): it is the user's exact integer arithmetic (:func:`is_integer_gemm`)."""
    return eqn.primitive.name in GEMMS and not is_integer_gemm(eqn)


def is_integer_gemm(eqn) -> bool:
    """A dot_general or convolution of two integer (or bool) operands: run as it is, never
    rounded, and priced in the formats of its own dtypes (:func:`.trace.dtype_formats`)."""
    return eqn.primitive.name in GEMMS and all(
        jnp.issubdtype(v.aval.dtype, jnp.integer) or v.aval.dtype == jnp.bool_ for v in eqn.invars[:2])


def scan_parts(p: dict) -> tuple[int, int]:
    """(consts, carry) operand counts of a scan equation (its xs follow)."""
    return scan_operand_counts(p)


def is_layer_scan(p: dict, flags) -> bool:
    """Whether a scan (params ``p``, operand weight flags ``flags``) scans over weights: its
    iterations are different layers, each with rows of its own."""
    nc, ncarry = scan_parts(p)
    return any(flags[nc + ncarry:])


def _inner(p, key="jaxpr"):
    inner = p[key]
    return inner.jaxpr if hasattr(inner, "consts") else inner


def count_rows(jaxpr, flags=None, data=None) -> int:
    """Rows of ``jaxpr`` (see the module docstring) when its inputs have weight ``flags`` (one
    per invar, truthy: a weight; None: none is) and depend on data as ``data`` says (None: every
    input that is not a weight does, :func:`.provenance.input_data`)."""
    return _walk(jaxpr, flags or [0] * len(jaxpr.invars), data)[0]


def _walk(jaxpr, flags, data) -> tuple[int, list[bool]]:
    """(rows of ``jaxpr``, whether each of its outputs is the weight), as :func:`count_rows`."""
    weights = {v for v, f in zip(jaxpr.invars, flags, strict=True) if f}
    weights |= {v for v in jaxpr.constvars if jnp.issubdtype(v.aval.dtype, jnp.floating)}  # closed over
    dep = {v for v, d in zip(jaxpr.invars, input_data(flags, data), strict=True) if d}
    n = 0
    for eqn in jaxpr.eqns:
        name, p = eqn.primitive.name, eqn.params
        fl = [not isinstance(v, jcore.Literal) and v in weights for v in eqn.invars]
        dl = operand_data(eqn, dep)
        if is_gemm(eqn):
            n += 1
        elif name == "scan":
            nc, ncarry = scan_parts(p)
            bdata = loop_data(_inner(p), dl, nc, ncarry)
            body = count_rows(_inner(p), [*fl[:nc], *([False] * ncarry), *fl[nc + ncarry:]], bdata)
            n += body * (p["length"] if is_layer_scan(p, fl) else 1)
        elif name == "while":
            cn, bn = p["cond_nconsts"], p["body_nconsts"]
            nin = len(eqn.invars) - cn - bn
            bdata = loop_data(_inner(p, "body_jaxpr"), dl[cn:], bn, nin)
            n += count_rows(_inner(p, "cond_jaxpr"), [*fl[:cn], *([False] * nin)], [*dl[:cn], *bdata[bn:]])
            n += count_rows(_inner(p, "body_jaxpr"), [*fl[cn:cn + bn], *([False] * nin)], bdata)
        elif name == "cond":
            n += sum(count_rows(br.jaxpr, fl[1:], dl[1:]) for br in p["branches"])
        elif name in CALLS and "jaxpr" in p:
            rows, out = _walk(_inner(p), fl, dl)
            n += rows
            if name not in REMAT:  # inlined (interpreter.py): its results as its body made them
                weights.update(v for v, w in zip(eqn.outvars, out, strict=True) if w)
        elif name in CUSTOM:
            n += count_rows(_inner(p, "call_jaxpr"), fl, dl)
        if moves_weight(name, fl, dl):
            weights.update(eqn.outvars)
        if any(dl):
            dep.update(eqn.outvars)
    return n, [not isinstance(v, jcore.Literal) and v in weights for v in jaxpr.outvars]
