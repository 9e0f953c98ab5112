"""``op_trace``: the GEMMs an emulated function runs, as a DataFrame (see :mod:`.trace`)."""

from __future__ import annotations

import jax
import pandas as pd

from asicsim.emulate.trace import recording, trace_frame
from asicsim.emulate.transform import emulate, split_arrays


def op_trace(fn, policy, *args, training: bool = False, weights: int | None = 0, **kwargs) -> pd.DataFrame:
    """Trace ``fn(*args, **kwargs)`` under ``policy`` (shapes only, nothing is computed) and return
    one row per GEMM/convolution and role (forward; with ``training`` also grad-input and
    grad-weight), with M, N, K, batch, count per call, operand roles and formats, and MACs."""
    emulated = emulate(fn, policy, weights=weights)
    arrays, _, rebuild = split_arrays((args, kwargs))

    def run(*xs):
        a, k = rebuild(xs)
        return emulated(*a, **k)

    with recording() as entries:
        jax.make_jaxpr(run)(*arrays)
    return trace_frame(entries, training)
