"""The Deep Speech 2-shaped model (asicsim._src.workloads.speech_model) and the speech (CTC) task in
training, inference, pricing and the report, on a small synthetic dataset of the speech
interface (the real ``speech`` dataset only in the slow test)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax import lax

from asicsim._src.emulate import op_trace
from asicsim._src.emulate.training import make_train_step
from asicsim._src.workloads import post_training, tasks, training
from asicsim._src.workloads.ctc import ctc_loss
from asicsim._src.workloads.datasets import Dataset
from asicsim._src.workloads.models import im2col_2d, make_model
from asicsim._src.workloads.speech_model import RELU_CLIP, patches
from asicsim._src.workloads.workload import Workload, load_workload

SIZES = {"channels": [4, 4], "kernels": [[3, 5], [3, 3]], "strides": [[2, 2], [1, 2]], "hidden": 8, "layers": 1}


def synthetic_speech(n_train=192, n_test=48, feats=12, seed=0, max_chars=6) -> Dataset:
    """Utterances of characters, each a fixed random spectrum held 3-5 frames plus noise, zero
    padded; labels padded with -1; vocab[0] the blank; test speakers not in training."""
    rng = np.random.default_rng(seed)
    vocab = "_ abcd"
    spectra = rng.normal(0, 1, (len(vocab), feats)).astype(np.float32)
    spectra[1] *= 0.1  # the space is quiet

    def split(n):
        t = max_chars * 5
        x, y = np.zeros((n, t, feats), np.float32), np.full((n, max_chars), -1, np.int32)
        lengths = np.zeros(n, np.int32)
        for i in range(n):
            k = int(rng.integers(1, max_chars + 1))
            chars = rng.integers(2, len(vocab), k)
            chars[1:-1][rng.random(max(k - 2, 0)) < 0.25] = 1
            frames = np.concatenate([np.repeat(spectra[c][None], rng.integers(3, 6), 0) for c in chars])
            lengths[i] = len(frames)
            x[i, : len(frames)] = frames + rng.normal(0, 0.3, frames.shape)
            y[i, :k] = chars
        return x, lengths, y

    (xtr, ltr, ytr), (xte, lte, yte) = split(n_train), split(n_test)
    return Dataset("speech", "ctc", xtr, ytr, xte, yte, len(vocab), vocab=vocab, x_len_train=ltr,
                   x_len_test=lte, speakers_train=np.zeros(n_train, np.int32),
                   speakers_test=np.ones(n_test, np.int32), speaker_names=("train", "test"))


@pytest.fixture(scope="module")
def data():
    return synthetic_speech()


@pytest.fixture
def synthetic(monkeypatch, data):
    """``training`` (and pricing, which builds through it) loads the synthetic dataset as ``speech``."""
    monkeypatch.setattr(training, "load_dataset", lambda name: data)
    return Workload(name="speech_synthetic", dataset="speech", model="ds2", sizes={**SIZES, "hidden": 16},
                    lr=0.02, batch=32, steps=40, eval_every=20)


def test_patches_match_im2col_and_convolution():
    x = jnp.asarray(np.random.default_rng(0).normal(size=(2, 9, 11, 3)), jnp.float32)
    np.testing.assert_array_equal(patches(x, (3, 3), (2, 2), (1, 1)), im2col_2d(x, 3, 2, 1))
    # a rectangular kernel and stride as one GEMM equals XLA's convolution
    w = jnp.asarray(np.random.default_rng(1).normal(size=(3, 5, 3, 4)), jnp.float32)  # HWIO
    got = patches(x, (3, 5), (1, 2), (1, 2)) @ w.reshape(-1, 4)
    ref = lax.conv_general_dilated(x, w, (1, 2), ((1, 1), (2, 2)), dimension_numbers=("NHWC", "HWIO", "NHWC"))
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_out_frames_and_contract():
    model = make_model("ds2", (30, 12), 6, **SIZES)
    params = model.init(0)
    for t in (1, 8):
        shape = jax.eval_shape(model.apply, params, jnp.ones((2, t, 12), jnp.float32))
        assert shape.shape == (2, model.out_frames(t), 6)
    sink: dict = {}
    x = jnp.concatenate([jnp.ones((1, 30, 12), jnp.float32), 100 * jnp.ones((1, 30, 12), jnp.float32)])
    logits = model.apply(params, x, sink=sink)
    # the clipped ReLU (min(max(x, 0), 20)) of a loud input reaches its ceiling
    assert float(sink["conv1_in"][1].max()) == RELU_CLIP and float(sink["conv1_in"].min()) == 0.0
    assert model.out_frames(8) == 4 and model.out_frames(7) == 4  # (n + 2*1 - 3) // 2 + 1, then stride 1
    np.testing.assert_array_equal(model.out_frames(jnp.array([7, 8, 30])), [4, 4, 15])
    assert set(sink) == {"conv0_in", "conv1_in", "gru0_in", "out_in"}
    assert sink["conv0_in"].shape == (2, 15, 6, 15) and sink["gru0_in"].shape == (2, 15, 3 * 4)
    # a tap is added at its GEMM input
    taps = {"out_in": jnp.ones_like(sink["out_in"])}
    shifted = model.apply(params, x, taps=taps)
    np.testing.assert_allclose(shifted - logits, jnp.broadcast_to(params["out"]["w"].sum(0), logits.shape),
                               rtol=1e-4, atol=1e-4)


def _gru_reference(p, x, n):
    """numpy: PyTorch's GRU both ways over the first ``n`` frames of one utterance, summed."""
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    hidden = p["fwd_wh"].shape[0]
    xs = x @ np.asarray(p["wx"]) + np.asarray(p["bx"])
    out = np.zeros((n, hidden))
    for d, order in (("fwd", range(n)), ("bwd", reversed(range(n)))):
        h = np.zeros(hidden)
        xd = xs[:, :3 * hidden] if d == "fwd" else xs[:, 3 * hidden:]
        for t in order:
            xr, xz, xn = np.split(xd[t], 3)
            hr, hz, hn = np.split(h @ np.asarray(p[f"{d}_wh"]) + np.asarray(p[f"{d}_bh"]), 3)
            r, z = sig(xr + hr), sig(xz + hz)
            h = (1 - z) * np.tanh(xn + r * hn) + z * h
            out[t] += h
    return out


def test_bidirectional_gru_and_padding(data):
    """The GRU output equals a numpy GRU run on each utterance's own frames (both directions,
    summed), and no output frame depends on the padding after the utterance."""
    model = make_model("ds2", data.feature_shape, data.num_classes, **SIZES)
    params = model.init(0)
    x, n = jnp.asarray(data.x_train[:3]), jnp.asarray(data.x_len_train[:3])

    @jax.jit
    def run(p, inp):
        sink: dict = {}
        return model.apply(p, inp, sink=sink), sink

    logits, sink = run(params, (x, n))
    frames = np.asarray(model.out_frames(n))
    for i in range(3):
        ref = _gru_reference(params["gru0"], np.asarray(sink["gru0_in"][i, : frames[i]], np.float64), frames[i])
        np.testing.assert_allclose(sink["out_in"][i, : frames[i]], ref, rtol=1e-4, atol=1e-5)
    more = jnp.pad(x, ((0, 0), (0, 10), (0, 0)))
    longer, _ = run(params, (more, n))
    for i in range(3):
        np.testing.assert_allclose(longer[i, : frames[i]], logits[i, : frames[i]], rtol=1e-5, atol=1e-6)


def test_bad_sizes_are_named():
    with pytest.raises(ValueError, match=r"kernels\[1\] = \[3, 0\]"):
        make_model("ds2", (30, 12), 6, **{**SIZES, "kernels": [[3, 3], [3, 0]]})
    with pytest.raises(ValueError, match=r"strides = \[2\]: allowed: one per convolution layer"):
        make_model("ds2", (30, 12), 6, **{**SIZES, "strides": [2]})
    with pytest.raises(ValueError, match="hidden = 0"):
        make_model("ds2", (30, 12), 6, **{**SIZES, "hidden": 0})


def test_shipped_workload_loads():
    w = load_workload("speech_ds2")
    assert (w.dataset, w.model) == ("speech", "ds2")
    model = make_model(w.model, (100, 40), 29, **w.sizes)
    assert model.out_frames(100) == 50
    gpu = load_workload("speech_ds2", "gpu")
    assert (gpu.dataset, gpu.sizes["hidden"], gpu.sizes["layers"], gpu.batch) == ("speech_large", 1760, 7, 32)
    big = make_model(gpu.model, (198, 40), 29, **gpu.sizes)  # builds (no weights drawn)
    assert big.out_frames(198) == 99 and big.sizes["time_stride"] == 2


def test_lower_is_better_everywhere():
    from asicsim._src.report.tables import lower_is_better as report_lower

    for m in ("test_cer", "test_wer", "val_loss"):
        assert tasks.lower_is_better(m) and report_lower(m)
    assert not tasks.lower_is_better("test_accuracy")
    worse = post_training.InferResult("w", "r", "test_cer", [0.10], [0.25], {}, "")
    assert worse.drop == pytest.approx(0.15)  # positive: the quantized model is worse
    assert post_training.InferResult("w", "r", "test_accuracy", [0.9], [0.8], {}, "").drop == pytest.approx(0.1)


@pytest.mark.slow  # ~10-20 s: the default run stays under 10 minutes on 2 cores
def test_train_and_infer_on_synthetic_speech(synthetic, monkeypatch):
    r = training.train(synthetic, "fp32", seeds=(0,), keep_params=True)
    run = r.runs[0]
    assert r.metric == "test_cer" and not r.diverged
    assert set(run.curves) == {"step", "train_loss", "test_loss", "test_accuracy", "test_cer", "test_wer"}
    assert run.final == run.curves["test_cer"][-1] < 0.5  # chance (an empty transcript) is 1.0
    assert run.curves["test_wer"][-1] < 1.0 and run.curves["test_loss"][-1] < run.curves["test_loss"][0]
    assert {"act:gru0_in", "grad:out_in", "wgrad:gru0/wx"} <= set(run.numerics)
    # evaluation in chunks (the last padded with empty utterances) equals one pass
    _, model = training.build(synthetic)
    forward = jax.jit(lambda x: model.apply(run.params, x))
    whole = tasks.evaluate("ctc", forward, training.load_dataset("speech"), synthetic, model)
    monkeypatch.setattr(tasks, "CTC_EVAL_CHUNK", 20)
    chunked = tasks.evaluate("ctc", forward, training.load_dataset("speech"), synthetic, model)
    assert chunked["test_cer"] == whole["test_cer"] == pytest.approx(run.final, abs=0.02)
    assert chunked["test_loss"] == pytest.approx(whole["test_loss"], rel=1e-5)
    q = post_training.infer(synthetic, "int8_ptq_tensor", seeds=(0,), params=[run.params], stats=False)
    assert q.metric == "test_cer" and q.fp32 == pytest.approx([run.final])
    assert q.quantized[0] < 0.6 and q.drop == pytest.approx(q.quantized[0] - q.fp32[0])


def _gemm_rows(trace):
    return trace[trace["kind"] != "elementwise"] if "kind" in trace else trace


@pytest.mark.slow  # ~10-20 s: the default run stays under 10 minutes on 2 cores
def test_fp16_mixed_step_and_no_gemm_in_the_loss(data):
    model = make_model("ds2", data.feature_shape, data.num_classes, **SIZES)
    params = model.init(0)
    batch = tasks.batch_fn("ctc", 0)(tasks.train_arrays(data), jnp.arange(8))
    loss = tasks.loss_fn(model, "ctc")
    init, step = make_train_step(loss, "fp16_mixed", training.make_optimizer("adam", 1e-3))
    _, m = jax.jit(step)(init(params, 0), batch)
    assert np.isfinite(float(m["loss"])) and not bool(m["skipped"])
    x = tasks.model_input("ctc", batch)
    model_rows = _gemm_rows(op_trace(model.apply, "fp16_mixed", params, x))
    loss_rows = _gemm_rows(op_trace(loss, "fp16_mixed", params, batch))
    # 2 convolutions, the GRU input projection, its 2 recurrent GEMMs (one row each, counted per
    # step), the head: the loss adds none
    assert len(model_rows) == 6 and len(loss_rows) == len(model_rows)

    def optax_loss(p, b):  # the same loss through optax: its einsum is one more GEMM
        xb, xl, y = b
        logits = model.apply(p, (xb, xl))
        pad = (jnp.arange(logits.shape[1])[None] >= model.out_frames(xl)[:, None]).astype(jnp.float32)
        return jnp.mean(optax.ctc_loss(logits, pad, jnp.maximum(y, 0), (y < 0).astype(jnp.float32)))

    assert len(_gemm_rows(op_trace(optax_loss, "fp16_mixed", params, batch))) > len(loss_rows)
    np.testing.assert_allclose(optax_loss(params, batch), loss(params, batch), rtol=1e-5)
    assert float(jnp.mean(ctc_loss(model.apply(params, x), model.out_frames(x[1]), batch[2]))) > 0


def test_workload_trace_of_speech(synthetic):
    from asicsim._src.workloads.pricing import workload_trace

    t = workload_trace(synthetic, "fp16_mixed", batch=4)
    assert {"forward", "grad-input", "grad-weight", "optimizer"} <= set(t["role"])
    inf = workload_trace(synthetic, "fp32", batch=4, training=False)
    assert set(inf["role"]) == {"forward"} and (inf["macs"] > 0).any()


# The workload's fp32 training (600 steps, seed 0, CER < 0.25) is held by the speech reproduction
# (tests/repro/test_speech_reproduction.py), which trains it beside fp16; a second run here cost
# four minutes of CI.


def test_cli_prints_error_rates(monkeypatch, capsys):
    import argparse

    from asicsim._src.workloads import speech_corpus_stats
    from asicsim._src.workloads.cli import run_train

    curves = {"step": [10], "train_loss": [2.0], "test_loss": [1.5], "test_accuracy": [None],
              "test_cer": [0.125], "test_wer": [0.5]}
    run = training.RunResult(seed=0, metric="test_cer", final=0.125, test_accuracy=None, test_loss=1.5,
                             curves=curves)
    fake = training.TrainResult("speech_ds2", "fp32", {"scale": "small", "model": "ds2", "dataset": "speech", "optimizer": "adam",
                                                        "lr": 1e-3, "batch": 32, "steps": 10}, [run])
    monkeypatch.setattr(training, "train", lambda *a, **k: fake)
    # the baselines beside the CER (tested on their own in test_speech_corpus_open.py)
    monkeypatch.setattr(speech_corpus_stats, "baseline_line", lambda name: f"baselines of {name}")
    args = argparse.Namespace(workload="speech_ds2", recipe="fp32", seeds=1, optimizer=None, lr=None, steps=None,
                              batch=None, eval_every=None, json=False)
    assert run_train(args) == 0
    out = capsys.readouterr().out
    assert "test_cer: 0.1250" in out and "baselines of speech" in out
    header, row = (line.split() for line in out.splitlines() if line.strip().startswith(("step", "10 ")))
    assert header[-2:] == ["test_cer", "test_wer"] and row[-2:] == ["0.1250", "0.5000"]


def test_ctc_needs_a_speech_model_and_a_known_task(data):
    gru = make_model("gru", data.feature_shape, data.num_classes, hidden=4)
    with pytest.raises(ValueError, match="model 'gru' gives no output frame count"):
        tasks.loss_fn(gru, "ctc")
    with pytest.raises(ValueError, match="unknown task 'seq2seq'"):
        tasks.loss_fn(gru, "seq2seq")
