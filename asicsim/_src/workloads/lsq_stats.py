"""Numerics statistics of a training run whose recipe has learned step sizes (LSQ, ``scaling =
"lsq"``/``"lsq_channel"``): the per-tensor statistics of :mod:`.stats` round whole tensors with a
role's own scaling, which a learned step is not (it belongs to one GEMM operand and is training
state), so an LSQ run is measured where its steps act instead: every LSQ operand of the training
loss on one training batch, rounded with the run's current steps
(:func:`asicsim._src.emulate.transform.observe_lsq`).

Per LSQ operand, named ``<role>:<weight path>`` (an activation by the weight of its GEMM; a
repeated name gets `` #2``, `` #3``...), the keys :mod:`.stats` gives where they mean the same
(so tables, sweeps and summaries read them alike), with ``r = x / step``:

``underflow``  fraction of the nonzero finite elements that round to 0 (``|r|`` below half a code)
``overflow``   fraction of the elements the clip moves: beyond the codes, ``r > Qp`` or ``r < -Qn``
               (LSQ saturates them at ``Qp * step`` / ``-Qn * step``)
``nonfinite``  fraction of inf/NaN after rounding; ``zero``: exact zeros before it
``size``       the operand's elements (in a time scan: per iteration; a layer scan: all layers)

and the learned step itself: ``step`` (the mean over channels and stacked layers; ``step_min``,
``step_max``) and ``rel_error``, ``sqrt(sum (q - x)**2 / sum x**2)`` over the finite elements
(the quantization noise relative to the operand; NaN for an all-zero operand). A time scan's
operand is summed over all its iterations (equal-sized: the mean sums give the same fractions), a
while loop's is its first iteration's. At every evaluation a run keeps ``step``, ``overflow`` and
``rel_error`` per operand (``numerics_curve[i]["tensors"]``, :func:`.stats.extremes`).
"""

from __future__ import annotations

import math

import jax
import numpy as np

from asicsim._src.emulate.lsq_sites import OBSERVED
from asicsim._src.emulate.policy import Policy
from asicsim._src.emulate.transform import observe_lsq


class LsqObserver:
    """``observer(params, batch, steps, **kw) -> {name: statistics}`` for ``loss(params, batch)``
    under ``policy`` (jitted once; the names are known once it has been traced)."""

    def __init__(self, policy: Policy, loss):
        self.policy = policy
        self.labels: list = []

        def sums(params, batch, steps, kw):
            labels, seen = observe_lsq(loss, policy, steps, params, batch, **kw)
            self.labels = labels
            return seen

        self._sums = jax.jit(sums)

    def __call__(self, params, batch, steps, **kw) -> dict:
        if steps is None:
            raise ValueError(f"recipe {self.policy.name!r} has learned step sizes: its statistics need the "
                             "run's steps (TrainState.lsq[0])")
        raw = self._sums(params, batch, list(steps), kw)
        return describe_lsq(self.policy, self.labels, [np.asarray(r) for r in raw], [np.asarray(s) for s in steps])


def describe_lsq(policy: Policy, labels, sums, steps) -> dict:
    """Host-side statistics (module docstring) of each LSQ operand from its :data:`OBSERVED` sums
    (summed over any leading axes: stacked layers) and its step."""
    out: dict = {}
    for (role, path), raw, step in zip(labels, sums, steps, strict=True):
        v = dict(zip(OBSERVED, np.asarray(raw, np.float64).reshape(-1, len(OBSERVED)).sum(0).tolist(), strict=True))
        spec = policy.role(role)
        size = max(v["size"], 1.0)
        name = f"{role}:{path}"
        n = sum(1 for k in out if k == name or k.startswith(f"{name} #"))
        out[name if n == 0 else f"{name} #{n + 1}"] = {
            "format": spec.format, "rounding": spec.rounding, "scaling": str(spec.scaling), "size": int(v["size"]),
            "underflow": v["underflow"] / max(v["nonzero"], 1.0), "overflow": v["saturated"] / size,
            "nonfinite": v["nonfinite"] / size, "zero": v["zero"] / size,
            "step": float(np.mean(step)), "step_min": float(np.min(step)), "step_max": float(np.max(step)),
            "rel_error": math.sqrt(v["err_sq"] / v["sq"]) if v["sq"] > 0 else float("nan")}
    return out
