"""Generation with a KV cache for the character transformer (:func:`asicsim._src.workloads.models.transformer`,
the GPT-2-shaped LM): prefill the prompt, then one token a step, every attention reading K and V
from a cache quantized once when written (:mod:`asicsim._src.workloads.kv_cache`).

:func:`forward_cached` runs ``t`` tokens from position ``start`` with the same blocks as the
model's full forward (:func:`~asicsim._src.workloads.models.transformer_block`), writing their K and V
into the cache first and attending over every written position (the prompt's tokens too read
the cache, so prefill and decode see the same stored values). :func:`greedy` decodes greedily;
:func:`teacher_forced_nll` feeds the true text through the same path and scores each next token
(perplexity = exp of its mean). :func:`kv_cache_table` compares caches with a bf16 one on a
trained model: perplexity and the fraction of greedy tokens identical to bf16's.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from asicsim._src.workloads import kv_cache
from asicsim._src.workloads.kv_cache import KVCacheSpec
from asicsim._src.workloads.model_parts import dense
from asicsim._src.workloads.models import _layer_norm, attend, transformer_block

UNQUANTIZED = KVCacheSpec("fp32")  # the default cache: K and V kept as computed


def _check(sizes: dict, tokens: int) -> None:
    if tokens > sizes["context"]:
        raise ValueError(f"generation: {tokens} tokens exceed the model's context of {sizes['context']} "
                         "(its learned positions end there)")


def forward_cached(params, sizes: dict, spec: KVCacheSpec, cache: dict, tokens, start):
    """(logits (B, t, vocab), cache) of ``tokens`` (B, t) at positions ``start .. start + t - 1``."""
    heads, context = sizes["heads"], sizes["context"]
    t = tokens.shape[1]
    pos = jax.lax.dynamic_slice_in_dim(params["pos"], start, t)
    h = params["embed"][tokens] + pos[None]
    query_pos = start + jnp.arange(t)
    mask = (jnp.arange(context)[None, :] <= query_pos[:, None])[None, None]  # (1, 1, t, context)
    new = {}
    for i in range(sizes["layers"]):
        name = f"block{i}"

        def attention(q, k, v, name=name):
            new[name] = kv_cache.write(spec, cache[name], k, v, start)
            keys, values = kv_cache.read(spec, new[name])
            return attend(q, keys, values, mask)

        h = transformer_block(params[name], h, heads, attention, name)
    return dense(params["out"], _layer_norm(params["ln_f"], h)), new


def _empty(sizes: dict, spec: KVCacheSpec, batch: int) -> dict:
    dh = sizes["d_model"] // sizes["heads"]
    return kv_cache.empty_cache(spec, sizes["layers"], batch, sizes["context"], sizes["heads"], dh)


@functools.partial(jax.jit, static_argnums=(1, 2, 4))
def _greedy(params, sizes_items, spec, prompt, steps):
    sizes = dict(sizes_items)
    logits, cache = forward_cached(params, sizes, spec, _empty(sizes, spec, prompt.shape[0]), prompt, 0)
    first = jnp.argmax(logits[:, -1], axis=-1).astype(prompt.dtype)

    def step(carry, i):
        tok, cache = carry
        logits, cache = forward_cached(params, sizes, spec, cache, tok[:, None], prompt.shape[1] + i)
        nxt = jnp.argmax(logits[:, -1], axis=-1).astype(tok.dtype)
        return (nxt, cache), tok

    (last, cache), toks = jax.lax.scan(step, (first, cache), jnp.arange(steps - 1))
    return jnp.concatenate([toks.T, last[:, None]], axis=1), cache


def greedy(params, sizes: dict, prompt, steps: int, spec: KVCacheSpec = UNQUANTIZED):
    """(tokens (B, steps), cache): ``steps`` tokens after ``prompt`` (B, P), each the argmax of the
    logits, with a KV cache stored as ``spec`` says."""
    prompt = jnp.asarray(prompt, jnp.int32)
    _check(sizes, prompt.shape[1] + steps - 1)
    if steps < 1:
        raise ValueError(f"generation: steps={steps}; allowed: >= 1")
    return _greedy(params, tuple(sorted(sizes.items())), spec, prompt, steps)


@functools.partial(jax.jit, static_argnums=(1, 2, 4))
def _feed(params, sizes_items, spec, text, prompt_len):
    sizes = dict(sizes_items)
    logits, cache = forward_cached(params, sizes, spec, _empty(sizes, spec, text.shape[0]),
                                   text[:, :prompt_len], 0)

    def step(cache, i):
        logits, cache = forward_cached(params, sizes, spec, cache, text[:, i][:, None], i)
        return cache, logits[:, -1]

    cache, rest = jax.lax.scan(step, cache, jnp.arange(prompt_len, text.shape[1]))
    return jnp.concatenate([logits, jnp.swapaxes(rest, 0, 1)], axis=1), cache


def feed(params, sizes: dict, text, prompt_len: int, spec: KVCacheSpec = UNQUANTIZED):
    """(logits (B, T, vocab), cache) of ``text`` (B, T) run through the cache: the first
    ``prompt_len`` tokens prefilled at once, the rest fed one token a step (teacher forcing)."""
    text = jnp.asarray(text, jnp.int32)
    _check(sizes, text.shape[1])
    if not 1 <= prompt_len <= text.shape[1]:
        raise ValueError(f"feed: prompt_len={prompt_len}; allowed: 1 .. {text.shape[1]}")
    return _feed(params, tuple(sorted(sizes.items())), spec, text, prompt_len)


def teacher_forced_nll(params, sizes: dict, text, prompt_len: int, spec: KVCacheSpec = UNQUANTIZED):
    """Negative log-likelihood (nats, (B, T - prompt_len)) of each token of ``text`` (B, T) after
    the first ``prompt_len``, the prompt prefilled and the rest fed one token a step through the
    cache (so every scored token read K and V as the cache stores them)."""
    text = jnp.asarray(text, jnp.int32)
    if not 1 <= prompt_len < text.shape[1]:
        raise ValueError(f"teacher_forced_nll: prompt_len={prompt_len}; allowed: 1 .. {text.shape[1] - 1}")
    logits, _ = feed(params, sizes, text, prompt_len, spec)
    logp = jax.nn.log_softmax(logits[:, prompt_len - 1:-1], axis=-1)  # predicting tokens P .. T-1
    return -jnp.take_along_axis(logp, text[:, prompt_len:, None], axis=-1)[..., 0]


def windows(tokens: np.ndarray, count: int, length: int, seed: int = 0) -> np.ndarray:
    """``count`` windows of ``length`` tokens from ``tokens`` at seeded random offsets."""
    rng = np.random.default_rng(seed)
    starts = rng.integers(0, len(tokens) - length, count)
    return np.stack([tokens[s: s + length] for s in starts]).astype(np.int32)


def kv_cache_table(params, sizes: dict, text: np.ndarray, prompt_len: int, specs, baseline: str = "bf16") -> list[dict]:
    """Per cache spec (names as :meth:`KVCacheSpec.parse` reads them): perplexity over ``text``
    (B, T) teacher-forced after ``prompt_len`` tokens, and of greedy decoding of ``T - prompt_len``
    tokens from the same prompts, the fraction of tokens equal to ``baseline``'s at the same
    position and of sequences equal throughout."""
    steps = text.shape[1] - prompt_len
    base = np.asarray(greedy(params, sizes, text[:, :prompt_len], steps, KVCacheSpec.parse(baseline))[0])
    rows = []
    for name in specs:
        spec = KVCacheSpec.parse(name)
        nll = np.asarray(teacher_forced_nll(params, sizes, text, prompt_len, spec), np.float64)
        toks = np.asarray(greedy(params, sizes, text[:, :prompt_len], steps, spec)[0])
        rows.append({"cache": spec.name, "nll": float(nll.mean()), "perplexity": float(np.exp(nll.mean())),
                     "token_agreement": float((toks == base).mean()),
                     "sequence_agreement": float((toks == base).all(axis=1).mean())})
    return rows
