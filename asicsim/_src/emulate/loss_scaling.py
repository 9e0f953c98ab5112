"""Loss scaling (Micikevicius et al., ICLR 2018; NVIDIA AMP's ``GradScaler``).

The loss is multiplied by ``scale`` before the backward pass, so small activation gradients stay
above the gradient format's underflow threshold, and the weight gradients are divided by it
afterwards (in float32). Kinds:

``none``     scale 1, never skips.
``static``   a constant scale (``init``); an overflow is reported, the step is applied anyway.
``dynamic``  start at ``init``; a step whose gradients hold inf/NaN is skipped and the scale is
             divided by ``factor``; after ``growth_interval`` consecutive clean steps it is
             multiplied by ``factor`` (and the clean-step count restarts); it stays within
             [``MIN_SCALE``, ``MAX_SCALE``] = [2**-24, 2**64].
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from asicsim._src.emulate.fields import MAX_SCALE, MIN_SCALE
from asicsim._src.emulate.policy import LossScaling
from asicsim._src.numerics.pow2_scales import REDUCE_LANE

__all__ = ["MAX_SCALE", "MIN_SCALE", "ScaleState", "all_finite", "init_scale", "norm_and_finite", "update_scale"]


class ScaleState(NamedTuple):
    scale: jax.Array  # float32 scalar
    good_steps: jax.Array  # int32 scalar: clean steps since the last change


def init_scale(ls: LossScaling) -> ScaleState:
    scale = 1.0 if ls.kind == "none" else ls.init
    return ScaleState(jnp.float32(scale), jnp.int32(0))


def all_finite(tree) -> jax.Array:
    """True when every float leaf of ``tree`` is finite (a bool scalar)."""
    return norm_and_finite(tree)[1]


def norm_and_finite(tree) -> tuple[jax.Array, jax.Array]:
    """(global L2 norm in float32, True when every element is finite) of the float leaves of
    ``tree`` (cast to float32), in one read of each leaf: a two-output reduce of the squares (a
    sum) and of the magnitude bits (an integer max, NaN and inf above every finite value), over
    32-element pieces first. XLA:CPU fuses the leaf's producer into that reduce; a sum alone went
    to a library kernel that read the squares back from memory, and isfinite + all() ran as an
    unvectorised reduce-window, 10x slower."""
    total, worst = jnp.float32(0), jnp.int32(0)
    for v in jax.tree_util.tree_leaves(tree):
        if not (jnp.issubdtype(jnp.asarray(v).dtype, jnp.floating) and jnp.size(v)):
            continue
        x = jnp.asarray(v, jnp.float32).ravel()
        if x.size > REDUCE_LANE and x.size % REDUCE_LANE == 0:
            x = x.reshape(-1, REDUCE_LANE)
        squares, mags = jax.lax.reduce(
            (x * x, jax.lax.bitcast_convert_type(x, jnp.int32) & np.int32(0x7FFFFFFF)), (np.float32(0), np.int32(0)),
            lambda a, b: (a[0] + b[0], jnp.maximum(a[1], b[1])), (x.ndim - 1,))
        total, worst = total + jnp.sum(squares), jnp.maximum(worst, jnp.max(mags))
    return jnp.sqrt(total), worst < np.int32(0x7F800000)


def update_scale(ls: LossScaling, state: ScaleState, finite: jax.Array) -> tuple[ScaleState, jax.Array]:
    """(new state, skip): the dynamic rule; ``skip`` says to drop this step's update."""
    if ls.kind != "dynamic":
        return state, jnp.bool_(False)
    good = jnp.where(finite, state.good_steps + 1, 0)
    grow = good >= ls.growth_interval
    scale = jnp.where(finite, jnp.where(grow, state.scale * ls.factor, state.scale),
                      state.scale / ls.factor)
    scale = jnp.clip(scale, jnp.float32(MIN_SCALE), jnp.float32(MAX_SCALE))
    good = jnp.where(grow, 0, good).astype(jnp.int32)
    return ScaleState(scale.astype(jnp.float32), good), ~finite
