"""The contraction of an emulated GEMM (:mod:`asicsim._src.emulate.gemm`) on operands already rounded
(or on their codes, under a recipe's ``tensor_core``): accumulated in float32 (on narrow inputs
where that is exact: :mod:`.tensor_cores`) or by a bit-exact MAC order, and its gradient GEMMs
run on the transposed products JAX's own rules form."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend import core as jcore

from asicsim._jax_compat import bind_args
from asicsim._src.emulate.policy import Policy
from asicsim._src.emulate.tensor_cores import fast_dot, narrow_dtype


def contract(a, b, dn, policy: Policy, specs=(None, None)):
    """The GEMM itself on operands rounded by ``specs``, accumulated in float32 (on narrow inputs
    where that is exact: :mod:`.tensor_cores`) or by a MAC order."""
    a, b = a.astype(jnp.float32), b.astype(jnp.float32)
    mac = policy.mac_spec()
    if mac is not None:
        return mac_dot_general(a, b, dn, mac)
    return fast_dot(a, b, dn, specs)


def contract_grad(a, b, g, dn, policy: Policy, wrt: int, specs=(None, None), macs=None):
    """The gradient of the contraction with respect to operand ``wrt`` (0: dA, 1: dB) at
    cotangent ``g``: a gradient GEMM on the two operands rounded by ``specs``, accumulated as the
    forward one is (a bit-exact MAC order, or narrow inputs, run on the transposed product JAX's
    own rule forms: JAX's transpose of a narrow-input GEMM would round dA to the input dtype).
    ``macs``: a tensor core's MAC per (lhs, rhs) operand (0: a, 1: b, 2: g), as the product's
    operands come from them through JAX's transposes and reshapes."""
    def grad(x, w, ct, contract):
        if wrt == 0:
            return jax.vjp(lambda v: contract(v, w), x)[1](ct)[0]
        return jax.vjp(lambda v: contract(x, v), w)[1](ct)[0]

    mac = policy.mac_spec()
    if macs is not None:
        def dot(x, y, d, labels):
            return mac_dot_general(x, y, d, macs(*labels))
    elif mac is None and narrow_dtype(specs) is None:
        return grad(a, b, g, lambda x, w: contract(x, w, dn, policy))
    elif mac is None:
        def dot(x, y, d):
            return fast_dot(x, y, d, specs)
    else:
        def dot(x, y, d):
            return mac_dot_general(x, y, d, mac)

    def fast(x, w, ct):
        return grad(x, w, ct, lambda x_, w_: lax.dot_general(x_, w_, dn, preferred_element_type=jnp.float32))

    closed = jax.make_jaxpr(fast)(a, b, g)
    env: dict = {}
    source = dict(zip(closed.jaxpr.invars, range(3), strict=True))  # which operand a value comes from

    def read(v):
        return v.val if isinstance(v, jcore.Literal) else env[v]

    for v, c in zip(closed.jaxpr.constvars, closed.consts, strict=True):
        env[v] = c
    for v, x in zip(closed.jaxpr.invars, (a, b, g), strict=True):
        env[v] = x
    used = {v for e in closed.jaxpr.eqns for v in e.invars if not isinstance(v, jcore.Literal)}
    used |= {v for v in closed.jaxpr.outvars if not isinstance(v, jcore.Literal)}
    for eqn in closed.jaxpr.eqns:
        if not any(v in used for v in eqn.outvars):
            continue  # the forward product jax.vjp traces too: not needed, and costly by a MAC order
        invals = [read(v) for v in eqn.invars]
        came = {source[v] for v in eqn.invars if not isinstance(v, jcore.Literal) and v in source}
        if len(came) == 1 and eqn.primitive.name != "dot_general":
            source.update((v, next(iter(came))) for v in eqn.outvars)
        if eqn.primitive.name == "dot_general":
            x, y = (v.astype(jnp.float32) for v in invals[:2])
            d = eqn.params["dimension_numbers"]
            if macs is None:
                outs = [dot(x, y, d)]
            else:
                labels = tuple(source.get(v) for v in eqn.invars[:2])
                if None in labels:
                    raise NotImplementedError(f"tensor_core: a gradient GEMM's operands not traced to the "
                                              f"GEMM's operands ({labels}); please report this model")
                outs = [dot(x, y, d, labels)]
        else:
            subfuns, params = bind_args(eqn.primitive, eqn.params)
            out = eqn.primitive.bind(*subfuns, *invals, **params)
            outs = out if eqn.primitive.multiple_results else [out]
        for v, o in zip(eqn.outvars, outs, strict=True):
            env[v] = o
    return read(closed.jaxpr.outvars[0])


def mac_dot_general(a, b, dn, mac):
    """``dot_general`` by a bit-exact MAC order: operands transposed and reshaped to batched
    (B, M, K) x (B, K, N) products for :func:`asicsim.numerics.matmul`, the result laid out as
    ``dot_general`` lays it out (batch, lhs free, rhs free)."""
    from asicsim._src.numerics import matmul

    (lc, rc), (lb, rb) = dn
    lf = [i for i in range(a.ndim) if i not in lc and i not in lb]
    rf = [i for i in range(b.ndim) if i not in rc and i not in rb]
    size = lambda x, dims: int(np.prod([x.shape[i] for i in dims], dtype=np.int64))  # noqa: E731
    at = jnp.transpose(a, (*lb, *lf, *lc)).reshape(size(a, lb), size(a, lf), size(a, lc))
    bt = jnp.transpose(b, (*rb, *rc, *rf)).reshape(size(b, rb), size(b, rc), size(b, rf))
    out = matmul(at, bt, mac)
    shape = (*[a.shape[i] for i in lb], *[a.shape[i] for i in lf], *[b.shape[i] for i in rf])
    return out.astype(jnp.float32).reshape(shape)
