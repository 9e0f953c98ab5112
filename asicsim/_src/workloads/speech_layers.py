"""Deep Speech 2's sequence-wise batch normalisation and row (lookahead) convolution, and the
running statistics a batch-normalised model carries through training.

Sequence-wise batch normalisation (Amodei et al. 2016, arXiv:1512.02595, section 3.2): in a
recurrent layer ``h_t = f(B(W h^{l-1}_t) + U h_{t-1})`` only the input-to-hidden term
``W h^{l-1}_t`` is normalised, not the recurrent one, and "for each hidden unit, the mean and
variance statistics are computed over all items in the minibatch over the length of the
sequence"; at inference a running average of those statistics collected in training is used
(section 3.2). ``B(x) = gamma (x - E[x]) / sqrt(Var[x] + eps) + beta`` (Ioffe & Szegedy 2015,
Algorithm 1). Here the statistics are over the *valid* frames only (an utterance's padding is
left out, as a packed sequence leaves it out), the variance is the biased one (Algorithm 1's
``1/m``), ``eps = 1e-5`` and the running averages follow ``r <- m r + (1 - m) batch`` with
``m = 0.99`` (PyTorch's and Flax's BatchNorm defaults; the paper states neither), starting from
mean 0 and variance 1. A step that loss scaling skips leaves them unchanged.

Row convolution (section 3.5, for a unidirectional model): above the recurrent layers, each
feature ``i`` of output frame ``t`` is ``r_{t,i} = sum_{j=0..tau} W_{j,i} h_{t+j,i}``: the
current frame and ``tau`` future frames, one weight per (offset, feature), no mixing between
features (PaddlePaddle's ``row_conv`` documents the same formula, ``out_i = sum_{j=i}^{i+context-1}
X_j . W_{j-i}``). Frames past an utterance's end read as zero.

Every op of a batch norm runs inside ``jax.named_scope("<layer>_bn")``, so a recipe's op rule
(:mod:`asicsim._src.emulate.op_rules`, ``match = "*_bn/*"``) rounds the batch norm's reductions and
arithmetic in its own format (fp16 batch norm) through the emulator like any other op.

A model's running statistics travel beside its trained parameters: ``params[RUNNING]`` (a dict
per layer of ``mean`` and ``var``) is present in the parameters used for inference
(:func:`with_running`) and absent in training, where each batch's own statistics are used and
handed out through ``apply(..., stats=dict)``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from asicsim._src.workloads.model_parts import lead
from asicsim._src.workloads.wrapped_state import reads_through

#: the key of the running statistics in a batch-normalised model's inference parameters
RUNNING = "bn_running"
#: added to the variance before the square root (PyTorch's and Flax's default)
BN_EPS = 1e-5
#: weight of the old running average per step (Flax's default momentum; PyTorch's 0.1 is 1 - this)
BN_MOMENTUM = 0.99


def bn_init(features: int) -> dict:
    """gamma 1, beta 0 (Ioffe & Szegedy 2015: the identity transform at the start)."""
    return {"gamma": jnp.ones((features,), jnp.float32), "beta": jnp.zeros((features,), jnp.float32)}


def running_init(features: int) -> dict:
    return {"mean": jnp.zeros((features,), jnp.float32), "var": jnp.ones((features,), jnp.float32)}


def seq_batch_norm(x, mask, p, running=None, name: str = "bn"):
    """Sequence-wise batch norm of ``x`` (T, B, C) over the frames where ``mask`` (T, B, 1) is
    True, per feature; ``running`` (``mean``, ``var``): use those instead (inference). Returns
    ``(y, (mean, var))``; ``y`` is ``x`` normalised at every frame (padding frames included, by
    the same statistics)."""
    with jax.named_scope(name):
        if running is None:
            m = mask.astype(x.dtype)
            n = jnp.maximum(jnp.sum(m), 1.0)
            mean = jnp.sum(x * m, axis=(0, 1)) / n
            xc = x - lead(mean, 3)
            var = jnp.sum(jnp.square(xc) * m, axis=(0, 1)) / n
        else:
            mean, var = running["mean"], running["var"]
            xc = x - lead(mean, 3)
        y = xc * lead(lax.rsqrt(var + BN_EPS), 3) * lead(p["gamma"], 3) + lead(p["beta"], 3)
    return y, (mean, var)


def row_conv(h, w, mask):
    """Row convolution of ``h`` (T, B, C) with ``w`` (tau + 1, C): ``r_t = sum_j w_j * h_{t+j}``,
    frames where ``mask`` (T, B, 1) is False (and past the batch) read as zero."""
    h = jnp.where(mask, h, 0.0)
    tau, t = w.shape[0] - 1, h.shape[0]
    hp = jnp.pad(h, ((0, tau), (0, 0), (0, 0)))
    out = hp[:t] * lead(w[0], 3)
    for j in range(1, tau + 1):
        out = out + hp[j:j + t] * lead(w[j], 3)
    return out


def with_running(params: dict, running: dict) -> dict:
    """The inference parameters: ``params`` with the running statistics under :data:`RUNNING`."""
    return {**params, RUNNING: running}


def update_running(running: dict, stats: dict, keep) -> dict:
    """One step of the running averages from a batch's ``stats`` ({layer: (mean, var)});
    ``keep`` (a bool scalar, a skipped step): leave them as they are."""
    out = {}
    for layer, r in running.items():
        mean, var = stats[layer]
        new = {"mean": BN_MOMENTUM * r["mean"] + (1 - BN_MOMENTUM) * mean.astype(jnp.float32),
               "var": BN_MOMENTUM * r["var"] + (1 - BN_MOMENTUM) * var.astype(jnp.float32)}
        out[layer] = {k: jnp.where(keep, r[k], new[k]) for k in new}
    return out


@reads_through
class NormState(NamedTuple):
    """A training state (``train``: a TrainState, or a pruned one) with the running statistics."""

    train: Any
    running: dict


def with_running_stats(init, step, first: dict):
    """``(init, step)`` of a training step whose metrics carry the batch statistics as ``aux``
    (``make_train_step(..., has_aux=True)``), keeping their running averages from ``first``
    (:class:`NormState`); the metrics lose ``aux``."""

    def norm_init(params, key, batch=None):  # batch: the first one, for learned steps (lsq_init)
        return NormState(init(params, key) if batch is None else init(params, key, batch), first)

    def norm_step(s: NormState, batch):
        train, metrics = step(s.train, batch)
        metrics = dict(metrics)
        stats = metrics.pop("aux")
        return NormState(train, update_running(s.running, stats, metrics["skipped"])), metrics

    return norm_init, norm_step


def inference_params(state) -> Any:
    """The parameters a trained state is evaluated with: with its running statistics where it
    keeps them (:class:`NormState`)."""
    return with_running(state.params, state.running) if isinstance(state, NormState) else state.params
