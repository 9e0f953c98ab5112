"""Rows: the numbering of GEMM sites that delayed scaling's amax history, static (calibrated)
scales, ``[first_last]`` and :func:`asicsim.emulate.layer_rules.layer_report` share.

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

Which scans are layer scans is decided by the same weight provenance the interpreter uses (leaves
of the ``weights`` argument and whatever reshapes, slices or casts them), so this count and the
interpreter's numbering agree.
"""

from __future__ import annotations

import jax.numpy as jnp
from jax.extend import core as jcore

from asicsim._jax_compat import scan_operand_counts

# kept in step with interpreter.py (the interpreter imports them from here)
STRUCTURAL = frozenset({"reshape", "transpose", "convert_element_type", "broadcast_in_dim", "squeeze",
                        "expand_dims", "slice", "dynamic_slice", "copy", "copy_p", "rev", "gather",
                        "reduce_precision", "concatenate", "pad", "select_n"})
CALLS = frozenset({"pjit", "jit", "closed_call", "core_call", "remat", "checkpoint", "remat2", "custom_lin"})
CUSTOM = frozenset({"custom_vjp_call", "custom_vjp_call_jaxpr", "custom_jvp_call"})  # a user's derivative rule


def is_gemm(eqn) -> bool:
    """A float dot_general or convolution: an emulated GEMM site (integer GEMMs are not)."""
    if eqn.primitive.name not in ("dot_general", "conv_general_dilated"):
        return False
    return not all(jnp.issubdtype(v.aval.dtype, jnp.integer) or v.aval.dtype == jnp.bool_
                   for v in (*eqn.invars, *eqn.outvars))


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


def count_rows(jaxpr, flags=None) -> int:
    """Rows of ``jaxpr`` (see the module docstring) when its inputs have weight ``flags`` (one
    per invar, truthy: a weight; None: none is)."""
    weights = {v for v, f in zip(jaxpr.invars, flags or [0] * len(jaxpr.invars), strict=True) if f}
    weights |= {v for v in jaxpr.constvars if jnp.issubdtype(v.aval.dtype, jnp.floating)}  # closed over
    n = 0
    for eqn in jaxpr.eqns:
        name, p = eqn.primitive.name, eqn.params
        fl = [not isinstance(v, jcore.Literal) and v in weights for v in eqn.invars]
        if is_gemm(eqn):
            n += 1
        elif name == "scan":
            nc, ncarry = scan_parts(p)
            body = count_rows(_inner(p), [*fl[:nc], *([False] * ncarry), *fl[nc + ncarry:]])
            n += body * (p["length"] if is_layer_scan(p, fl) else 1)
        elif name == "while":
            cn, bn = p["cond_nconsts"], p["body_nconsts"]
            nin = len(eqn.invars) - cn - bn
            n += count_rows(_inner(p, "cond_jaxpr"), [*fl[:cn], *([False] * nin)])
            n += count_rows(_inner(p, "body_jaxpr"), [*fl[cn:cn + bn], *([False] * nin)])
        elif name == "cond":
            n += sum(count_rows(br.jaxpr, fl[1:]) for br in p["branches"])
        elif name in CALLS and "jaxpr" in p:
            n += count_rows(_inner(p), fl)
        elif name in CUSTOM:
            n += count_rows(_inner(p, "call_jaxpr"), fl)
        if name in STRUCTURAL and any(fl):
            weights.update(eqn.outvars)
    return n
