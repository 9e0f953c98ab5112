"""Train a speech workload (seed 0, fp32) and decode its test split greedily and with CTC
prefix beam search: test CER and WER of both, as benchmarks/RESULTS.md "DS2 batch norm, the
unidirectional model and beam search" reports them.

    python benchmarks/ds2_decoders.py speech_ds2_bn [--beam 8] [--steps N]

Prints one JSON line: the workload's sizes, parameter count, the CER curve (greedy, as training
records it), both decoders' CER/WER and the wall time.
"""

from __future__ import annotations

import argparse
import json
import time

import jax
import numpy as np

from asicsim._src.workloads import training
from asicsim._src.workloads.ctc import beam_decode, error_rate, greedy_decode, transcripts
from asicsim._src.workloads.speech_layers import RUNNING
from asicsim._src.workloads.workload import load_workload


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workload")
    ap.add_argument("--beam", type=int, default=8)
    ap.add_argument("--steps", type=int, default=None)
    a = ap.parse_args(argv)
    t0 = time.time()
    w = load_workload(a.workload).replace(steps=a.steps)
    run = training.train(w, "fp32", seeds=(0,), stats=False, keep_params=True).runs[0]
    data, model = training.build(w)
    forward = jax.jit(lambda x: model.apply(run.params, x))
    greedy, beam = [], []
    for i in range(0, len(data.x_test), 128):
        x, n = data.x_test[i:i + 128], data.x_len_test[i:i + 128]
        logits, frames = np.asarray(forward((x, n))), np.asarray(model.out_frames(n))
        greedy += greedy_decode(logits, frames)
        beam += beam_decode(logits, frames, beam=a.beam)
    refs = transcripts(data.y_test, data.vocab)
    trained = {k: v for k, v in run.params.items() if k != RUNNING}  # the running statistics are no weights
    out = {"workload": w.name, "steps": w.steps, "sizes": w.sizes, "params": model.num_params(trained),
           "curve_cer": run.curves["test_cer"], "seconds": round(time.time() - t0)}
    for name, hyps in (("greedy", greedy), (f"beam{a.beam}", beam)):
        text = transcripts(hyps, data.vocab)
        out[f"cer_{name}"] = error_rate(refs, text)
        out[f"wer_{name}"] = error_rate([r.split() for r in refs], [h.split() for h in text])
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
