"""Weight gradients rounded to a wire format before the optimizer sees them: the accuracy side of
a reduced-precision gradient all-reduce (``asicsim scaling --grad-format``).

In data-parallel training every chip sends its weight gradients over the ring in ``grad_format``;
:func:`round_gradients` is an optax transformation that rounds the step's gradients (every float
leaf, biases included) as a recipe role with that format and rounding says
(:func:`asicsim._src.emulate.training.round_tree`: round-to-nearest-even, or stochastic rounding from
a stream that advances every step), placed before the optimizer by
``train(..., grad_format=..., grad_rounding=...)``. The model is one rounding of the mean
gradient, as one chip's shard would be rounded. ``fp32`` with ``rne`` leaves the gradients
untouched: the run is bit-identical to plain training.

With ``replicas = R > 1`` (``train(..., replicas=R)``, :func:`gradient_setup`) the step's batch is
split over ``R`` data-parallel replicas and each replica's gradient is rounded to ``grad_format``
before the float32 sum, the sum rounded again for the all-gather
(:class:`asicsim._src.emulate.replicas.Replicas`): the rounding then sees each chip's gradient, not
their mean; with ``allreduce="ring"`` the ring's partial sums are rounded to ``grad_format`` at
every hop as well (:mod:`asicsim._src.emulate.ring_reduce`). Without ``grad_format`` the replicas' gradients are summed in float32: the
fp32-all-reduce run the rounded one is compared with (the ordinary gradient up to float32
summation order, not bit-identical to ``R = 1``).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from asicsim._src.emulate.policy import RoleSpec
from asicsim._src.emulate.replicas import ReplicaError, Replicas
from asicsim._src.emulate.training import round_tree


class GradRoundingState(NamedTuple):
    count: jax.Array  # steps taken: the stochastic-rounding stream's position


def gradient_role(grad_format: str, grad_rounding: str = "rne") -> RoleSpec:
    """The role the gradients are rounded as (a :class:`RecipeError` names a bad format or rounding)."""
    return RoleSpec(grad_format, rounding=grad_rounding)


def round_gradients(spec: RoleSpec, seed: int = 0) -> optax.GradientTransformation:
    """An optax transformation rounding the updates it is given (the gradients, when it comes
    first in a chain) as ``spec`` says; stochastic rounding draws from ``seed`` and the step count."""
    def init(params):
        return GradRoundingState(jnp.zeros((), jnp.int32))

    def update(updates, state, params=None):
        key = jax.random.fold_in(jax.random.key(seed), state.count) if spec.stochastic else None
        return round_tree(updates, spec, key), GradRoundingState(state.count + 1)

    return optax.GradientTransformation(init, update)


def gradient_setup(tx: optax.GradientTransformation, grad_format: str | None, grad_rounding: str,
                   replicas: int, batch: int, allreduce: str = "sum"
                   ) -> tuple[optax.GradientTransformation, Replicas | None]:
    """The optimizer and the replicas of a run whose gradients cross an all-reduce in
    ``grad_format`` (None: not rounded) over ``replicas`` data-parallel replicas of the ``batch``:
    one replica rounds the mean gradient before ``tx``; several round each replica's gradient
    (:class:`~asicsim._src.emulate.replicas.Replicas`). A count that does not divide ``batch`` is a
    :class:`~asicsim._src.emulate.replicas.ReplicaError` naming both. ``allreduce``: ``sum``
    (the rounded gradients summed in float32) or ``ring`` (partial sums rounded at every hop)."""
    spec = None if grad_format is None else gradient_role(grad_format, grad_rounding)
    r = check_replicas(replicas, batch, spec, allreduce)
    if replicas == 1:
        return (tx if spec is None else optax.chain(round_gradients(spec), tx)), None
    return tx, r


def check_replicas(replicas: int, batch: int, spec: RoleSpec | None = None, allreduce: str = "sum") -> Replicas:
    """:class:`~asicsim._src.emulate.replicas.Replicas` of ``replicas`` over ``batch``, or a
    :class:`~asicsim._src.emulate.replicas.ReplicaError` naming both where the count does not divide it."""
    r = Replicas(replicas, spec, allreduce)  # checks the count and the all-reduce
    if batch % replicas:
        raise ReplicaError(f"replicas = {replicas} does not divide batch = {batch}; allowed: a divisor of {batch}")
    return r
