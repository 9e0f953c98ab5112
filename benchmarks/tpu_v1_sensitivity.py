"""TPU v1's published sensitivities against the cost model (issue 31, item 5).

Source: N. P. Jouppi et al., "In-Datacenter Performance Analysis of a Tensor Processing Unit",
ISCA 2017 (arXiv:1704.04760; page numbers of the arXiv version):

* Figure 11 and its caption (p. 11) with Sec. 7's text (p. 12): "MLPs and LSTMs improve 3X with 4X
  memory bandwidth, but get nothing from a higher clock. For CNNs it's vice versa; 2X for 4X
  clock, but get little benefit from faster memory"; "increasing the clock rate by 4X has almost
  no impact on MLPs and LSTMs but improves performance of CNNs by about 2X". Figure 11 is the
  paper's performance model and excludes host server time.
* Table 3 (p. 7): hardware counters per application. Rows 1, 4, 5 and 6 total 100 %: array active
  cycles, weight stall cycles, weight shift cycles and non-matrix cycles (MLP0: 12.7, 53.9, 15.9,
  17.5 %). Row 9: measured TeraOps/s (MLP0 12.3). Host server overhead excluded.
* Sec. 7 (p. 12): "the average performance in Figure 11 slightly degrades when the matrix unit
  expands from 256x256 to 512x512 for all apps"; the caption: "A bigger matrix multiply unit
  doesn't help any DNN". LSTM1's 600x600 matrix takes 9 steps of ~2 us (18 us) on 256x256 and 4
  steps of ~8 us (32 us) on 512x512: each step costs a whole tile's weight fetch.
* Table 7 (p. 10): the paper's performance model differs from the counters by 8 % on average: the
  tolerance used for the active-cycle shares below.
* Table 1 (p. 2): per application, layers by kind, weights, TPU batch size, ops per weight byte, and
  the share of deployed TPUs per kind (MLPs 61 %, LSTMs 29 %, CNNs 5 %): the mix of Figure 11's
  weighted means (Sec. 4, p. 8: "we do know the mix (Table 1)").
* Sec. 7 (p. 12): "performance improves 3X on average when memory increases 4X" (Figure 11's
  weighted mean over the six applications), and for TPU' (GDDR5 Weight Memory, "shifting its
  roofline ridge point from 1350 to 250", so 1350 / 250 = 5.4x the bandwidth at the same clock):
  "the geometric mean increase jumps to an impressive 2.6 and the weighted mean to 3.9".

The applications are rebuilt from Table 1 (the paper gives no layer shapes): each fully connected
layer is a square ``Gemm(batch, n, n)`` with ``n = round(sqrt(weights / FC layers))``, the shapes
issue 31 measured with (MLP0: five ``Gemm(200, 2000, 2000)``). CNN0 is sixteen 3x3 convolutions of
256 -> 256 channels on a 19x19 board at batch 8: 16 x 3 x 3 x 256 x 256 = 9.4 M weights (Table 1:
8M) and 19 x 19 x 8 = 2888 MACs per weight byte, Table 1's 2888 ops per weight byte exactly (Table 1
names DeepMind AlphaGo among the CNNs; its board is 19x19). The LSTMs' vector layers and CNN1 (89
layers, no shapes published) are not modelled.

What the cost model prices is the matrix unit's time: array active (``cycles_compute``), fill and
drain (the weight shift a pass does not hide) and the DRAM stall. Table 3's rows 1, 4 and 5 are
that same scope; row 6 (non-matrix cycles: activation, synchronisation, RAW and PCIe input stalls,
which "our counters cannot exactly explain") is outside it. So like with like:

* active share: the model's ``cycles_compute / cycles`` against row 1 / (rows 1 + 4 + 5). Row 1
  counts a cycle active when the array streams, whether or not every MAC holds a useful weight
  (rows 2 and 3 split it), as ``cycles_compute`` counts every fold's streamed cycles, a partial
  fold's too;
* 4x bandwidth: the model's matrix-unit speed-up is an upper bound (non-matrix time scaling like
  the rest), and the same with Table 3's non-matrix cycles added as a fixed time a lower bound
  (non-matrix time not scaling at all); the paper's 3X must lie between them. Figure 11 plots
  weighted means, so :func:`weighted_mean` takes both bounds over the modelled applications with
  Table 1's mix (a kind's share split evenly between its two applications, as Table 1 gives one
  share per kind; CNN1's half of the CNNs' 5 % on CNN0). CNN1 could move the weighted mean by at
  most :func:`cnn1_slack`: 2.5 x (k - 1) / 95 for k x the bandwidth (CNN0 and CNN1 each between 1
  and k): 0.08 at 4x, 0.12 at 5.4x.

    python benchmarks/tpu_v1_sensitivity.py [--objective balanced]
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys

from asicsim._src.hw import Conv, Gemm, cost_many, load_design

#: Table 3 (p. 7), % of cycles: rows 1 (array active), 4 (weight stall), 5 (weight shift), 6 (non-matrix), 9 (TOPS)
TABLE3 = {
    "MLP0": (12.7, 53.9, 15.9, 17.5, 12.3),
    "MLP1": (10.6, 44.2, 13.4, 31.9, 9.7),
    "LSTM0": (8.2, 58.1, 15.8, 17.9, 3.7),
    "LSTM1": (10.5, 62.1, 17.1, 10.3, 2.8),
    "CNN0": (78.2, 0.0, 0.0, 21.8, 86.0),
}
#: Table 1 (p. 2): fully connected layers, weights, TPU batch size
TABLE1_FC = {"MLP0": (5, 20e6, 200), "MLP1": (4, 5e6, 168), "LSTM0": (24, 52e6, 64), "LSTM1": (37, 34e6, 96)}
#: Figure 11's caption (p. 11) and Sec. 7 (p. 12)
PAPER_MEMORY_4X_MLP_LSTM = 3.0  # "MLPs and LSTMs improve 3X with 4X memory bandwidth"
PAPER_CLOCK_4X_CNN = 2.0  # "improves performance of CNNs by about 2X"
#: Table 7 (p. 10): the performance model is within 8 % of the counters on average
MODEL_VS_COUNTERS = 0.08
#: Table 1 (p. 2), % of deployed TPUs in July 2016 per kind of network (one share per kind)
TABLE1_MIX = {"MLP": 61, "LSTM": 29, "CNN": 5}
#: Sec. 7 (p. 12): "performance improves 3X on average when memory increases 4X" (weighted mean)
PAPER_MEMORY_4X_WEIGHTED = 3.0
#: Sec. 7 (p. 12): TPU' moves the ridge point "from 1350 to 250" with GDDR5 at the same 700 MHz
TPU_PRIME_BANDWIDTH = 1350 / 250
#: Sec. 7 (p. 12): TPU' "geometric mean increase jumps to an impressive 2.6 and the weighted mean to 3.9"
PAPER_TPU_PRIME_WEIGHTED, PAPER_TPU_PRIME_GEOMEAN = 3.9, 2.6


def operations(app: str) -> list:
    """The application's layers, rebuilt from Table 1 (module docstring)."""
    if app == "CNN0":
        return [Conv(19, 19, 256, 256, 3, 3, padding=1, batch=8, name=f"CNN0.conv{i}") for i in range(16)]
    layers, weights, batch = TABLE1_FC[app]
    n = round(math.sqrt(weights / layers))
    return [Gemm(batch, n, n, name=f"{app}.fc{i}") for i in range(layers)]


def scaled(design, bandwidth: float = 1.0, side: int | None = None):
    """``design`` with ``bandwidth`` x its DRAM bandwidth (and a ``side`` x ``side`` array whose Weight
    FIFO stays four tiles deep, Sec. 2: 4 x 256 KiB on 512 x 512; the other buffers kept). The FIFO
    holds whole tiles (``array.whole_tiles``, padded in the buffer since issue 31): kept at 256 KiB
    it would hold one 512 x 512 tile and could not double-buffer at all."""
    d = dataclasses.replace(design, dram=dataclasses.replace(design.dram,
                                                             bandwidth_gbps=bandwidth * design.dram.bandwidth_gbps))
    if side is None:
        return d
    fifo = d.weight_buffer().capacity_kib * side * side / (d.array.rows * d.array.cols)
    return dataclasses.replace(d.with_weight_buffer(fifo), array=dataclasses.replace(d.array, rows=side, cols=side))


def measure(app: str, objective: str = "balanced", design="tpu_v1") -> dict:
    """The model's figures for one application: cycles of the matrix unit at 1x, 4x and 1/4 of the
    DRAM bandwidth, the active share and the like-with-like speed-ups (module docstring)."""
    d = load_design(design)
    ops = operations(app)

    def run(k, side=None):
        rs = cost_many(ops, scaled(d, k, side), objective=objective)
        return sum(r.cycles for r in rs), sum(r.cycles_compute for r in rs), sum(2 * r.macs for r in rs)

    (c1, active, ops_count), (c4, _, _), (cq, _, _) = run(1.0), run(4.0), run(0.25)
    cp, _, _ = run(TPU_PRIME_BANDWIDTH)
    c512, _, _ = run(1.0, 512)
    row1, row4, row5, row6, tops = TABLE3[app]
    fixed = row6 / (row1 + row4 + row5) * c1  # Table 3's non-matrix cycles, as cycles beside the model's
    return {
        "app": app, "cycles": c1, "active_share": active / c1,
        "paper_active_share": row1 / (row1 + row4 + row5), "paper_active_share_all": row1 / 100,
        "active_share_all": active / (c1 + fixed),
        "memory_4x": c1 / c4, "memory_4x_nonmatrix_fixed": (c1 + fixed) / (c4 + fixed),
        "memory_tpu_prime": c1 / cp, "memory_tpu_prime_nonmatrix_fixed": (c1 + fixed) / (cp + fixed),
        # 4x clock at the same DRAM bytes per second: a quarter of the bytes per cycle, 4x the cycles per second
        "clock_4x": 4 * c1 / cq,
        "matrix_512": c1 / c512,  # Figure 11's "matrix": a 512x512 unit, the same accumulators, the FIFO four tiles deep
        "tops": ops_count / (c1 / d.clock_hz) / 1e12, "paper_tops": tops,
    }


def mix_weight(app: str) -> float:
    """The application's share of Table 1's mix (module docstring): half its kind's, CNN0 all the CNNs'."""
    kind = app.rstrip("0123456789")
    return TABLE1_MIX[kind] / (1 if kind == "CNN" else 2)


def weighted_mean(rows: list[dict], key: str) -> float:
    """Figure 11's weighted mean of ``key`` over ``rows`` (Table 1's mix, normalised over the rows)."""
    weights = [mix_weight(r["app"]) for r in rows]
    return sum(w * r[key] for w, r in zip(weights, rows, strict=True)) / sum(weights)


def cnn1_slack(bandwidth: float) -> float:
    """How far CNN1 (not modelled) could move :func:`weighted_mean` at ``bandwidth`` x the DRAM
    bandwidth: its half of the CNNs' share, times the widest gap between two speed-ups in [1, k]."""
    return TABLE1_MIX["CNN"] / 2 * (bandwidth - 1) / sum(TABLE1_MIX.values())


def geometric_mean(rows: list[dict], key: str) -> float:
    """The plain geometric mean of ``key`` over ``rows`` (printed only: the paper's is over six, CNN1 too)."""
    return math.exp(sum(math.log(r[key]) for r in rows) / len(rows))


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--objective", default="balanced")
    args = ap.parse_args(argv)
    rows = [measure(app, args.objective) for app in TABLE3]
    print(f"tpu_v1, objective {args.objective}; paper: Jouppi et al. ISCA 2017 Table 3 (p. 7), Figure 11 (p. 11)")
    print(f"{'app':<7}{'active/matrix':>14}{'paper':>7}{'active/all':>11}{'paper':>7}{'mem 4x':>8}"
          f"{'mem 4x, row 6 fixed':>20}{'paper':>7}{'clock 4x':>9}{'512x512':>14}{'TOPS':>7}{'paper':>7}")
    for r in rows:
        paper_mem = "~1" if r["app"] == "CNN0" else f"{PAPER_MEMORY_4X_MLP_LSTM:.0f}"
        paper_clock = f"{PAPER_CLOCK_4X_CNN:.0f}" if r["app"] == "CNN0" else "~1"
        print(f"{r['app']:<7}{r['active_share']:14.3f}{r['paper_active_share']:7.3f}{r['active_share_all']:11.3f}"
              f"{r['paper_active_share_all']:7.3f}{r['memory_4x']:8.2f}{r['memory_4x_nonmatrix_fixed']:20.2f}"
              f"{paper_mem:>7}{r['clock_4x']:9.2f} ({paper_clock}){r['matrix_512']:9.3f} (<=1){r['tops']:7.1f}"
              f"{r['paper_tops']:7.1f}")
    print("weighted means (Figure 11; Table 1's mix), bounds: matrix unit alone / row 6 held fixed")
    for label, key, paper in (("4x bandwidth", "memory_4x", f"{PAPER_MEMORY_4X_WEIGHTED:.0f}X"),
                              (f"TPU' ({TPU_PRIME_BANDWIDTH:.1f}x bandwidth)", "memory_tpu_prime",
                               f"{PAPER_TPU_PRIME_WEIGHTED}")):
        print(f"  {label:<28} weighted mean {weighted_mean(rows, key):.2f} / "
              f"{weighted_mean(rows, key + '_nonmatrix_fixed'):.2f} (paper {paper}); geometric mean of "
              f"the five {geometric_mean(rows, key):.2f} / {geometric_mean(rows, key + '_nonmatrix_fixed'):.2f}"
              + (f" (paper, six with CNN1: {PAPER_TPU_PRIME_GEOMEAN})" if key == "memory_tpu_prime" else ""))
    return rows


if __name__ == "__main__":
    sys.exit(main() and 0)
