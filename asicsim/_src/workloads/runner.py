"""The compiled pieces of one (workload, recipe, optimizer) that every seed's run shares
(:class:`Runner`): the emulated forward pass, the training chunk (``eval_every`` steps in one
``lax.scan``, pruning applied), and the numerics statistics of weights, activations and
gradients measured against the recipe's formats."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import optax
from jax import lax

from asicsim._src.emulate import emulate
from asicsim._src.emulate.policy import Policy, RoleSpec
from asicsim._src.emulate.training import make_train_step
from asicsim._src.workloads import tasks
from asicsim._src.workloads.datasets import Dataset
from asicsim._src.workloads.lsq_stats import LsqObserver
from asicsim._src.workloads.models import Model
from asicsim._src.workloads.pruning import with_pruning
from asicsim._src.workloads.speech_layers import with_running_stats
from asicsim._src.workloads.stats import describe, tensor_stats
from asicsim._src.workloads.workload import Workload


def without_grad_rounding(policy: Policy) -> Policy:
    """The recipe with ``grad``/``grad_out``/``wgrad`` kept in float32: gradients as they are before rounding."""
    roles = tuple((r, RoleSpec("fp32") if r in ("grad", "grad_out", "wgrad") else s) for r, s in policy.roles)
    return dataclasses.replace(policy, roles=roles)


class Runner:
    """Compiled pieces of one (workload, recipe, optimizer) shared by all seeds."""

    def __init__(self, workload: Workload, policy: Policy, data: Dataset, model: Model,
                 tx: optax.GradientTransformation | None, stats: bool, replicas=None):
        self.w, self.policy, self.data, self.model = workload, policy, data, model
        self.task = data.task
        self.loss = tasks.loss_fn(model, data.task)
        self.make_batch = tasks.batch_fn(data.task, workload.context)
        self.train_data = tasks.train_arrays(data)
        fwd = emulate(model.apply, policy)
        kw = sr_key(policy)
        self.forward = jax.jit(lambda p, x, steps=None: fwd(p, x, **kw, **lsq_steps(steps)))
        first = getattr(model, "running_init", None)  # a batch-normalised model's running statistics
        if tx is not None:
            if first is None:
                self.init, step = make_train_step(lambda p, b: self.loss(p, b), policy, tx, replicas=replicas)
            else:  # the batch statistics leave each step as aux (asicsim._src.workloads.speech_layers)
                stat_loss = tasks.loss_fn(model, data.task, batch_stats=True)
                self.init, step = make_train_step(lambda p, b: stat_loss(p, b), policy, tx, has_aux=True,
                                                  replicas=replicas)
            self.init, step = with_pruning(self.init, step, workload.prune)  # asicsim._src.workloads.pruning
            if first is not None:
                self.init, step = with_running_stats(self.init, step, first)
            self.chunk = jax.jit(self._chunk_fn(step))
        # training: weights, activations and both gradients; inference: weights and activations;
        # learned step sizes: each LSQ operand as the run's steps round it (.lsq_stats)
        if stats and policy.lsq:
            self.stats_fn = LsqObserver(policy, lambda p, b: self.loss(p, b))
        else:
            self.stats_fn = jax.jit(self._stats_fn(grads=tx is not None)) if stats else None

    def _chunk_fn(self, step):
        def chunk(state, data, idx):
            def body(s, i):
                s, m = step(s, self.make_batch(data, i))
                return s, {k: jnp.asarray(v) for k, v in m.items()}
            return lax.scan(body, state, idx)
        return chunk

    def _stats_fn(self, grads: bool):
        pol, model, loss = self.policy, self.model, self.loss
        act_fn = emulate(lambda p, x: _capture(model, p, x), pol)
        grad_pol = without_grad_rounding(pol)
        loss_em = emulate(lambda p, b, taps: loss(p, b, taps), grad_pol)

        kw = sr_key(pol)

        def fn(params, batch, scale):
            x = tasks.model_input(self.task, batch)
            acts = act_fn(params, x, **kw)
            groups = [("weight", params, "weight"), ("act", acts, "act")]
            if grads:
                taps = jax.tree_util.tree_map(jnp.zeros_like, acts)
                gp, gt = jax.grad(lambda p, t: loss_em(p, batch, t, **kw), argnums=(0, 1))(params, taps)
                groups += [("grad", gt, "grad"), ("wgrad", gp, "wgrad")]
            out = {}
            for group, tree, role in groups:
                spec = pol.role(role)
                scaled = role in ("grad", "wgrad")
                for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
                    name = "/".join(str(getattr(k, "key", k)) for k in path)
                    if group in ("weight", "wgrad") and leaf.ndim < 2:
                        continue  # biases and norm scales do not enter GEMMs as operands
                    if group == "grad" and name == "input":
                        continue  # the gradient of the data: no GEMM computes it in training
                    out[f"{group}:{name}"] = tensor_stats(leaf * scale if scaled else leaf, spec)
            return out
        return fn

    def numerics(self, params, batch, scale: float, histogram: bool, steps=None) -> dict:
        """Statistics of one batch (:mod:`.stats`; with learned step sizes, ``steps`` =
        ``TrainState.lsq[0]``: :mod:`.lsq_stats`, without histograms)."""
        if self.policy.lsq:
            return self.stats_fn(params, batch, steps, **sr_key(self.policy))
        raw = self.stats_fn(params, batch, jnp.float32(scale))
        roles = {"weight": "weight", "act": "act", "grad": "grad", "wgrad": "wgrad"}
        out = {k: describe(v, self.policy.role(roles[k.split(":")[0]]), histogram=histogram)
               for k, v in raw.items()}
        for k, s in out.items():  # |x| >= 6 is a threshold on activations and weights; gradients
            if k.split(":")[0] in ("grad", "wgrad"):  # are measured times the loss scale (2^16...)
                s["outliers"] = float("nan")  # where it would count nearly everything
        return out

    def evaluate(self, params, steps=None) -> dict:
        """The test split under the recipe's forward pass: :func:`.tasks.evaluate`'s values
        (``test_loss``, ``test_accuracy`` (None for the LM and speech); speech's ``test_cer``,
        ``test_wer``). ``steps``: the learned step sizes (``TrainState.lsq[0]``) of an LSQ recipe,
        the forward's GEMMs taking them in the training loss's order."""
        return tasks.evaluate(self.task, lambda x: self.forward(params, x, steps), self.data, self.w, self.model)


def sr_key(policy: Policy) -> dict:
    """Stochastic-rounding recipes need a key in every emulated call (fixed: evaluation)."""
    return {"asicsim_key": jax.random.key(0)} if getattr(policy, "stochastic", False) else {}


def lsq_steps(steps) -> dict:
    """``asicsim_lsq`` for an emulated call where a recipe has learned step sizes (else nothing)."""
    return {} if steps is None else {"asicsim_lsq": steps}


def _capture(model: Model, params, x) -> dict:
    sink: dict = {}
    model.apply(params, x, sink=sink)
    return sink
