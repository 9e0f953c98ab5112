"""The jaxpr interpreter behind :func:`asicsim.emulate`: re-evaluates a traced function,
replacing every float ``dot_general`` and ``conv_general_dilated`` with an emulated GEMM and
recursing into scans, while loops, conds and nested calls; weights are found by provenance."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend import core as jcore

from asicsim._jax_compat import bind_args
from asicsim._src.emulate import control_flow, custom_rules, opaque
from asicsim._src.emulate.attention import marked_role
from asicsim._src.emulate.conv import conv_as_gemm
from asicsim._src.emulate.custom_rules import GRAD  # flag of a value computed from a cotangent
from asicsim._src.emulate.gemm import _GEMM_ROLES, GemmSite, _emulated_dot
from asicsim._src.emulate.layer_rules import gemm_policy, match_rule, note
from asicsim._src.emulate.layer_scan import layer_scan
from asicsim._src.emulate.lsq_sites import LsqSteps, conv_kept, dot_kept
from asicsim._src.emulate.op_rules import eqn_scope, op_policy
from asicsim._src.emulate.operand_roles import attention_roles, dot_roles, gemm_path, plain_float32
from asicsim._src.emulate.policy import Policy, RoleSpec
from asicsim._src.emulate.provenance import input_data, moves_weight, operand_data
from asicsim._src.emulate.role_rounding import _stochastic
from asicsim._src.emulate.site_rows import (
    CALLS,
    CUSTOM,
    REMAT,
    count_rows,
    is_integer_gemm,
    is_layer_scan,
)
from asicsim._src.emulate.trace import dtype_formats, record, record_elementwise
from asicsim._src.emulate.value_marks import grid_level, out_tags, same_grid
from asicsim._src.emulate.vector_roles import vector_rounder
from asicsim._src.numerics.random import derive

_CALLS = CALLS - REMAT  # inlined


class _Interpreter:
    """``flags`` (one per jaxpr variable): 0 activation, 1 weight, 2 weight already on the grid
    of ``prerounded`` (a training step rounds its working weights once; rounding them again in
    every GEMM, and in every scan iteration, returned the same bits and cost time); ``paths``: the
    weight leaf's pytree path per weight variable (for ``Policy.layers``); ``data``: the variables
    that depend on the function's data (:mod:`.provenance`: a gather of a weight by them is data).

    GEMMs are numbered by rows (:mod:`.site_rows`): ``site`` indexes this scope's rows of
    ``amax``/``est``/``words`` (a layer scan's body gets its iteration's rows as a slice, from 0);
    ``row_base + site`` is the row in the whole function (None inside a layer scan's middle
    iterations, where it is traced; never the first or last row, those iterations are peeled)."""

    def __init__(self, policy: Policy, words=None, amax=None, n_rows: int = 0,
                 prerounded: RoleSpec | None = None, lsq: LsqSteps | None = None):
        self.policy = policy
        self.lsq = LsqSteps() if lsq is None else lsq  # learned step sizes (.lsq_sites)
        self.custom = 0  # nesting in custom_vjp/custom_jvp rules (no learned steps inside: .lsq_sites)
        self.prerounded = prerounded
        self.n_rows = n_rows  # rows in the whole function (the last one is n_rows - 1)
        self.multiplier = 1  # times the current jaxpr runs per call (scan lengths)
        self.words = words  # uint32[2] or None: this scope's stochastic-rounding seed words
        self.amax = amax  # (S, 3) amax estimates per row, or None; its gradient: the amax seen
        # The estimates' values, not differentiated: the same in every iteration of a time scan,
        # so a weight rounded by them (a scan constant) is loop-invariant and JAX/XLA round it
        # once, before the loop, instead of in every iteration (the recurrent weight of a GRU).
        self.est = None if amax is None else lax.stop_gradient(amax)
        if amax is None and ("delayed" in policy.scalings or "static" in policy.scalings):
            last = max((i for i, _ in policy.static_scales), default=-1)  # rows need not be dense
            static = np.zeros((max(n_rows, last + 1), 3), np.float32)
            for i, v in policy.static_scales:  # calibrated amax per row; 0: use the current amax
                static[i] = v
            self.est = jnp.asarray(static)
        self.site = 0  # rows of this scope met so far
        self.row_base = 0  # row (whole function) of this scope's site 0; None: traced
        self.used: set[int] = set()  # layer rules some GEMM or op matched
        self.scopes: list[str] = []  # name scopes of the equations being evaluated (op_rules.py)
        self.vector = vector_rounder(policy)  # None unless the recipe rounds non-GEMM ops
        # per-channel static amax of an operand (row, side) -> vector (asicsim._src.emulate.ptq)
        self.channel = {(s, side): np.asarray(v, np.float32) for s, side, v in policy.channel_scales}
        # attention roles (asicsim._src.emulate.attention): the marks of the next ``run``'s inputs (a
        # nested call's), and of the operands of the equation being evaluated
        self.pending_tags: list | None = None
        self.operand_tags: list = []
        self.out_tags: list | None = None

    def _site(self, path=None):
        """(meta, words, policy) of the next GEMM; meta: (tap, estimate) rows of the amax (the
        tap, differentiated, carries the observed amax back as its gradient)."""
        i = self.site
        self.site += 1
        row = None if self.row_base is None else self.row_base + i
        edge = bool(self.policy.first_last) and row in (0, self.n_rows - 1)
        rule = match_rule(self.policy.layers, path) if self.policy.layers else None
        if rule is not None:
            self.used.add(rule)
        pol = gemm_policy(self.policy, rule, edge)
        note({"row": row, "path": path, "rule": None if rule is None else self.policy.layers[rule][0],
              "edge": edge, "policy": pol})
        meta = None
        if self.amax is not None:  # a row each (checked by ``_emulate``)
            meta = (self.amax[i], self.est[i])
        elif self.est is not None:
            meta = (None, self.est[i])
            key = row if row is not None else i
            if (key, 0) in self.channel or (key, 1) in self.channel:  # a vector in place of a scalar
                a, b = (jnp.asarray(self.channel.get((key, k), meta[1][k])) for k in (0, 1))
                meta = (None, (a, b, meta[1][2]))
        words = None
        if self.words is not None:
            words = derive(self.words, i)
        elif any(_stochastic(pol.role(r)) for r in _GEMM_ROLES):
            raise ValueError(f"recipe {self.policy.name!r} uses stochastic rounding: pass a key "
                             "(emulate(fn, policy)(*args, asicsim_key=jax.random.key(seed)))")
        return meta, words, pol

    def run(self, jaxpr, consts, args, weight_flags, weight_paths=None, data=None):
        """``jaxpr`` on ``args`` (weight ``weight_flags``, ``weight_paths``; ``data``: whether
        each depends on data, None: every one that is not a weight does)."""
        env: dict = {}
        weights: dict = {}  # var -> weight level (1 or 2, see the class docstring)
        paths: dict = {}  # var -> the weight leaf's path
        dep = {v for v, d in zip(jaxpr.invars, input_data(weight_flags, data), strict=True) if d}
        pending, self.pending_tags = self.pending_tags, None
        tags = {v: t for v, t in zip(jaxpr.invars, pending or (), strict=False) if t is not None}

        def read(v):
            return v.val if isinstance(v, jcore.Literal) else env[v]

        for v, c in zip(jaxpr.constvars, consts, strict=True):
            env[v] = c
            if jnp.issubdtype(v.aval.dtype, jnp.floating):  # an array the function closes over:
                weights[v] = 1  # a model's parameters, not an activation
        for v, a, w, path in zip(jaxpr.invars, args, weight_flags, weight_paths or [None] * len(args), strict=True):
            env[v] = a
            if w:
                weights[v] = int(w)
                paths[v] = path
        for eqn in jaxpr.eqns:
            invals = [read(v) for v in eqn.invars]
            flags = [0 if isinstance(v, jcore.Literal) else weights.get(v, 0) for v in eqn.invars]
            vpaths = [None if isinstance(v, jcore.Literal) else paths.get(v) for v in eqn.invars]
            vdata = operand_data(eqn, dep)
            self.operand_tags = [None if isinstance(v, jcore.Literal) else tags.get(v) for v in eqn.invars]
            in_tags, self.out_tags = self.operand_tags, None
            self.scopes.append(eqn_scope(eqn))
            outs = self.eqn(eqn, invals, flags, vpaths, vdata)
            self.scopes.pop()
            tags.update(out_tags(eqn, in_tags, self.out_tags if _inlined(eqn) else None))
            if any(vdata):
                dep.update(eqn.outvars)
            if GRAD in flags:  # anything computed from a cotangent is a gradient
                weights.update((v, GRAD) for v in eqn.outvars)
            elif moves_weight(eqn.primitive.name, flags, vdata) or (marked_role(eqn) and flags[0]):
                level = flags[0] if marked_role(eqn) else grid_level(eqn, flags)  # a mark: an identity
                weights.update((v, level) for v in eqn.outvars)
                path = next((q for q in vpaths if q is not None), None)  # concatenate: the first
                paths.update((v, path) for v in eqn.outvars)
            elif _inlined(eqn):  # a jitted helper (jnp.take, jnp.where): its results as its body made them
                weights.update((v, f) for v, f in zip(eqn.outvars, self.out_flags, strict=True) if f)
                paths.update((v, q) for v, q in zip(eqn.outvars, self.out_paths, strict=True) if q is not None)
            for v, o in zip(eqn.outvars, outs, strict=True):
                env[v] = o
        # the outputs' provenance flags and paths, for a caller that needs them (a custom_vjp's
        # residuals, the results of an inlined call)
        self.out_flags = [0 if isinstance(v, jcore.Literal) else weights.get(v, 0) for v in jaxpr.outvars]
        self.out_paths = [None if isinstance(v, jcore.Literal) else paths.get(v) for v in jaxpr.outvars]
        self.out_tags = [None if isinstance(v, jcore.Literal) else tags.get(v) for v in jaxpr.outvars]
        return [read(v) for v in jaxpr.outvars]

    def eqn(self, eqn, invals, flags, paths=None, data=None):
        name, p = eqn.primitive.name, eqn.params
        paths = paths or [None] * len(invals)
        data = input_data(flags, data)
        if is_integer_gemm(eqn):  # the user's exact integer GEMM: run as it is, traced in its dtypes
            self._record("gemm" if name == "dot_general" else "conv", eqn, dot_roles(flags), self.policy,
                         dtype_formats(eqn), gemm_path(dot_roles(flags), paths))
            return self._bind(eqn, invals)
        if marked_role(eqn) is not None:  # an attention operand's mark: an identity, no work
            return list(invals)
        if name == "dot_general":
            roles = attention_roles(dot_roles(flags), self.operand_tags)
            out_dtype = eqn.outvars[0].aval.dtype
            meta, kd, pol = self._site(gemm_path(roles, paths))
            pol = self._gemm_policy(pol, roles)
            self._record("gemm", eqn, roles, pol, path=gemm_path(roles, paths))
            if plain_float32(pol):
                return self._bind(eqn, invals)
            dn = p["dimension_numbers"]
            (a, b), lsq = self.lsq.operands(pol, roles, invals[:2], dot_kept(dn, (invals[0].ndim, invals[1].ndim)),
                                            self.custom, "dot_general", gemm_path(roles, paths))
            ongrid = tuple(g or q for g, q in zip(self._ongrid(flags, roles, pol), lsq, strict=True))
            return [_emulated_dot(a, b, meta, kd, GemmSite(dn, roles, out_dtype, ongrid), pol)]
        if name == "conv_general_dilated":
            roles = dot_roles(flags)
            keep = ("window_strides", "padding", "lhs_dilation", "rhs_dilation", "dimension_numbers",
                    "feature_group_count", "batch_group_count")
            meta, kd, pol = self._site(gemm_path(roles, paths))
            pol = self._gemm_policy(pol, roles)
            self._record("conv", eqn, roles, pol, path=gemm_path(roles, paths))  # priced as the convolution it is
            if plain_float32(pol):
                return self._bind(eqn, invals)
            ops, lsq = self.lsq.operands(pol, roles, invals[:2], conv_kept(p["dimension_numbers"]), self.custom,
                                         "convolution", gemm_path(roles, paths))
            patches, kernel, dn, finish = conv_as_gemm(ops[0], ops[1], {k: p[k] for k in keep})
            ongrid = tuple(g or q for g, q in zip(self._ongrid(flags, roles, pol), lsq, strict=True))
            site = GemmSite(dn, roles, eqn.outvars[0].aval.dtype, ongrid)
            return [finish(_emulated_dot(patches, kernel, meta, kd, site, pol))]
        if name in ("scan", "while", "cond") or (name in REMAT and "jaxpr" in p) or (
                name in CUSTOM and count_rows(eqn.params["call_jaxpr"].jaxpr, flags, data)):
            custom = int(name in CUSTOM)
            self.custom += custom
            try:
                return self._nested(eqn, invals, flags, paths, data)
            finally:
                self.custom -= custom
        if _inlined(eqn):
            inner = p["jaxpr"]
            closed = inner if hasattr(inner, "consts") else jcore.ClosedJaxpr(inner, ())
            self.pending_tags = list(self.operand_tags) if any(self.operand_tags) else None
            return self.run(closed.jaxpr, closed.consts, invals, flags, paths, data)
        if opaque.check(eqn, self.policy):  # passed through, with a warning (or refused)
            return self._bind(eqn, invals)
        # roles vector/transcendental/reduction (vector_roles.py), per op by rule (op_rules.py)
        pol = self.policy if self.vector is None else op_policy(self.policy, self.scopes, eqn, self.used)
        record_elementwise(eqn, self.multiplier, pol)  # the op trace's vector work
        if self.vector is not None:
            return self.vector.bind(eqn, invals, self.words, pol)
        return self._bind(eqn, invals)

    def _nested(self, eqn, invals, flags, paths, data):
        """A scan, while loop, cond, checkpoint or custom rule: its bodies emulated on their own."""
        name, p = eqn.primitive.name, eqn.params
        if name == "scan":
            if is_layer_scan(p, flags):
                return layer_scan(self, p, invals, flags, paths, data)
            return control_flow.time_scan(self, p, invals, flags, paths, data)
        if name == "while":
            return control_flow.while_loop(self, p, invals, flags, paths, data)
        if name == "cond":
            return control_flow.cond(self, p, invals, flags, paths, data)
        if name in REMAT:
            return custom_rules.checkpoint(self, eqn, invals, flags, paths, data)
        rule = custom_rules.custom_jvp if name == "custom_jvp_call" else custom_rules.custom_vjp
        return rule(self, eqn, invals, flags, paths, data)

    @staticmethod
    def _bind(eqn, invals):
        """The equation's own primitive on ``invals``, as ``jax.core.eval_jaxpr`` binds it."""
        subfuns, bind_params = bind_args(eqn.primitive, eqn.params)
        with eqn.ctx.manager:
            out = eqn.primitive.bind(*subfuns, *invals, **bind_params)
        return out if eqn.primitive.multiple_results else [out]

    def _gemm_policy(self, pol: Policy, roles) -> Policy:
        """``pol``, or for a gradient GEMM in a user's backward (an operand with role ``grad``)
        ``pol`` with its output rounded as the gradient it is: ``wgrad`` where no operand is a
        weight (dW = X^T dY), else ``grad_out`` (dX = dY W^T)."""
        if "grad" not in roles:
            return pol
        return custom_rules.backward_policy(pol, "grad_out" if "weight" in roles else "wgrad")

    def _ongrid(self, flags, roles, policy: Policy) -> tuple[bool, bool]:
        """Per operand: a pre-rounded weight whose GEMM role rounds onto that same grid."""
        return tuple(f == 2 and r == "weight" and same_grid(policy.role(r), self.prerounded)
                     for f, r in zip(flags[:2], roles, strict=True))

    def _record(self, kind, eqn, roles, policy, formats=None, path=""):
        shapes = tuple(tuple(v.aval.shape) for v in eqn.invars)
        record(kind=kind, shapes=shapes, out_shape=tuple(eqn.outvars[0].aval.shape), roles=roles,
               params=eqn.params, count=self.multiplier, policy=policy, formats=formats, path=path)


def _inlined(eqn) -> bool:
    """A nested call (``jit``, ``closed_call``) the interpreter runs as if inlined."""
    return eqn.primitive.name in _CALLS and "jaxpr" in eqn.params


def count_sites(jaxpr, flags=None, data=None) -> int:
    """Rows of ``jaxpr`` as the interpreter numbers them (:func:`.site_rows.count_rows`)."""
    return count_rows(jaxpr, flags, data)
