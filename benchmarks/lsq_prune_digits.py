"""LSQ quantization-aware training together with 2:4 pruning, and the statistics an LSQ run reports
(issue 34 items 5 and 8): ``digits_mlp`` trained ``--steps`` steps per recipe, fp32 and int8_lsq
dense, int8_lsq and int4_lsq with a 2:4 rule on every weight matrix from step ``--start``; the test
accuracy, the sparsity reached and, for LSQ runs, the per-operand statistics printed as
``asicsim train`` prints them (asicsim/_src/workloads/lsq_stats.py).

    python benchmarks/lsq_prune_digits.py [--steps 300] [--start 100] [--seed 0]
"""

from __future__ import annotations

import argparse
import time


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--start", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    from asicsim._src.workloads.cli import _numerics_lines
    from asicsim._src.workloads.prune_rules import PruneRule
    from asicsim._src.workloads.training import train

    rule = [PruneRule("2:4", start=args.start)]
    for rec, prune in [("fp32", None), ("int8_lsq", None), ("int8_lsq", rule), ("int4_lsq", rule)]:
        t = time.time()
        run = train("digits_mlp", rec, seeds=(args.seed,), steps=args.steps, eval_every=args.steps // 2,
                    prune=prune).runs[0]
        print(f"### {rec} prune={f'2:4 from step {args.start}' if prune else 'none'}: test_accuracy "
              f"{run.final:.4f} sparsity {run.sparsity} diverged {run.diverged} {time.time() - t:.0f} s")
        if "lsq" in rec:
            print("\n".join(_numerics_lines(run.numerics)))


if __name__ == "__main__":
    main()
