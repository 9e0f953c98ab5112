"""Plain-JAX models: a params pytree (nested dicts of float32 arrays) and a pure apply function.

=============== ===============================================================================
``logreg``      one linear layer
``mlp``         linear layers with ReLU; ``residual=True`` adds each same-width hidden layer to its
                input (MNIST-1D's ``MLPBase``: h = relu(W1 x); h = h + relu(W2 h); W3 h)
``cnn1d``       1-D convolutions as im2col + matmul (strided slices, then one GEMM per layer:
                XLA:CPU convolutions inside ``lax.scan`` are 4-5x slower), ReLU, a linear head;
                defaults are MNIST-1D's ``ConvBase`` (25 channels, kernels 5/3/3, stride 2, pad 1)
``cnn2d``       the same in two dimensions (for images)
``gru``/``lstm``  recurrent nets, ``lax.scan`` over time; the input projection of every step is one
                GEMM outside the scan, the recurrent GEMM runs per step; optionally bidirectional;
                the head reads every step's hidden state (``readout="all"``, MNIST-1D's
                ``GRUBase``) or the last one
``transformer`` a causal character-level transformer (pre-LayerNorm, learned positions)
=============== ===============================================================================

Initialization follows PyTorch's defaults (uniform in +-1/sqrt(fan_in)), as the MNIST-1D paper's
models used; ``init(key)`` draws on the host from a numpy generator seeded by the key. ``apply(params, x, taps=None, sink=None)``: ``sink`` (a dict) receives the named
activations that enter GEMMs; ``taps`` (a dict of arrays of those shapes) is added at the same
points, so the gradient with respect to zero taps is the activation gradient there.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from asicsim._src.emulate.attention import attention_role
from asicsim._src.workloads.model_parts import (
    Model,
    dense,
    dense_init,
    host_rng,
    lead,
    tap,
    uniform_init,
)
from asicsim._src.workloads.speech_model import ds2
from asicsim._src.workloads.workload_checks import MODELS

# --- logistic regression and MLP ---------------------------------------------------------------

def logreg(input_shape, num_classes) -> Model:
    n_in = int(np.prod(input_shape))

    def init(key):
        return {"out": dense_init(host_rng(key), n_in, num_classes)}

    def apply(params, x, taps=None, sink=None):
        h = tap(x.reshape(x.shape[0], -1), "input", taps, sink)
        return dense(params["out"], h)

    return Model("logreg", init, apply, {"inputs": n_in, "classes": num_classes})


def mlp(input_shape, num_classes, hidden=(100, 100), residual=False) -> Model:
    n_in = int(np.prod(input_shape))
    widths = [n_in, *hidden]

    def init(key):
        rng = host_rng(key)
        p = {f"fc{i}": dense_init(rng, widths[i], widths[i + 1]) for i in range(len(hidden))}
        p["out"] = dense_init(rng, widths[-1], num_classes)
        return p

    def apply(params, x, taps=None, sink=None):
        h = x.reshape(x.shape[0], -1)
        for i in range(len(hidden)):
            z = tap(h, "input" if i == 0 else f"fc{i}_in", taps, sink)
            y = jax.nn.relu(dense(params[f"fc{i}"], z))
            h = h + y if residual and i > 0 and widths[i] == widths[i + 1] else y
        return dense(params["out"], tap(h, "out_in", taps, sink))

    return Model("mlp", init, apply, {"inputs": n_in, "hidden": list(hidden), "residual": residual,
                                      "classes": num_classes})


# --- convolutions as im2col + matmul -----------------------------------------------------------

def _out_len(n, k, stride, pad):
    return (n + 2 * pad - k) // stride + 1


def im2col_1d(x, kernel: int, stride: int, pad: int):
    """(B, L, C) -> (B, L_out, kernel * C) patches by strided slices (no convolution primitive)."""
    xp = jnp.pad(x, ((0, 0), (pad, pad), (0, 0)))
    n = _out_len(x.shape[1], kernel, stride, pad)
    cols = [xp[:, k: k + stride * (n - 1) + 1: stride, :] for k in range(kernel)]
    return jnp.concatenate(cols, axis=-1)


def im2col_2d(x, kernel: int, stride: int, pad: int):
    """(B, H, W, C) -> (B, H_out, W_out, kernel^2 * C) patches by strided slices."""
    xp = jnp.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    nh, nw = _out_len(x.shape[1], kernel, stride, pad), _out_len(x.shape[2], kernel, stride, pad)
    cols = [xp[:, i: i + stride * (nh - 1) + 1: stride, j: j + stride * (nw - 1) + 1: stride, :]
            for i in range(kernel) for j in range(kernel)]
    return jnp.concatenate(cols, axis=-1)


def _cnn(dims: int, input_shape, num_classes, channels, kernels, strides, pads) -> Model:
    shape = tuple(input_shape) if len(input_shape) == dims + 1 else (*input_shape, 1)
    n_layers = len(channels)
    c_in = [shape[-1], *channels[:-1]]
    spatial = list(shape[:-1])
    for i, (k, s, p) in enumerate(zip(kernels, strides, pads, strict=True)):
        spatial = [_out_len(n, k, s, p) for n in spatial]
        if min(spatial) < 1:
            raise ValueError(f"cnn{dims}d model: layer {i} has no output: its input is too small for kernel "
                             f"{k}, stride {s}, padding {p} (the model's input is {list(shape[:-1])})")
    flat = int(np.prod(spatial)) * channels[-1]
    im2col = im2col_1d if dims == 1 else im2col_2d

    def init(key):
        rng = host_rng(key)
        p = {f"conv{i}": dense_init(rng, kernels[i] ** dims * c_in[i], channels[i])
             for i in range(n_layers)}
        p["out"] = dense_init(rng, flat, num_classes)
        return p

    def apply(params, x, taps=None, sink=None):
        h = x.reshape(x.shape[0], *shape)
        for i in range(n_layers):
            cols = tap(im2col(h, kernels[i], strides[i], pads[i]), f"conv{i}_in", taps, sink)
            h = jax.nn.relu(dense(params[f"conv{i}"], cols))
        return dense(params["out"], tap(h.reshape(h.shape[0], -1), "out_in", taps, sink))

    sizes = {"input": list(shape), "channels": list(channels), "kernels": list(kernels),
             "strides": list(strides), "pads": list(pads), "flat": flat, "classes": num_classes}
    return Model(f"cnn{dims}d", init, apply, sizes)


def cnn1d(input_shape, num_classes, channels=(25, 25, 25), kernels=(5, 3, 3), strides=(2, 2, 2),
          pads=(1, 1, 1)) -> Model:
    return _cnn(1, input_shape, num_classes, channels, kernels, strides, pads)


def cnn2d(input_shape, num_classes, channels=(16, 32), kernels=(3, 3), strides=(2, 2),
          pads=(1, 1)) -> Model:
    return _cnn(2, input_shape, num_classes, channels, kernels, strides, pads)


# --- recurrent nets ----------------------------------------------------------------------------

def _rnn(cell: str, input_shape, num_classes, hidden=6, bidirectional=True, readout="all") -> Model:
    steps, feats = (input_shape[0], 1) if len(input_shape) == 1 else tuple(input_shape)
    gates = {"gru": 3, "lstm": 4}[cell]
    dirs = ("fwd", "bwd") if bidirectional else ("fwd",)
    flat = hidden * len(dirs) * (steps if readout == "all" else 1)

    def init(key):
        rng = host_rng(key)
        p = {}
        for d in dirs:
            p[d] = {"wx": uniform_init(rng, (feats, gates * hidden), hidden),
                    "wh": uniform_init(rng, (hidden, gates * hidden), hidden),
                    "bx": uniform_init(rng, (gates * hidden,), hidden),
                    "bh": uniform_init(rng, (gates * hidden,), hidden)}
        p["out"] = dense_init(rng, flat, num_classes)
        return p

    def run(p, x, reverse):
        batch = x.shape[0]
        xs = jnp.swapaxes(x, 0, 1) @ p["wx"]  # (T, B, gates*H): one GEMM for all steps
        xs = xs + lead(p["bx"], 3)

        def step(carry, xg):
            h, c = carry
            hg = h @ p["wh"] + lead(p["bh"], 2)
            if cell == "gru":  # PyTorch's GRU: n = tanh(x_n + r * (W_hn h + b_hn))
                xr, xz, xn = jnp.split(xg, 3, axis=-1)
                hr, hz, hn = jnp.split(hg, 3, axis=-1)
                r, z = jax.nn.sigmoid(xr + hr), jax.nn.sigmoid(xz + hz)
                n = jnp.tanh(xn + r * hn)
                h = (1 - z) * n + z * h
            else:
                i, f, g, o = jnp.split(xg + hg, 4, axis=-1)
                c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
                h = jax.nn.sigmoid(o) * jnp.tanh(c)
            return (h, c), h

        zeros = jnp.zeros((batch, hidden), x.dtype)
        _, hs = lax.scan(step, (zeros, zeros), xs, reverse=reverse)
        return jnp.swapaxes(hs, 0, 1)  # (B, T, H), hs[t] aligned with input step t

    def apply(params, x, taps=None, sink=None):
        x = tap(x.reshape(x.shape[0], steps, feats), "input", taps, sink)
        outs = [run(params[d], x, reverse=(d == "bwd")) for d in dirs]
        hs = jnp.concatenate(outs, axis=-1)  # (B, T, dirs*H)
        hs = tap(hs, "hidden", taps, sink)
        if readout == "all":
            feat = hs.reshape(hs.shape[0], -1)
        else:  # last step of each direction
            feat = jnp.concatenate([o[:, -1] if d == "fwd" else o[:, 0] for d, o in zip(dirs, outs, strict=True)], -1)
        return dense(params["out"], feat)

    sizes = {"steps": steps, "features": feats, "hidden": hidden, "bidirectional": bidirectional,
             "readout": readout, "classes": num_classes}
    return Model(cell, init, apply, sizes)


def gru(input_shape, num_classes, hidden=6, bidirectional=True, readout="all") -> Model:
    return _rnn("gru", input_shape, num_classes, hidden, bidirectional, readout)


def lstm(input_shape, num_classes, hidden=6, bidirectional=True, readout="all") -> Model:
    return _rnn("lstm", input_shape, num_classes, hidden, bidirectional, readout)


# --- character-level transformer ---------------------------------------------------------------

def _layer_norm(p, x, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) * lax.rsqrt(var + eps) * lead(p["g"], x.ndim) + lead(p["b"], x.ndim)


def attend(q, k, v, mask):
    """Causal softmax attention: q (B, Tq, H, Dh), k and v (B, Tk, H, Dh), ``mask`` (broadcast
    to (B, H, Tq, Tk)) True where a query may see a key; (B, Tq, H, Dh). Its four GEMM operands
    are marked as the attention roles (:mod:`asicsim._src.emulate.attention`)."""
    q, k = attention_role(q, "query"), attention_role(k, "key")
    s = jnp.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(q.shape[-1])
    a = jax.nn.softmax(jnp.where(mask, s, -1e9), axis=-1)
    return jnp.einsum("bhqk,bkhd->bqhd", attention_role(a, "probabilities"), attention_role(v, "value"))


def transformer_block(p, h, heads: int, attention, name: str, taps=None, sink=None):
    """One pre-LayerNorm block on h (B, T, d_model); ``attention(q, k, v)`` -> (B, T, H, Dh) (the
    full forward's causal :func:`attend`, or a KV cache's, :mod:`asicsim._src.workloads.lm_generate`)."""
    b, t, d = h.shape
    z = tap(_layer_norm(p["ln1"], h), f"{name}_qkv_in", taps, sink)
    q, k, v = jnp.split(dense(p["qkv"], z).reshape(b, t, 3 * heads, d // heads), 3, axis=2)
    o = attention(q, k, v).reshape(b, t, d)
    h = h + dense(p["proj"], tap(o, f"{name}_proj_in", taps, sink))
    z = tap(_layer_norm(p["ln2"], h), f"{name}_fc_in", taps, sink)
    m = tap(jax.nn.gelu(dense(p["fc"], z)), f"{name}_fc_out_in", taps, sink)
    return h + dense(p["fc_out"], m)


def transformer(vocab: int, context=64, d_model=64, heads=4, layers=2, mlp_ratio=4) -> Model:
    """Causal LM: tokens (B, T) int -> logits (B, T, vocab); embeddings are gathers, not GEMMs."""
    if d_model % heads:
        raise ValueError(f"d_model must be a multiple of heads; got {d_model=}, {heads=}")

    def init(key):
        rng = host_rng(key)

        def normal(shape):
            return jnp.asarray(0.02 * rng.standard_normal(shape), jnp.float32)

        def norm():
            return {"g": jnp.ones(d_model, jnp.float32), "b": jnp.zeros(d_model, jnp.float32)}

        p = {"embed": normal((vocab, d_model)), "pos": normal((context, d_model)), "ln_f": norm(),
             "out": dense_init(rng, d_model, vocab)}
        for i in range(layers):
            p[f"block{i}"] = {
                "ln1": norm(), "qkv": dense_init(rng, d_model, 3 * d_model),
                "proj": dense_init(rng, d_model, d_model), "ln2": norm(),
                "fc": dense_init(rng, d_model, mlp_ratio * d_model),
                "fc_out": dense_init(rng, mlp_ratio * d_model, d_model)}
        return p

    def apply(params, x, taps=None, sink=None):
        t = x.shape[1]
        h = params["embed"][x] + params["pos"][None, :t]
        mask = jnp.tril(jnp.ones((1, 1, t, t), bool))
        for i in range(layers):
            h = transformer_block(params[f"block{i}"], h, heads, lambda q, k, v: attend(q, k, v, mask),
                                  f"block{i}", taps, sink)
        return dense(params["out"], tap(_layer_norm(params["ln_f"], h), "out_in", taps, sink))

    sizes = {"vocab": vocab, "context": context, "d_model": d_model, "heads": heads,
             "layers": layers, "mlp_ratio": mlp_ratio}
    return Model("transformer", init, apply, sizes)


def make_model(kind: str, input_shape, num_classes: int, **sizes) -> Model:
    """Build model ``kind`` (one of :data:`MODELS`) for inputs of ``input_shape`` (per example)."""
    if kind == "transformer":
        return transformer(num_classes, **sizes)
    if kind == "ds2":  # speech: asicsim._src.workloads.speech_model
        return ds2(tuple(input_shape), num_classes, **sizes)
    builders = {"logreg": logreg, "mlp": mlp, "cnn1d": cnn1d, "cnn2d": cnn2d, "gru": gru,
                "lstm": lstm}
    if kind not in builders:
        raise ValueError(f"unknown model {kind!r}; models are {list(MODELS)}")
    return builders[kind](tuple(input_shape), num_classes, **sizes)
