"""What differs between a workload's tasks: its loss, its batches, its model input, its evaluation
and its metric.

======== ======================================= ========================= ==================
task     batch (from example indices)            loss                      metric
======== ======================================= ========================= ==================
classify ``(x, y)``                              mean cross-entropy        ``test_accuracy``
lm       a window of ``context + 1`` tokens      mean cross-entropy/token  ``val_loss``
ctc      ``(x, x_len, y)``                       mean CTC loss/utterance   ``test_cer``
======== ======================================= ========================= ==================

Speech (``ctc``) is evaluated as Deep Speech 2 reports it (Amodei et al. 2016, section 3.1):
greedy (best path) decoding, then the character error rate (``test_cer``, the final metric) and
word error rate (``test_wer``) over the test split (:mod:`.ctc`). The model gets ``(x, x_len)``
so that it can ignore each utterance's padding; the CTC loss counts each utterance's
``model.out_frames(x_len)`` output frames.

:data:`LOWER_IS_BETTER` is the one list of metrics where lower is better; everything that ranks
or compares results (the report, accuracy-drop tables) reads it through :func:`lower_is_better`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from asicsim._src.workloads.ctc import ctc_loss, error_rate, greedy_decode, transcripts

TASKS = ("classify", "lm", "ctc")
#: the final metric of each task
METRICS = {"classify": "test_accuracy", "lm": "val_loss", "ctc": "test_cer"}
#: metrics where lower is better (everything else: higher is better)
LOWER_IS_BETTER = ("val_loss", "test_loss", "loss", "perplexity", "test_cer", "test_wer")
EVAL_CHUNK = 1000  # test examples per forward pass at evaluation
#: utterances per forward pass at evaluation (a speech model's activations are ~T times a
#: classifier's: 1000 utterances of 200 frames hold gigabytes of im2col patches)
CTC_EVAL_CHUNK = 128


def lower_is_better(metric) -> bool:
    return str(metric) in LOWER_IS_BETTER


def _check(task: str) -> None:
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; tasks are {list(TASKS)}")


def cross_entropy(logits, labels):
    logp = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, labels[..., None], axis=-1))


def _out_frames(model, lengths):
    fn = getattr(model, "out_frames", None)
    if fn is None:
        raise ValueError(f"model {model.kind!r} gives no output frame count (out_frames): it cannot be "
                         "trained with CTC (use a speech model such as ds2)")
    return fn(lengths)


def loss_fn(model, task: str, *, batch_stats: bool = False):
    """``loss(params, batch, taps=None)``: the task's training loss (a float32 scalar);
    ``batch_stats`` (a batch-normalised speech model): ``(loss, stats)``, the batch statistics
    of its batch norms (:mod:`.speech_layers`) beside it."""
    _check(task)
    if batch_stats and task != "ctc":
        raise ValueError(f"loss_fn(batch_stats=True): only the ctc task's models have batch norms, not {task!r}")
    if task == "lm":
        def loss(params, batch, taps=None):
            return cross_entropy(model.apply(params, batch[:, :-1], taps), batch[:, 1:])
    elif task == "ctc":
        _out_frames(model, 1)  # fails here, naming the model, rather than inside a trace

        def loss(params, batch, taps=None):
            x, x_len, y = batch
            stats: dict = {}
            logits = model.apply(params, (x, x_len), taps, stats=stats) if batch_stats else model.apply(params, (x, x_len), taps)
            value = jnp.mean(ctc_loss(logits, _out_frames(model, x_len), y))
            return (value, stats) if batch_stats else value
    else:
        def loss(params, batch, taps=None):
            x, y = batch
            return cross_entropy(model.apply(params, x, taps), y)
    return loss


def train_arrays(data) -> tuple:
    """The training split as the device arrays :func:`batch_fn`'s batches are gathered from."""
    _check(data.task)
    if data.task == "lm":
        return (jnp.asarray(data.x_train),)
    if data.task == "ctc":
        return (jnp.asarray(data.x_train), jnp.asarray(data.x_len_train), jnp.asarray(data.y_train))
    return jnp.asarray(data.x_train), jnp.asarray(data.y_train)


def batch_fn(task: str, context: int):
    """``make(arrays, idx)``: the batch of example indices ``idx`` (B,) (LM: window starts)."""
    _check(task)
    if task == "lm":
        def make(data, idx):
            return data[0][idx[:, None] + jnp.arange(context + 1)[None, :]]
    else:
        def make(data, idx):
            return tuple(a[idx] for a in data)
    return make


def model_input(task: str, batch):
    """What the model's ``apply`` takes from a training batch."""
    if task == "lm":
        return batch[:, :-1]
    if task == "ctc":
        return batch[0], batch[1]
    return batch[0]


def curve_keys(task: str) -> tuple[str, ...]:
    """The evaluation values recorded at every evaluation (besides ``step`` and ``train_loss``)."""
    return ("test_loss", "test_accuracy", "test_cer", "test_wer") if task == "ctc" else ("test_loss", "test_accuracy")


def evaluate(task: str, forward, data, workload, model) -> dict:
    """The test split through ``forward(x) -> logits`` (the model's forward pass, its parameters
    bound, under a recipe). Returns
    :func:`curve_keys`' values (``test_accuracy`` None for the LM and speech)."""
    _check(task)
    if task == "lm":
        t, n = workload.context, workload.eval_windows
        starts = np.linspace(0, len(data.x_test) - t - 2, n).astype(np.int64)
        windows = data.x_test[starts[:, None] + np.arange(t + 1)]
        logits = forward(jnp.asarray(windows[:, :-1]))
        return {"test_loss": float(cross_entropy(logits, jnp.asarray(windows[:, 1:]))), "test_accuracy": None}
    if task == "ctc":
        return _evaluate_ctc(forward, data, model)
    losses, correct = 0.0, 0
    for i in range(0, len(data.x_test), EVAL_CHUNK):
        x, y = jnp.asarray(data.x_test[i:i + EVAL_CHUNK]), jnp.asarray(data.y_test[i:i + EVAL_CHUNK])
        logits = forward(x)
        losses += float(cross_entropy(logits, y)) * len(y)
        correct += int(jnp.sum(jnp.argmax(logits, -1) == y))
    return {"test_loss": losses / len(data.x_test), "test_accuracy": correct / len(data.x_test)}


@jax.jit
def _ctc_sum(logits, frames, labels):
    return jnp.sum(ctc_loss(logits, frames, labels))


def _evaluate_ctc(forward, data, model) -> dict:
    """Chunks of :data:`CTC_EVAL_CHUNK` utterances (the last one padded with empty utterances, so
    one compiled forward pass serves all): the summed CTC loss and the greedy transcripts."""
    n_test, c = len(data.x_test), CTC_EVAL_CHUNK
    losses, hyps = 0.0, []
    for i in range(0, n_test, c):
        x, n, y = data.x_test[i:i + c], data.x_len_test[i:i + c], data.y_test[i:i + c]
        real, extra = len(x), c - len(x)
        if extra:
            x = np.concatenate([x, np.zeros((extra, *x.shape[1:]), x.dtype)])
            n = np.concatenate([n, np.zeros(extra, n.dtype)])
            y = np.concatenate([y, np.full((extra, y.shape[1]), -1, y.dtype)])
        logits = forward((jnp.asarray(x), jnp.asarray(n)))
        frames = _out_frames(model, jnp.asarray(n))
        losses += float(_ctc_sum(logits[:real], frames[:real], jnp.asarray(y[:real])))
        hyps += greedy_decode(logits[:real], frames[:real])
    refs = transcripts(data.y_test, data.vocab)
    hyp_text = transcripts(hyps, data.vocab)
    return {"test_loss": losses / n_test, "test_accuracy": None,
            "test_cer": error_rate(refs, hyp_text),
            "test_wer": error_rate([r.split() for r in refs], [h.split() for h in hyp_text])}
