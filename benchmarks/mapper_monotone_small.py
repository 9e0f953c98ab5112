"""The monotonicity property of ``tests/hw/test_mapper_search.py::test_better_hardware_never_worse``
on more random small cases than the test draws, without its skip of tiles larger than the smaller
array: counts the (case, objective) pairs whose chosen schedule is worse after the change than the
allowance (``_allowance``: the longer one-time fill/drain of a larger array without bypass).

    python benchmarks/mapper_monotone_small.py [SEED [CASES [CHANGE]]]   # CHANGE: array, buffers, ...

Cases: 1-40 per GEMM side, 1-6 PE arrays of every dataflow, 16-600 byte buffers, bypass or not
(the test's strategy), ``random.Random(SEED)``.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "hw"))

from test_mapper_search import HELD, OWN, _allowance, _bypassing, _scaled, small_design

import asicsim as sim


def main() -> None:
    rng = random.Random(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    bad: dict = {}
    total = 0
    for _ in range(n):
        M, N, K = (rng.randint(1, 40) for _ in range(3))
        df = rng.choice(["os", "ws", "is"])
        R, C = rng.randint(1, 6), rng.randint(1, 6)
        caps = tuple(rng.randint(16, 600) for _ in range(3))
        psum = rng.choice([None, rng.randint(16, 2000)])
        bypass = rng.random() < 0.5
        change = sys.argv[3] if len(sys.argv) > 3 else rng.choice(sorted(HELD))
        d = small_design(R, C, df, caps, psum)
        d = _bypassing(d) if bypass else d
        op = sim.Gemm(M, N, K)
        for objective in HELD[change]:
            try:
                before = sim.cost(op, d, objective=objective)
            except ValueError:
                continue
            after = (sim.cost(op, d, "act=int4,weight=int4", objective=objective) if change == "int4"
                     else sim.cost(op, _scaled(d, change), objective=objective))
            slack = _allowance(d, change) if objective == "latency" else 0.0
            a, b = OWN[objective](after), OWN[objective](before)
            total += 1
            if a > b * (1 + 1e-9) + slack:
                bad.setdefault((change, objective), []).append((round(a / b, 4), (M, N, K, df, R, C, caps, psum, bypass)))
    print("pairs", total)
    for k, v in bad.items():
        v.sort(reverse=True)
        print(k, len(v), "worst", v[:3])


if __name__ == "__main__":
    main()
