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
Absent, a backward role is its forward role (``role_spec._FALLBACK``). Where a backward operand
role equals the forward one the gradient GEMM reads the forward-rounded operand (AQT's
``use_fwd_quant``); where it differs it rounds the *unrounded* forward operand (kept as the
residual) with its own role, as microxcaling re-quantizes the stashed input for each gradient
GEMM. Delayed and static scaling scale a tensor by its one amax row (lhs, rhs, grad) whichever
role rounds it: the amax is the tensor's, the format's max comes from the role (Transformer
Engine's ``scale = fp8_max / amax`` per format). Under a recipe's ``tensor_core`` a GEMM runs
that GPU's tensor-core MAC on its operands' codes and applies their scales to the result
(:mod:`.tensor_core_gemm`).
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from asicsim._src.emulate.contract import contract as _contract
from asicsim._src.emulate.contract import contract_grad as _contract_grad
from asicsim._src.emulate.contract import mac_dot_general as _mac_dot_general
from asicsim._src.emulate.policy import ATTENTION_ROLES, Policy, RoleSpec
from asicsim._src.emulate.role_rounding import _amax, _blocked, _stochastic, round_role
from asicsim._src.emulate.tensor_core_checks import TC_GEMMS, gemm_mac
from asicsim._src.emulate.tensor_core_gemm import apply_scales, role_codes
from asicsim._src.numerics.fusion import computed_once
from asicsim._src.numerics.random import derive

# the roles an emulated GEMM rounds
_GEMM_ROLES = ("weight", "act", "out", "acc", "grad", "grad_out", "wgrad",
               "grad_dx", "grad_dw", "act_dx", "act_dw", "weight_dx", "weight_dw", *ATTENTION_ROLES)


class GemmSite(NamedTuple):
    """An emulated GEMM as its trace fixes it: dimension numbers, its operands' forward roles,
    its result's dtype and which operands are already on their role's grid (pre-rounded weights)."""

    dn: Any
    roles: tuple[str, str]
    out_dtype: Any
    ongrid: tuple[bool, bool]


class Streams(NamedTuple):
    """A GEMM site's independent random streams, as seed words (all None: no stochastic rounding):
    the two operands, the accumulator, the result, the cotangent, and the two gradients."""

    a: Any
    b: Any
    acc: Any
    out: Any
    grad: Any
    da: Any
    db: Any


class GradGemm(NamedTuple):
    """One gradient GEMM's role specs: the cotangent as it reads it, the other forward operand as
    it reads it, and the gradient it writes (``wgrad`` for a weight, else ``grad_out``)."""

    grad: RoleSpec | None
    other: RoleSpec | None
    result: RoleSpec | None


class GemmRoles(NamedTuple):
    """A GEMM's role specs, fallbacks resolved once: its forward operands (``a``, ``b``) and its
    two gradient GEMMs (``da``: dA = g . B, ``db``: dB = A . g), AQT's ``DotGeneral(fwd, dlhs,
    drhs)``."""

    a: RoleSpec | None
    b: RoleSpec | None
    da: GradGemm
    db: GradGemm


def _grad_role(role: str) -> str:
    return "wgrad" if role == "weight" else "grad_out"


def gemm_roles(policy: Policy, roles) -> GemmRoles:
    """The role specs of a GEMM whose operands have forward ``roles``, under ``policy``."""
    (ga, oa), (gb, ob) = _bwd_roles(roles)
    return GemmRoles(policy.role(roles[0]), policy.role(roles[1]),
                     GradGemm(policy.role(ga), policy.role(oa), policy.role(_grad_role(roles[0]))),
                     GradGemm(policy.role(gb), policy.role(ob), policy.role(_grad_role(roles[1]))))


def _bwd_roles(roles) -> tuple[tuple[str, str], tuple[str, str]]:
    """Per gradient GEMM (dA, dB) of a GEMM whose operands have forward ``roles``: (the role it
    reads the cotangent with, the role it reads the other operand with)."""
    out = []
    for wrt in (0, 1):
        kind = "dw" if roles[wrt] == "weight" else "dx"
        other = "act" if roles[1 - wrt] in ATTENTION_ROLES else roles[1 - wrt]  # forward-only roles
        out.append((f"grad_{kind}", f"{other}_{kind}"))
    return out[0], out[1]


def _streams(words) -> Streams:
    """The independent streams of one site's seed words (None: no stochastic rounding)."""
    return Streams(*([None] * 7 if words is None else [derive(words, i) for i in range(7)]))


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
def _emulated_dot(a, b, meta, words, site: GemmSite, policy):
    return _dot_fwd(a, b, meta, words, site, policy)[0]


def _dot_fwd(a, b, meta, words, site: GemmSite, policy):
    dn, k = site.dn, _streams(words)
    tap, est = (None, None) if meta is None else meta
    ma, mb = (None, None) if est is None else (est[0], est[1])
    # An operand already on its role's grid (weights pre-rounded by the training step) is left
    # as it is: rounding it again would return the same bits (see ``_Interpreter.prerounded``).
    r = gemm_roles(policy, site.roles)
    gpu = policy.tensor_core_gpu("out")
    if gpu is not None:  # the GPU's MAC on the operands' codes, their scales applied after
        (ca, sa), (cb, sb) = role_codes(a, r.a, amax=ma, words=k.a), role_codes(b, r.b, amax=mb, words=k.b)
        mac = gemm_mac(gpu, r.a.format, r.b.format, policy.role("acc").format)
        y = apply_scales(_mac_dot_general(ca, cb, dn, mac), sa, sb)
    else:
        qa = a if site.ongrid[0] else round_role(a, r.a, words=k.a, amax=ma, axis=_scale_axes(r.a, dn, 0, a.ndim))
        qb = b if site.ongrid[1] else round_role(b, r.b, words=k.b, amax=mb, axis=_scale_axes(r.b, dn, 1, b.ndim))
        y = _contract(qa, qb, dn, policy, (r.a, r.b))
    out = policy.role("out")
    y = round_role(_accumulate(y, policy, words=k.acc), out, words=k.out)
    if _stochastic(out):  # not fused into each consumer (a GRU's gate slices: scalar loops)
        y = _materialize(y, out)
    seen = None if tap is None else jnp.stack([_amax(a), _amax(b)])
    # A block-scaled operand is rounded again for the gradient GEMM, along that GEMM's
    # contraction axis, and one with a backward role of its own is rounded by that: keep it
    # unrounded for that.
    if _tensor_cores(policy):  # unrounded: a gradient GEMM takes codes or rounds them again alike
        keep = (a, b)
    else:  # A as dB's GEMM reads it, B as dA's
        keep = tuple(x if _blocked(f) or read != f else q
                     for x, q, f, read in zip((a, b), (qa, qb), (r.a, r.b), (r.db.other, r.da.other), strict=True))
    return y.astype(site.out_dtype), (*keep, seen, est, words)


def _dot_bwd(site: GemmSite, policy, res, g):
    """dA = g . B and dB = A . g (the two gradient GEMMs), each on operands rounded for it."""
    dn = site.dn
    xa, xb, seen, est, words = res
    k, r = _streams(words), gemm_roles(policy, site.roles)
    g32 = g.astype(jnp.float32)
    ma, mb, mg = (None, None, None) if est is None else (est[0], est[1], est[2])
    gpus = [policy.tensor_core_gpu(_grad_role(role)) for role in site.roles]
    if any(gpus):
        da, db = _tc_grads(xa, xb, g32, dn, policy, r, gpus, (k.a, k.b, k.grad), (ma, mb, mg))
    else:
        ga, gb = _round_cotangent(g32, r.da.grad, r.db.grad, dn, xa.ndim, k.grad, mg)
        xa = _operand_for_grad(xa, r.a, r.db.other, _again(k.a), ma, dn, 0)
        xb = _operand_for_grad(xb, r.b, r.da.other, _again(k.b), mb, dn, 1)
        xa32, xb32 = xa.astype(jnp.float32), xb.astype(jnp.float32)
        da = _contract_grad(xa32, xb32, ga, dn, policy, 0, (r.da.grad, r.da.other))
        db = _contract_grad(xa32, xb32, gb, dn, policy, 1, (r.db.other, r.db.grad))
    ra, rb = r.da.result, r.db.result
    da = _materialize(round_role(_accumulate(da, policy, words=_again(k.da)), ra, words=k.da), ra)
    db = _materialize(round_role(_accumulate(db, policy, words=_again(k.db)), rb, words=k.db), rb)
    dtap = None if seen is None else jnp.concatenate([seen, _amax(g32)[None]]).astype(est.dtype)
    return da.astype(xa.dtype), db.astype(xb.dtype), None if est is None else (dtap, None), None


def _tensor_cores(policy: Policy) -> bool:
    return any(policy.tensor_core_gpu(g) for g in TC_GEMMS)


def _tc_grads(xa, xb, g32, dn, policy: Policy, r: GemmRoles, gpus, words, amax):
    """(dA, dB) where a gradient GEMM runs on ``gpus``' tensor cores (None: as without them),
    from the unrounded operands ``xa``, ``xb``: a tensor-core GEMM reads the codes of the
    cotangent and of the other operand, each rounded as the other path rounds it (the forward's
    words and amax where the backward role is the forward one), its result times their scales."""
    fwd, bwd = (r.a, r.b), (r.db.other, r.da.other)  # A as dB's GEMM reads it, B as dA's
    sg = (r.da.grad, r.db.grad)
    gwords = (words[2], words[2]) if sg[0] == sg[1] and not _blocked(sg[0]) else (words[2], _again(words[2]))
    xs, outs = (xa, xb), []
    for wrt, gpu in enumerate(gpus):
        side = 1 - wrt  # the other operand: read by this gradient GEMM with role spec bwd[side]
        x, f, b, k, m = xs[side], fwd[side], bwd[side], words[side], amax[side]
        if gpu is None:  # as without tensor cores
            if b == f and not _blocked(f):  # the forward's rounding, again
                q = round_role(x, f, words=k, amax=m, axis=tuple(dn[0][side]))
            else:
                q = _operand_for_grad(x, f, b, _again(k), m, dn, side)
            gq = _round_cotangent(g32, sg[0], sg[1], dn, xa.ndim, words[2], amax[2])[wrt]
            ops = [v.astype(jnp.float32) for v in xs]
            ops[side] = q.astype(jnp.float32)
            outs.append(_contract_grad(*ops, gq, dn, policy, wrt, (sg[0], b) if wrt == 0 else (b, sg[1])))
            continue
        cg, s_g = role_codes(g32, sg[wrt], amax=amax[2], words=gwords[wrt])
        co, s_o = role_codes(x, b, amax=m, words=k if b == f else _again(k))
        fmts = {2: sg[wrt].format, side: b.format}

        def macs(lhs, rhs, fmts=fmts, gpu=gpu):
            return gemm_mac(gpu, fmts[lhs], fmts[rhs], policy.role("acc").format)

        ops = [jnp.zeros(v.shape, jnp.float32) for v in xs]  # dA reads g and B only (dB: A and g)
        ops[side] = co
        outs.append(apply_scales(_contract_grad(*ops, cg, dn, policy, wrt, macs=macs), s_g, s_o))
    return outs[0], outs[1]


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
    """``x`` unchanged, computed once (:func:`asicsim._src.numerics.fusion.computed_once`) where its
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
