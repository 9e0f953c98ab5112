"""Primitives whose work the emulation cannot see: refused, or passed through where the recipe says.

A Pallas kernel (``pallas_call``), a foreign function (``jax.ffi.ffi_call``; cuDNN's fused
attention ``jax.nn.dot_product_attention(implementation="cudnn")`` and scaled matmul), a host
callback with results (``jax.pure_callback``, ``io_callback``), a function exported and called
back (``call_exported``), or a ``shard_map``/``pmap`` body run code of their own: a GEMM in there
is neither rounded nor in the op trace, so an mxfp4 model came out bit-identical to fp32 with no
word. The interpreter refuses such an equation (:class:`OpaqueError`, naming it and the way out)
where it may hide work the recipe would change (:func:`hidden`):

- a black box (:data:`BLACK_BOX`): code the emulation cannot look into;
- ``ragged_dot_general`` (``lax.ragged_dot``, the grouped GEMM of mixture-of-experts layers): a
  GEMM the emulation does not implement;
- any other primitive it binds whole (it does not enter it as it enters ``jit``, ``scan``,
  ``while``, ``cond``, ``checkpoint`` and ``custom_vjp``/``custom_jvp`` functions with GEMMs) whose
  params hold a jaxpr with a float GEMM or a black box inside: a Pallas kernel's ``dot``, a
  ``custom_vjp`` around cuDNN's attention, a ``shard_map`` body.

A Pallas kernel is not emulated inside: its GEMMs run on the tiles its block specs cut, in a
kernel the backend compiles (Triton, Mosaic), where the rounding code would be another program
(and an MX block along K would be cut at the tile's edge). Emulate the model with the kernel's
reference implementation (an XLA attention for a flash-attention kernel).

A recipe's ``opaque = ["pallas_call"]`` (:attr:`asicsim._src.emulate.Policy.opaque`) passes the
primitives it names through unemulated, each with an :class:`OpaquePrimitive` warning at every
trace: their GEMMs run in the model's own precision and are absent from the op trace.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator

from jax.extend import core as jcore

from asicsim._src.emulate.site_rows import is_gemm

# code the emulation cannot look into (a callback or io_callback without results is left alone:
# jax.debug.print, logging; it cannot change a number)
BLACK_BOX = frozenset({"ffi_call", "custom_call", "pure_callback", "io_callback", "buffer_callback",
                       "call_exported", "scaled_matmul", "scaled_matmul_wrapper",
                       *(f"dot_product_attention{fp8}_{d}{w}" for fp8 in ("", "_fp8") for d in ("fwd", "bwd")
                         for w in ("", "_wrapper"))})
UNEMULATED_GEMMS = frozenset({"ragged_dot_general"})


class OpaqueError(NotImplementedError):
    """An equation that may hide work the recipe would change (module docstring)."""


class OpaquePrimitive(UserWarning):
    """A primitive the recipe's ``opaque`` list passed through unemulated."""


def sub_jaxprs(params: dict) -> Iterator:
    """The jaxprs among an equation's params (a Pallas kernel, a call's body, cond branches)."""
    for value in params.values():
        for x in value if isinstance(value, (tuple, list)) else (value,):
            if isinstance(x, jcore.ClosedJaxpr):
                yield x.jaxpr
            elif isinstance(x, jcore.Jaxpr):
                yield x


def _black_box(eqn) -> bool:
    return eqn.primitive.name in BLACK_BOX and bool(eqn.outvars)


def _inside(jaxpr) -> str | None:
    """What in ``jaxpr`` (nested jaxprs included) the emulation would miss: a float GEMM's or a
    black box's name, else None."""
    for eqn in jaxpr.eqns:
        if is_gemm(eqn) or _black_box(eqn) or eqn.primitive.name in UNEMULATED_GEMMS:
            return eqn.primitive.name
        found = next(filter(None, (_inside(j) for j in sub_jaxprs(eqn.params))), None)
        if found is not None:
            return found
    return None


def hidden(eqn) -> tuple[str, str] | None:
    """(the primitive to name, what it hides) where ``eqn``, bound whole, may hide work the
    recipe would change; None where it cannot."""
    name = eqn.primitive.name
    if _black_box(eqn):
        return name, "runs code the emulation cannot look into"
    if name in UNEMULATED_GEMMS:
        return name, "is a GEMM the emulation does not implement"
    for jaxpr in sub_jaxprs(eqn.params):
        found = _inside(jaxpr)
        if found is None:
            continue
        if found in BLACK_BOX:
            return found, f"runs inside {name!r} code the emulation cannot look into"
        return name, f"has a {found!r} inside that the emulation does not enter"
    return None


def check(eqn, policy) -> bool:
    """Whether ``eqn`` is opaque (:func:`hidden`) and the recipe passes it through (with an
    :class:`OpaquePrimitive` warning); raise :class:`OpaqueError` where it does not."""
    found = hidden(eqn)
    if found is None:
        return False
    culprit, what = found
    if culprit in policy.opaque or eqn.primitive.name in policy.opaque:
        warnings.warn(f"recipe {policy.name!r}: {culprit!r} ran unemulated (opaque = {list(policy.opaque)}): "
                      f"it {what}; its GEMMs run in the model's own precision and are not in the op trace",
                      OpaquePrimitive, stacklevel=2)
        return True
    raise OpaqueError(
        f"asicsim.emulate cannot emulate {culprit!r}: it {what}, so its GEMMs would run unrounded in the "
        f"model's own precision and be missing from the op trace. Emulate the model with its reference "
        f"implementation (an XLA attention in place of a Pallas or cuDNN kernel, the computation in place "
        f"of a callback), or pass it through unemulated with the recipe option opaque = [{culprit!r}] "
        f"(Policy(..., opaque=({culprit!r},))): each emulated call then warns that it did")
