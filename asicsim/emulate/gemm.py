"""One emulated GEMM (custom VJP, as AQT's fwd/dlhs/drhs): operands rounded per role, the product
accumulated in float32 or by a bit-exact MAC order, the two gradient GEMMs on operands rounded
for them (block-scaled ones again along the gradient GEMM's contraction axes).

The gradient GEMM of an operand with role ``weight`` is a dW GEMM, of any other operand a dX
GEMM. Each reads the cotangent with role ``grad_dw``/``grad_dx`` and the other forward operand
(role ``r``) with role ``r_dw``/``r_dx`` (:func:`_bwd_roles`): a dense layer's dX GEMM reads
``grad_dx`` and ``weight_dx``, its dW GEMM ``act_dw`` and ``grad_dw``; attention's two gradient
GEMMs are dX GEMMs (``act_dx``). These are AQT's ``DotGeneral(fwd, dlhs, drhs)``, each gradient
GEMM with its own lhs/rhs quantizer (``aqt/jax/v2/aqt_dot_general.py``), named by role as
microxcaling's backward formats are (``mx/specs.py``: ``w_elem_format_bp`` the weight of the dX
GEMM, ``a_elem_format_bp`` the stashed activation of the dW GEMM, ``a_elem_format_bp_os`` and
``a_elem_format_bp_ex`` the output gradient of the dX and of the dW GEMM; ``mx/linear.py``).
Absent, a backward role is its forward role (``policy._FALLBACK``). Where a backward operand
role equals the forward one the gradient GEMM reads the forward-rounded operand (AQT's
``use_fwd_quant``); where it differs it rounds the *unrounded* forward operand (kept as the
residual) with its own role, as microxcaling re-quantizes the stashed input for each gradient
GEMM. Delayed and static scaling scale a tensor by its one amax row (lhs, rhs, grad) whichever
role rounds it: the amax is the tensor's, the format's max comes from the role (Transformer
Engine's ``scale = fp8_max / amax`` per format).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend import core as jcore

from asicsim._jax_compat import bind_args
from asicsim.emulate.policy import ATTENTION_ROLES, Policy, RoleSpec
from asicsim.emulate.role_rounding import _amax, _blocked, _stochastic, round_role
from asicsim.emulate.tensor_cores import fast_dot, narrow_dtype
from asicsim.numerics.fusion import computed_once
from asicsim.numerics.random import derive

# the roles an emulated GEMM rounds
_GEMM_ROLES = ("weight", "act", "out", "acc", "grad", "grad_out", "wgrad",
               "grad_dx", "grad_dw", "act_dx", "act_dw", "weight_dx", "weight_dw", *ATTENTION_ROLES)


def _grad_role(role: str) -> str:
    return "wgrad" if role == "weight" else "grad_out"


def _bwd_roles(roles) -> tuple[tuple[str, str], tuple[str, str]]:
    """Per gradient GEMM (dA, dB) of a GEMM whose operands have forward ``roles``: (the role it
    reads the cotangent with, the role it reads the other operand with)."""
    out = []
    for wrt in (0, 1):
        kind = "dw" if roles[wrt] == "weight" else "dx"
        other = "act" if roles[1 - wrt] in ATTENTION_ROLES else roles[1 - wrt]  # forward-only roles
        out.append((f"grad_{kind}", f"{other}_{kind}"))
    return out[0], out[1]


def _operand_bwd_specs(policy: Policy, roles) -> tuple[RoleSpec | None, RoleSpec | None]:
    """How each operand is read by the gradient GEMM of the *other* operand (A by dB, B by dA)."""
    (_, rb), (_, ra) = _bwd_roles(roles)
    return policy.role(ra), policy.role(rb)


def _role_words(words, n: int):
    """Seed words of ``n`` independent streams from one site's words (None: no stochastic rounding)."""
    if words is None:
        return [None] * n
    return [derive(words, i) for i in range(n)]


def _scale_axes(spec: RoleSpec | None, dn, side: int, ndim: int) -> tuple[int, ...]:
    """The axes operand ``side`` is rounded along: its contraction axes, or for ``head`` scaling
    (attention roles) every axis but the batch axes, so that each (sequence, head) has a scale."""
    if spec is not None and spec.scaling == "head":
        return tuple(i for i in range(ndim) if i not in dn[1][side])
    return tuple(dn[0][side])


def _free_axes(dn, side: int, ndim: int) -> list[int]:
    """Operand ``side``'s axes that are neither contracted nor batch (its M or N axes)."""
    (lc, rc), (lb, rb) = dn
    contract, batch = (lc, lb) if side == 0 else (rc, rb)
    return [i for i in range(ndim) if i not in contract and i not in batch]


@functools.partial(jax.custom_vjp, nondiff_argnums=(4, 5))
def _emulated_dot(a, b, meta, words, cfg, policy):
    return _dot_fwd(a, b, meta, words, cfg, policy)[0]


def _dot_fwd(a, b, meta, words, cfg, policy):
    dn, roles, out_dtype, ongrid = cfg
    ka, kb, kacc, kout, _, _, _ = _role_words(words, 7)
    tap, est = (None, None) if meta is None else meta
    ma, mb = (None, None) if est is None else (est[0], est[1])
    # An operand already on its role's grid (weights pre-rounded by the training step) is left
    # as it is: rounding it again would return the same bits (see ``_Interpreter.prerounded``).
    sa, sb = policy.role(roles[0]), policy.role(roles[1])
    qa = a if ongrid[0] else round_role(a, sa, words=ka, amax=ma, axis=_scale_axes(sa, dn, 0, a.ndim))
    qb = b if ongrid[1] else round_role(b, sb, words=kb, amax=mb, axis=_scale_axes(sb, dn, 1, b.ndim))
    y = _contract(qa, qb, dn, policy, (policy.role(roles[0]), policy.role(roles[1])))
    out = policy.role("out")
    y = round_role(_accumulate(y, policy, words=kacc), out, words=kout)
    if _stochastic(out):  # not fused into each consumer (a GRU's gate slices: scalar loops)
        y = _materialize(y, out)
    seen = None if tap is None else jnp.stack([_amax(a), _amax(b)])
    # A block-scaled operand is rounded again for the gradient GEMM, along that GEMM's
    # contraction axis, and one with a backward role of its own is rounded by that: keep it
    # unrounded for that.
    bwd = _operand_bwd_specs(policy, roles)
    keep = tuple(x if _blocked(policy.role(r)) or s != policy.role(r) else q
                 for x, q, r, s in zip((a, b), (qa, qb), roles, bwd, strict=True))
    return y.astype(out_dtype), (*keep, seen, est, words)


def _dot_bwd(cfg, policy, res, g):
    """dA = g . B and dB = A . g (the two gradient GEMMs), each on operands rounded for it."""
    dn, roles, _, _ = cfg
    xa, xb, seen, est, words = res
    ka, kb, _, _, kg, kda, kdb = _role_words(words, 7)
    g32 = g.astype(jnp.float32)
    (rga, _), (rgb, _) = _bwd_roles(roles)
    ga, gb = _round_cotangent(g32, policy.role(rga), policy.role(rgb), dn, xa.ndim, kg,
                              None if est is None else est[2])
    ba, bb = _operand_bwd_specs(policy, roles)
    xa = _operand_for_grad(xa, policy.role(roles[0]), ba, _again(ka), None if est is None else est[0], dn, 0)
    xb = _operand_for_grad(xb, policy.role(roles[1]), bb, _again(kb), None if est is None else est[1], dn, 1)
    xa32, xb32 = xa.astype(jnp.float32), xb.astype(jnp.float32)
    da = _contract_grad(xa32, xb32, ga, dn, policy, 0, (policy.role(rga), bb))
    db = _contract_grad(xa32, xb32, gb, dn, policy, 1, (ba, policy.role(rgb)))
    ra, rb = policy.role(_grad_role(roles[0])), policy.role(_grad_role(roles[1]))
    da = _materialize(round_role(_accumulate(da, policy, words=_again(kda)), ra, words=kda), ra)
    db = _materialize(round_role(_accumulate(db, policy, words=_again(kdb)), rb, words=kdb), rb)
    dtap = None if seen is None else jnp.concatenate([seen, _amax(g32)[None]]).astype(est.dtype)
    return da.astype(xa.dtype), db.astype(xb.dtype), None if est is None else (dtap, None), None


def _round_cotangent(g32, sa: RoleSpec | None, sb: RoleSpec | None, dn, a_ndim: int, kg, amax):
    """The cotangent as dA's GEMM reads it (role spec ``sa``) and as dB's does (``sb``): rounded
    once where both read it alike (same elementwise role), else once per GEMM, a block-scaled
    one along that GEMM's contraction axes (g's axes: batch, A's free axes, which dB contracts,
    then B's, which dA contracts)."""
    if sa == sb and not _blocked(sa):
        ga = round_role(g32, sa, words=kg, amax=amax)
        return ga, ga
    nb, na = len(dn[1][0]), len(_free_axes(dn, 0, a_ndim))

    def one(spec, words, axes):
        if _blocked(spec):
            return round_role(g32, spec, words=words, axis=axes)
        return round_role(g32, spec, words=words, amax=amax)

    return one(sa, kg, range(nb + na, g32.ndim)), one(sb, _again(kg), range(nb, nb + na))


def _operand_for_grad(x, fwd: RoleSpec | None, bwd: RoleSpec | None, words, amax, dn, side: int):
    """Operand ``side`` as the other operand's gradient GEMM reads it: the forward-rounded value
    kept by ``_dot_fwd``, or, where it was kept unrounded (a block-scaled forward role, or a
    backward role of its own), rounded along that GEMM's contraction axes (its free axes)."""
    if bwd != fwd:
        return round_role(x, bwd, words=words, amax=amax, axis=_free_axes(dn, side, x.ndim))
    if _blocked(fwd):
        return round_role(x, fwd, words=words, axis=_free_axes(dn, side, x.ndim))
    return x


def _again(words):
    """A second stream from a role's seed words (None stays None)."""
    return None if words is None else derive(words, 1)


_emulated_dot.defvjp(_dot_fwd, _dot_bwd)


def _materialize(x: jax.Array, spec: RoleSpec | None) -> jax.Array:
    """``x`` unchanged, computed once (:func:`asicsim.numerics.fusion.computed_once`) where its
    rounding is scaled (per block, tensor, channel) or stochastic (random bits hashed per element).

    Fused, the transposed im2col of a convolution's dX summed 3-5 taps of it, so the block
    rounding of dX (exponent, scale, element grid) ran once per tap, in a gather-like loop XLA
    does not vectorise (30 % of an MX CNN step); stochastic rounding of dX fused into those taps
    cost 2.3 of 3.9 ms of a fixed16_sr CNN step.
    """
    plain = spec is None or spec.is_identity or (spec.scaling == "none" and spec.spec.kind != "block")
    return x if plain and not _stochastic(spec) else computed_once(x)


def _accumulate(y: jax.Array, policy: Policy, words=None) -> jax.Array:
    """Round an fp32 accumulation result to the accumulator format (a GEMM under a bit-exact MAC
    order has already accumulated in it)."""
    if policy.mac_spec() is not None:
        return y
    return round_role(y, policy.role("acc"), words=words)


def _contract(a, b, dn, policy: Policy, specs=(None, None)):
    """The GEMM itself on operands rounded by ``specs``, accumulated in float32 (on narrow inputs
    where that is exact: :mod:`.tensor_cores`) or by a MAC order."""
    a, b = a.astype(jnp.float32), b.astype(jnp.float32)
    mac = policy.mac_spec()
    if mac is not None:
        return _mac_dot_general(a, b, dn, mac)
    return fast_dot(a, b, dn, specs)


def _contract_grad(a, b, g, dn, policy: Policy, wrt: int, specs=(None, None)):
    """The gradient of the contraction with respect to operand ``wrt`` (0: dA, 1: dB) at
    cotangent ``g``: a gradient GEMM on the two operands rounded by ``specs``, accumulated as the
    forward one is (a bit-exact MAC order, or narrow inputs, run on the transposed product JAX's
    own rule forms: JAX's transpose of a narrow-input GEMM would round dA to the input dtype)."""
    def grad(x, w, ct, contract):
        if wrt == 0:
            return jax.vjp(lambda v: contract(v, w), x)[1](ct)[0]
        return jax.vjp(lambda v: contract(x, v), w)[1](ct)[0]

    mac = policy.mac_spec()
    if mac is None and narrow_dtype(specs) is None:
        return grad(a, b, g, lambda x, w: _contract(x, w, dn, policy))
    if mac is None:
        def dot(x, y, d):
            return fast_dot(x, y, d, specs)
    else:
        def dot(x, y, d):
            return _mac_dot_general(x, y, d, mac)

    def fast(x, w, ct):
        return grad(x, w, ct, lambda x_, w_: lax.dot_general(x_, w_, dn, preferred_element_type=jnp.float32))

    closed = jax.make_jaxpr(fast)(a, b, g)
    env: dict = {}

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
        if eqn.primitive.name == "dot_general":
            outs = [dot(invals[0].astype(jnp.float32), invals[1].astype(jnp.float32),
                        eqn.params["dimension_numbers"])]
        else:
            subfuns, params = bind_args(eqn.primitive, eqn.params)
            out = eqn.primitive.bind(*subfuns, *invals, **params)
            outs = out if eqn.primitive.multiple_results else [out]
        for v, o in zip(eqn.outvars, outs, strict=True):
            env[v] = o
    return read(closed.jaxpr.outvars[0])


def _mac_dot_general(a, b, dn, mac):
    """``dot_general`` by a bit-exact MAC order: operands transposed and reshaped to batched
    (B, M, K) x (B, K, N) products for :func:`asicsim.numerics.matmul`, the result laid out as
    ``dot_general`` lays it out (batch, lhs free, rhs free)."""
    from asicsim.numerics import matmul

    (lc, rc), (lb, rb) = dn
    lf = [i for i in range(a.ndim) if i not in lc and i not in lb]
    rf = [i for i in range(b.ndim) if i not in rc and i not in rb]
    size = lambda x, dims: int(np.prod([x.shape[i] for i in dims], dtype=np.int64))  # noqa: E731
    at = jnp.transpose(a, (*lb, *lf, *lc)).reshape(size(a, lb), size(a, lf), size(a, lc))
    bt = jnp.transpose(b, (*rb, *rc, *rf)).reshape(size(b, rb), size(b, rc), size(b, rf))
    out = matmul(at, bt, mac)
    shape = (*[a.shape[i] for i in lb], *[a.shape[i] for i in lf], *[b.shape[i] for i in rf])
    return out.astype(jnp.float32).reshape(shape)
