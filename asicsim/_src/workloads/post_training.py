"""Post-training quantization: :func:`infer` trains the fp32 model of a workload (cached per
process, :func:`fp32_params`), calibrates static scales where the recipe asks for them, and
evaluates the forward pass under an inference recipe; :func:`accuracy_drop_table` compares recipes.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np
import pandas as pd

from asicsim._src.emulate import load_recipe
from asicsim._src.emulate.policy import Policy
from asicsim._src.emulate.ptq import UncalibratedSites, calibrate
from asicsim._src.workloads import tasks
from asicsim._src.workloads.runner import Runner
from asicsim._src.workloads.training import batch_order, build, check_batch, train
from asicsim._src.workloads.workload import Workload, load_workload

_FP32_CACHE: dict = {}


@dataclass
class InferResult:
    """Post-training quantization of the fp32-trained model of each seed under ``recipe``."""

    workload: str
    recipe: str
    metric: str
    fp32: list[float]
    quantized: list[float]
    numerics: dict
    calibration: str

    @property
    def mean(self) -> float:
        return float(np.mean(self.quantized))

    @property
    def drop(self) -> float:
        """How much worse the quantized model's metric is, positive when worse: fp32 minus
        quantized for a higher-is-better metric (accuracy lost), quantized minus fp32 for a
        lower-is-better one (:data:`.tasks.LOWER_IS_BETTER`: the LM's val loss, speech's CER added)."""
        lost = float(np.mean(self.fp32) - np.mean(self.quantized))
        return -lost if tasks.lower_is_better(self.metric) else lost

    @property
    def diverged(self) -> bool:
        return not all(np.isfinite(self.quantized))

    def to_dict(self) -> dict:
        return {"workload": self.workload, "recipe": self.recipe, "metric": self.metric,
                self.metric: self.mean, "per_seed": self.quantized, "fp32": float(np.mean(self.fp32)),
                "fp32_per_seed": self.fp32, "drop": self.drop, "diverged": self.diverged,
                "calibration": self.calibration, "numerics": self.numerics}


def fp32_params(workload: str | Workload, seeds=(0,), *,
                progress: Callable[[int, int], None] | None = None, scale: str | None = None,
                **overrides) -> list:
    """The fp32-trained weights of each seed (trained once per process, then reused);
    ``progress(steps_done, steps_total)`` as :func:`train`'s."""
    w = load_workload(workload, scale).replace(**overrides)
    out, total = [], len(seeds) * w.steps
    for i, s in enumerate(seeds):
        k = (repr(w), int(s))
        if k not in _FP32_CACHE:
            tick = None if progress is None else (lambda d, _, i=i: progress(i * w.steps + d, total))
            r = train(w, "fp32", seeds=(s,), stats=False, keep_params=True, progress=tick)
            _FP32_CACHE[k] = r.runs[0].params
        if progress is not None:
            progress((i + 1) * w.steps, total)
        out.append(_FP32_CACHE[k])
    return out


def _calibrate(policy: Policy, fn, params, batches) -> tuple[Policy, str]:
    """Static scales from calibration batches where the recipe asks for them
    (:func:`asicsim._src.emulate.ptq.calibrate`, by the recipe's ``[calibration]`` method); other recipes scale each tensor by
    its own current amax, as their ``scaling`` says."""
    if not policy.needs_calibration:
        return policy, "none (no static scales: each tensor or block is scaled from itself, as the recipe says)"
    n = min(len(batches), policy.calibration_batches)
    method = policy.calibration_method
    if method == "percentile":
        method = f"{policy.calibration_percentile:g}th percentile"
    per = " per channel" if policy.calibration_granularity == "channel" else ""
    with warnings.catch_warnings():  # said in the result's calibration note instead
        warnings.simplefilter("ignore", UncalibratedSites)
        pol = calibrate(fn, params, batches[:n], policy)
    how = f"{method} calibration{per} on {n} training batches"
    if pol.uncalibrated:
        how += (f"; {len(pol.uncalibrated)} GEMM operand(s) with static scaling it did not observe (rows "
                f"{sorted({r for r, _ in pol.uncalibrated})}: never reached, or only zeros) scale by their "
                "current amax")
    return pol, how


def infer(workload: str | Workload, recipe: str | Policy, seeds=(0,), *, params=None,
          stats: bool = True, progress: Callable[[int, int], None] | None = None,
          scale: str | None = None, **overrides) -> InferResult:
    """Post-training quantization: train ``workload`` in fp32 (or take ``params``, one per seed),
    then evaluate its forward pass under ``recipe`` (an inference recipe such as int8_ptq_tensor).
    ``progress(steps_done, steps_total)`` reports the fp32 training; ``scale`` as :func:`train`'s."""
    w = load_workload(workload, scale).replace(**overrides)
    policy = load_recipe(recipe)
    data, model = build(w)
    check_batch(w, data)
    params = params if params is not None else fp32_params(w, seeds, progress=progress)
    ref = Runner(w, load_recipe("fp32"), data, model, None, stats=False)
    fp32, quant, numerics, how = [], [], {}, ""
    metric = tasks.METRICS[data.task]
    value = "test_loss" if metric == "val_loss" else metric
    for s, p in zip(seeds, params, strict=True):
        fp32.append(ref.evaluate(p)[value])
        order = batch_order(data, w, policy.calibration_batches, w.batch, int(s))
        mb = tasks.batch_fn(data.task, w.context)
        batches = [mb(ref.train_data, jnp.asarray(i)) for i in order]
        xs = [tasks.model_input(data.task, b) for b in batches]
        pol, how = _calibrate(policy, model.apply, p, xs)
        run = Runner(w, pol, data, model, None, stats=stats)
        quant.append(run.evaluate(p)[value])
        if stats and not numerics:
            numerics = run.numerics(p, batches[0], 1.0, histogram=True)
    return InferResult(w.name, policy.name, metric, fp32, quant, numerics, how)


def accuracy_drop_table(workload: str | Workload, recipes, seeds=(0,)):
    """A pandas table: one row per inference recipe (fp32 metric, quantized metric, drop)."""
    rows = []
    for r in recipes:
        res = infer(workload, r, seeds, stats=False)
        rows.append({"workload": res.workload, "recipe": res.recipe, "metric": res.metric,
                     "fp32": float(np.mean(res.fp32)), "quantized": res.mean, "drop": res.drop,
                     "calibration": res.calibration})
    return pd.DataFrame(rows)
