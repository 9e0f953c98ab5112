"""Emulated training step time vs the same model trained unemulated in fp32 (issue 5, "Speed").

For each workload model (real data, the workload's batch and optimizer), one jitted ``lax.scan``
of ``--steps`` training steps is timed:

* the anchor: a plain optax step on the plain loss (``value_and_grad``, ``tx.update``,
  ``apply_updates``), no asicsim anywhere;
* each recipe: :func:`asicsim._src.emulate.training.make_train_step` under that recipe, in the same
  jit/scan structure on the same batches.

The machine is shared and noisy, so every recipe is timed interleaved with the anchor (anchor,
recipe, anchor, recipe, ...; best of ``--repeat`` each) and the table reports the ratio
``recipe / anchor``. Fake-quant recipes (``mac_order = "fast"``) have a 1.5x target; the bit-exact
accumulation orders (fp8_wang2018's ``chunk:64``, tensorcore_fp16's V100 MAC) are reported
separately: they simulate every addition of every dot product, and are not expected to be close.

    python benchmarks/bench_emulate.py [--steps 100] [--repeat 5] [--workloads mnist1d_mlp ...]
        [--recipes bf16 ...] [--exact-steps 10]

``--workloads`` takes workload names or TOML paths. ``benchmarks/workloads/`` holds the
reference CNN and GRU widened (64/128 channels, hidden 16/32/64), for the overhead-vs-width
study in RESULTS.md:

    python benchmarks/bench_emulate.py --workloads benchmarks/workloads/*.toml --exact
"""

from __future__ import annotations

import argparse
import platform
import time

import jax
import jax.numpy as jnp
import optax
from _timing import best_of  # benchmarks/ is on sys.path when run as a script
from jax import lax

from asicsim._src.emulate.training import make_train_step
from asicsim._src.workloads import tasks
from asicsim._src.workloads.training import batch_order, build, make_optimizer
from asicsim._src.workloads.workload import load_workload

WORKLOADS = ["mnist1d_mlp", "mnist1d_cnn", "mnist1d_gru"]
FAKE_QUANT = ["fp32", "bf16", "bf16_nomaster", "fp16_mixed", "fp16_nomaster", "fp8_hybrid", "mxfp8",
              "mxfp6", "mxfp4", "int8_ptq_tensor", "int8_ptq_channel", "fixed16_rn", "fixed16_sr"]
EXACT = ["fp8_wang2018", "tensorcore_fp16"]


def _plain_step(loss, tx):
    def step(state, batch):
        params, opt = state
        value, grads = jax.value_and_grad(loss)(params, batch)
        updates, opt = tx.update(grads, opt, params)
        return (optax.apply_updates(params, updates), opt), {"loss": value}
    return step


def _chunk(step, make_batch):
    def chunk(state, data, idx):
        def body(s, i):
            return step(s, make_batch(data, i))
        return lax.scan(body, state, idx)
    return jax.jit(chunk)


class Case:
    """One workload: its data, the anchor chunk, and a timer for any recipe's chunk."""

    def __init__(self, name: str, steps: int):
        self.w = load_workload(name)
        data, self.model = build(self.w)
        self.loss = tasks.loss_fn(self.model, data.task)
        self.make_batch = tasks.batch_fn(data.task, self.w.context)
        self.data = (jnp.asarray(data.x_train), jnp.asarray(data.y_train))
        self.tx = make_optimizer(self.w.optimizer, self.w.lr, self.w.momentum)
        self.params = self.model.init(jax.random.key(0))
        self.order = batch_order(data, self.w, steps, self.w.batch, 0)
        self.plain = _chunk(_plain_step(self.loss, self.tx), self.make_batch)

    def anchor(self, steps: int):
        return self._runner(self.plain, (self.params, self.tx.init(self.params)), steps)

    def _runner(self, chunk, state, steps):
        idx = jnp.asarray(self.order[:steps])

        def run():
            out = chunk(state, self.data, idx)
            jax.block_until_ready(out)
            return out
        return run

    def recipe(self, recipe: str, steps: int):
        init, step = make_train_step(self.loss, recipe, self.tx)
        return self._runner(_chunk(step, self.make_batch), init(self.params, jax.random.key(1)), steps)


def interleaved(anchor, fn, repeat: int) -> tuple[float, float]:
    """Best-of times of ``anchor`` and ``fn``, run alternately (after one warm-up call each)."""
    anchor(), fn()
    ta, tf = [], []
    for _ in range(repeat):
        for f, ts in ((anchor, ta), (fn, tf)):
            t = time.perf_counter()
            f()
            ts.append(time.perf_counter() - t)
    return min(ta), min(tf)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100, help="steps per timed scan (fake-quant)")
    parser.add_argument("--exact-steps", type=int, default=10, help="steps per timed scan (bit-exact)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--workloads", nargs="*", default=WORKLOADS)
    parser.add_argument("--recipes", nargs="*", default=FAKE_QUANT)
    parser.add_argument("--exact", nargs="*", default=EXACT)
    args = parser.parse_args()
    print(f"# emulated training step time / plain fp32 optax step (same jit + lax.scan), best of {args.repeat}")
    print(f"machine: {platform.processor() or platform.machine()}, {jax.device_count()} JAX device(s), "
          f"jax {jax.__version__}, date {time.strftime('%Y-%m-%d')}")
    cases = {}
    for name in args.workloads:
        case = Case(name, max(args.steps, args.exact_steps))
        cases[case.w.name] = case
    head = "| recipe | " + " | ".join(cases) + " |"
    print("\nfp32 anchor, ms/step: " + ", ".join(
        f"{n} {1e3 * best_of(c.anchor(args.steps), args.repeat) / args.steps:.2f}" for n, c in cases.items()))
    for title, recipes, steps in (("fake-quant (mac_order fast)", args.recipes, args.steps),
                                  ("bit-exact accumulation orders", args.exact, args.exact_steps)):
        if not recipes:
            continue
        print(f"\n{title}: ratio to the fp32 anchor ({steps} steps per scan)\n")
        print(head)
        print("|---" * (len(cases) + 1) + "|")
        for r in recipes:
            cells = []
            for c in cases.values():
                ta, tr = interleaved(c.anchor(steps), c.recipe(r, steps), args.repeat)
                cells.append(f"{tr / ta:.2f}")
            print(f"| {r} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
