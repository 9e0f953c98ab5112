"""Magnitude pruning during training: masks kept beside the training state, updated on a
schedule after optimizer steps and applied after every step (:mod:`.prune_rules` says which
weights and which schedules).

>>> import numpy as np, jax.numpy as jnp
>>> w = jnp.asarray([[4.0], [-1.0], [3.0], [2.0]])   # (in, out): groups of 4 along "in"
>>> np.asarray(nm_mask(w, 2, 4, axis=-2)).ravel().tolist()
[True, False, True, False]

:func:`with_pruning` wraps a training step (:func:`asicsim._src.emulate.training.make_train_step`'s
``(init, step)``): its state is a :class:`PrunedState` (the training state, one boolean mask per
pruned leaf, Narang's per-leaf ``q`` of the latest update); after each step the masks of the rules whose update
step it is are recomputed from the updated weights, and every pruned leaf of the weights (and
of the master copy, when the recipe has one) is set to zero where its mask is, so a pruned
weight is exactly zero in every forward pass from then on. :func:`weight_sparsity` measures
what a model's weight matrices hold: the fraction of exact zeros per path.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from asicsim._src.emulate.layer_rules import leaf_paths, match_rule
from asicsim._src.workloads.deepbench import WorkloadError
from asicsim._src.workloads.prune_rules import PruneRule, cubic_counts, narang_fractions
from asicsim._src.workloads.wrapped_state import reads_through


def magnitude_key(w):
    """|w| as an int32 that orders as the magnitudes do (the float32 bit pattern without its
    sign), compared exactly: XLA on CPU flushes subnormals in float arithmetic, not in integers."""
    bits = lax.bitcast_convert_type(jnp.asarray(w).astype(jnp.float32), jnp.int32)
    return bits & jnp.int32(0x7FFFFFFF)


def nm_mask(w, n: int, m: int, axis: int = -2):
    """Keep the ``n`` largest magnitudes of every group of ``m`` consecutive entries along
    ``axis`` (ties: the lower index is kept); ``w.shape[axis]`` must be a multiple of ``m``."""
    x = jnp.moveaxis(magnitude_key(w), axis, -1)
    shape = x.shape
    g = x.reshape(*shape[:-1], shape[-1] // m, m)
    order = jnp.argsort(-g, axis=-1, stable=True)
    rank = jnp.argsort(order, axis=-1, stable=True)
    return jnp.moveaxis((rank < n).reshape(shape), -1, axis)


def smallest_mask(w, keep, k):
    """``keep`` with exactly ``k`` entries False: the already pruned ones first, then the
    smallest magnitudes (ties: the lower flat index is pruned first)."""
    score = jnp.where(keep, magnitude_key(w), jnp.int32(-1)).ravel()
    order = jnp.argsort(score, stable=True)
    rank = jnp.zeros(score.shape, jnp.int32).at[order].set(jnp.arange(score.size, dtype=jnp.int32))
    return (rank >= k).reshape(w.shape)


class Target(NamedTuple):
    """One pruned leaf: its index in ``tree_leaves`` order, path, rule and host tables."""

    index: int
    path: str
    rule: PruneRule
    table: np.ndarray  # per update step: cubic counts (int32) or Narang's eps(t) / eps(t_last) (float32)


@reads_through
class PrunedState(NamedTuple):
    """A training state with its pruning masks (a pytree: jit/scan friendly)."""

    train: Any
    masks: tuple  # bool, one per target, the leaf's shape (True: kept)
    q: tuple  # float32 scalars: per target, Narang's q at its latest mask update (0 before; 0 for others)


def _any_rule(_) -> bool:
    """Every prune rule is consulted (``match_rule`` filters recipe rules by their roles)."""
    return True


class Pruner:
    """The targets of ``rules`` in ``params`` (checked: every rule matches a weight matrix, an N:M
    rule's axis length is a multiple of M)."""

    def __init__(self, rules, params):
        self.rules = tuple(rules)
        pairs = [(r.match, r) for r in self.rules]
        leaves = jax.tree_util.tree_leaves(params)
        self.targets, used = [], set()
        for i, (path, x) in enumerate(zip(leaf_paths(params), leaves, strict=True)):
            j = match_rule(pairs, path, consults=_any_rule) if np.ndim(x) >= 2 else None
            if j is None:
                continue
            used.add(j)
            self.targets.append(Target(i, path, self.rules[j], _table(self.rules[j], path, np.shape(x))))
        weights = [p for p, x in zip(leaf_paths(params), leaves, strict=True) if np.ndim(x) >= 2]
        for j, r in enumerate(self.rules):
            if j not in used:
                raise WorkloadError(f"prune[{j}].match = {r.match!r}: matches no weight matrix (rank >= 2) "
                                    f"the earlier rules leave; weight matrices are {weights}")

    def init(self, train) -> PrunedState:
        leaves = jax.tree_util.tree_leaves(train.params)
        masks = tuple(jnp.ones(np.shape(leaves[t.index]), bool) for t in self.targets)
        return PrunedState(train, masks, tuple(jnp.float32(0) for _ in self.targets))

    @staticmethod
    def narang_update(w, keep, fraction, k: int):
        """Narang's mask update (:mod:`.prune_rules`): ``q`` is the ``k``-th smallest ``|w|`` (0-based,
        pruned weights counted as 0; ``k = round(sparsity x size)``, ``+inf`` for ``k = size``) and
        the weights below ``q x fraction`` are pruned; compared on magnitude keys (exact).
        Returns the new mask and ``q``."""
        key = magnitude_key(w)
        ranked = jnp.sort(jnp.where(keep, key, jnp.int32(0)).ravel())
        q_key = jnp.concatenate([ranked, jnp.full(1, 0x7F800000, jnp.int32)])[k]  # +inf past the end
        q = lax.bitcast_convert_type(q_key, jnp.float32)
        th_key = jnp.where(fraction == 1, q_key, magnitude_key(q * fraction))  # the last update: q itself
        return keep & (key >= th_key), q

    def update(self, s: PrunedState, train) -> PrunedState:
        """The masks after step ``train.step`` (updated where it is a target's update step),
        applied to the new weights."""
        t = train.step
        leaves = jax.tree_util.tree_leaves(train.params)
        masks, qs = [], []
        for tg, keep, q in zip(self.targets, s.masks, s.q, strict=True):
            w, r = leaves[tg.index], tg.rule
            steps = r.update_steps()
            j = jnp.clip((t - r.start) // r.every, 0, len(steps) - 1)
            due = (t >= r.start) & (t <= steps[-1]) & ((t - r.start) % r.every == 0)
            if r.schedule == "narang":  # q from the current weights at every update (module prune_rules)
                k, f = round(r.sparsity * int(np.size(w))), jnp.asarray(tg.table)[j]
                new, q = lax.cond(due, lambda w=w, keep=keep, f=f, k=k: self.narang_update(w, keep, f, k),
                                  lambda keep=keep, q=q: (keep, q))
            elif r.schedule == "cubic":
                k = jnp.asarray(tg.table)[j]
                new = lax.cond(due, lambda w=w, keep=keep, k=k: smallest_mask(w, keep, k), lambda keep=keep: keep)
            else:
                n, m = r.structured
                new = keep & nm_mask(w, n, m, r.axis)
            masks.append(jnp.where(due, new, keep))
            qs.append(q)
        return PrunedState(self.apply_train(train, masks), tuple(masks), tuple(qs))

    def apply(self, tree, masks):
        """``tree`` (the params' structure) with every target leaf zero where its mask is False."""
        if tree is None:
            return None
        leaves, treedef = jax.tree_util.tree_flatten(tree)
        for tg, keep in zip(self.targets, masks, strict=True):
            x = leaves[tg.index]
            leaves[tg.index] = jnp.where(keep, x, jnp.zeros_like(x))
        return jax.tree_util.tree_unflatten(treedef, leaves)

    def apply_train(self, train, masks):
        return train._replace(params=self.apply(train.params, masks), master=self.apply(train.master, masks))


def _table(rule: PruneRule, path: str, shape) -> np.ndarray:
    size = int(np.prod(shape))
    if rule.schedule == "cubic":
        return np.asarray(cubic_counts(rule, size), np.int32)
    if rule.schedule == "narang":  # eps(t) / eps(t_last) at each update step
        return np.asarray(narang_fractions(rule), np.float32)
    m = rule.structured[1]
    axis = rule.axis
    if not -len(shape) <= axis < len(shape) or shape[axis] % m:
        raise WorkloadError(f"prune rule {rule.match!r}: schedule = {rule.schedule!r}, axis = {axis}: "
                            f"weight {path!r} of shape {tuple(shape)} has no axis {axis} of a length that is "
                            f"a multiple of {m}; allowed: a weight whose contraction axis divides into groups of {m}")
    return np.zeros(1, np.float32)


def with_pruning(init, step, rules):
    """``(init, step)`` of a training step with pruning by ``rules`` (``init(params, key) ->
    PrunedState``); the pair itself when there are no rules."""
    if not rules:
        return init, step
    holder: dict = {}

    def pruned_init(params, key, batch=None):  # batch: the first one, for learned steps (lsq_init)
        train = init(params, key) if batch is None else init(params, key, batch)
        holder["pruner"] = Pruner(rules, train.params)
        return holder["pruner"].init(train)

    def pruned_step(s: PrunedState, batch):
        train, metrics = step(s.train, batch)
        return holder["pruner"].update(s, train), metrics

    return pruned_init, pruned_step


def weight_sparsity(params) -> dict[str, float]:
    """Fraction of exact zeros of every weight matrix (rank >= 2 leaf) of ``params``, by path."""
    leaves = jax.tree_util.tree_leaves(params)
    return {p: float(np.mean(np.asarray(x) == 0)) for p, x in zip(leaf_paths(params), leaves, strict=True)
            if np.ndim(x) >= 2}
