"""Train and evaluate real workloads under a precision recipe.

A training workload is a TOML file ``workloads/<name>.toml`` (dataset, model and sizes, optimizer,
learning rate, batch, steps, evaluation cadence); :func:`list_workloads` names the shipped ones.

>>> from asicsim._src.workloads import train, infer
>>> r = train("digits_mlp", "bf16", seeds=(0, 1), steps=300)
>>> r.metric, r.diverged, len(r.per_seed), r.mean > 0.9
('test_accuracy', False, 2, True)

:func:`train` runs ``steps`` optimizer steps per seed in ``lax.scan`` chunks of ``eval_every``
steps (one compiled chunk shared by all seeds), each step from
:func:`asicsim._src.emulate.training.make_train_step` (the model's GEMMs in the recipe's formats, optax
doing the optimizing), then evaluates the model's forward pass under the same recipe on the test
set. Each run reports curves, the final metric (``test_accuracy``; ``val_loss`` in nats per
character for the language model; ``test_cer``, the character error rate of greedy decoding,
for speech: :mod:`.tasks`), divergence (the step and its cause, :mod:`.divergence`: a
non-finite loss on a step that was not skipped, a loss above ``explode_factor`` times the first
step's, a collapsed loss scale, more than half the steps skipped, non-finite weights or a
non-finite test loss), and per-tensor numerics statistics (:mod:`asicsim._src.workloads.stats`) of the weights,
the activations entering GEMMs, the activation gradients and the weight gradients, measured
against the recipe's ``weight``/``act``/``grad``/``wgrad`` formats on one training batch at
every evaluation (gradients before they are rounded, times the loss scale in use).

Post-training quantization (the fp32-trained model evaluated under an inference recipe) is in
:mod:`asicsim._src.workloads.post_training`. The compiled pieces every seed shares are in
:mod:`asicsim._src.workloads.runner`, the result types in :mod:`asicsim._src.workloads.train_results`.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax

from asicsim._src.emulate import load_recipe
from asicsim._src.emulate.policy import Policy
from asicsim._src.emulate.training import check_trainable
from asicsim._src.workloads import tasks
from asicsim._src.workloads.datasets import Dataset, load_dataset
from asicsim._src.workloads.deepbench import WorkloadError
from asicsim._src.workloads.divergence import DivergenceWatch
from asicsim._src.workloads.grad_rounding import gradient_setup
from asicsim._src.workloads.models import Model, make_model
from asicsim._src.workloads.pruning import weight_sparsity
from asicsim._src.workloads.runner import Runner
from asicsim._src.workloads.speech_layers import inference_params
from asicsim._src.workloads.stats import extremes, summarize
from asicsim._src.workloads.train_results import RunResult, TrainResult
from asicsim._src.workloads.workload import OPTIMIZERS, Workload, load_workload

EVAL_CHUNK = tasks.EVAL_CHUNK


def build(workload: Workload, data: Dataset | None = None) -> tuple[Dataset, Model]:
    data = data or load_dataset(workload.dataset)
    if data.task == "lm":
        model = make_model(workload.model, (workload.context,), data.num_classes,
                           context=workload.context, **workload.sizes)
    else:
        model = make_model(workload.model, data.feature_shape, data.num_classes, **workload.sizes)
    return data, model


def make_optimizer(name: str, lr: float, momentum: float = 0.0) -> optax.GradientTransformation:
    """optax's ``sgd`` or ``adam``, run under JAX's standard dtype promotion (optax mixes Python
    floats with int32 step counts, which ``jax_numpy_dtype_promotion = "strict"`` rejects)."""
    if name == "sgd":
        tx = optax.sgd(lr, momentum=momentum or None)
    elif name == "adam":
        tx = optax.adam(lr)
    else:
        raise ValueError(f"unknown optimizer {name!r}; optimizers are {list(OPTIMIZERS)}")

    def init(params):
        with jax.numpy_dtype_promotion("standard"):
            return tx.init(params)

    def update(updates, state, params=None):
        with jax.numpy_dtype_promotion("standard"):
            return tx.update(updates, state, params)

    return optax.GradientTransformation(init, update)


def batch_order(data: Dataset, workload: Workload, steps: int, batch: int, seed: int) -> np.ndarray:
    """(steps, batch) int32: example indices (epochs of seeded permutations, or the dataset order
    when the workload says ``shuffle = false``) or LM window starts."""
    rng = np.random.default_rng(seed)
    if data.task == "lm":
        return rng.integers(0, len(data.x_train) - workload.context - 1, (steps, batch), np.int32)
    n = len(data.x_train)
    epochs = math.ceil(steps * batch / n)
    order = np.concatenate([rng.permutation(n) if workload.shuffle else np.arange(n)
                            for _ in range(epochs)]).astype(np.int32)
    return order[: steps * batch].reshape(steps, batch)


def check_batch(w: Workload, data: Dataset) -> None:
    """A training batch draws distinct examples: it cannot exceed the dataset's training set (a
    language model's windows start anywhere, so any batch fits)."""
    n = len(data.x_train)
    if data.task != "lm" and w.batch > n:
        raise WorkloadError(f"workload {w.name!r}: batch = {w.batch}: allowed: at most the {n} training "
                            f"examples of dataset {w.dataset!r} (a larger batch repeats examples in one step)")


def _loss_scale(state) -> float:
    """The training step's current loss scale (1.0 for recipes without loss scaling)."""
    return float(state.loss_scale.scale)


def train(workload: str | Workload, recipe: str | Policy = "fp32", seeds=(0, 1), *,
          optimizer: str | None = None, lr: float | None = None, steps: int | None = None,
          batch: int | None = None, eval_every: int | None = None, momentum: float | None = None,
          stats: bool = True, keep_params: bool = False,
          progress: Callable[[int, int], None] | None = None, scale: str | None = None,
          grad_format: str | None = None, grad_rounding: str = "rne", prune=None,
          replicas: int = 1, allreduce: str = "sum") -> TrainResult:
    """Train ``workload`` under ``recipe`` once per seed; keyword arguments override the workload.

    Returns a :class:`TrainResult`: ``metric`` (``test_accuracy``, or ``val_loss`` for the
    language model, ``test_cer`` for speech), ``mean``/``per_seed``, ``diverged``, and per run
    the curves (``step``, ``train_loss`` (mean over the chunk), ``test_loss``, ``test_accuracy``;
    for speech also ``test_cer`` and ``test_wer``), the divergence (step, cause), skipped/overflow
    step counts and the numerics statistics (``numerics``: the last evaluation, with exponent
    histograms; ``numerics_curve``: underflow/overflow per group and per tensor (``tensors``)
    amax, outlier fraction and kurtosis (:mod:`.stats`) at every evaluation). An inference-only
    recipe (static scaling) is a ``RecipeError``.
    ``progress(steps_done, steps_total)`` is called after every evaluation (all seeds together).
    ``scale`` picks the workload's scale (``small`` by default; ``gpu``: its ``[scales.gpu]``).
    ``grad_format`` (with ``grad_rounding``, ``rne`` or ``sr``): the weight gradients are rounded to
    it before the optimizer, as a reduced-precision all-reduce sends them
    (:mod:`asicsim._src.workloads.grad_rounding`); None: not rounded. ``replicas``: the batch split over
    that many data-parallel replicas, each one's gradient rounded to ``grad_format`` before the sum;
    ``allreduce="ring"``: the sum formed in a ring whose partial sums are rounded to it at every hop.
    ``prune``: :class:`~asicsim._src.workloads.prune_rules.PruneRule` s replacing the workload's
    ``[[prune]]``; a pruned run's ``sparsity`` holds the zeros of every weight matrix at the end.
    A recipe with learned step sizes (``int8_lsq``): the steps are initialised on the first
    training batch and trained with the weights (:func:`asicsim.make_train_step`; with pruning
    and batch norm too), the evaluation uses them; its numerics statistics are of each LSQ GEMM
    operand as the run's steps round it (:mod:`.lsq_stats`: step, saturated and underflowing
    fractions, relative error) in place of the per-tensor ones.
    """
    w = load_workload(workload, scale).replace(optimizer=optimizer, lr=lr, steps=steps, batch=batch,
                                        eval_every=eval_every, momentum=momentum, prune=prune)
    policy = check_trainable(load_recipe(recipe))
    data, model = build(w)
    check_batch(w, data)
    tx, reps = gradient_setup(make_optimizer(w.optimizer, w.lr, w.momentum), grad_format, grad_rounding,
                              replicas, w.batch, allreduce)
    runner = Runner(w, policy, data, model, tx, stats, replicas=reps)
    total = len(seeds) * w.steps
    runs = []
    for i, s in enumerate(seeds):
        tick = None if progress is None else (lambda done, i=i: progress(i * w.steps + done, total))
        runs.append(_train_seed(runner, w, policy, int(s), keep_params, tick))
        if progress is not None:  # a diverged run stops early: its remaining steps count as done
            progress((i + 1) * w.steps, total)
    settings = {k: getattr(w, k) for k in ("scale", "dataset", "model", "sizes", "optimizer", "lr",
                                           "momentum", "batch", "steps", "eval_every")}
    if grad_format is not None:
        settings |= {"grad_format": grad_format, "grad_rounding": grad_rounding}
    if replicas != 1:
        settings["replicas"] = replicas
        if allreduce != "sum":
            settings["allreduce"] = allreduce
    if w.prune:
        settings["prune"] = [dataclasses.asdict(r) for r in w.prune]
    return TrainResult(w.name, policy.name, settings, runs)


def _train_seed(runner: Runner, w: Workload, policy: Policy, seed: int, keep: bool,
                tick: Callable[[int], None] | None = None) -> RunResult:
    t0 = time.perf_counter()
    key = jax.random.key(seed)
    params = runner.model.init(jax.random.fold_in(key, 0))
    order = batch_order(runner.data, w, w.steps, w.batch, seed)
    if policy.lsq:  # learned steps: lsq_init on the operands of the first training batch
        state = runner.init(params, jax.random.fold_in(key, 1), runner.make_batch(runner.train_data,
                                                                                  jnp.asarray(order[0])))
    else:
        state = runner.init(params, jax.random.fold_in(key, 1))
    keys = tasks.curve_keys(runner.task)
    curves: dict = {"step": [], "train_loss": [], **{k: [] for k in keys}}
    numerics, numerics_curve = {}, []
    watch = DivergenceWatch(w.steps, w.explode_factor,
                            pruning_until=max((r.update_steps()[-1] for r in w.prune), default=0))
    done = 0
    while done < w.steps and watch.found is None:
        n = min(w.eval_every, w.steps - done)
        idx = jnp.asarray(order[done:done + n])
        state, m = runner.chunk(state, runner.train_data, idx)
        losses = np.asarray(m["loss"], np.float64)
        watch.chunk(done, m)
        done += n
        p = state.params
        watch.weights(done, p)
        steps = getattr(state, "lsq", None) and state.lsq[0]  # learned steps, where the recipe has them
        ev = runner.evaluate(inference_params(state), steps)  # a batch norm's running statistics included
        watch.evaluation(done, ev["test_loss"])
        finite = losses[np.isfinite(losses)]
        curves["step"].append(done)
        curves["train_loss"].append(float(finite.mean()) if finite.size else float("nan"))
        for k in keys:
            curves[k].append(ev[k])
        if runner.stats_fn is not None:
            batch = runner.make_batch(runner.train_data, jnp.asarray(order[min(done, w.steps - 1)]))
            last = done >= w.steps or watch.found is not None
            num = runner.numerics(p, batch, _loss_scale(state), histogram=last, steps=steps)
            numerics_curve.append({"step": done, **summarize(num), "tensors": extremes(num)})
            if last:
                numerics = num
        if tick is not None:
            tick(done)
    metric = tasks.METRICS[runner.task]
    return RunResult(seed=seed, metric=metric,
                     final=curves["test_loss" if metric == "val_loss" else metric][-1],
                     test_accuracy=curves["test_accuracy"][-1], test_loss=curves["test_loss"][-1],
                     curves=curves, diverged=watch.found is not None, divergence=watch.found,
                     skipped_steps=watch.skipped, overflow_steps=watch.overflow, numerics=numerics,
                     numerics_curve=numerics_curve, seconds=time.perf_counter() - t0,
                     sparsity=weight_sparsity(state.params) if w.prune else {},
                     params=inference_params(state) if keep else None)
