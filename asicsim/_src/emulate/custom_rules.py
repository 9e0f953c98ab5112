"""A user's own differentiation and memory rules inside an emulated function.

``jax.custom_vjp``: the forward function (the one jax runs when it differentiates) and the user's
backward function are both traced and run through the interpreter, so their GEMMs are emulated:
forward GEMMs as everywhere (roles by provenance), backward GEMMs as gradient GEMMs (the operand
computed from the cotangent has role ``grad``; the result is rounded to ``grad_out``, or to
``wgrad`` where neither operand is a weight, i.e. dW = X^T dY). The user's rule is kept: jax
differentiates the emulated function through it, never through the forward's own derivative.
Backward GEMMs scale by their current amax (a backward pass records no delayed-scaling history)
and draw stochastic rounding's bits from streams of their own.

``jax.custom_jvp`` with GEMMs inside (``jax.nn`` functions have none and run untouched): the
primal is emulated; differentiating it is an error, because a JVP rule's tangent GEMMs would
have to be linear in the tangents to be transposed, and rounding is not. Rewriting the rule as a
``custom_vjp`` emulates both directions.

``jax.checkpoint``: the emulated body runs inside a ``jax.checkpoint`` with the user's policy, so
its activations are recomputed in the backward pass, as without emulation.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend import core as jcore

from asicsim._jax_compat import subfuns
from asicsim._src.emulate.lsq_sites import Body
from asicsim._src.emulate.policy import Policy
from asicsim._src.emulate.site_rows import count_rows
from asicsim._src.numerics.random import derive

GRAD = 3  # interpreter flag of a value computed from a cotangent
_BACKWARD_WORDS = 0x5EED_B0  # stream offset of a user's backward GEMMs


@functools.lru_cache(maxsize=64)
def backward_policy(pol: Policy, out_role: str) -> Policy:
    """``pol`` with role ``out`` replaced by ``out_role``'s spec (a gradient GEMM's result), and
    run on the tensor cores ``out_role``'s GEMM runs on (``tensor_core``)."""
    spec = pol.role(out_role)
    roles = [(r, s) for r, s in pol.roles if r != "out"]
    if spec is not None:
        roles.append(("out", spec))
    gpu = pol.tensor_core_gpu(out_role)
    return dataclasses.replace(pol, roles=tuple(roles), tensor_core=(("out", gpu),) if gpu else "")


def _name(eqn) -> str:
    """The user's function name, as jax recorded it (a fallback where it did not)."""
    info = getattr(getattr(eqn.params["call_jaxpr"], "jaxpr", None), "debug_info", None)
    return getattr(info, "func_name", None) or "a custom_vjp/custom_jvp function"


def custom_vjp(interp, eqn, invals, flags, paths=None, data=None):
    """A ``custom_vjp_call`` with GEMMs inside, emulated forward and backward (module docstring)."""
    p = eqn.params
    _, fwd, bwd = subfuns(eqn.primitive, p)
    call, nc, out_trees = p["call_jaxpr"], p["num_consts"], p["out_trees"]
    site0, words0 = interp.site, interp.words
    found: dict = {}  # the residuals' provenance flags, known once the forward has been traced

    def run_at_site0(jaxpr, consts, args, fl):
        interp.site, interp.words = site0, words0
        return interp.run(jaxpr, consts, list(args), fl, paths, data)

    @jax.custom_vjp
    def fun(*args):
        return tuple(run_at_site0(call.jaxpr, call.consts, args, flags))

    def fun_fwd(*args):
        def user_fwd(*vals):  # jax's lift_fwd takes (value, has a tangent) pairs; consts have none
            return fwd.call_wrapped(*[x for i, v in enumerate(vals) for x in (v, i >= nc)])

        closed = jax.make_jaxpr(user_fwd)(*args)
        outs = run_at_site0(closed.jaxpr, closed.consts, args, flags)
        out_flags = interp.out_flags
        _, res_tree, forwarded = out_trees()
        n_res = res_tree.num_leaves - sum(f is not None for f in forwarded)
        made, made_flags = iter(outs[:n_res]), iter(out_flags[:n_res])
        res, res_flags = [], []
        for f in forwarded:  # residuals the user's fwd passed through from its inputs
            res.append(next(made) if f is None else args[f])
            res_flags.append(next(made_flags) if f is None else flags[f])
        found["res_flags"] = res_flags
        return tuple(outs[n_res:]), tuple(res)

    def fun_bwd(res, cts):
        def user_bwd(*z):
            return [_instantiate(c) for c in bwd.call_wrapped(*z)]

        closed = jax.make_jaxpr(user_bwd)(*res, *cts)
        saved = interp.amax, interp.est, interp.words
        interp.amax = interp.est = None  # current-amax scaling in a backward pass
        interp.words = None if words0 is None else derive(words0, _BACKWARD_WORDS + site0)
        interp.site = site0  # traced when jax differentiates, after the forward's interpretation
        try:
            res_flags = found["res_flags"]  # the cotangents are data (what the loss computes)
            grads = interp.run(closed.jaxpr, closed.consts, [*res, *cts], [*res_flags, *[GRAD] * len(cts)],
                               data=[not f for f in res_flags] + [True] * len(cts))
        finally:
            interp.amax, interp.est, interp.words = saved
        return tuple(g.astype(x.dtype) if jnp.issubdtype(x.dtype, jnp.inexact) else None
                     for g, x in zip(grads, invals, strict=True))

    fun.defvjp(fun_fwd, fun_bwd)
    out = list(fun(*invals))
    interp.site = site0 + _sites(call.jaxpr, flags, data)
    return out


def _instantiate(ct):
    """A cotangent from the user's backward, symbolic zeros made arrays."""
    if isinstance(ct, (jax.Array, np.ndarray, np.generic)):
        return ct
    aval = ct.aval
    dtype = aval.dtype if jnp.issubdtype(aval.dtype, jnp.inexact) else jnp.float32
    return jnp.zeros(aval.shape, dtype)


def custom_jvp(interp, eqn, invals, flags, paths=None, data=None):
    """A ``custom_jvp_call`` with GEMMs inside: the primal emulated, its derivative refused."""
    call, site0 = eqn.params["call_jaxpr"], interp.site
    name = _name(eqn)

    @jax.custom_jvp
    def fun(*args):
        interp.site = site0
        return tuple(interp.run(call.jaxpr, call.consts, list(args), flags, paths, data))

    @fun.defjvp
    def fun_jvp(primals, tangents):
        raise NotImplementedError(
            f"asicsim.emulate cannot differentiate {name!r}: it is a jax.custom_jvp function with "
            "GEMMs inside, and its JVP rule's tangent GEMMs cannot be rounded and still be "
            "transposed. Write its rule as a jax.custom_vjp (fwd/bwd): emulate runs both, "
            "rounding the backward GEMMs as gradient GEMMs.")

    out = list(fun(*invals))
    interp.site = site0 + _sites(call.jaxpr, flags, data)
    return out


def checkpoint(interp, eqn, invals, flags, paths=None, data=None):
    """``jax.checkpoint`` (remat) kept around the emulated body, with the user's policy."""
    p, site0 = eqn.params, interp.site
    inner = p["jaxpr"]
    closed = inner if hasattr(inner, "consts") else jcore.ClosedJaxpr(inner, ())

    steps = Body(interp.lsq)  # learned steps: closed over; initial ones come out as extra outputs

    def body(*args):
        interp.site = site0  # retraced when jax recomputes: the same site numbers
        steps.enter()
        outs = interp.run(closed.jaxpr, closed.consts, list(args), flags, paths, data)
        return [*outs, *steps.leave()]

    out = jax.checkpoint(body, prevent_cse=p.get("prevent_cse", True), policy=p.get("policy"))(*invals)
    n = len(closed.jaxpr.outvars)
    steps.close(out[n:])
    interp.site = site0 + _sites(closed.jaxpr, flags, data)
    return list(out[:n])


def _sites(jaxpr, flags, data=None) -> int:
    return count_rows(jaxpr, [bool(f) for f in flags], data)
