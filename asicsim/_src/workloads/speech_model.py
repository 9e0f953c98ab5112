"""A Deep Speech 2-shaped acoustic model (Amodei et al. 2016, arXiv:1512.02595, section 3).

Log-mel frames (B, T, F) pass through:

1. 2-D convolutions over (time, frequency), each an im2col + one GEMM (as
   :mod:`asicsim._src.workloads.models`' ``cnn2d``: XLA:CPU convolutions are slow and the emulator sees
   every GEMM the same way), "same" zero padding (``kernel // 2``), with the clipped ReLU the paper
   uses, ``min(max(x, 0), 20)`` (section 3.1, eq. 1). Kernels and strides are given per layer as
   [time, frequency]; the paper's Table 4 (written frequency x time) has 3-layer 2-D front ends of
   32, 32, 96 channels, kernels 41x11, 21x11, 21x11 and strides 2x2, 2x1, 2x1: here kernels
   [[11, 41], [11, 21], [11, 21]] and strides [[2, 2], [1, 2], [1, 2]], striding 2 in time once
   (section 3.5: a larger time stride hurts character outputs). A kernel or stride is an integer
   (both axes) or a [time, frequency] pair, since the paper's kernels are not square
   (``models.im2col_2d`` takes square ones only; :func:`patches` generalises it).
2. Bidirectional GRU layers (section 3.2; PyTorch's GRU cell as ``models.gru``): the input
   projection of both directions for every frame is one GEMM, the recurrent GEMM runs per step in
   ``lax.scan``; the two directions' states are summed (section 3.2: "the forward and backward
   computations ... are summed", keeping the width at ``hidden``).
3. A linear layer to the characters (the CTC blank included).

Options (all off by default: the model is then exactly the one above):

- ``batch_norm=True``: sequence-wise batch normalisation of each recurrent layer's input
  projection ``W h^{l-1}_t`` (section 3.2; :func:`.speech_layers.seq_batch_norm`: statistics over
  the batch and the valid frames, running averages for inference), which replaces that
  projection's bias (beta plays its part).
- ``bidirectional=False``: forward GRUs only, the unidirectional deployment model of section
  3.5; ``lookahead=tau`` (>= 1) adds the row convolution over the current and ``tau`` future
  frames above the last recurrent layer (:func:`.speech_layers.row_conv`).

Padding: an utterance occupies the first ``x_len`` frames. Every convolution output frame past
the utterance's output frame count (:func:`out_frames`) is set to zero, and neither GRU direction
updates its state there, so a frame's output does not depend on how much padding follows the
utterance (the backward direction starts at the utterance's last frame, not the batch's).

``apply(params, x, taps=None, sink=None, stats=None)`` takes ``x`` as the frames (all frames
valid) or as a pair ``(frames, x_len)``; ``taps``/``sink`` as ``models``: at the GEMM inputs
``conv{i}_in``, ``gru{i}_in`` and ``out_in``. With batch norm, ``params`` holding the running
statistics (:func:`.speech_layers.with_running`) normalise by them (inference), otherwise by the
batch's own, which ``stats`` (a dict) receives as ``{"gru{i}": (mean, var)}`` (training).
``model.running_init`` is the running statistics' starting value (None without batch norm).
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from asicsim._src.workloads import speech_layers as sl
from asicsim._src.workloads.model_parts import (
    Model,
    dense,
    dense_init,
    host_rng,
    lead,
    tap,
    uniform_init,
)

#: the clipped ReLU's ceiling (Amodei et al. 2016, eq. 1)
RELU_CLIP = 20.0


@dataclass(frozen=True)
class SpeechModel(Model):
    """A :class:`~asicsim._src.workloads.models.Model` with ``out_frames(n)``: the output frame count
    of an input of ``n`` frames (an int or an integer array), and ``running_init``: the
    running statistics before training (None: no batch norm)."""

    out_frames: Callable | None = None
    running_init: dict | None = None


def _pair(v, what: str) -> tuple[int, int]:
    if isinstance(v, numbers.Integral) and not isinstance(v, bool):
        v = (v, v)
    if (not isinstance(v, list | tuple) or len(v) != 2
            or not all(isinstance(u, numbers.Integral) and not isinstance(u, bool) and u >= 1 for u in v)):
        raise ValueError(f"ds2 model: {what} = {v!r}: allowed: an integer >= 1 or a [time, frequency] "
                         "pair of them")
    return int(v[0]), int(v[1])


def _out_len(n, k, s, p):
    return (n + 2 * p - k) // s + 1


def patches(x, kernel: tuple[int, int], stride: tuple[int, int], pad: tuple[int, int]):
    """(B, H, W, C) -> (B, H_out, W_out, kh * kw * C) by strided slices, ``models.im2col_2d``
    with a separate kernel, stride and padding per axis (the same column order)."""
    (kh, kw), (sh, sw), (ph, pw) = kernel, stride, pad
    xp = jnp.pad(x, ((0, 0), (ph, ph), (pw, pw), (0, 0)))
    nh, nw = _out_len(x.shape[1], kh, sh, ph), _out_len(x.shape[2], kw, sw, pw)
    cols = [xp[:, i: i + sh * (nh - 1) + 1: sh, j: j + sw * (nw - 1) + 1: sw, :]
            for i in range(kh) for j in range(kw)]
    return jnp.concatenate(cols, axis=-1)


def _gru_scan(wh, bh, xs, mask, reverse: bool):
    """One direction: ``xs`` (T, B, 3H) input projections, ``mask`` (T, B, 1) live frames;
    returns (T, B, H). The state stays zero before (in scan order) an utterance's frames start
    and is frozen after they end."""
    hidden = wh.shape[0]

    def step(h, inp):
        xg, live = inp
        hg = h @ wh + lead(bh, 2)
        xr, xz, xn = jnp.split(xg, 3, axis=-1)
        hr, hz, hn = jnp.split(hg, 3, axis=-1)
        r, z = jax.nn.sigmoid(xr + hr), jax.nn.sigmoid(xz + hz)
        n = jnp.tanh(xn + r * hn)  # PyTorch's GRU: n = tanh(x_n + r * (W_hn h + b_hn))
        h = jnp.where(live, (1 - z) * n + z * h, h)
        return h, h

    h0 = jnp.zeros((xs.shape[1], hidden), xs.dtype)
    _, hs = lax.scan(step, h0, (xs, mask), reverse=reverse)
    return hs


def ds2(input_shape, num_classes: int, channels=(32, 32), kernels=((11, 11), (11, 11)),
        strides=((2, 2), (1, 2)), hidden=256, layers=3, bidirectional=True, batch_norm=False,
        lookahead=0) -> SpeechModel:
    """Deep Speech 2-shaped model for frames of ``input_shape`` = (T, F) (only F is fixed)."""
    if len(input_shape) != 2:
        raise ValueError(f"ds2 model: input_shape = {tuple(input_shape)}: allowed: (frames, features)")
    feats = int(input_shape[1])
    if feats < 1:
        raise ValueError(f"ds2 model: input_shape = {tuple(input_shape)}: allowed: at least one feature per frame")
    channels = list(channels)
    if not channels or not all(isinstance(c, numbers.Integral) and c >= 1 for c in channels):
        raise ValueError(f"ds2 model: channels = {channels!r}: allowed: a non-empty list of integers >= 1")
    for what, v in (("kernels", kernels), ("strides", strides)):
        if len(v) != len(channels):
            raise ValueError(f"ds2 model: {what} = {list(v)!r}: allowed: one per convolution layer "
                             f"({len(channels)}, as channels)")
    for what, v in (("hidden", hidden), ("layers", layers)):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1:
            raise ValueError(f"ds2 model: {what} = {v!r}: allowed: an integer >= 1")
    for what, v in (("bidirectional", bidirectional), ("batch_norm", batch_norm)):
        if not isinstance(v, bool):
            raise ValueError(f"ds2 model: {what} = {v!r}: allowed: true or false")
    if isinstance(lookahead, bool) or not isinstance(lookahead, numbers.Integral) or lookahead < 0:
        raise ValueError(f"ds2 model: lookahead = {lookahead!r}: allowed: an integer >= 0 (future frames)")
    if lookahead and bidirectional:
        raise ValueError(f"ds2 model: lookahead = {lookahead}: allowed only with bidirectional = false "
                         "(the row convolution is the unidirectional model's lookahead, section 3.5)")
    dirs = ("fwd", "bwd") if bidirectional else ("fwd",)
    proj = len(dirs) * 3 * hidden  # input projection width of a recurrent layer
    ks = [_pair(k, f"kernels[{i}]") for i, k in enumerate(kernels)]
    ss = [_pair(s, f"strides[{i}]") for i, s in enumerate(strides)]
    ps = [(kt // 2, kf // 2) for kt, kf in ks]
    c_in = [1, *channels[:-1]]
    f_out = feats
    for (_, kf), (_, sf), (_, pf) in zip(ks, ss, ps, strict=True):
        f_out = _out_len(f_out, kf, sf, pf)
    rnn_in = [f_out * channels[-1], *[hidden] * (layers - 1)]

    def out_frames(n):
        for (kt, _), (st, _), (pt, _) in zip(ks, ss, ps, strict=True):
            n = _out_len(n, kt, st, pt)
        return max(n, 0) if isinstance(n, numbers.Integral) else jnp.maximum(n, 0)

    def init(key):
        rng = host_rng(key)
        p = {f"conv{i}": dense_init(rng, ks[i][0] * ks[i][1] * c_in[i], channels[i])
             for i in range(len(channels))}
        for i in range(layers):
            p[f"gru{i}"] = {"wx": uniform_init(rng, (rnn_in[i], proj), hidden),
                            "bx": uniform_init(rng, (proj,), hidden),
                            **{f"{d}_{w}": uniform_init(rng, shape, hidden) for d in dirs
                               for w, shape in (("wh", (hidden, 3 * hidden)), ("bh", (3 * hidden,)))}}
            if batch_norm:  # beta replaces the projection's bias
                del p[f"gru{i}"]["bx"]
                p[f"gru{i}"]["bn"] = sl.bn_init(proj)
        if lookahead:  # PyTorch's depthwise Conv1d default: uniform +-1/sqrt(kernel)
            p["rowconv"] = uniform_init(rng, (lookahead + 1, hidden), lookahead + 1)
        p["out"] = dense_init(rng, hidden, num_classes)
        return p

    def apply(params, x, taps=None, sink=None, stats=None):
        frames, lengths = x if isinstance(x, tuple | list) else (x, None)
        b, t = frames.shape[:2]
        lengths = jnp.full((b,), t, jnp.int32) if lengths is None else jnp.asarray(lengths, jnp.int32)
        h = frames.reshape(b, t, feats, 1)
        n = lengths
        for i in range(len(channels)):
            cols = tap(patches(h, ks[i], ss[i], ps[i]), f"conv{i}_in", taps, sink)
            h = jnp.clip(dense(params[f"conv{i}"], cols), 0.0, RELU_CLIP)
            n = _out_len(n, ks[i][0], ss[i][0], ps[i][0])
            h = h * (jnp.arange(h.shape[1])[None, :] < n[:, None]).astype(h.dtype)[:, :, None, None]
        h = h.reshape(b, h.shape[1], -1)
        mask = (jnp.arange(h.shape[1])[:, None] < n[None, :])[:, :, None]  # (T', B, 1)
        running = params.get(sl.RUNNING)
        for i in range(layers):
            p = params[f"gru{i}"]
            z = tap(h, f"gru{i}_in", taps, sink)
            xs = jnp.swapaxes(z, 0, 1) @ p["wx"]  # (T', B, 6H): one GEMM
            if batch_norm:  # B(W h^{l-1}_t), section 3.2
                xs, batch = sl.seq_batch_norm(xs, mask, p["bn"], None if running is None else running[f"gru{i}"],
                                              name=f"gru{i}_bn")
                if stats is not None:
                    stats[f"gru{i}"] = batch
            else:
                xs = xs + lead(p["bx"], 3)
            if bidirectional:
                xf, xb = jnp.split(xs, 2, axis=-1)
                hf = _gru_scan(p["fwd_wh"], p["fwd_bh"], xf, mask, reverse=False)
                hb = _gru_scan(p["bwd_wh"], p["bwd_bh"], xb, mask, reverse=True)
                hs = hf + hb  # the directions summed (section 3.2)
            else:
                hs = _gru_scan(p["fwd_wh"], p["fwd_bh"], xs, mask, reverse=False)
            h = jnp.swapaxes(hs, 0, 1)
        if lookahead:
            h = jnp.swapaxes(sl.row_conv(jnp.swapaxes(h, 0, 1), params["rowconv"], mask), 0, 1)
        return dense(params["out"], tap(h, "out_in", taps, sink))

    sizes = {"features": feats, "channels": channels, "kernels": [list(k) for k in ks],
             "strides": [list(s) for s in ss], "pads": [list(p) for p in ps], "hidden": int(hidden),
             "layers": int(layers), "classes": num_classes, "time_stride": int(np.prod([s[0] for s in ss])),
             "bidirectional": bidirectional, "batch_norm": batch_norm, "lookahead": int(lookahead)}
    first = {f"gru{i}": sl.running_init(proj) for i in range(layers)} if batch_norm else None
    return SpeechModel("ds2", init, apply, sizes, out_frames=out_frames, running_init=first)
