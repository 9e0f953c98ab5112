"""Volta's own GPU constants, fitted on DeepBench's V100 GEMM sheet only, and their held-out error.

The V100 rows (``data/deepbench/measured/v100_gemm_results.csv``; fp32 SIMT and fp16 tensor-core
GEMMs, the latter padded to multiples of 8 as DeepBench ran them:
:func:`gpu_measured.deepbench_tensor_padding`) fit the Volta constants GEMMs inform (``KEYS``),
every other constant fixed at the shipped fit (no other device's rows inform a ``@Volta`` key, so
this is the joint fit's answer for them too). Printed per precision x shape, median / p90 of
|ln(pred/meas)| and bias:

* ``borrowed``: V100 held out, priced with the nearest generations' constants (what a GPU without
  measurements gets, and the leave-one-device-out prediction of the V100);
* ``two-fold``: the Volta constants fitted on half the shapes (alternate (M, N, K) in sorted
  order), the other half predicted, and back;
* ``in sample``: fitted on every V100 row (the values shipped in gpu_fit.toml).

    python benchmarks/gpu_volta.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_calibration import groups_of, refit
from gpu_heldout import shape_of
from gpu_measured import deepbench_rows

from asicsim._src.hw.gpu_model import fit_table, load_fit

KEYS = ("eff_tensor", "eff_simt", "launch_us", "cta_k_overhead", "occ_exp", "smax_p", "smax_p_stream")


def v100_rows() -> list[dict]:
    return [r for r in deepbench_rows() if r["device"] == "V100"]


def errors(rows: list[dict], fit: dict) -> pd.DataFrame:
    recs = []
    for g in groups_of(rows):
        p = g.predict(fit)
        recs += [dict(precision=g.precision, shape=shape_of(r, g.path.name), err=np.log(p[i] / g.measured[i]))
                 for i, r in enumerate(g.rows)]
    return pd.DataFrame(recs)


def summary(df: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    return df.groupby(by).err.agg(n="size", med=lambda s: np.median(np.abs(s)),
                                  p90=lambda s: np.quantile(np.abs(s), 0.9), bias=lambda s: np.exp(np.median(s)))


def fit_volta(rows: list[dict], shipped: dict, table: dict) -> dict:
    """The ``@Volta`` KEYS by least squares on ``rows``, all else fixed at ``shipped``; each starts
    from and is bounded like the shipped table's entry."""
    without = {k: v for k, v in shipped.items() if not k.endswith("@Volta")}
    fixed = {k: dict(v, lower=without[k], upper=without[k]) for k, v in table.items() if k in without}
    free = {f"{k}@Volta": table[f"{k}@Volta"] for k in KEYS}
    return refit(groups_of(rows), without | {k: v["prior"] for k, v in free.items()}, fixed | free)


def main() -> None:
    shipped, table = load_fit(), fit_table()
    rows = v100_rows()
    borrowed = {k: v for k, v in shipped.items() if not k.endswith("@Volta")}
    key = {id(r): (r["ops"][0].M, r["ops"][0].N, r["ops"][0].K) for r in rows}
    shapes = sorted(set(key.values()))
    fold = {s: i % 2 for i, s in enumerate(shapes)}
    two = []
    for k in (0, 1):
        f = fit_volta([r for r in rows if fold[key[id(r)]] != k], shipped, table)
        two.append(errors([r for r in rows if fold[key[id(r)]] == k], f))
    full = fit_volta(rows, shipped, table)
    pd.set_option("display.width", 200)
    for name, df in (("borrowed (V100 held out)", errors(rows, borrowed)), ("two-fold", pd.concat(two)),
                     ("in sample", errors(rows, full))):
        print(f"# {name}")
        print(summary(df, ["precision", "shape"]).round(3).to_string())
        print(summary(df, ["precision"]).round(3).to_string())
        a = np.abs(df.err)
        print(f"all {len(a)} rows: {np.median(a):.3f} / {np.quantile(a, 0.9):.3f}")
    print("# fitted on every V100 row:", {k: round(full[f"{k}@Volta"], 4) for k in KEYS})


if __name__ == "__main__":
    main()
