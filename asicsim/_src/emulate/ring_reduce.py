"""A ring reduce-scatter whose partial sums are rounded to the wire format at every hop
(``Replicas(..., allreduce="ring")``, :mod:`asicsim._src.emulate.replicas`).

``R`` chips hold one gradient each, already in the wire format (each rounded as that chip sends
it). Every leaf is flattened (C order) and cut into ``R`` chunks of ``c = ceil(n / R)`` elements
(chunk ``i``: elements ``i c .. (i + 1) c - 1``; the last chunk padded with zeros, which add and
round to nothing). Chunk ``i`` travels the ring starting at chip ``i + 1``: that chip sends its
own chunk, every chip on the way adds its own chunk to what it received (a float32 addition) and
rounds the partial sum to the wire format before sending it on; the last addition is made by chip
``i`` (``i + R`` mod ``R``), whose rounded result is the reduced chunk, already in the wire format
the all-gather sends. So chunk ``i`` is ``rnd(... rnd(rnd(g[i+1] + g[i+2]) + g[i+3]) ... + g[i])``
with chip indices mod ``R``: ``R - 1`` roundings of partial sums, each in its own
stochastic-rounding stream (child ``k`` of the leaf's words for the sum that includes ``k + 1``
chips) where the format rounds stochastically.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from asicsim._src.emulate.policy import RoleSpec
from asicsim._src.emulate.role_rounding import round_role
from asicsim._src.numerics.random import derive


def ring_sum(g: jax.Array, spec: RoleSpec | None, words=None) -> jax.Array:
    """The sum over axis 0 of ``g`` (R, ...) as the module doc's ring reduce-scatter forms it,
    each partial sum rounded to ``spec`` (None: float32 partial sums in ring order)."""
    r, shape = g.shape[0], g.shape[1:]
    if r == 1:
        return g[0].astype(jnp.float32)
    n = math.prod(shape)
    c = -(-n // r)
    flat = jnp.pad(g.astype(jnp.float32).reshape(r, n), ((0, 0), (0, r * c - n))).reshape(r, r, c)
    chunk = jnp.arange(r)
    acc = flat[(chunk + 1) % r, chunk]  # (R, c): chunk i as chip i + 1 sends it
    for k in range(2, r + 1):
        acc = acc + flat[(chunk + k) % r, chunk]
        if spec is not None:
            acc = round_role(acc, spec, words=None if words is None else derive(words, k))
    return acc.reshape(r * c)[:n].reshape(shape)


def ring_tree(grads, spec: RoleSpec | None, words=None):
    """:func:`ring_sum` of every float leaf of ``grads`` (each (R, ...)), each leaf its own stream."""
    leaves, treedef = jax.tree_util.tree_flatten(grads)
    stochastic = spec is not None and spec.stochastic
    out = [ring_sum(x, spec, derive(words, i) if stochastic else None) for i, x in enumerate(leaves)]
    return jax.tree_util.tree_unflatten(treedef, out)
