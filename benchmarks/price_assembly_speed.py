"""CPU time of gemm_sweep and cost_many, to compare the typed price's assembly with older code.

``python benchmarks/price_assembly_speed.py LABEL``: a 16 x 32 x 3 x 3 design grid of
edge_int8_32x32 (rows, cols, dataflow, buffer scale) over 21 layers, and cost_many of 50 random
GEMMs on the design as catalogued; CPU seconds (``time.process_time``), mean of 3 and 10 calls
after one warm-up. Run it in two checkouts, alternating, to compare (RESULTS.md, issue 31 item 7).
"""

import sys
import time

import numpy as np

import asicsim as sim
from asicsim._src.hw import gemm_sweep

ops = [sim.Gemm(256, 256, 256), sim.Conv(28, 28, 128, 128, 3, 3, padding=1, batch=8), sim.Gemm(197, 768, 3072)] * 7
side = np.arange(8, 257, 8)
rows = side[:16, None, None, None]
cols = side[None, :, None, None]
dfs = np.array(["os", "ws", "is"])[None, None, :, None]
sc = np.array([0.5, 1, 2])[None, None, None, :]
gemm_sweep(ops, "edge_int8_32x32", rows=rows, cols=cols, dataflow=dfs, buffer_scale=sc)
c0 = time.process_time()
for _ in range(3):
    gemm_sweep(ops, "edge_int8_32x32", rows=rows, cols=cols, dataflow=dfs, buffer_scale=sc)
sweep = (time.process_time() - c0) / 3
big = [sim.Gemm(int(m), int(n), int(k)) for m, n, k in np.random.default_rng(0).integers(16, 2048, (50, 3))]
sim.hw.cost_many(big, "edge_int8_32x32")
c0 = time.process_time()
for _ in range(10):
    sim.hw.cost_many(big, "edge_int8_32x32")
many = (time.process_time() - c0) / 10
print(f"{sys.argv[1] if len(sys.argv) > 1 else 'this checkout'}: gemm_sweep {sweep:.3f} s CPU; cost_many 50 GEMMs {many*1e3:.1f} ms CPU")
