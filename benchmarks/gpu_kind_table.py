"""The GPU model per device and kind of kernel, held out (issue 32's table): every measured device,
every precision, every kind (GEMM per precision, conv per pass, RNN per pass), the datasheet roofline
next to the model, against the aim |ln(pred/meas)| median <= 0.10 and p90 <= 0.30.

* ``held out`` for the fitted devices (DeepBench's sheets and the H100 set): each device held out in
  turn, the constants refitted from their priors on the others
  (:func:`gpu_calibration.loo_predictions`; a generation with no device left borrows the nearest
  one's constants, as an unmeasured GPU is priced); for the H200 set: the shipped constants (no fit
  ever sees it).
* ``in sample``: the shipped constants on the fitted devices (for comparison).

The leave-one-device-out refits take ~25 minutes on a 2-core box: ``--loo-save FILE`` stores the
per-row held-out predictions this command computed, ``--loo-from FILE`` reads them back (checked
row by row against the measured set) so that the table can be reprinted; ``--no-loo`` prints the
in-sample columns only.

    python benchmarks/gpu_kind_table.py [--no-loo] [--loo-save FILE | --loo-from FILE] [--worst N]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))  # siblings

from gpu_calibration import groups_of, loo_predictions
from gpu_heldout import shape_of
from gpu_measured import all_rows, h200_rows

from asicsim._src.hw.gpu_model import fit_table, load_fit

MED_AIM, P90_AIM = 0.10, 0.30


def _dims(r: dict) -> str:
    op = r["ops"][0]
    if r["kind"].startswith(("gemm", "sparse")):
        return f"{op.M}x{op.N}x{op.K} {'T' if op.a_transposed else 'N'}{'T' if op.b_transposed else 'N'}"
    if r["kind"].startswith("rnn"):
        return f"{op.cell} h{op.hidden} b{op.batch} t{op.steps}"
    return op.label


def row_frame(groups, preds: dict[str, list[np.ndarray]]) -> pd.DataFrame:
    """One record per measured row: device, precision, kind, shape class, the op, measured seconds,
    the roofline's and each prediction's (``preds``: name -> one array per group)."""
    recs = []
    for gi, g in enumerate(groups):
        naive = g.naive()
        for i, r in enumerate(g.rows):
            rec = dict(device=g.device, precision=g.precision, kind=r["kind"], shape=shape_of(r, g.path.name),
                       op=_dims(r), meas=g.measured[i], naive=naive[i])
            rec |= {name: p[gi][i] for name, p in preds.items()}
            recs.append(rec)
    return pd.DataFrame(recs)


def kind_table(df: pd.DataFrame, cols=("held_out",)) -> pd.DataFrame:
    """Per device x precision x kind: rows, |ln(pred/meas)| median and p90 of the roofline and of
    each column in ``cols``, the bias exp(median signed ln) of the first, and whether it meets the aim."""
    out = []
    for key, g in df.groupby(["device", "precision", "kind"], sort=True):
        rec = dict(zip(("device", "precision", "kind"), key, strict=True), n=len(g))
        for c in ("naive", *cols):
            e = np.log(g[c].to_numpy() / g.meas.to_numpy())
            rec[f"{c}_med"], rec[f"{c}_p90"] = float(np.median(np.abs(e))), float(np.quantile(np.abs(e), 0.9))
            if c == cols[0]:
                rec["bias"] = float(np.exp(np.median(e)))
        rec["aim"] = "yes" if rec[f"{cols[0]}_med"] <= MED_AIM and rec[f"{cols[0]}_p90"] <= P90_AIM else "no"
        out.append(rec)
    return pd.DataFrame(out).set_index(["device", "precision", "kind"])


def save_loo(path: str, groups, loo: list[np.ndarray]) -> None:
    pd.DataFrame([dict(device=g.device, precision=g.precision, row=i, meas=g.measured[i], pred=p[i])
                  for g, p in zip(groups, loo, strict=True) for i in range(len(g.rows))]).to_csv(path, index=False)


def load_loo(path: str, groups) -> list[np.ndarray]:
    """Held-out predictions stored by ``--loo-save``; an error if they are not of these rows."""
    f = pd.read_csv(path)
    out = []
    for g in groups:
        s = f[(f.device == g.device) & (f.precision == g.precision)].sort_values("row")
        if len(s) != len(g.rows) or not np.allclose(s.meas.to_numpy(), g.measured, rtol=1e-12):
            raise ValueError(f"{path}: its {g.device} {g.precision} rows are not the measured set's "
                             f"({len(s)} stored, {len(g.rows)} measured); rerun with --loo-save")
        out.append(s.pred.to_numpy())
    return out


def frames(loo: str | bool | None = None, save: str | None = None, fit: dict | None = None) -> pd.DataFrame:
    """All rows: the fitted devices (``in_sample``, and ``held_out`` unless ``loo`` is False: a file
    of stored predictions, or computed when None) and the H200 (held out by construction)."""
    fit = load_fit() if fit is None else fit
    fitted = groups_of(all_rows())
    preds = {"in_sample": [g.predict(fit) for g in fitted]}
    if loo is not False:
        if isinstance(loo, str):
            preds["held_out"] = load_loo(loo, fitted)
        else:
            table = fit_table()
            preds["held_out"] = loo_predictions(fitted, {k: v["prior"] for k, v in table.items()}, table)
            if save:
                save_loo(save, fitted, preds["held_out"])
    a = row_frame(fitted, preds).assign(set="fit set")
    held = groups_of(h200_rows())
    p = [g.predict(fit) for g in held]
    b = row_frame(held, {"in_sample": p, "held_out": p} if loo is not False else {"in_sample": p})
    return pd.concat([a, b.assign(set="held out")], ignore_index=True)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--no-loo", action="store_true", help="in-sample columns only (seconds, not ~25 minutes)")
    ap.add_argument("--loo-save", help="store the held-out predictions this run computes (CSV)")
    ap.add_argument("--loo-from", help="read held-out predictions a --loo-save run stored")
    ap.add_argument("--worst", type=int, default=10, help="rows listed with the largest held-out error")
    args = ap.parse_args(argv)
    df = frames(False if args.no_loo else args.loo_from, args.loo_save)
    cols = ("in_sample",) if args.no_loo else ("held_out", "in_sample")
    pd.set_option("display.width", 220)
    pd.set_option("display.max_rows", 500)
    print(f"# {len(df)} rows; |ln(pred/meas)| median / p90; naive = datasheet roofline; bias = exp(median "
          f"signed) of {cols[0]}; aim: median <= {MED_AIM}, p90 <= {P90_AIM} ({cols[0]})")
    t = kind_table(df, cols)
    print(t.round(3).to_string())
    met = t.aim == "yes"
    print(f"\n# meets the aim: {int(met.sum())} of {len(t)} device x precision x kind groups "
          f"({int(t.n[met].sum())} of {int(t.n.sum())} rows)")
    c = cols[0]
    worst = df.assign(err=np.log(df[c] / df.meas)).assign(abs_err=lambda d: d.err.abs()).nlargest(args.worst, "abs_err")
    worst = worst.assign(meas_us=worst.meas * 1e6, pred_us=worst[c] * 1e6)
    print(f"\n# worst {args.worst} rows ({c})")
    print(worst[["device", "precision", "kind", "shape", "op", "meas_us", "pred_us", "err"]].round(3)
          .to_string(index=False))


if __name__ == "__main__":
    main()
