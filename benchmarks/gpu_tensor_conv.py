"""Tensor-core convolutions as the library runs them: DeepBench's V100 and T4 fp16 conv sheets.

Rows: the fp16 (tensor-core, fp32 accumulation) forward, data-gradient and filter-gradient convs of
``data/deepbench/measured/v100_conv_results.csv`` and ``conv_results.csv`` (T4), priced as
``conv_bench`` ran them: C and K padded to 8, NHWC (:data:`gpu_measured.DEEPBENCH_CONV_PAD`), so
no layout transform; the kernels step through ``conv_chunk_bytes`` of input channels per filter tap
(:func:`asicsim._src.hw.gpu_kernels.conv_kernels`). Fitted here: each generation's three tensor-core
pass factors (``conv_<pass>_tensor@Volta`` on the V100 rows only, ``@Turing`` on the T4 rows only),
every other constant fixed at the shipped fit. Printed per device x pass, median / p90 of
|ln(pred/meas)| and bias = exp(median signed):

* ``roofline``: the datasheet roofline (flops at the fp16 tensor peak, bytes at the bandwidth);
* ``held out``: the device's generation without its own pass factors, so it takes the other
  device's (Volta <-> Turing, the nearest generation with them): fit on one device, predict the other;
* ``in sample``: fitted on the device's own rows (the values shipped in gpu_fit.toml).

``--chunks``: the grid that chose ``conv_chunk_bytes`` (each device alone); ``--worst N``: the N rows
with the largest error under the shipped constants.

    python benchmarks/gpu_tensor_conv.py [--chunks] [--worst N]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gpu_calibration as gc
from gpu_measured import deepbench_rows

from asicsim._src.hw.gpu_model import fit_table, load_fit

PASSES = ("conv_fwd", "conv_bwd_data", "conv_bwd_filter")
GENS = {"V100": "Volta", "T4": "Turing"}


def tensor_conv_rows() -> list[dict]:
    return [r for r in deepbench_rows() if r["precision"] == "fp16_mixed" and r["kind"].startswith("conv")]


def keys(gen: str) -> list[str]:
    return [f"{p}_tensor@{gen}" for p in PASSES]


def errors(rows: list[dict], fit: dict) -> pd.DataFrame:
    recs = []
    for g in gc.groups_of(rows):
        p, nv = g.predict(fit), g.naive()
        recs += [dict(device=g.device, kind=r["kind"], err=np.log(p[i] / g.measured[i]),
                      naive=np.log(nv[i] / g.measured[i])) for i, r in enumerate(g.rows)]
    return pd.DataFrame(recs)


def summary(df: pd.DataFrame) -> pd.DataFrame:
    def med(s):
        return float(np.median(np.abs(s)))

    def p90(s):
        return float(np.quantile(np.abs(s), 0.9))

    return df.groupby(["device", "kind"]).agg(n=("err", "size"), roofline_med=("naive", med),
                                              roofline_p90=("naive", p90), med=("err", med), p90=("err", p90),
                                              bias=("err", lambda s: float(np.exp(np.median(s)))))


def worst(rows: list[dict], fit: dict, n: int) -> pd.DataFrame:
    recs = []
    for g in gc.groups_of(rows):
        p = g.predict(fit)
        for i, r in enumerate(g.rows):
            o = r["ops"][0]
            recs.append(dict(device=g.device, kind=r["kind"], err=np.log(p[i] / g.measured[i]),
                             op=f"{o.in_h}x{o.in_w}x{o.in_channels}->{o.out_channels} k{o.kernel_h}x{o.kernel_w} "
                                f"s{o.stride} n{o.batch}", meas_us=g.measured[i] * 1e6, pred_us=p[i] * 1e6))
    df = pd.DataFrame(recs)
    return df.loc[df.err.abs().sort_values(ascending=False).index[:n]]


def fit_generation(rows: list[dict], shipped: dict, table: dict, gen: str) -> dict:
    """``gen``'s three tensor pass factors by least squares on ``rows``, all else fixed at ``shipped``."""
    without = {k: v for k, v in shipped.items() if k not in keys(gen)}
    fixed = {k: dict(v, lower=without[k], upper=without[k]) for k, v in table.items() if k in without}
    free = {k: table[k] for k in keys(gen)}
    return gc.refit(gc.groups_of(rows), without | {k: v["prior"] for k, v in free.items()}, fixed | free)


def chunks(rows: list[dict], shipped: dict) -> None:
    for cb in (32, 64, 128, 256):
        fit = dict(shipped, conv_chunk_bytes=float(cb))
        real = gc.load_fit
        gc.load_fit = lambda *a, fit=fit: fit  # Group builds its kernels with the chunk of this fit
        try:
            s = summary(errors(rows, fit))
        finally:
            gc.load_fit = real
        print(f"# conv_chunk_bytes = {cb}")
        print(s[["med", "p90", "bias"]].round(3).T.to_string())


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--chunks", action="store_true", help="the conv_chunk_bytes grid, each device alone")
    ap.add_argument("--worst", type=int, default=0, help="list the N rows with the largest error")
    args = ap.parse_args(argv)
    shipped, table = load_fit(), fit_table()
    rows = tensor_conv_rows()
    pd.set_option("display.width", 200)
    if args.chunks:
        chunks(rows, shipped)
        return
    if args.worst:
        print(worst(rows, shipped, args.worst).round(2).to_string(index=False))
        return
    no_tensor = {k: v for k, v in shipped.items() if "_tensor@" not in k or not k.startswith("conv")}
    own = {}
    for dev, gen in GENS.items():
        own[gen] = fit_generation([r for r in rows if r["device"] == dev], no_tensor, table, gen)
    held, ins = [], []
    for dev, gen in GENS.items():
        other = next(g for g in GENS.values() if g != gen)
        dev_rows = [r for r in rows if r["device"] == dev]
        held.append(errors(dev_rows, no_tensor | {k: own[other][k] for k in keys(other)}))
        ins.append(errors(dev_rows, no_tensor | {k: own[gen][k] for k in keys(gen)}))
    for name, df in (("held out (the other generation's pass factors)", pd.concat(held)),
                     ("in sample", pd.concat(ins))):
        print(f"# {name}")
        print(summary(df).round(3).to_string())
    for gen in GENS.values():
        print(f"# fitted on the {gen} rows:", {k: round(own[gen][k], 4) for k in keys(gen)})


if __name__ == "__main__":
    main()
