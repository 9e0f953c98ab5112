"""CPU time of a GPU's price and of ``cost_table``, to compare the vectorised assembly with older code.

``python benchmarks/gpu_price_speed.py LABEL``: ``cost_many`` of every DeepBench kernel suite but
all-reduce (11 suites, 622 kernels) on ``gpu_h100``; ``cost_many`` of 500 random GEMMs on
``gpu_h100``; ``cost_table`` of 50 random GEMMs on four designs (two systolic, two GPUs) as a
pandas table (``.frame()`` where it returns a price). CPU seconds (``time.process_time``), the best
of 5 calls after one warm-up. Run it in two checkouts, alternating, to compare (RESULTS.md, issue 31
item 7).
"""

import sys
import time

import numpy as np

import asicsim as sim
from asicsim._src.workloads.deepbench import list_suites, load_suite


def best(fn, repeat: int = 5) -> float:
    fn()
    times = []
    for _ in range(repeat):
        c0 = time.process_time()
        fn()
        times.append(time.process_time() - c0)
    return min(times)


suites = [load_suite(s) for s in list_suites() if "allreduce" not in s]
kernels = [s.operations() for s in suites]
big = [sim.Gemm(int(m), int(n), int(k)) for m, n, k in np.random.default_rng(0).integers(16, 4096, (500, 3))]
small = big[:50]
designs = ["edge_int8_32x32", "tpu_v1", "gpu_h100", "gpu_v100"]

t_suites = best(lambda: [sim.hw.cost_many(ops, "gpu_h100") for ops in kernels])
t_many = best(lambda: sim.hw.cost_many(big, "gpu_h100"))


def table():
    t = sim.cost_table(small, designs)
    return t.frame() if hasattr(t, "labels") else t  # a price (this code) or a DataFrame (before)


t_table = best(table)
label = sys.argv[1] if len(sys.argv) > 1 else "this checkout"
print(f"{label}: DeepBench suites on gpu_h100 ({sum(map(len, kernels))} kernels) {t_suites * 1e3:.1f} ms CPU; "
      f"cost_many 500 GEMMs on gpu_h100 {t_many * 1e3:.1f} ms CPU; cost_table 50 GEMMs x 4 designs "
      f"{t_table * 1e3:.1f} ms CPU (with the DataFrame)")
