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
bit-exact MAC order runs :func:`asicsim.numerics.matmul` for plain 2-D products). Backward: the
incoming cotangent is rounded to ``grad``; the two gradient GEMMs accumulate like the forward one,
then dX is rounded to ``grad`` and dW to ``wgrad``. Rounding itself is straight-through.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend import core as jcore

from asicsim.emulate.policy import Policy, RoleSpec, load_recipe
from asicsim.emulate.trace import record
from asicsim.numerics import quantize

# primitives that only move or relabel data: a weight stays a weight through them
_STRUCTURAL = {"reshape", "transpose", "convert_element_type", "broadcast_in_dim", "squeeze",
               "expand_dims", "slice", "dynamic_slice", "copy", "copy_p", "rev", "gather",
               "reduce_precision", "concatenate", "pad", "select_n"}
_CALLS = {"pjit", "jit", "closed_call", "core_call", "remat", "checkpoint", "remat2", "custom_lin"}


def round_role(x: jax.Array, spec: RoleSpec | None, *, key=None) -> jax.Array:
    """Round ``x`` as role ``spec`` says (None or fp32/rne: unchanged), keeping its dtype."""
    if spec is None or spec.is_identity:
        return x
    kw = {}
    if spec.scaling in ("tensor", "delayed"):  # delayed: the loop keeps the history; here current
        kw["scaling"] = "tensor"
    elif spec.scaling == "channel":
        kw["scaling"] = "channel"
    elif spec.scaling == "block":
        kw["block_size"] = spec.block_size
        kw["axis"] = -1
    if spec.rounding.startswith("sr"):
        if key is None:
            raise ValueError(f"role format {spec.format!r} uses stochastic rounding {spec.rounding!r}: "
                             "pass a key (emulate(...)(..., asicsim_key=jax.random.key(seed)))")
        kw["key"] = key
    y = quantize(x.astype(jnp.float32), spec.format, spec.rounding, saturate=spec.saturate, **kw)
    return y.astype(x.dtype)


def _grad_role(role: str) -> str:
    return "wgrad" if role == "weight" else "grad"


def _accumulate(y: jax.Array, policy: Policy) -> jax.Array:
    """Round an fp32 accumulation result to the accumulator format."""
    return round_role(y, policy.role("acc"))


@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3))
def _emulated_dot(a, b, cfg, policy):
    return _dot_fwd(a, b, cfg, policy)[0]


def _dot_fwd(a, b, cfg, policy):
    dn, roles, out_dtype, conv = cfg
    qa = round_role(a, policy.role(roles[0]))
    qb = round_role(b, policy.role(roles[1]))
    y = _contract(qa, qb, dn, conv, policy)
    y = round_role(_accumulate(y, policy), policy.role("out"))
    return y.astype(out_dtype), (qa, qb)


def _dot_bwd(cfg, policy, res, g):
    dn, roles, _, conv = cfg
    qa, qb = res
    gq = round_role(g.astype(jnp.float32), policy.role("grad"))
    _, vjp = jax.vjp(lambda x, w: _contract(x, w, dn, conv, policy), qa.astype(jnp.float32),
                     qb.astype(jnp.float32))
    da, db = vjp(gq)
    da = round_role(_accumulate(da, policy), policy.role(_grad_role(roles[0])))
    db = round_role(_accumulate(db, policy), policy.role(_grad_role(roles[1])))
    return da.astype(qa.dtype), db.astype(qb.dtype)


_emulated_dot.defvjp(_dot_fwd, _dot_bwd)


def _contract(a, b, dn, conv, policy: Policy):
    """The GEMM/conv itself on rounded operands, accumulated in float32 (or by a MAC order)."""
    a, b = a.astype(jnp.float32), b.astype(jnp.float32)
    if conv is not None:
        return lax.conv_general_dilated(a, b, **dict(conv), precision=lax.Precision.HIGHEST,
                                        preferred_element_type=jnp.float32)
    if policy.mac_order != "fast":
        return _mac_matmul(a, b, dn, policy)
    return lax.dot_general(a, b, dn, precision=lax.Precision.HIGHEST, preferred_element_type=jnp.float32)


def _mac_matmul(a, b, dn, policy: Policy):
    """A bit-exact accumulation order: only for plain (M, K) x (K, N) products."""
    from asicsim.numerics import MacSpec, matmul

    if dn != (((1,), (0,)), ((), ())) or a.ndim != 2 or b.ndim != 2:
        raise NotImplementedError(f"mac order {policy.mac_order!r} emulates plain 2-D matmuls only; "
                                  f"got dimension numbers {dn} on shapes {a.shape} x {b.shape}: use "
                                  "mac order 'fast' for this model")
    acc = policy.role("acc")
    mac = MacSpec(a_fmt="fp32", acc=acc.format if acc else "fp32", order=policy.mac_order)
    return matmul(a, b, mac)


def _dot_roles(weightish: Sequence[bool]) -> tuple[str, str]:
    lhs_w, rhs_w = weightish
    if rhs_w and not lhs_w:
        return "act", "weight"
    if lhs_w and not rhs_w:
        return "weight", "act"
    if lhs_w and rhs_w:
        return "weight", "weight"
    return "act", "act"


class _Interpreter:
    def __init__(self, policy: Policy):
        self.policy = policy
        self.multiplier = 1  # times the current jaxpr runs per call (scan lengths)

    def run(self, jaxpr, consts, args, weight_flags):
        env: dict = {}
        weights: set = set()

        def read(v):
            return v.val if isinstance(v, jcore.Literal) else env[v]

        for v, c in zip(jaxpr.constvars, consts, strict=True):
            env[v] = c
        for v, a, w in zip(jaxpr.invars, args, weight_flags, strict=True):
            env[v] = a
            if w:
                weights.add(v)
        for eqn in jaxpr.eqns:
            invals = [read(v) for v in eqn.invars]
            flags = [not isinstance(v, jcore.Literal) and v in weights for v in eqn.invars]
            outs = self.eqn(eqn, invals, flags)
            if eqn.primitive.name in _STRUCTURAL and any(flags):
                weights.update(eqn.outvars)
            for v, o in zip(eqn.outvars, outs, strict=True):
                env[v] = o
        return [read(v) for v in jaxpr.outvars]

    def eqn(self, eqn, invals, flags):
        name, p = eqn.primitive.name, eqn.params
        if name == "dot_general":
            roles = _dot_roles(flags)
            out_dtype = eqn.outvars[0].aval.dtype
            self._record("gemm", eqn, roles)
            return [_emulated_dot(invals[0], invals[1], (p["dimension_numbers"], roles, out_dtype, None),
                                  self.policy)]
        if name == "conv_general_dilated":
            roles = _dot_roles(flags)
            keep = ("window_strides", "padding", "lhs_dilation", "rhs_dilation", "dimension_numbers",
                    "feature_group_count", "batch_group_count")
            conv = tuple((k, p[k]) for k in keep)
            self._record("conv", eqn, roles)
            return [_emulated_dot(invals[0], invals[1], (None, roles, eqn.outvars[0].aval.dtype, conv),
                                  self.policy)]
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
        bind_params = eqn.primitive.get_bind_params(p)  # as jax.core.eval_jaxpr does
        with eqn.ctx.manager:
            out = eqn.primitive.bind(*invals, **bind_params)
        return out if eqn.primitive.multiple_results else [out]

    def _record(self, kind, eqn, roles):
        shapes = tuple(tuple(v.aval.shape) for v in eqn.invars)
        record(kind=kind, shapes=shapes, out_shape=tuple(eqn.outvars[0].aval.shape), roles=roles,
               params=eqn.params, count=self.multiplier, policy=self.policy)

    def _scan(self, p, invals, flags):
        nc, ncarry, closed = p["num_consts"], p["num_carry"], p["jaxpr"]
        consts, init, xs = invals[:nc], invals[nc:nc + ncarry], invals[nc + ncarry:]
        cflags, xflags = flags[:nc], flags[nc + ncarry:]

        def body(carry, x):
            outs = self.run(closed.jaxpr, closed.consts, [*consts, *carry, *x],
                            [*cflags, *([False] * ncarry), *xflags])
            return outs[:ncarry], outs[ncarry:]

        outer, self.multiplier = self.multiplier, self.multiplier * p["length"]
        try:
            carry, ys = lax.scan(body, init, xs, length=p["length"], reverse=p["reverse"],
                                 unroll=p["unroll"])
        finally:
            self.multiplier = outer
        return [*carry, *ys]

    def _while(self, p, invals, flags):
        cn, bn = p["cond_nconsts"], p["body_nconsts"]
        cc, bc, init = invals[:cn], invals[cn:cn + bn], invals[cn + bn:]
        cj, bj = p["cond_jaxpr"], p["body_jaxpr"]
        n = len(init)

        def cond(c):
            return self.run(cj.jaxpr, cj.consts, [*cc, *c], [*flags[:cn], *([False] * n)])[0]

        def body(c):
            return self.run(bj.jaxpr, bj.consts, [*bc, *c], [*flags[cn:cn + bn], *([False] * n)])

        return list(lax.while_loop(cond, body, tuple(init)))

    def _cond(self, p, invals, flags):
        index, ops = invals[0], invals[1:]
        branches = [functools.partial(lambda br, *a: self.run(br.jaxpr, br.consts, list(a), flags[1:]), br)
                    for br in p["branches"]]
        return list(lax.switch(index, branches, *ops))


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
    pol = load_recipe(policy)

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        counts = [len(jax.tree_util.tree_leaves(a)) for a in args]
        start = sum(counts[:weights]) if weights is not None and weights < len(args) else 0
        stop = start + (counts[weights] if weights is not None and weights < len(args) else 0)
        arrays, positions, rebuild = split_arrays((args, kwargs))
        flags = [start <= i < stop for i in positions]

        def flat_fn(*xs):
            a, k = rebuild(xs)
            return fn(*a, **k)

        closed, out_shape = jax.make_jaxpr(flat_fn, return_shape=True)(*arrays)
        outs = _Interpreter(pol).run(closed.jaxpr, closed.consts, arrays, flags)
        return jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(out_shape), outs)

    return wrapped
