"""Weight gradients rounded to a wire format before the optimizer sees them: the accuracy side of
a reduced-precision gradient all-reduce (``asicsim scaling --grad-format``).

In data-parallel training every chip sends its weight gradients over the ring in ``grad_format``;
:func:`round_gradients` is an optax transformation that rounds the step's gradients (every float
leaf, biases included) as a recipe role with that format and rounding says
(:func:`asicsim.emulate.training.round_tree`: round-to-nearest-even, or stochastic rounding from
a stream that advances every step), placed before the optimizer by
``train(..., grad_format=..., grad_rounding=...)``. The model is one rounding of the mean
gradient, as one chip's shard would be rounded; the ring's own partial sums (each rounded again
in ``grad_format`` on some hardware) are not emulated. ``fp32`` with ``rne`` leaves the gradients
untouched: the run is bit-identical to plain training.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from asicsim.emulate.policy import RoleSpec
from asicsim.emulate.training import round_tree


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
