"""The KV cache of the character transformer's generation (issue 34 item 4): quantized once when
written (codes equal one quantization of the whole K/V: ml_dtypes' float8_e4m3fn cast for fp8,
an exact integer rounding by ``fractions.Fraction`` for int8), per-token or per-head scales, and
with an unquantized cache the same greedy tokens as the model's full forward without a cache."""

from __future__ import annotations

from fractions import Fraction

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from asicsim._src.workloads import kv_cache
from asicsim._src.workloads.kv_cache import KVCacheSpec
from asicsim._src.workloads.lm_generate import feed, greedy, teacher_forced_nll
from asicsim._src.workloads.models import transformer

MAX = {"fp8_e4m3": np.float32(448), "int8": np.float32(127)}


@pytest.fixture(scope="module")
def lm():
    model = transformer(31, context=16, d_model=16, heads=4, layers=2)
    params = model.init(0)
    text = np.random.default_rng(2).integers(0, 31, (3, 16)).astype(np.int32)
    return model, params, text


def _scale(amax, fmt):
    """numpy's IEEE float32 quotient amax / max (1 where amax is 0)."""
    amax = np.asarray(amax, np.float32)
    return np.where(amax == 0, np.float32(1), amax / MAX[fmt]).astype(np.float32)


def _codes(x, scale, fmt):
    """The oracle's codes of float32 x: fp8 by ml_dtypes' cast of the IEEE quotient x / scale
    (round to nearest even; within the amax, never past 448); int8 by exact rounding, half to
    even, of the same quotient as a Fraction, saturated to [-128, 127]."""
    y = (np.asarray(x, np.float32) / np.asarray(scale, np.float32)).astype(np.float32)
    if fmt == "fp8_e4m3":  # saturating: beyond +-448 (a later token over a per-head scale) is 448
        return np.clip(y, -448, 448).astype(ml_dtypes.float8_e4m3fn).astype(np.float32)
    ints = [min(127, max(-128, round(Fraction(float(v))))) for v in y.ravel()]  # round(): half to even
    return np.asarray(ints, np.float32).reshape(y.shape)


@pytest.mark.parametrize("fmt", ["fp8_e4m3", "int8"])
@pytest.mark.parametrize("gran", ["token", "head"])
def test_stored_codes_are_the_whole_kv_quantized_once(lm, fmt, gran):
    """After prefill and 10 one-token steps, every stored code of layer 0 (whose K and V depend
    only on the tokens) equals the oracle's quantization of the whole K and V, which an fp32
    cache holds as they were written: nothing written earlier was rounded again."""
    model, params, text = lm
    spec = KVCacheSpec(fmt, gran)
    prompt = 6
    _, raw = feed(params, model.sizes, text, prompt, KVCacheSpec("fp32"))
    _, cache = feed(params, model.sizes, text, prompt, spec)
    for name in ("k", "v"):
        x = np.asarray(raw["block0"][name])  # (B, T, H, Dh)
        over = x[:, :prompt] if gran == "head" else x
        scale = _scale(np.abs(over).max(axis=(1, 3) if gran == "head" else 3, keepdims=True), fmt)
        stored = cache["block0"]
        np.testing.assert_array_equal(stored[f"{name}_scale"], np.broadcast_to(scale, stored[f"{name}_scale"].shape))
        np.testing.assert_array_equal(np.asarray(stored[name]).astype(np.float32), _codes(x, scale, fmt))
        assert stored[name].dtype == kv_cache.FORMATS[fmt]
        k, v = kv_cache.read(spec, stored)
        np.testing.assert_array_equal(k if name == "k" else v, _codes(x, scale, fmt) * scale)


def test_head_scales_are_computed_per_head():
    """Heads of ranges 1, 100 and 0.01: each gets amax(prompt positions of that head) / max, and
    a later token above it saturates (fp8 to 448, int8 to 127) instead of changing the scale."""
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((2, 5, 3, 4)) * np.float32([1, 100, 0.01])[None, None, :, None]).astype(np.float32)
    for fmt in ("fp8_e4m3", "int8"):
        spec = KVCacheSpec(fmt, "head")
        layer = kv_cache.empty_cache(spec, 1, 2, 8, 3, 4)["block0"]
        write = jax.jit(kv_cache.write, static_argnums=0)
        layer = write(spec, layer, x, x, 0)
        want = _scale(np.abs(x).max(axis=(1, 3), keepdims=True), fmt)  # (2, 1, 3, 1)
        np.testing.assert_array_equal(layer["k_scale"], want)
        assert len({float(s) for s in want[0, 0, :, 0]}) == 3
        codes = np.asarray(layer["k"][:, :5]).astype(np.float32)
        assert np.array_equal(np.abs(codes).max(axis=(1, 3)), np.full((2, 3), MAX[fmt]))  # each head's range used
        big = np.full((2, 1, 3, 4), 1e4, np.float32)
        later = write(spec, layer, big, big, 5)
        np.testing.assert_array_equal(later["k_scale"], want)
        np.testing.assert_array_equal(np.asarray(later["k"][:, 5]).astype(np.float32), np.full((2, 3, 4), MAX[fmt]))


def test_unquantized_cache_generates_the_full_forwards_greedy_tokens(lm):
    model, params, text = lm
    prompt, steps = text[:, :5], 7
    toks, _ = greedy(params, model.sizes, prompt, steps)
    seq = jnp.asarray(prompt)
    for _ in range(steps):  # no cache: the whole sequence through the model each step
        nxt = jnp.argmax(model.apply(params, seq)[:, -1], axis=-1).astype(jnp.int32)
        seq = jnp.concatenate([seq, nxt[:, None]], axis=1)
    np.testing.assert_array_equal(toks, seq[:, 5:])
    nll = teacher_forced_nll(params, model.sizes, text, 5)
    logp = jax.nn.log_softmax(model.apply(params, jnp.asarray(text))[:, 4:-1], axis=-1)
    ref = -jnp.take_along_axis(logp, jnp.asarray(text[:, 5:, None]), axis=-1)[..., 0]
    np.testing.assert_allclose(nll, ref, rtol=1e-5, atol=1e-6)


@pytest.mark.slow  # three more compilations of the cached forward
def test_quantized_caches_change_the_logits_a_little(lm):
    model, params, text = lm
    base, _ = feed(params, model.sizes, text, 5, KVCacheSpec("fp32"))
    for name in ("bf16", "fp8_e4m3/token", "int8/head"):
        logits, _ = feed(params, model.sizes, text, 5, KVCacheSpec.parse(name))
        diff = float(jnp.abs(logits - base).max())
        assert 0 < diff < 0.5, name


@pytest.mark.parametrize("make, fragment", [
    (lambda: KVCacheSpec("fp8"), "format='fp8'; allowed: ['fp32', 'bf16', 'fp8_e4m3', 'int8']"),
    (lambda: KVCacheSpec("int8", "tensor"), "granularity='tensor'; allowed: ['token', 'head']"),
    (lambda: KVCacheSpec.parse("int8/channel"), "granularity='channel'"),
])
def test_bad_cache_specs(make, fragment):
    with pytest.raises(ValueError, match=fragment.replace("[", "\\[").replace("]", "\\]")):
        make()


def test_generation_past_the_context_is_refused(lm):
    model, params, text = lm
    with pytest.raises(ValueError, match="exceed the model's context of 16"):
        greedy(params, model.sizes, text[:, :10], 8)
    with pytest.raises(ValueError, match=r"prompt_len=0; allowed: 1 \.\. 15"):
        teacher_forced_nll(params, model.sizes, text, 0)
