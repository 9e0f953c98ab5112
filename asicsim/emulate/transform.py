"""``asicsim.emulate(fn, policy)``: run any JAX function with its GEMMs and convolutions in the
formats a precision policy names, gradients included.

How: ``fn`` is traced to a jaxpr and re-evaluated by a small interpreter (the pattern of JAX's
"custom jaxpr interpreters" guide) that replaces every ``dot_general`` and ``conv_general_dilated``
with an emulated one and recurses into ``scan``, ``while``, ``cond`` and nested ``jit`` calls.
Everything it emits is ordinary JAX, so the result composes with ``jit``, ``grad``, ``vmap`` and
``lax.scan``, and works on plain JAX, Flax and Equinox models alike (they all lower to the same
primitives). Which operand of a GEMM is the weight is found by provenance: leaves of the argument
``weights`` (default: the first) and anything reshaped, transposed or cast from them.

An emulated GEMM (custom VJP, as AQT's fwd/dlhs/drhs): the activation operand is rounded with role
``act`` and the weight with ``weight`` (two activations, e.g. attention scores: both ``act``), the
product accumulates in float32 and is rounded to ``acc`` then ``out`` (``mac_order = "fast"``; a
bit-exact MAC order runs :func:`asicsim.numerics.matmul`). A convolution is carried out as the
im2col GEMM an accelerator runs (:mod:`asicsim.emulate.conv`) and treated as that GEMM. Backward: the
incoming cotangent is rounded to ``grad``; the two gradient GEMMs accumulate like the forward one,
then dX is rounded to ``grad_out`` (default ``grad``) and dW to ``wgrad``. Rounding itself is
straight-through. Block scaling (OCP MX) runs along each GEMM's contraction axes (flattened), so
a block-scaled tensor that a gradient GEMM contracts along other axes (the cotangent for dX and
for dW, the activation for dW, the weight for dX) is rounded again for it from its unrounded
values, as Microsoft's microxcaling library and Transformer Engine's MXFP8 recipe quantize it.

Two optional keyword arguments of the emulated function (not passed to ``fn``):

``asicsim_key``   a ``jax.random`` key for roles with stochastic rounding; each GEMM site, role and
                  scan iteration gets its own stream (never reused): seed words drawn once from
                  the key, then derived per use by integer hashing (``random.derive``).
``asicsim_amax``  a float32 array (S, 3): per GEMM site (numbered in the order the interpreter meets
                  them, scan bodies counted once), the amax estimates of (lhs, rhs, grad) that roles
                  with ``scaling = "delayed"`` or ``"static"`` scale by (0: unknown, use the current
                  amax). Its *gradient* is the amax each site observed in this call (forward
                  operands, backward cotangent; the largest over scan iterations): what delayed
                  scaling's history records (:mod:`asicsim.emulate.training`) and calibration reads
                  (:mod:`asicsim.emulate.ptq`). Static scales may also live in the policy
                  (``Policy.static_scales``).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend import core as jcore

from asicsim._jax_compat import bind_args, scan_operand_counts
from asicsim.emulate.conv import conv_as_gemm
from asicsim.emulate.policy import Policy, RoleSpec
from asicsim.emulate.recipes import load_recipe
from asicsim.emulate.trace import record, record_elementwise
from asicsim.numerics import quantize
from asicsim.numerics.fusion import computed_once
from asicsim.numerics.random import derive, key_words
from asicsim.numerics.scaling import amax_bits

# primitives that only move or relabel data: a weight stays a weight through them
_STRUCTURAL = {"reshape", "transpose", "convert_element_type", "broadcast_in_dim", "squeeze",
               "expand_dims", "slice", "dynamic_slice", "copy", "copy_p", "rev", "gather",
               "reduce_precision", "concatenate", "pad", "select_n"}
# of those, the ones that keep every value unchanged (a value on a format's grid stays on it)
_VALUE_PRESERVING = {"reshape", "transpose", "broadcast_in_dim", "squeeze", "expand_dims", "slice",
                     "dynamic_slice", "copy", "copy_p", "rev", "concatenate"}
_GEMM_ROLES = ("weight", "act", "out", "acc", "grad", "grad_out", "wgrad")  # the roles an emulated GEMM rounds
_CALLS = {"pjit", "jit", "closed_call", "core_call", "remat", "checkpoint", "remat2", "custom_lin"}


def round_role(x: jax.Array, spec: RoleSpec | None, *, key=None, amax=None,
               axis: int | Sequence[int] | None = None, words=None) -> jax.Array:
    """Round ``x`` as role ``spec`` says (None or fp32/rne: unchanged), keeping its dtype.

    ``key`` (a ``jax.random`` key) or ``words`` (seed words already drawn from one, see
    ``random.derive``) feeds stochastic rounding.
    ``amax``: for ``delayed``/``static`` scaling, the amax estimate to scale by (a traced scalar;
    <= 0 or None: the current amax of ``x``). ``axis``: the axis of block scaling and of block
    formats (default the last), or several axes: blocks then run along them flattened in the
    order given (a GEMM passes its contraction axes, as OCP MX blocks along K). With ``channel``
    scaling the same ``axis`` names the contraction: one scale per index of the other axes (a
    weight's output channel whether it is stored (in, out) or (out, in)); without it, the last axis.
    """
    if spec is None or spec.is_identity:
        return x
    if spec.scaling == "channel" and axis is not None:
        return _round_per_channel(x, spec, axis, key=key, amax=amax, words=words)
    if axis is not None and not isinstance(axis, (int, np.integer)):
        return _round_flat(x, spec, tuple(int(a) % x.ndim for a in axis), key=key, amax=amax, words=words)
    words = _sr_words(spec, key, words)
    kw = {}
    if spec.scaling in ("delayed", "static") and (amax is not None or spec.margin):
        return _round_scaled(x, spec, jnp.float32(0) if amax is None else amax, words)
    if spec.scaling in ("tensor", "delayed", "static"):  # no estimate given: the current amax
        kw["scaling"] = "tensor"
    elif spec.scaling == "channel":
        kw["scaling"] = "channel"
    elif spec.scaling == "block":
        kw["block_size"] = spec.block_size
        kw["axis"] = -1 if axis is None else axis
    elif spec.spec.kind == "block" and axis is not None:
        kw["axis"] = axis
    y = quantize(x.astype(jnp.float32), spec.format, spec.rounding, saturate=spec.saturate, words=words, **kw)
    return y.astype(x.dtype)


def _round_per_channel(x, spec: RoleSpec, axis, **kw) -> jax.Array:
    """``channel`` scaling of a GEMM operand: the contraction ``axis`` (or axes) first, the rest
    flattened last, one scale per column of that view; a fully contracted operand has one scale."""
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    axes = tuple(int(a) % x.ndim for a in axes)
    keep = [i for i in range(x.ndim) if i not in axes]
    perm = [*axes, *keep]
    moved = jnp.transpose(x, perm)
    flat = moved.reshape(int(np.prod([x.shape[i] for i in axes], dtype=np.int64)), -1)
    if not keep:  # no free axis: the whole operand is one channel
        flat = flat.reshape(-1, 1)
    y = round_role(flat, spec, **kw)  # channel scaling along the last axis of the view
    return jnp.transpose(y.reshape(moved.shape), np.argsort(perm))


def _round_flat(x, spec: RoleSpec, axes: tuple[int, ...], **kw) -> jax.Array:
    """``round_role`` with blocks along ``axes`` flattened: a reshape where they are adjacent and
    in order (a GEMM's M of (batch, length)), otherwise moved last first."""
    if len(axes) <= 1 or not _blocked(spec):
        return round_role(x, spec, axis=axes[0] if axes else None, **kw)
    lo, n = axes[0], len(axes)
    if axes == tuple(range(lo, lo + n)):
        flat = x.reshape(*x.shape[:lo], -1, *x.shape[lo + n:])
        return round_role(flat, spec, axis=lo, **kw).reshape(x.shape)
    perm = [i for i in range(x.ndim) if i not in axes] + list(axes)
    moved = jnp.transpose(x, perm)
    flat = moved.reshape(*moved.shape[:-n], -1)
    y = round_role(flat, spec, axis=-1, **kw).reshape(moved.shape)
    return jnp.transpose(y, np.argsort(perm))


def _sr_words(spec: RoleSpec, key, words):
    """The seed words stochastic rounding by ``spec`` uses (None when it rounds otherwise)."""
    if not spec.stochastic:
        return None
    if words is not None:
        return words
    if key is None:
        raise ValueError(f"role format {spec.format!r} uses stochastic rounding {spec.rounding!r}: "
                         "pass a key (emulate(...)(..., asicsim_key=jax.random.key(seed)))")
    return key_words(key)


def _round_scaled(x, spec: RoleSpec, amax, words):
    """Per-tensor scaling by a given amax estimate (delayed or static scaling): values beyond it
    saturate, as fp8/int8 casts with a stale scale do; a margin leaves headroom above the estimate.

    Delayed scaling computes as Transformer Engine's DelayedScaling does: the scaling factor
    ``sf = (format max / amax) / 2**margin`` in float32, the cast of ``x * sf``, dequantized by
    ``scale_inv = 1 / sf`` (TE keeps the previous scale where amax is 0 or not finite, and caps
    an infinite ``sf`` at the float32 max; with no previous scale, ``sf = 1`` there). Static
    scaling (int8 calibration, TensorRT's convention) divides by ``scale = amax * 2**margin /
    format max`` and multiplies back by it."""
    xf = x.astype(jnp.float32)
    est = jnp.where(amax > 0, amax, _amax(xf))
    sat = True if spec.saturate is None else spec.saturate
    fmax = jnp.float32(spec.spec.max)
    if spec.scaling == "delayed":
        sf = fmax / est / jnp.float32(2.0**spec.margin)
        sf = jnp.where((est > 0) & jnp.isfinite(est), sf, jnp.float32(1.0))
        sf = jnp.where(jnp.isinf(sf), jnp.finfo(jnp.float32).max, sf)
        y = quantize(xf * sf, spec.format, spec.rounding, saturate=sat, words=words)
        return (y * (jnp.float32(1.0) / sf)).astype(x.dtype)
    scale = est / fmax * jnp.float32(2.0**spec.margin)
    scale = jnp.where(scale > 0, scale, jnp.float32(1.0))
    y = quantize(xf / scale, spec.format, spec.rounding, saturate=sat, words=words)
    return (y * scale).astype(x.dtype)


# tensors below this many elements take the integer amax (see ``_amax``)
INT_AMAX_BELOW = 4096


def _amax(x) -> jax.Array:
    """max |x| as float32.

    Below ``INT_AMAX_BELOW`` elements, ``numerics.scaling.amax_bits`` (an integer max of the
    magnitude bits): XLA:CPU runs it as one kernel, where ``max(abs(x))`` ran as three (abs, a
    reduce-window, a reduce), which cost more than the reduction in a GRU's scan ((100, 18):
    1.0-1.2 against 2.4 us). Larger tensors keep the float max, which XLA:CPU vectorises
    ((1000, 75): 21-22 against 31-32 us). A NaN element gives NaN on the integer path; XLA:CPU's
    vectorised float max keeps or drops it by its position (Transformer Engine's ``fmaxf`` amax
    drops it), and a NaN select there cost the CNN's fp8_hybrid step 3-5 %. Delayed scaling
    copes with either: it scales by the finite amax, or by sf = 1 for a NaN estimate."""
    if not x.size:
        return jnp.float32(0)
    x = x.astype(jnp.float32)
    if x.size >= INT_AMAX_BELOW:
        return jnp.max(jnp.abs(x))
    return lax.bitcast_convert_type(amax_bits(x, tuple(range(x.ndim)), keepdims=False), jnp.float32)


def _grad_role(role: str) -> str:
    return "wgrad" if role == "weight" else "grad_out"


def _role_words(words, n: int):
    """Seed words of ``n`` independent streams from one site's words (None: no stochastic rounding)."""
    if words is None:
        return [None] * n
    return [derive(words, i) for i in range(n)]


def _free_axes(dn, side: int, ndim: int) -> list[int]:
    """Operand ``side``'s axes that are neither contracted nor batch (its M or N axes)."""
    (lc, rc), (lb, rb) = dn
    contract, batch = (lc, lb) if side == 0 else (rc, rb)
    return [i for i in range(ndim) if i not in contract and i not in batch]


def _blocked(spec: RoleSpec | None) -> bool:
    """Whether rounding by ``spec`` depends on the axis (block scaling, an MX block format)."""
    return spec is not None and not spec.is_identity and (spec.scaling == "block" or spec.spec.kind == "block")


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
    qa = a if ongrid[0] else round_role(a, policy.role(roles[0]), words=ka, amax=ma,
                                        axis=tuple(dn[0][0]))
    qb = b if ongrid[1] else round_role(b, policy.role(roles[1]), words=kb, amax=mb,
                                        axis=tuple(dn[0][1]))
    y = _contract(qa, qb, dn, policy)
    out = policy.role("out")
    y = round_role(_accumulate(y, policy, words=kacc), out, words=kout)
    if _stochastic(out):  # not fused into each consumer (a GRU's gate slices: scalar loops)
        y = _materialize(y, out)
    seen = None if tap is None else jnp.stack([_amax(a), _amax(b)])
    # A block-scaled operand is rounded again for the gradient GEMM, along that GEMM's
    # contraction axis: keep it unrounded for that.
    keep = tuple(x if _blocked(policy.role(r)) else q for x, q, r in zip((a, b), (qa, qb), roles, strict=True))
    return y.astype(out_dtype), (*keep, seen, est, words)


def _dot_bwd(cfg, policy, res, g):
    """dA = g . B and dB = A . g (the two gradient GEMMs), each on operands rounded for it."""
    dn, roles, _, _ = cfg
    xa, xb, seen, est, words = res
    ka, kb, _, _, kg, kda, kdb = _role_words(words, 7)
    g32, gspec = g.astype(jnp.float32), policy.role("grad")
    sa, sb = policy.role(roles[0]), policy.role(roles[1])
    if _blocked(gspec):
        # g's axes: batch, then A's free axes (dB contracts over them), then B's (dA does)
        nb, na = len(dn[1][0]), len(_free_axes(dn, 0, xa.ndim))
        gb = round_role(g32, gspec, words=_again(kg), axis=range(nb, nb + na))
        ga = round_role(g32, gspec, words=kg, axis=range(nb + na, g.ndim))
    else:
        ga = gb = round_role(g32, gspec, words=kg, amax=None if est is None else est[2])
    if _blocked(sa):  # kept unrounded by _dot_fwd
        xa = round_role(xa, sa, words=_again(ka), axis=_free_axes(dn, 0, xa.ndim))
    if _blocked(sb):
        xb = round_role(xb, sb, words=_again(kb), axis=_free_axes(dn, 1, xb.ndim))
    xa32, xb32 = xa.astype(jnp.float32), xb.astype(jnp.float32)
    da = _contract_grad(xa32, xb32, ga, dn, policy, 0)
    db = _contract_grad(xa32, xb32, gb, dn, policy, 1)
    ra, rb = policy.role(_grad_role(roles[0])), policy.role(_grad_role(roles[1]))
    da = _materialize(round_role(_accumulate(da, policy, words=_again(kda)), ra, words=kda), ra)
    db = _materialize(round_role(_accumulate(db, policy, words=_again(kdb)), rb, words=kdb), rb)
    dtap = None if seen is None else jnp.concatenate([seen, _amax(g32)[None]]).astype(est.dtype)
    return da.astype(xa.dtype), db.astype(xb.dtype), None if est is None else (dtap, None), None


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


def _stochastic(spec: RoleSpec | None) -> bool:
    return spec is not None and spec.stochastic


def _accumulate(y: jax.Array, policy: Policy, words=None) -> jax.Array:
    """Round an fp32 accumulation result to the accumulator format (a GEMM under a bit-exact MAC
    order has already accumulated in it)."""
    if policy.mac_spec() is not None:
        return y
    return round_role(y, policy.role("acc"), words=words)


def _contract(a, b, dn, policy: Policy):
    """The GEMM itself on rounded operands, accumulated in float32 (or by a MAC order)."""
    a, b = a.astype(jnp.float32), b.astype(jnp.float32)
    mac = policy.mac_spec()
    if mac is not None:
        return _mac_dot_general(a, b, dn, mac)
    return lax.dot_general(a, b, dn, precision=lax.Precision.HIGHEST, preferred_element_type=jnp.float32)


def _contract_grad(a, b, g, dn, policy: Policy, wrt: int):
    """The gradient of the contraction with respect to operand ``wrt`` (0: dA, 1: dB) at
    cotangent ``g``: a gradient GEMM, accumulated as the forward one is (a bit-exact MAC order
    runs on the transposed product JAX's own rule forms)."""
    def grad(x, w, ct, contract):
        if wrt == 0:
            return jax.vjp(lambda v: contract(v, w), x)[1](ct)[0]
        return jax.vjp(lambda v: contract(x, v), w)[1](ct)[0]

    mac = policy.mac_spec()
    if mac is None:
        return grad(a, b, g, lambda x, w: _contract(x, w, dn, policy))

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
            outs = [_mac_dot_general(invals[0].astype(jnp.float32), invals[1].astype(jnp.float32),
                                     eqn.params["dimension_numbers"], mac)]
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


def _dot_roles(weightish: Sequence[bool]) -> tuple[str, str]:
    lhs_w, rhs_w = weightish
    if rhs_w and not lhs_w:
        return "act", "weight"
    if lhs_w and not rhs_w:
        return "weight", "act"
    if lhs_w and rhs_w:
        return "weight", "weight"
    return "act", "act"


def _same_grid(spec: RoleSpec | None, pre: RoleSpec | None) -> bool:
    """Whether values rounded by ``pre`` are left unchanged by rounding with ``spec``: the same
    plain (unscaled, elementwise) format and overflow rule; the rounding mode does not matter,
    every mode keeps a value that is on the grid."""
    if spec is None or pre is None or spec.is_identity or spec.scaling != "none" or pre.scaling != "none":
        return False
    a, b = spec.spec, pre.spec
    return a.kind != "block" and a == b and spec.saturate == pre.saturate


def _grid_level(eqn, flags) -> int:
    """Weight level of a structural op's outputs: 2 (on the pre-rounded grid) when the op only
    moves values and every float input is an on-grid weight (a literal is not), else 1."""
    name = eqn.primitive.name
    if name == "convert_element_type":
        if np.dtype(eqn.params.get("new_dtype")) != np.float32:
            return 1
    elif name not in _VALUE_PRESERVING:
        return 1
    floats = [(v, f) for v, f in zip(eqn.invars, flags, strict=True) if jnp.issubdtype(v.aval.dtype, jnp.floating)]
    ok = floats and all(f == 2 and not isinstance(v, jcore.Literal) for v, f in floats)
    return 2 if ok else 1


class _Interpreter:
    """``flags`` (one per jaxpr variable): 0 activation, 1 weight, 2 weight already on the grid
    of ``prerounded`` (a training step rounds its working weights once; rounding them again in
    every GEMM, and in every scan iteration, returned the same bits and cost time)."""

    def __init__(self, policy: Policy, words=None, amax=None, n_sites: int = 0,
                 prerounded: RoleSpec | None = None):
        self.policy = policy
        self.prerounded = prerounded
        self.n_sites = n_sites  # GEMM sites in the whole function (the last one is n_sites - 1)
        self.edge_policy = policy
        if policy.first_last:  # the first and last GEMM sites: roles overridden
            merged = {**dict(policy.roles), **dict(policy.first_last)}
            self.edge_policy = dataclasses.replace(policy, roles=tuple(merged.items()), first_last=())
        self.multiplier = 1  # times the current jaxpr runs per call (scan lengths)
        self.words = words  # uint32[2] or None: this scope's stochastic-rounding seed words
        self.amax = amax  # (S, 3) amax estimates per GEMM site, or None; its gradient: the amax seen
        # The estimates' values, not differentiated: the same in every scan iteration, so a weight
        # rounded by them (a scan constant) is loop-invariant and JAX/XLA round it once, before
        # the loop, instead of in every iteration (the recurrent weight of a GRU).
        self.est = None if amax is None else lax.stop_gradient(amax)
        self.site = 0  # GEMM sites met so far (scan bodies counted once)
        self.static = np.asarray([v for _, v in policy.static_scales], np.float32).reshape(-1, 3)

    def _site(self):
        """(meta, words, policy) of the next GEMM site; meta: (tap, estimate) rows of the amax
        (the tap, differentiated, carries the observed amax back as its gradient)."""
        i = self.site
        self.site += 1
        pol = self.edge_policy if i in (0, self.n_sites - 1) else self.policy
        meta = None
        if self.amax is not None:  # a row per site (checked by ``_emulate``)
            meta = (self.amax[i], self.est[i])
        elif "delayed" in self.policy.scalings or "static" in self.policy.scalings:
            meta = (None, jnp.asarray(self.static[i] if i < len(self.static) else np.zeros(3, np.float32)))
        words = None
        if self.words is not None:
            words = derive(self.words, i)
        elif any(_stochastic(pol.role(r)) for r in _GEMM_ROLES):
            raise ValueError(f"recipe {self.policy.name!r} uses stochastic rounding: pass a key "
                             "(emulate(fn, policy)(*args, asicsim_key=jax.random.key(seed)))")
        return meta, words, pol

    def run(self, jaxpr, consts, args, weight_flags):
        env: dict = {}
        weights: dict = {}  # var -> weight level (1 or 2, see the class docstring)

        def read(v):
            return v.val if isinstance(v, jcore.Literal) else env[v]

        for v, c in zip(jaxpr.constvars, consts, strict=True):
            env[v] = c
        for v, a, w in zip(jaxpr.invars, args, weight_flags, strict=True):
            env[v] = a
            if w:
                weights[v] = int(w)
        for eqn in jaxpr.eqns:
            invals = [read(v) for v in eqn.invars]
            flags = [0 if isinstance(v, jcore.Literal) else weights.get(v, 0) for v in eqn.invars]
            outs = self.eqn(eqn, invals, flags)
            if eqn.primitive.name in _STRUCTURAL and any(flags):
                level = _grid_level(eqn, flags)
                weights.update((v, level) for v in eqn.outvars)
            for v, o in zip(eqn.outvars, outs, strict=True):
                env[v] = o
        return [read(v) for v in jaxpr.outvars]

    def eqn(self, eqn, invals, flags):
        name, p = eqn.primitive.name, eqn.params
        if name == "dot_general" and not _integer_gemm(eqn):
            roles = _dot_roles(flags)
            out_dtype = eqn.outvars[0].aval.dtype
            meta, kd, pol = self._site()
            self._record("gemm", eqn, roles, pol)
            return [_emulated_dot(invals[0], invals[1], meta, kd,
                                  (p["dimension_numbers"], roles, out_dtype, self._ongrid(flags, roles, pol)), pol)]
        if name == "conv_general_dilated":
            roles = _dot_roles(flags)
            keep = ("window_strides", "padding", "lhs_dilation", "rhs_dilation", "dimension_numbers",
                    "feature_group_count", "batch_group_count")
            patches, kernel, dn, finish = conv_as_gemm(invals[0], invals[1], {k: p[k] for k in keep})
            meta, kd, pol = self._site()
            self._record("conv", eqn, roles, pol)  # priced as the convolution it is
            cfg = (dn, roles, eqn.outvars[0].aval.dtype, self._ongrid(flags, roles, pol))
            return [finish(_emulated_dot(patches, kernel, meta, kd, cfg, pol))]
        if name == "scan":
            return self._scan(p, invals, flags)
        if name == "while":
            return self._while(p, invals, flags)
        if name == "cond":
            return self._cond(p, invals, flags)
        if name in _CALLS and "jaxpr" in p:
            inner = p["jaxpr"]
            closed = inner if hasattr(inner, "consts") else jcore.ClosedJaxpr(inner, ())
            return self.run(closed.jaxpr, closed.consts, invals, flags)
        record_elementwise(eqn, self.multiplier, self.policy)  # the op trace's vector work
        subfuns, bind_params = bind_args(eqn.primitive, p)  # as jax.core.eval_jaxpr does
        with eqn.ctx.manager:
            out = eqn.primitive.bind(*subfuns, *invals, **bind_params)
        return out if eqn.primitive.multiple_results else [out]

    def _ongrid(self, flags, roles, policy: Policy) -> tuple[bool, bool]:
        """Per operand: a pre-rounded weight whose GEMM role rounds onto that same grid."""
        return tuple(f == 2 and r == "weight" and _same_grid(policy.role(r), self.prerounded)
                     for f, r in zip(flags[:2], roles, strict=True))

    def _record(self, kind, eqn, roles, policy):
        shapes = tuple(tuple(v.aval.shape) for v in eqn.invars)
        record(kind=kind, shapes=shapes, out_shape=tuple(eqn.outvars[0].aval.shape), roles=roles,
               params=eqn.params, count=self.multiplier, policy=policy)

    def _scan(self, p, invals, flags):
        (nc, ncarry), closed = scan_operand_counts(p), p["jaxpr"]
        consts, init, xs = invals[:nc], invals[nc:nc + ncarry], invals[nc + ncarry:]
        cflags, xflags = flags[:nc], flags[nc + ncarry:]

        length, site0 = p["length"], self.site
        outer_words, outer_amax = self.words, self.amax
        extra = {}
        if outer_words is not None:  # words per iteration: stochastic rounding never reuses bits
            extra["words"] = derive(derive(outer_words, 1_000_003 + site0), jnp.arange(length))
        if outer_amax is not None:  # the body's observed amax: the largest over iterations
            extra["amax"] = _broadcast_max(outer_amax, length)

        def body(carry, x):
            x, ex = x
            self.site = site0  # a retraced body numbers its sites the same way
            self.words, self.amax = ex.get("words"), ex.get("amax")
            outs = self.run(closed.jaxpr, closed.consts, [*consts, *carry, *x],
                            [*cflags, *([False] * ncarry), *xflags])
            return outs[:ncarry], outs[ncarry:]

        outer, self.multiplier = self.multiplier, self.multiplier * length
        try:
            carry, ys = lax.scan(body, init, (xs, extra), length=length, reverse=p["reverse"],
                                 unroll=p["unroll"])
        finally:
            self.multiplier = outer
            self.words, self.amax = outer_words, outer_amax
        self.site = site0 + count_sites(closed.jaxpr)
        return [*carry, *ys]

    def _while(self, p, invals, flags):
        cn, bn = p["cond_nconsts"], p["body_nconsts"]
        cc, bc, init = invals[:cn], invals[cn:cn + bn], invals[cn + bn:]
        cj, bj = p["cond_jaxpr"], p["body_jaxpr"]
        n = len(init)

        site0, ncond = self.site, count_sites(cj.jaxpr)

        def cond(c):
            self.site = site0
            return self.run(cj.jaxpr, cj.consts, [*cc, *c], [*flags[:cn], *([False] * n)])[0]

        def body(c):  # note: stochastic-rounding streams repeat across while iterations
            self.site = site0 + ncond
            # a tuple, as the carry went in: while_loop checks the two have one pytree structure
            return tuple(self.run(bj.jaxpr, bj.consts, [*bc, *c], [*flags[cn:cn + bn], *([False] * n)]))

        out = list(lax.while_loop(cond, body, tuple(init)))
        self.site = site0 + ncond + count_sites(bj.jaxpr)
        return out

    def _cond(self, p, invals, flags):
        index, ops = invals[0], invals[1:]
        starts = np.cumsum([self.site] + [count_sites(br.jaxpr) for br in p["branches"]])

        def branch(i, br, *a):
            self.site = int(starts[i])  # each branch numbers its own sites
            return self.run(br.jaxpr, br.consts, list(a), flags[1:])

        branches = [functools.partial(branch, i, br) for i, br in enumerate(p["branches"])]
        out = list(lax.switch(index, branches, *ops))
        self.site = int(starts[-1])
        return out


def _integer_gemm(eqn) -> bool:
    """A GEMM on integers only (index arithmetic, exact counts): the user's exact op, not a MAC
    unit's float GEMM of the recipe, so it is neither rounded nor numbered as a site."""
    return all(jnp.issubdtype(v.aval.dtype, jnp.integer) or v.aval.dtype == jnp.bool_
               for v in (*eqn.invars, *eqn.outvars))


def count_sites(jaxpr) -> int:
    """GEMM sites (dot_general/conv) in ``jaxpr`` as the interpreter numbers them: a scan or while
    body counted once, every cond branch, nested calls."""
    n = 0
    for eqn in jaxpr.eqns:
        name, p = eqn.primitive.name, eqn.params
        if name in ("dot_general", "conv_general_dilated") and not _integer_gemm(eqn):
            n += 1
        elif name == "scan":
            n += count_sites(p["jaxpr"].jaxpr)
        elif name == "while":
            n += count_sites(p["cond_jaxpr"].jaxpr) + count_sites(p["body_jaxpr"].jaxpr)
        elif name == "cond":
            n += sum(count_sites(br.jaxpr) for br in p["branches"])
        elif name in _CALLS and "jaxpr" in p:
            inner = p["jaxpr"]
            n += count_sites(inner.jaxpr if hasattr(inner, "consts") else inner)
    return n


@functools.partial(jax.custom_vjp, nondiff_argnums=(1,))
def _broadcast_max(x, n: int):
    """``x`` repeated ``n`` times along a new axis 0; its gradient is the *largest* cotangent over
    that axis (not the sum), so an amax observed in every scan iteration comes back as the max."""
    return jnp.broadcast_to(x, (n, *x.shape))


_broadcast_max.defvjp(lambda x, n: (_broadcast_max(x, n), None), lambda n, _, g: (jnp.max(g, axis=0),))


def split_arrays(tree):
    """(array leaves, their leaf positions, rebuild(arrays) -> tree): arrays are traced; any other
    leaf (an Equinox module's activation function) stays a static Python value."""
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    positions = [i for i, x in enumerate(leaves)
                 if isinstance(x, (jax.Array, np.ndarray, np.generic, bool, int, float, complex))]

    def rebuild(arrays):
        full = list(leaves)
        for i, x in zip(positions, arrays, strict=True):
            full[i] = x
        return jax.tree_util.tree_unflatten(treedef, full)

    return [leaves[i] for i in positions], positions, rebuild


def emulate(fn: Callable, policy, *, weights: int | None = 0) -> Callable:
    """Return ``fn`` computed in the formats of ``policy`` (a recipe name, path, mapping or Policy).

    ``weights``: the positional argument holding the model's weights (its leaves get the
    ``weight`` role; None: every GEMM operand is an activation unless derived from a weight).
    """
    return _emulate(fn, load_recipe(policy), weights=weights)


def _emulate(fn: Callable, pol: Policy, *, weights: int | None = 0, prerounded: RoleSpec | None = None) -> Callable:
    """:func:`emulate`; ``prerounded``: the caller promises the ``weights`` argument's leaves are
    already rounded with this role spec (the training step's working weights), so GEMM weight
    operands on the same grid are not rounded again (same bits, less work). The wrapped function
    also takes ``asicsim_words``: seed words instead of ``asicsim_key`` (no threefry call)."""

    @functools.wraps(fn)
    def wrapped(*args, asicsim_key=None, asicsim_amax=None, asicsim_words=None, **kwargs):
        key, amax = asicsim_key, asicsim_amax
        if key is not None and not jnp.issubdtype(jnp.asarray(key).dtype, jax.dtypes.prng_key):
            key = jax.random.wrap_key_data(key)  # a raw uint32 key
        counts = [len(jax.tree_util.tree_leaves(a)) for a in args]
        start = sum(counts[:weights]) if weights is not None and weights < len(args) else 0
        stop = start + (counts[weights] if weights is not None and weights < len(args) else 0)
        arrays, positions, rebuild = split_arrays((args, kwargs))
        level = 2 if prerounded is not None else 1
        flags = [level if start <= i < stop else 0 for i in positions]

        def flat_fn(*xs):
            a, k = rebuild(xs)
            return fn(*a, **k)

        closed, out_shape = jax.make_jaxpr(flat_fn, return_shape=True)(*arrays)
        words = asicsim_words
        if words is None and key is not None and pol.stochastic:
            words = key_words(key)
        sites = count_sites(closed.jaxpr) if amax is not None or pol.first_last else 0
        if amax is not None and sites > amax.shape[0]:
            raise ValueError(f"{getattr(fn, '__name__', 'the function')} has {sites} GEMM/convolution sites but "
                             f"asicsim_amax has rows for {amax.shape[0]}: delayed and static scaling need one "
                             f"row per site (make_train_step(..., max_sites={sites}) or "
                             f"observe_amax(..., max_sites={sites}))")
        interp = _Interpreter(pol, words, amax, n_sites=sites if pol.first_last else 0, prerounded=prerounded)
        outs = interp.run(closed.jaxpr, closed.consts, arrays, flags)
        return jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(out_shape), outs)

    return wrapped
