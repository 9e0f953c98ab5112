"""``asicsim.emulate(fn, policy)``: run any JAX function with its GEMMs and convolutions in the
formats a precision policy names, gradients included.

How: ``fn`` is traced to a jaxpr and re-evaluated by a small interpreter (the pattern of JAX's
"custom jaxpr interpreters" guide) that replaces every ``dot_general`` and ``conv_general_dilated``
with an emulated one and recurses into ``scan``, ``while``, ``cond`` and nested ``jit`` calls;
a user's ``jax.custom_vjp`` is emulated forward and backward, ``jax.checkpoint`` stays a
checkpoint (:mod:`asicsim._src.emulate.custom_rules`). Where every role a GEMM rounds is float32 and
the MAC order ``fast`` (the fp32 recipe), the user's own GEMM or convolution runs unchanged.
Everything it emits is ordinary JAX, so the result composes with ``jit``, ``grad``, ``vmap`` and
``lax.scan``, and works on plain JAX, Flax and Equinox models alike (they all lower to the same
primitives). Which operand of a GEMM is the weight is found by provenance: leaves of the argument
``weights`` (default: the first) and anything reshaped, transposed or cast from them.

An emulated GEMM (custom VJP, as AQT's fwd/dlhs/drhs): the activation operand is rounded with role
``act`` and the weight with ``weight`` (two activations, e.g. attention scores: both ``act``), the
product accumulates in float32 and is rounded to ``acc`` then ``out`` (``mac_order = "fast"``; a
bit-exact MAC order runs :func:`asicsim.numerics.matmul`). A convolution is carried out as the
im2col GEMM an accelerator runs (:mod:`asicsim._src.emulate.conv`) and treated as that GEMM. Backward: the
incoming cotangent is rounded to ``grad`` (``grad_dx``/``grad_dw`` where a recipe gives each gradient
GEMM its own; the other operand to ``weight_dx``/``act_dw`` likewise: :mod:`asicsim._src.emulate.gemm`);
the two gradient GEMMs accumulate like the forward one, then dX is rounded to ``grad_out``
(default ``grad``) and dW to ``wgrad``. Rounding itself is straight-through. Ops outside the GEMMs
are rounded only where the recipe has a ``vector`` role (:mod:`asicsim._src.emulate.vector_roles`);
per-layer rules and the first/last layer pick each GEMM's roles (:mod:`asicsim._src.emulate.layer_rules`). Block scaling (OCP MX) runs along each GEMM's contraction axes (flattened), so
a block-scaled tensor that a gradient GEMM contracts along other axes (the cotangent for dX and
for dW, the activation for dW, the weight for dX) is rounded again for it from its unrounded
values, as Microsoft's microxcaling library and Transformer Engine's MXFP8 recipe quantize it.

Two optional keyword arguments of the emulated function (not passed to ``fn``):

``asicsim_key``   a ``jax.random`` key for roles with stochastic rounding; each GEMM site, role and
                  scan iteration gets its own stream (never reused): seed words drawn once from
                  the key, then derived per use by integer hashing (``random.derive``).
``asicsim_amax``  a float32 array (S, 3): per GEMM row (numbered in the order the interpreter meets
                  them; a scan over stacked layers -- weights among its xs -- counted per layer as
                  if unrolled, any other scan or while body once: :mod:`.site_rows`), the amax
                  estimates of (lhs, rhs, grad) that roles
                  with ``scaling = "delayed"`` or ``"static"`` scale by (0: unknown, use the current
                  amax). Its *gradient* is the amax each row observed in this call (forward
                  operands, backward cotangent; the largest over the iterations of a scan that is
                  not over layers, e.g. an RNN's time steps): what delayed
                  scaling's history records (:mod:`asicsim._src.emulate.training`). Static scales
                  may also live in the policy (``Policy.static_scales``, from
                  :func:`asicsim._src.emulate.ptq.calibrate`, which observes on the host instead).
``asicsim_lsq``   the learned step sizes of roles with ``scaling = "lsq"``/``"lsq_channel"``: a
                  sequence of float32 arrays, one per operand they round, in GEMM order
                  (:mod:`asicsim._src.emulate.lsq_sites`); differentiable (LSQ's step gradient).
                  Absent: each step is the paper's initial step of this call's operand
                  (:func:`init_lsq_steps` returns them).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from asicsim._src.emulate import nnx_state
from asicsim._src.emulate.interpreter import _Interpreter, count_sites
from asicsim._src.emulate.layer_rules import UnusedLayerRule, leaf_paths
from asicsim._src.emulate.lsq_sites import InitialStepsWarning, LsqSteps
from asicsim._src.emulate.policy import Policy, RoleSpec
from asicsim._src.emulate.recipes import load_recipe
from asicsim._src.emulate.role_rounding import round_role
from asicsim._src.emulate.site_rows import count_rows
from asicsim._src.emulate.trace import trace_active
from asicsim._src.numerics.random import key_words

__all__ = ["count_sites", "emulate", "init_lsq_steps", "observe_lsq", "round_role", "split_arrays"]


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
    Float arrays the function closes over (``lambda x: model.apply(params, x)``) are weights
    too: with such a closure pass ``weights=None``, or its input gets the weight role.
    """
    return _emulate(fn, load_recipe(policy), weights=weights)


def init_lsq_steps(fn: Callable, policy, *args, weights: int | None = 0, **kwargs) -> list:
    """The initial learned step sizes (``asicsim_lsq``) of ``fn`` under ``policy`` on these
    arguments: the paper's ``lsq_init`` of each operand a role with ``scaling = "lsq"`` or
    ``"lsq_channel"`` rounds, in GEMM order (:mod:`asicsim._src.emulate.lsq_sites`). ``kwargs`` go to
    the emulated function (``asicsim_key`` for a stochastic recipe)."""
    steps = LsqSteps()
    _emulate(fn, load_recipe(policy), weights=weights, lsq_steps=steps)(*args, **kwargs)
    return steps.seen


def observe_lsq(fn: Callable, policy, steps, *args, weights: int | None = 0, **kwargs) -> tuple[list, list]:
    """How the learned ``steps`` round ``fn``'s LSQ operands on these arguments: ``(labels, sums)``,
    per LSQ operand in GEMM order its ``(role, weight path)`` and its
    :data:`~asicsim._src.emulate.lsq_sites.OBSERVED` sums (shape (8,); in a scan over stacked layers
    ``(layers, 8)``; a time scan's: the mean over iterations; a while loop's: its first iteration's).
    Jittable (the labels are known when it is traced)."""
    lsq = LsqSteps(steps, observe=True)
    _emulate(fn, load_recipe(policy), weights=weights, lsq_steps=lsq)(*args, **kwargs)
    return [lsq.labels[i] for i in range(len(lsq.given))], lsq.seen


def _emulate(fn: Callable, pol: Policy, *, weights: int | None = 0, prerounded: RoleSpec | None = None,
             lsq_steps: LsqSteps | None = None) -> Callable:
    """:func:`emulate`; ``prerounded``: the caller promises the ``weights`` argument's leaves are
    already rounded with this role spec (the training step's working weights), so GEMM weight
    operands on the same grid are not rounded again (same bits, less work). The wrapped function
    also takes ``asicsim_words``: seed words instead of ``asicsim_key`` (no threefry call).
    ``lsq_steps``: collects the initial steps a call without ``asicsim_lsq`` uses."""

    @functools.wraps(fn)
    def wrapped(*args, asicsim_key=None, asicsim_amax=None, asicsim_words=None, asicsim_lsq=None, **kwargs):
        key, amax = asicsim_key, asicsim_amax
        if key is not None and not jnp.issubdtype(jnp.asarray(key).dtype, jax.dtypes.prng_key):
            key = jax.random.wrap_key_data(key)  # a raw uint32 key
        args, graph = nnx_state.lift(args)  # NNX modules: traced as their state
        counts = [len(jax.tree_util.tree_leaves(a)) for a in args]
        start = sum(counts[:weights]) if weights is not None and weights < len(args) else 0
        stop = start + (counts[weights] if weights is not None and weights < len(args) else 0)
        arrays, positions, rebuild = split_arrays((args, kwargs))
        level = 2 if prerounded is not None else 1
        flags = [level if start <= i < stop else 0 for i in positions]
        # each weight leaf's path inside the ``weights`` argument, for the layer rules and the op
        # trace's ``weight_path`` (a pruned weight's sparsity is priced by it)
        observing = lsq_steps is not None and lsq_steps.observing  # names its sites by weight path
        wpaths = leaf_paths(args[weights]) if (pol.layers or trace_active() or observing) and start < stop else []
        paths = [wpaths[i - start] if wpaths and start <= i < stop else None for i in positions]

        def flat_fn(*xs):
            a, k = rebuild(xs)
            if graph is None:
                return fn(*a, **k)
            a = graph.merge(a)
            return fn(*a, **k), graph.states(a)

        closed, out_shape = jax.make_jaxpr(flat_fn, return_shape=True)(*arrays)
        words = asicsim_words
        if words is None and key is not None and pol.stochastic:
            words = key_words(key)
        rows = count_rows(closed.jaxpr, flags)
        if amax is not None and rows > amax.shape[0]:
            raise ValueError(f"{getattr(fn, '__name__', 'the function')} has {rows} GEMM/convolution sites "
                             f"(rows: a scan over stacked layers has a row per layer) but "
                             f"asicsim_amax has rows for {amax.shape[0]}: delayed and static scaling need one "
                             f"row per site (make_train_step(..., max_sites={rows}) or "
                             f"observe_amax(..., max_sites={rows}))")
        lsq = LsqSteps(asicsim_lsq) if lsq_steps is None else lsq_steps
        interp = _Interpreter(pol, words, amax, n_rows=rows, prerounded=prerounded, lsq=lsq)
        outs = interp.run(closed.jaxpr, closed.consts, arrays, flags, paths)
        lsq.check_used(getattr(fn, "__name__", "the function"))
        if lsq_steps is None and lsq.given is None and lsq.seen:
            warnings.warn(f"recipe {pol.name!r} has learned step sizes but no asicsim_lsq was given: "
                          f"{getattr(fn, '__name__', 'the function')}'s {len(lsq.seen)} step(s) are lsq_init of "
                          "this call's operands, not trained ones (pass asicsim_lsq=state.lsq[0] after "
                          "make_train_step)", InitialStepsWarning, stacklevel=2)
        unused = [pat for i, (pat, _) in enumerate(pol.layers) if i not in interp.used]
        if unused:
            warnings.warn(f"recipe {pol.name!r}: layer rule(s) {unused} matched no GEMM (rules of "
                          f"vector roles: no op) of {getattr(fn, '__name__', 'the function')} (see "
                          "asicsim.layer_report for every GEMM's weight path and op's name)", UnusedLayerRule, stacklevel=2)
        result = jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(out_shape), outs)
        if graph is None:
            return result
        graph.update(result[1])  # the modules' in-place updates, as without emulation
        return result[0]

    return wrapped
