"""A precision-aware training step on top of optax (optax does the optimizing).

    init, step = make_train_step(loss_fn, policy, tx)
    state = init(params, key)
    state, metrics = step(state, batch)     # jittable, usable inside lax.scan

What one step does, in the recipe's formats:

1. Forward and backward run through :func:`asicsim.emulate` (GEMM operands, accumulator, outputs,
   activation and weight gradients rounded per role). The loss is multiplied by the loss scale
   first; the weight gradients are divided by it in float32 afterwards.
2. Loss scaling (:mod:`.loss_scaling`): ``dynamic`` skips a step whose gradients hold inf/NaN
   and divides the scale by ``factor``; after ``growth_interval`` clean steps it grows.
3. optax turns the gradients into an update; every float leaf of the optimizer state is then
   rounded to role ``opt_state``.
4. Master weights. With role ``master`` (Micikevicius 2018) the update is added to a master copy
   held in that format, and the weights the model uses are the master copy rounded to ``weight``
   (when ``weight`` is a plain format; a scaled one, fp8/int8, is rounded inside each GEMM).
   Without ``master`` the update is added to the weights themselves and the sum rounded onto the
   ``update`` role's format with its rounding (Gupta 2015, Wang 2018): with round-to-nearest an
   update below half an ulp of the weight is lost, with stochastic rounding it survives in
   expectation.
5. Delayed scaling (fp8 recipes, Transformer Engine): per GEMM row (a site; a scan over stacked
   layers has a row per layer, :mod:`.site_rows`) an amax history of
   ``amax_history`` steps (one length for all delayed roles, as Transformer Engine's
   ``amax_history_len``) for (lhs, rhs, grad); each step scales by the largest amax in the
   history (``amax_compute = "most_recent"``: the newest) and records the amax it observed
   (largest over the iterations of a time scan or while loop, whose body is one module).
6. Learned step sizes (roles with ``scaling = "lsq"``/``"lsq_channel"``, Esser et al. 2020):
   ``state.lsq`` holds a step per GEMM operand they round (:mod:`.lsq_sites`), initialised by
   ``init(params, key, batch)`` with the paper's ``lsq_init`` of each operand on that batch (pass
   the first batch; a step below ``lsq_sites.LSQ_MIN_STEP`` raised to it, as after updates: an operand
   that is zero throughout the batch has step 0), differentiated with the weights (LSQ's step gradient, divided by the loss
   scale like theirs) and updated by the same optimizer ``tx`` (its own state for the steps,
   float leaves rounded to ``opt_state``); the steps stay float32, not kept on a skipped step,
   and clamped to at least ``lsq_sites.LSQ_MIN_STEP`` (1e-5) after each update.
7. Stochastic rounding: seed words from ``state.key`` and ``state.step``, derived per use by
   integer hashing (``random.seed_words``/``derive``: no threefry call inside the step), so no
   random bits are ever reused.

``state.params`` are the weights the model uses, each leaf in the dtype it was given (bf16
parameters stay bf16; the master copy, when the recipe has one, is float32, and is ``params``
itself where the two would be equal: :func:`master_is_params`). ``metrics`` holds the scalars
``loss`` (unscaled), ``loss_scale``, ``overflow`` (an unscaled gradient is not finite, as AMP's
GradScaler checks), ``skipped`` and ``grad_norm`` (of the unscaled gradients), and with
``has_aux=True`` the ``aux`` output of ``loss_fn(params, batch) -> (loss, aux)`` (BatchNorm
statistics, metrics), as ``jax.value_and_grad(has_aux=True)`` has it.
``params`` must be a pytree of float arrays (every leaf is trained).

Delayed scaling, what is exact and what is approximated: each GEMM site (numbered as
:func:`asicsim.emulate` meets them) has its own history for its lhs, rhs and incoming gradient;
the scaling factor is Transformer Engine's ``(format max / max(history)) / 2**margin`` (not
rounded to a power of two; values are cast as ``x * sf`` and dequantized by ``1 / sf``), values
beyond the estimate saturate; the current amax is used where the history is still empty and for the
rounding of a GEMM's dX output where ``grad_out`` scales (the next
GEMM rounds that gradient again with its own delayed scale; fp8_hybrid writes dX in bf16). A GEMM
inside a ``while_loop`` cannot record its amax (no reverse mode through while).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from asicsim._src.emulate.layer_rules import gemm_policy, leaf_paths, match_rule
from asicsim._src.emulate.loss_output import split_loss
from asicsim._src.emulate.loss_scaling import (
    ScaleState,
    all_finite,
    init_scale,
    norm_and_finite,
    update_scale,
)
from asicsim._src.emulate.lsq_sites import LsqSteps, clamp_steps
from asicsim._src.emulate.policy import Policy, RecipeError, RoleSpec
from asicsim._src.emulate.recipes import load_recipe
from asicsim._src.emulate.transform import _emulate, round_role
from asicsim._src.numerics.exact_div import divide
from asicsim._src.numerics.random import derive, key_words, seed_words

#: GEMM rows whose delayed-scaling history a TrainState keeps (a model with more is an error that
#: names the ``max_sites`` it needs): a row per GEMM per stacked layer, so 256 holds a 40-layer
#: scanned transformer of 6 GEMMs per layer; the history costs 256 x history x 3 floats.
MAX_SITES = 256


class TrainState(NamedTuple):
    """Everything a step carries; a pytree (jit/scan/checkpoint friendly)."""

    step: jax.Array  # int32: steps taken (skipped ones included)
    params: Any  # the weights the model uses
    #: the master copy the optimizer updates: None without role ``master``, and None where it
    #: would equal ``params`` (float32 parameters whose weight role is scaled, rounded at each
    #: GEMM: the scaled fp8, MX and NVFP4 recipes), which then hold it (:func:`master_is_params`)
    master: Any
    opt_state: Any  # optax state, float leaves rounded to role ``opt_state``
    loss_scale: ScaleState
    key: jax.Array  # base key for stochastic rounding
    amax_history: jax.Array | None  # (MAX_SITES, history, 3) for delayed scaling, else None
    lsq: Any = None  # (steps, their optax state) for learned step sizes (scaling = "lsq"), else None


def _is_float(x) -> bool:
    return hasattr(x, "dtype") and jnp.issubdtype(x.dtype, jnp.floating)


def round_tree(tree, spec: RoleSpec | None, key=None, *, words=None):
    """Round every float leaf of ``tree`` as role ``spec`` says (each leaf its own stream, from
    ``key`` or from seed ``words`` already drawn)."""
    if spec is None or spec.is_identity:
        return tree
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    if not spec.stochastic:
        words = None
    elif words is None:
        if key is None:
            raise ValueError(f"role format {spec.format!r} uses stochastic rounding: a key is needed")
        words = key_words(key)  # one threefry draw, then a cheap integer hash per leaf
    out = [round_role(x, spec, words=None if words is None else derive(words, i)) if _is_float(x) else x
           for i, x in enumerate(leaves)]
    return jax.tree_util.tree_unflatten(treedef, out)


def _plain(spec: RoleSpec | None) -> RoleSpec | None:
    """A role usable for stored weights: a scaled one (fp8/int8 with scales) is left to the GEMMs."""
    if spec is None or spec.scaling != "none" or spec.spec.kind == "block":
        return None
    return spec


def working_weights(master, policy: Policy, key=None, *, words=None):
    """The weights the model uses from a master copy: rounded to ``weight`` where it is plain
    (per leaf, the ``weight`` of the layer rule its path matches: :mod:`.layer_rules`)."""
    if not any(r == "weight" for _, roles in policy.layers for r, _ in roles):
        return round_tree(master, _plain(policy.role("weight")), key, words=words)
    leaves, treedef = jax.tree_util.tree_flatten(master)
    if words is None and policy.stochastic and key is not None:
        words = key_words(key)
    out = [round_tree(x, spec, words=None if words is None else derive(words, i))
           for i, (x, spec) in enumerate(zip(leaves, _weight_roles(master, policy), strict=True))]
    return jax.tree_util.tree_unflatten(treedef, out)


def _weight_roles(master, policy: Policy) -> list:
    """Per leaf of ``master``, the plain ``weight`` role it is rounded to (None: a scaled one, left
    to the GEMMs)."""
    return [_plain(gemm_policy(policy, match_rule(policy.layers, path), False).role("weight"))
            for path in leaf_paths(master)]


def master_is_params(params, policy: Policy) -> bool:
    """True where the master copy would equal the weights the model uses, leaf for leaf: every
    float parameter is float32 and no leaf's ``weight`` role is plain (a scaled one rounds at each
    GEMM). The step then keeps one copy, ``params``, and ``master`` is None: two equal outputs of
    a jitted step are two buffers, one a copy of the other (a pass over every weight per step)."""
    if not policy.has_master:
        return False
    leaves = jax.tree_util.tree_leaves(params)
    return all(x.dtype == jnp.float32 and (spec is None or spec.is_identity)
               for x, spec in zip(leaves, _weight_roles(params, policy), strict=True) if _is_float(x))


def stored_format(policy: Policy) -> RoleSpec | None:
    """The format the weights are kept in without a master copy: role ``update`` (else ``weight``)."""
    return _plain(policy.role("update") or policy.role("weight"))


def check_trainable(pol: Policy) -> Policy:
    """``pol``, or a :class:`RecipeError` where it is for inference only (static scaling)."""
    if pol.inference_only:
        tables = [("roles", pol.roles), ("first_last", pol.first_last),
                  *((f"layers[{i}].roles", roles) for i, (_, roles) in enumerate(pol.layers))]
        static = [(t, r) for t, roles in tables for r, s in roles if s.scaling == "static"]
        raise RecipeError([(f"{t}.{r}.scaling", "static", "a training recipe's scaling: static scales are "
                            "calibrated on a trained model for inference (asicsim infer)") for t, r in static],
                          f"recipe {pol.name!r} is for inference only, not training")
    return pol


def make_train_step(loss_fn: Callable, policy, tx: optax.GradientTransformation, *,
                    weights: int = 0, max_sites: int = MAX_SITES, has_aux: bool = False,
                    replicas=None) -> tuple[Callable, Callable]:
    """``(init, step)`` for ``loss_fn(params, batch) -> scalar`` (``has_aux``: ``-> (scalar, aux)``,
    aux returned as ``metrics["aux"]``) under ``policy`` with optimizer ``tx``.

    ``init(params, key, batch=None) -> TrainState`` (``batch``: the first batch, required by a
    recipe with learned step sizes, which are initialised on it); ``step(state, batch) -> (state,
    metrics)``. An inference-only recipe (static scaling: post-training quantization) is a
    :class:`RecipeError`. ``replicas`` (:class:`asicsim._src.emulate.replicas.Replicas`): the batch split
    over data-parallel replicas whose gradients are all-reduced in a wire format (None: one batch).
    """
    pol = check_trainable(load_recipe(policy))
    ls = pol.loss_scaling
    # The weights the model uses are already rounded (below: ``working_weights`` or
    # ``stored_format``); the GEMMs need not round them again when their weight role has that grid.
    pre = _plain(pol.role("weight")) if pol.has_master else stored_format(pol)
    emulated = _emulate(loss_fn, pol, weights=weights, prerounded=pre)
    # parameters kept in another dtype (bf16) are cast after rounding: maybe off the role's grid
    emulated_cast = _emulate(loss_fn, pol, weights=weights)
    unscaled = ls.kind == "none"  # the scale is 1: no pass over the loss and gradients for it
    # every scale is init * factor**k clipped to [MIN_SCALE, MAX_SCALE]: powers of two where both
    # are, with a normal float32 reciprocal where init is within 2**+-126 (XLA:CPU reads a
    # subnormal operand as zero)
    pow2_scale = (not unscaled and math.frexp(ls.init)[0] == 0.5 and math.frexp(ls.factor)[0] == 0.5
                  and 2.0**-126 <= ls.init <= 2.0**126)
    hist_len, algo = pol.history_settings  # checked here too: a Policy built in code skips the loader

    def init(params, key, batch=None) -> TrainState:
        key = jax.random.key(key) if isinstance(key, int) else key
        if pol.lsq and batch is None:
            raise ValueError(f"recipe {pol.name!r} has learned step sizes (scaling = 'lsq'): init(params, key, batch) "
                             "needs the first batch, on whose operands the steps are initialised (lsq_init)")
        params = jax.tree_util.tree_map(jnp.asarray, params)  # each leaf keeps its dtype
        k_init = jax.random.fold_in(key, -1 & 0x7FFFFFFF)
        if pol.has_master:
            master = round_tree(_as_float32(params), pol.role("master"), k_init)
            opt_state = tx.init(master)
            if master_is_params(params, pol):  # one copy: params (master_is_params)
                work, master = master, None
            else:
                work = _like(working_weights(master, pol, k_init), params)
        else:
            master = None
            work = round_tree(params, stored_format(pol), k_init)
            opt_state = tx.init(work)
        opt_state = round_tree(opt_state, pol.role("opt_state"), jax.random.fold_in(k_init, 1))
        amax = jnp.zeros((max_sites, hist_len, 3), jnp.float32) if pol.delayed else None
        lsq = None
        if pol.lsq:
            steps = clamp_steps(_initial_steps(work, batch, key))  # an all-zero operand's 0: LSQ_MIN_STEP
            lsq = (steps, round_tree(tx.init(steps), pol.role("opt_state"), jax.random.fold_in(k_init, 2)))
        return TrainState(step=jnp.int32(0), params=work, master=master, opt_state=opt_state,
                          loss_scale=init_scale(ls), key=key, amax_history=amax, lsq=lsq)

    @jax.jit
    def _initial_steps(params, batch, key):
        """LSQ's initial steps on the operands of ``batch`` (jitted: eagerly, op by op, slow)."""
        seen = LsqSteps()
        kw = {"asicsim_words": derive(seed_words(key), 0)} if pol.stochastic else {}
        _emulate(loss_fn, pol, weights=weights, lsq_steps=seen)(params, batch, **kw)
        return tuple(seen.seen)

    def step(state: TrainState, batch):
        words = derive(seed_words(state.key), state.step)
        w_fwd, w_upd, w_opt, w_lsq = (derive(words, i) for i in range(4))
        scale = state.loss_scale.scale
        amax0 = None if state.amax_history is None else amax_estimate(state.amax_history, algo)

        def scaled(params, amax, steps, batch, fwd_words):
            extra = {"asicsim_words": fwd_words} if pol.stochastic else {}
            if amax is not None:
                extra["asicsim_amax"] = amax
            if steps is not None:
                extra["asicsim_lsq"] = steps
            all_f32 = all(x.dtype == jnp.float32 for x in jax.tree_util.tree_leaves(params) if _is_float(x))
            out = (emulated if all_f32 else emulated_cast)(params, batch, **extra)
            loss, aux = split_loss(out, has_aux, getattr(loss_fn, "__name__", "loss_fn"))
            return (loss if unscaled else loss * scale).astype(jnp.float32), (loss, aux)

        steps0 = None if state.lsq is None else state.lsq[0]
        vg = jax.value_and_grad(scaled, argnums=(0, 1, 2), has_aux=True)
        if replicas is None:
            (_, (loss, aux)), (sgrads, seen, sgrad_steps) = vg(state.params, amax0, steps0, batch, w_fwd)
        else:  # per-replica gradients, all-reduced in the wire format (asicsim._src.emulate.replicas)
            loss, aux, sgrads, seen, sgrad_steps = replicas.value_and_grads(vg, state.params, amax0, steps0,
                                                                            batch, w_fwd)
        # a power-of-two scale's reciprocal is exact, and the product rounds the same real value
        # as the quotient: XLA fuses a product into each of the gradient's consumers, where it
        # wrote a quotient out (a divide is not computed again per consumer)
        inv = divide(np.float32(1), scale) if pow2_scale else None
        unscale = functools.partial(_unscale, unscaled=unscaled, scale=scale, inv=inv)
        grads = jax.tree_util.tree_map(unscale, sgrads)
        if replicas is not None:
            grads = replicas.reduce(grads, derive(words, 4))
        # finiteness of the unscaled gradients, as AMP's GradScaler checks them (a gradient the
        # division overflows is not applied), in the same pass as their norm
        norm, finite = norm_and_finite(grads)
        if steps0 is not None:
            finite = finite & all_finite(jax.tree_util.tree_map(unscale, sgrad_steps))
        new_scale, skip = update_scale(ls, state.loss_scale, finite)

        def keep(new, old):
            return jax.tree_util.tree_map(lambda n, o: jnp.where(skip, o, n), new, old)

        target = state.params if state.master is None else state.master
        updates, opt_state = tx.update(grads, state.opt_state, target)
        opt_state = round_tree(opt_state, pol.role("opt_state"), words=w_opt)
        if pol.has_master:
            master = round_tree(optax.apply_updates(target, updates), pol.role("master"),
                                words=derive(w_upd, 0))
            if state.master is None:  # the master copy is the params (master_is_params)
                params, master = master, None
            else:
                # the working weights from the master copy once it is kept or skipped: read from
                # memory, not computed again from the update (which XLA then wrote out)
                master = keep(master, state.master)
                params = _like(working_weights(master, pol, words=derive(w_upd, 1)), state.params)
        else:
            master = None
            params = round_tree(_add(target, updates), stored_format(pol), words=w_upd)

        params = keep(params, state.params)
        opt_state = keep(opt_state, state.opt_state)
        lsq = state.lsq
        if lsq is not None:  # the learned steps: the same optimizer, state of their own
            step_updates, step_opt = tx.update(jax.tree_util.tree_map(unscale, sgrad_steps), lsq[1], lsq[0])
            step_opt = round_tree(step_opt, pol.role("opt_state"), words=w_lsq)
            lsq = keep((clamp_steps(optax.apply_updates(lsq[0], step_updates)), step_opt), lsq)  # >= 1e-5
        amax_history = state.amax_history
        if amax_history is not None:  # record this step's amax (not on a skipped step)
            rolled = jnp.roll(amax_history, 1, axis=1).at[:, 0].set(seen.astype(jnp.float32))
            amax_history = jnp.where(skip | ~finite, amax_history, rolled)
        metrics = {"loss": jnp.asarray(loss, jnp.float32), "loss_scale": scale,
                   "overflow": ~finite, "skipped": skip, "grad_norm": norm}
        if has_aux:
            metrics["aux"] = aux
        new = TrainState(step=state.step + 1, params=params, master=master, opt_state=opt_state,
                         loss_scale=new_scale, key=state.key, amax_history=amax_history, lsq=lsq)
        return new, metrics

    return init, step


def amax_estimate(history: jax.Array, algo: str = "max") -> jax.Array:
    """The amax each site's delayed scaling uses, from its (sites, steps, 3) history (newest
    first): the largest over the history (``max``) or the newest (``most_recent``), as Transformer
    Engine's ``amax_compute_algo``. 0 (an empty history) means: use the current amax."""
    return history[:, 0] if algo == "most_recent" else jnp.max(history, axis=1)


def _unscale(g, *, unscaled: bool, scale, inv=None):
    """A gradient leaf in float32 with the loss scale divided out (non-float leaves unchanged);
    ``inv``: the scale's reciprocal where that is exact (a power of two)."""
    if not _is_float(g):
        return g
    if unscaled:
        return g.astype(jnp.float32)
    return g.astype(jnp.float32) / scale if inv is None else g.astype(jnp.float32) * inv


def _as_float32(tree):
    return jax.tree_util.tree_map(lambda x: x.astype(jnp.float32) if _is_float(x) else x, tree)


def _like(tree, ref):
    """``tree``'s float leaves cast to the dtypes of ``ref``'s (the user's parameter dtypes)."""
    return jax.tree_util.tree_map(lambda x, r: x.astype(r.dtype) if _is_float(x) else x, tree, ref)


def _add(params, updates):
    """``params + updates`` in float32 (rounded by the caller), leaves without an update kept."""
    return jax.tree_util.tree_map(
        lambda p, u: (p.astype(jnp.float32) + u.astype(jnp.float32)).astype(p.dtype) if u is not None else p,
        params, updates, is_leaf=lambda x: x is None)
