"""Data-parallel replicas inside one training step: each replica's gradient, rounded to the wire
format of the gradient all-reduce before the sum (``make_train_step(..., replicas=Replicas(...))``).

The step's batch ``B`` is split into ``R`` replicas of ``B / R`` consecutive examples (``R`` must
divide ``B``), as ``R`` data-parallel chips would each hold one. Every replica's loss and gradient
is computed at the same weights (one ``jax.vmap`` over the replicas; a stochastic-rounding
recipe gives each replica its own forward stream). The reduction then models a ring all-reduce
whose wire format is ``spec`` (None: float32, nothing rounded):

1. each replica's gradient ``g_r`` (its own mean over its ``B / R`` examples, the loss scale
   divided out) is rounded to ``spec``: what that chip sends in the reduce-scatter;
2. the rounded gradients are summed in float32 (the receiving chips accumulate in float32);
3. the sum is rounded to ``spec`` once more (the all-gather sends the reduced shards in it);
4. every chip divides by ``R``: the mean gradient the optimizer sees.

With stochastic rounding (``spec.rounding = "sr"``) steps 1 and 3 draw streams of their own
from the step's seed words. With ``allreduce = "ring"`` steps 2 and 3 are a ring reduce-scatter
whose partial sums are rounded to ``spec`` after every addition
(:mod:`asicsim._src.emulate.ring_reduce`: chunk ``i`` summed in ring order from chip ``i + 1``),
as an all-reduce that accumulates in the wire format does; the default ``"sum"`` sums the
rounded gradients in float32 (XLA's order) and rounds the sum once.

What is promised: with ``R = 1`` the caller keeps its ordinary step (no replica code runs);
with ``R > 1`` and ``spec`` None the gradient is the ordinary one up to float32 summation order
(the mean of ``R`` means instead of one mean over ``B``): not bit-identical, equal within a few
float32 ulps per step. The loss reported is the mean of the replicas' losses; a model's
auxiliary outputs (batch statistics) are averaged over the replicas, and a delayed-scaling amax
is the largest any replica saw.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp

from asicsim._src.emulate.policy import RoleSpec
from asicsim._src.emulate.ring_reduce import ring_tree
from asicsim._src.emulate.training import round_tree
from asicsim._src.numerics.random import derive


class ReplicaError(ValueError):
    """A batch the replicas cannot split, a bad replica count or all-reduce."""


#: how the replicas' rounded gradients are summed: once in float32 (``sum``), or in a ring whose
#: partial sums are rounded to the wire format after every addition (``ring``)
ALLREDUCE = ("sum", "ring")


@dataclass(frozen=True)
class Replicas:
    """``count`` data-parallel replicas whose gradients cross the all-reduce in ``spec``."""

    count: int
    spec: RoleSpec | None = None
    allreduce: str = "sum"

    def __post_init__(self):
        if not (isinstance(self.count, int) and not isinstance(self.count, bool) and self.count >= 1):
            raise ReplicaError(f"replicas = {self.count!r}; allowed: an integer >= 1")
        if self.allreduce not in ALLREDUCE:
            raise ReplicaError(f"allreduce = {self.allreduce!r}; allowed: {', '.join(ALLREDUCE)}")

    def split(self, batch):
        """Every leaf of ``batch`` (B, ...) as (R, B / R, ...)."""
        def one(x):
            n = x.shape[0] if x.ndim else 0
            if n % self.count:
                raise ReplicaError(f"replicas = {self.count} does not divide the batch ({n} examples); allowed: "
                                   f"a divisor of {n}")
            return x.reshape(self.count, n // self.count, *x.shape[1:])
        return jax.tree_util.tree_map(one, batch)

    def value_and_grads(self, vg, params, amax, steps, batch, words):
        """``vg(params, amax, steps, batch_r, words_r)`` (a ``jax.value_and_grad`` with aux) per
        replica: ``(loss, aux, grads (R, ...), amax seen, step gradients)`` (module doc)."""
        words_r = derive(words, jnp.arange(self.count))
        (_, (loss, aux)), (grads, seen, step_grads) = jax.vmap(vg, in_axes=(None, None, None, 0, 0))(
            params, amax, steps, self.split(batch), words_r)
        seen = None if seen is None else jnp.max(seen, axis=0)
        return jnp.mean(loss), jax.tree_util.tree_map(_mean, aux), grads, seen, jax.tree_util.tree_map(_mean, step_grads)

    def reduce(self, grads, words):
        """The mean gradient from the replicas' float32 gradients ``grads`` (R, ...) after the
        all-reduce in ``spec`` (steps 1-4 of the module doc)."""
        sent = round_tree(grads, self.spec, words=derive(words, 0))
        if self.allreduce == "ring":  # each partial sum rounded; the result is in the wire format already
            total = ring_tree(sent, self.spec, derive(words, 2))
        else:
            total = jax.tree_util.tree_map(lambda g: jnp.sum(g.astype(jnp.float32), axis=0), sent)
            total = round_tree(total, self.spec, words=derive(words, 1))
        return jax.tree_util.tree_map(lambda g: g / jnp.float32(self.count), total)


def _mean(x):
    return jnp.mean(x, axis=0) if jnp.issubdtype(jnp.asarray(x).dtype, jnp.floating) else x[0]
