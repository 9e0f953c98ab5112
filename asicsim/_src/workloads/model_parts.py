"""The pieces every plain-JAX model here is built from: the :class:`Model` record, host-side
initialization (PyTorch's default uniform), dense layers and activation taps.

A module of its own so that the model families in :mod:`asicsim._src.workloads.models` and
:mod:`asicsim._src.workloads.speech_model` share them without importing each other.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np


@dataclass(frozen=True)
class Model:
    """``init(key) -> params``; ``apply(params, x, taps=None, sink=None) -> logits``."""

    kind: str
    init: Callable
    apply: Callable
    sizes: dict = field(default_factory=dict)

    def num_params(self, params) -> int:
        return int(sum(np.size(p) for p in jax.tree_util.tree_leaves(params)))


def tap(h, name: str, taps, sink):
    if taps is not None and name in taps:
        h = h + taps[name]
    if sink is not None:
        sink[name] = h
    return h


def host_rng(key) -> np.random.Generator:
    """A numpy generator seeded from a JAX key (or an int): initialization draws on the host, as
    compiling threefry for every weight costs seconds on a CPU."""
    if isinstance(key, int):
        return np.random.default_rng(key)
    return np.random.default_rng(np.asarray(jax.random.key_data(key)).ravel().tolist())


def uniform_init(rng, shape, fan_in):
    bound = 1.0 / math.sqrt(fan_in)
    return jnp.asarray(rng.uniform(-bound, bound, shape), jnp.float32)


def dense_init(rng, n_in, n_out):
    return {"w": uniform_init(rng, (n_in, n_out), n_in), "b": uniform_init(rng, (n_out,), n_in)}


def lead(v, ndim):
    """``v`` with leading unit axes up to rank ``ndim`` (explicit broadcasting)."""
    return v.reshape((1,) * (ndim - v.ndim) + v.shape)


def dense(p, h):
    y = h @ p["w"]
    return y + lead(p["b"], y.ndim)
