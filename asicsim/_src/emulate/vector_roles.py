"""Rounding the ops outside the GEMMs: the recipe roles ``vector``, ``transcendental`` and
``reduction`` (softmax, normalisation, residual adds, activations in a format).

microxcaling computes every non-GEMM op (GELU, softmax, layernorm: add, sub, mul, div, sqrt,
exp...) in bfloat: ``bfloat = 16`` rounds each vector op's tensor inputs and its result
(``mx/vector_ops.py``, ``mx/simd_ops.py``: ``vec_quantize`` of the inputs, a scalar constant
left as it is; the result quantized; the incoming gradient quantized in backward), and QPyTorch
puts quantizer modules (forward and backward formats) where the user wants them. Here, as one
mechanism for any JAX program, the interpreter hands every equation it does not emulate itself
to :meth:`VectorRounder.bind`, which, for the primitives below with a float result:

- rounds each array operand once with the op's role where it is not already on that role's grid
  (a function argument, a constant, a GEMM result): a value read by several ops is rounded once,
  so that the gradients flowing back into it are summed before the one rounding of their sum;
  an operand that data movement made from such a value (a bias broadcast, a slice) is that
  value rounded, then moved;
- binds the primitive in float32 arithmetic (as it was) and rounds its result.

Each rounding is straight-through (:func:`_round_st`): forward ``round(y)``, backward
``round(g)`` of the cotangent, in the same role; JAX's own derivative of the op runs in between
in float32, so every gradient at an op's result (and at a rounded operand) is on the grid.

Which primitives (exactly; the op trace's classes, :mod:`.elementwise_trace`):

- ``transcendental``: :data:`TRANSCENDENTAL` (exp, log, tanh, logistic, erf...; absent: ``vector``);
- ``reduction``: :data:`REDUCTION` (reduce_sum/max/min/prod, cumulative sums, pooling windows;
  absent: ``vector``);
- ``vector``: :data:`ARITHMETIC` (add, sub, mul, div, max, min, neg, abs, square, sqrt, rsqrt,
  integer_pow...), and a ``custom_jvp_call``/``custom_vjp_call`` the interpreter binds whole
  (``jax.nn.relu``: its results only).

Never rounded: integer and bool results, comparisons, and data movement (reshape, transpose,
broadcast, slice, gather, concatenate, select_n, pad, casts, stop_gradient), which carry a value
on a grid through unchanged (:data:`_MOVES`); GEMM and convolution results (role ``out``).
softmax and layer norms are recognised by their primitives, not as patterns: JAX's softmax is
reduce_max, sub, exp, reduce_sum, div, so each step is rounded as microxcaling's softmax rounds
it. A recipe without these roles never reaches this module: its jaxpr is unchanged.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.extend import core as jcore

from asicsim._jax_compat import bind_args
from asicsim._src.emulate.fields import VECTOR_ROLES
from asicsim._src.emulate.policy import Policy, RoleSpec
from asicsim._src.emulate.role_rounding import round_role
from asicsim._src.numerics.random import derive

TRANSCENDENTAL = frozenset({"exp", "exp2", "log", "log1p", "expm1", "tanh", "logistic", "erf", "erfc",
                            "erf_inv", "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh",
                            "asinh", "acosh", "atanh", "lgamma", "digamma"})
REDUCTION = frozenset({"reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "cumsum", "cumprod", "cummax",
                       "cummin", "cumlogsumexp", "reduce_window_sum", "reduce_window_max", "reduce_window_min",
                       "reduce_window"})
ARITHMETIC = frozenset({"add", "add_any", "sub", "mul", "div", "rem", "pow", "integer_pow", "neg", "abs", "sign",
                        "square", "sqrt", "rsqrt", "cbrt", "max", "min", "clamp", "floor", "ceil", "round",
                        "nextafter", "custom_jvp_call", "custom_vjp_call", "custom_vjp_call_jaxpr"})
# data movement: a result on a grid where every float operand is on it
_MOVES = frozenset({"reshape", "transpose", "broadcast_in_dim", "squeeze", "expand_dims", "slice",
                    "dynamic_slice", "dynamic_update_slice", "copy", "copy_p", "rev", "concatenate", "gather",
                    "select_n", "pad", "stop_gradient", "convert_element_type"})
# moves of one array operand (the rest static or indices) that a fresh operand is rounded before
_ONE_OPERAND = frozenset({"reshape", "transpose", "broadcast_in_dim", "squeeze", "expand_dims", "slice",
                          "dynamic_slice", "copy", "copy_p", "rev", "convert_element_type"})
_STREAM = 2_000_003  # stochastic rounding: vector streams apart from the GEMM sites' (derive(words, site))


def role_of(primitive: str) -> str | None:
    """The vector role of a primitive's results (None: never rounded)."""
    if primitive in TRANSCENDENTAL:
        return "transcendental"
    if primitive in REDUCTION:
        return "reduction"
    if primitive in ARITHMETIC:
        return "vector"
    return None


def vector_rounder(policy: Policy) -> VectorRounder | None:
    """The rounder for ``policy``'s vector roles; None where it has none (nothing changes)."""
    if not any(r in VECTOR_ROLES for r, _ in policy.all_roles):  # the recipe's or an op rule's
        return None
    return VectorRounder(policy)


def _is_float(v) -> bool:
    return jnp.issubdtype(v.aval.dtype, jnp.floating)


@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def _round_st(x, words, spec: RoleSpec):
    """``x`` rounded by ``spec``; straight-through, its cotangent rounded by ``spec`` too."""
    return round_role(x, spec, words=words)


def _round_st_fwd(x, words, spec):
    return round_role(x, spec, words=words), words


def _round_st_bwd(spec, words, g):
    return round_role(g, spec, words=None if words is None else derive(words, 1)), None


_round_st.defvjp(_round_st_fwd, _round_st_bwd)


class VectorRounder:
    """Rounds the non-GEMM ops of one emulated call (one per interpreter): remembers which values
    are on which role's grid (by object identity; it holds them, so identities stay unique)."""

    def __init__(self, policy: Policy):
        self.policy = policy
        self._on: dict[int, tuple[object, RoleSpec]] = {}  # id -> (value, the spec it is on the grid of)
        self._rounded: dict[tuple[int, RoleSpec], tuple[object, object]] = {}  # operand rounded once per spec
        self._n = 0  # roundings so far: each its own stochastic-rounding stream
        self._moved: dict[int, tuple] = {}  # id -> (value, move eqn, its operands): a moved fresh value

    def _words(self, words):
        self._n += 1
        return None if words is None else derive(derive(words, _STREAM), self._n)

    def _grid(self, x) -> RoleSpec | None:
        hit = self._on.get(id(x))
        return hit[1] if hit is not None and hit[0] is x else None

    def _mark(self, x, spec: RoleSpec) -> None:
        self._on[id(x)] = (x, spec)

    def _operand(self, x, spec: RoleSpec, words):
        if self._grid(x) == spec:
            return x
        hit = self._rounded.get((id(x), spec))
        if hit is not None and hit[0] is x:
            return hit[1]
        moved = self._moved.get(id(x))
        if moved is not None and moved[0] is x:  # round the source, then move it again
            _, eqn, invals = moved
            src = self._operand(invals[0], spec, words)
            subfuns, params = bind_args(eqn.primitive, eqn.params)
            with eqn.ctx.manager:
                y = eqn.primitive.bind(*subfuns, src, *invals[1:], **params)
        else:
            y = _round_st(x, self._words(words), spec)
        self._rounded[(id(x), spec)] = (x, y)
        self._mark(y, spec)
        return y

    def bind(self, eqn, invals, words, policy: Policy | None = None):
        """Evaluate ``eqn`` (not a GEMM, scan, while, cond or call) on ``invals`` as the vector
        roles of ``policy`` say (the op's own, :mod:`.op_rules`; None: the recipe's); ``words``:
        the interpreter's stochastic-rounding seed words (or None)."""
        name = eqn.primitive.name
        role = role_of(name)
        spec = None if role is None else (policy or self.policy).role(role)
        if spec is not None and spec.is_identity:
            spec = None
        if spec is not None and any(_is_float(v) for v in eqn.outvars):
            invals = [self._operand(x, spec, words) if _is_float(v) and not isinstance(v, jcore.Literal) else x
                      for v, x in zip(eqn.invars, invals, strict=True)]
        subfuns, params = bind_args(eqn.primitive, eqn.params)  # as jax.core.eval_jaxpr does
        with eqn.ctx.manager:
            out = eqn.primitive.bind(*subfuns, *invals, **params)
        outs = list(out) if eqn.primitive.multiple_results else [out]
        if spec is not None:
            outs = [_round_st(y, self._words(words), spec) if _is_float(v) else y
                    for v, y in zip(eqn.outvars, outs, strict=True)]
            for v, y in zip(eqn.outvars, outs, strict=True):
                if _is_float(v):
                    self._mark(y, spec)
        elif name in _MOVES:
            self._carry(eqn, invals, outs)
        return outs

    def _carry(self, eqn, invals, outs) -> None:
        """Data movement keeps a grid: its float results are on the grid all its float operands
        share (a cast only to a float at least as wide as float32). A fresh operand moved by a
        one-operand move (a bias broadcast, a slice of the input) is remembered, so that a vector
        op reading the result rounds the source once (its gradients summed before the rounding,
        as microxcaling's broadcasting ops reduce the gradient, then quantize it)."""
        if eqn.primitive.name == "convert_element_type" and jnp.dtype(eqn.params["new_dtype"]).itemsize < 4:
            return
        if eqn.primitive.name in _ONE_OPERAND and len(outs) == 1 and _is_float(eqn.outvars[0]):
            v = eqn.invars[0]
            if _is_float(v) and not isinstance(v, jcore.Literal) and self._grid(invals[0]) is None:
                self._moved[id(outs[0])] = (outs[0], eqn, invals)
                return
        specs = {self._grid(x) if not isinstance(v, jcore.Literal) else None
                 for v, x in zip(eqn.invars, invals, strict=True) if _is_float(v)}
        if len(specs) == 1 and None not in specs:
            (spec,) = specs
            for v, y in zip(eqn.outvars, outs, strict=True):
                if _is_float(v):
                    self._mark(y, spec)
