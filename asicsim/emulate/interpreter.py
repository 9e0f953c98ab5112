"""The jaxpr interpreter behind :func:`asicsim.emulate.emulate`: re-evaluates a traced function,
replacing every float ``dot_general`` and ``conv_general_dilated`` with an emulated GEMM and
recursing into scans, while loops, conds and nested calls; weights are found by provenance."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend import core as jcore

from asicsim._jax_compat import bind_args, scan_operand_counts
from asicsim.emulate.conv import conv_as_gemm
from asicsim.emulate.gemm import _GEMM_ROLES, _emulated_dot
from asicsim.emulate.policy import Policy, RoleSpec
from asicsim.emulate.role_rounding import _stochastic
from asicsim.emulate.trace import record, record_elementwise
from asicsim.numerics.random import derive

_STRUCTURAL = {"reshape", "transpose", "convert_element_type", "broadcast_in_dim", "squeeze",
               "expand_dims", "slice", "dynamic_slice", "copy", "copy_p", "rev", "gather",
               "reduce_precision", "concatenate", "pad", "select_n"}
# of those, the ones that keep every value unchanged (a value on a format's grid stays on it)
_VALUE_PRESERVING = {"reshape", "transpose", "broadcast_in_dim", "squeeze", "expand_dims", "slice",
                     "dynamic_slice", "copy", "copy_p", "rev", "concatenate"}
_CALLS = {"pjit", "jit", "closed_call", "core_call", "remat", "checkpoint", "remat2", "custom_lin"}


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
        # per-channel static amax of an operand (site, side) -> vector (asicsim.emulate.ptq)
        self.channel = {(s, side): np.asarray(v, np.float32) for s, side, v in policy.channel_scales}

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
            if (i, 0) in self.channel or (i, 1) in self.channel:  # a vector in place of a scalar
                a, b = (jnp.asarray(self.channel.get((i, k), meta[1][k])) for k in (0, 1))
                meta = (None, (a, b, meta[1][2]))
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
