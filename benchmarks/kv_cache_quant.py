"""fp8 and int8 KV caches against a bf16 one on the GPT-2-shaped character LM (issue 34 item 4).

Trains workload ``gpt2_small_lm`` (scale ``small``: 4 layers, d_model 128, 4 heads, context 64,
600 steps; about 1.5 min per seed on 2 CPU cores) in fp32 per seed, then on ``--prompts`` windows
of ``context`` characters from GCIDE's validation split (seeded offsets):

* table 1, per KV cache (:mod:`asicsim._src.workloads.kv_cache`; fp32, bf16, fp8_e4m3 and int8, with
  per-token or per-head scales): perplexity (exp of the mean NLL, nats per character) of the
  tokens after a ``--prompt``-character prompt, fed one at a time through the cache (teacher
  forcing), and of greedy decoding of as many tokens from the same prompts, the fraction of
  tokens equal to the bf16 cache's at the same position and of sequences equal throughout;
* table 2, the attention roles (:mod:`asicsim._src.emulate.attention`): validation NLL of the full
  forward (no cache) emulated under recipes that round only Q, K, P and V (everything else fp32),
  per tensor or per (sequence, head).

    python benchmarks/kv_cache_quant.py --seeds 2          # the RESULTS.md section

Results: benchmarks/RESULTS.md, "KV cache quantized once at write: fp8 and int8 vs bf16".
"""

from __future__ import annotations

import argparse
import datetime
import time

import numpy as np

CACHES = ("fp32", "bf16", "fp8_e4m3/token", "fp8_e4m3/head", "int8/token", "int8/head")
ATTENTION = {  # role formats of table 2 (every other role fp32)
    "fp32": None,
    "bf16 QKPV": {"format": "bf16"},
    "fp8_e4m3 QKPV, per tensor": {"format": "fp8_e4m3", "scaling": "tensor"},
    "fp8_e4m3 QKPV, per head": {"format": "fp8_e4m3", "scaling": "head"},
    "int8 QKPV, per tensor": {"format": "int8", "scaling": "tensor"},
    "int8 QKPV, per head": {"format": "int8", "scaling": "head"},
}


def attention_recipe(name: str, role: dict | None) -> dict:
    roles = {"weight": "fp32", "act": "fp32", "acc": "fp32"}
    if role is not None:
        roles.update({r: dict(role) for r in ("query", "key", "probabilities", "value")})
    return {"name": name, "roles": roles}


def _attention_nll(model, params, text, names) -> dict[str, float]:
    import jax
    import jax.numpy as jnp

    from asicsim._src.emulate import emulate

    x, y = jnp.asarray(text[:, :-1]), jnp.asarray(text[:, 1:])
    out = {}
    for name in names:
        fn = jax.jit(emulate(model.apply, attention_recipe(name, ATTENTION[name]), weights=0))
        logp = jax.nn.log_softmax(fn(params, x), axis=-1)
        out[name] = float(-jnp.take_along_axis(logp, y[..., None], axis=-1).mean())
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=1, help="trained models, seeds 0..N-1 (default 1)")
    ap.add_argument("--prompts", type=int, default=64, help="validation windows (default 64)")
    ap.add_argument("--prompt", type=int, default=16, help="prompt characters (default 16)")
    ap.add_argument("--steps", type=int, help="override the workload's training steps")
    args = ap.parse_args(argv)

    from asicsim._src.workloads.datasets import load_dataset
    from asicsim._src.workloads.lm_generate import kv_cache_table, windows
    from asicsim._src.workloads.models import make_model
    from asicsim._src.workloads.training import train
    from asicsim._src.workloads.workload import load_workload

    t0 = time.perf_counter()
    w = load_workload("gpt2_small_lm").replace(steps=args.steps)
    data = load_dataset(w.dataset)
    model = make_model(w.model, (), data.num_classes, context=w.context, **w.sizes)
    text = windows(data.x_test, args.prompts, w.context, seed=0)
    tables, attn = [], []
    for s in range(args.seeds):
        r = train(w, "fp32", seeds=(s,), stats=False, keep_params=True)
        params = r.runs[0].params
        tables.append(kv_cache_table(params, model.sizes, text, args.prompt, CACHES))
        attn.append(_attention_nll(model, params, text, list(ATTENTION)))
        print(f"# seed {s}: val loss {r.mean:.4f}, {time.perf_counter() - t0:.0f} s", flush=True)
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    gen = w.context - args.prompt
    lines = [f"{w.name} (scale {w.scale}: {w.sizes}, context {w.context}, {w.steps} steps, fp32 training), "
             f"seeds {list(range(args.seeds))}; {args.prompts} validation windows (offsets seed 0), prompt "
             f"{args.prompt} characters, {gen} scored / generated; {when}; {time.perf_counter() - t0:.0f} s", "",
             "| KV cache | perplexity (mean) | per seed | token agreement with bf16 (mean) | per seed "
             "| sequences identical to bf16 (mean) |", "|---|---|---|---|---|---|"]
    for i, row in enumerate(tables[0]):
        per = [t[i] for t in tables]

        def col(key, fmt, per=per):
            return fmt.format(np.mean([p[key] for p in per])), ", ".join(fmt.format(p[key]) for p in per)

        ppl, ppl_s = col("perplexity", "{:.4f}")
        agr, agr_s = col("token_agreement", "{:.4f}")
        seq, _ = col("sequence_agreement", "{:.3f}")
        lines.append(f"| {row['cache']} | {ppl} | {ppl_s} | {agr} | {agr_s} | {seq} |")
    lines += ["", "| attention operands (Q, K, P, V; the rest fp32), full forward | val NLL nats/char (mean) "
              "| per seed |", "|---|---|---|"]
    for name in ATTENTION:
        vals = [a[name] for a in attn]
        lines.append(f"| {name} | {np.mean(vals):.4f} | {', '.join(f'{v:.4f}' for v in vals)} |")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
