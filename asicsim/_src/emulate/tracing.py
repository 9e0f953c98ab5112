"""``op_trace``: the GEMMs an emulated function runs, as a DataFrame (see :mod:`.trace`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pandas as pd

from asicsim._src.emulate.recipes import load_recipe
from asicsim._src.emulate.trace import recording, trace_frame
from asicsim._src.emulate.transform import emulate, split_arrays


def op_trace(fn, policy, *args, training: bool = False, weights: int | None = 0, elementwise: bool = False,
             **kwargs) -> pd.DataFrame:
    """Trace ``fn(*args, **kwargs)`` under ``policy`` (shapes only, nothing is computed) and return
    one row per GEMM/convolution and role (forward; with ``training`` also grad-input and
    grad-weight), with M, N, K, batch, count per call, operand roles and formats, and MACs.
    With ``elementwise``, also rows of kind ``elementwise`` (activations, pooling, reductions,
    bias adds: :mod:`.elementwise_trace`) with ``work``, ``primitive``, ``elements_out``,
    ``inputs``, ``elements_in``, ``ops`` (per output) and ``count``; M = elements_out, K = ops.
    Needs no key under stochastic rounding: nothing is computed, so no random bits are drawn."""
    pol = load_recipe(policy)
    emulated = emulate(fn, pol, weights=weights)
    # placeholder seed words: tracing only records shapes (a stochastic recipe's rounding needs
    # words to be traced at all, never their values)
    sr = {"asicsim_words": jnp.zeros(2, jnp.uint32)} if pol.stochastic else {}
    arrays, _, rebuild = split_arrays((args, kwargs))

    def run(*xs):
        a, k = rebuild(xs)
        return emulated(*a, **{**sr, **k})

    with recording(elementwise) as entries:
        jax.make_jaxpr(run)(*arrays)
    return trace_frame(entries, training)
