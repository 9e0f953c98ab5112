"""The GPU model on the held-out H200 set (``data/measured/h200/``, never in a fit): error per
precision x kind x shape next to the datasheet roofline, and the worst rows.

Shape classes of a GEMM: ``skinny`` (M or N <= 16: cuBLAS's GEMV-like kernels), ``long_k``
(K >= 100 000), ``unaligned`` (a leading dimension off the path's alignment,
:func:`asicsim._src.hw.gpu_kernels.gemm_align`), else ``gemm``; an RNN layer is ``rnn``. Every row is
priced with ``operands="warm"`` (the protocol: back-to-back calls on the same operands).
Error = ln(predicted / measured): median and 90th percentile of its magnitude, and ``bias`` =
exp(median signed error) (> 1: predicted slower than measured).

    python benchmarks/gpu_heldout.py [--fit FILE] [--worst N] [--by-kind]

``--by-kind``: the table per device x precision x kind (median / p90 / bias) of the H100 set (the
fit set, in sample) and the H200 set (held out), the aim being median <= 0.10 and p90 <= 0.30.
Every device held out (the fitted ones by leave-one-device-out), next to the roofline, with the
worst rows: ``benchmarks/gpu_kind_table.py``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))  # gpu_measured, gpu_calibration

from gpu_calibration import groups_of
from gpu_measured import h200_rows

from asicsim._src.hw.gpu import PATH_ALIGN
from asicsim._src.hw.gpu_model import load_fit


def shape_of(row: dict, path: str) -> str:
    op = row["ops"][0]
    if row["kind"] != "gemm":
        return row["kind"].split("_")[0]  # rnn, conv
    if min(op.M, op.N) <= 16:
        return "skinny"
    if op.K >= 100_000:
        return "long_k"
    from asicsim._src.hw.gpu_kernels import gemm_align
    if path in PATH_ALIGN and gemm_align(op) % PATH_ALIGN[path]:
        return "unaligned"
    return "gemm"


def heldout_frame(fit: dict | None = None, rows: list[dict] | None = None) -> pd.DataFrame:
    """One record per H200 row (or per row of ``rows``): precision, kind, shape, shape of the op,
    measured and predicted seconds, the roofline's, and the signed log errors."""
    fit = load_fit() if fit is None else fit
    recs = []
    for g in groups_of(h200_rows() if rows is None else rows):
        pred, naive = g.predict(fit), g.naive()
        for i, r in enumerate(g.rows):
            op = r["ops"][0]
            dims = (f"{op.M}x{op.N}x{op.K} {'T' if op.a_transposed else 'N'}{'T' if op.b_transposed else 'N'}"
                    if r["kind"].startswith("gemm") else f"{op.cell} h{op.hidden} b{op.batch} t{op.steps}"
                    if r["kind"].startswith("rnn") else op.label)
            recs.append(dict(device=g.device, precision=g.precision, kind=r["kind"],
                             shape=shape_of(r, g.path.name), op=dims, meas_us=g.measured[i] * 1e6,
                             pred_us=pred[i] * 1e6, fit=np.log(pred[i] / g.measured[i]),
                             naive=np.log(naive[i] / g.measured[i])))
    return pd.DataFrame(recs)


def table(df: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    def p90(s):
        return float(np.quantile(np.abs(s), 0.9))

    def med(s):
        return float(np.median(np.abs(s)))

    return df.groupby(by).agg(n=("fit", "size"), naive_med=("naive", med), naive_p90=("naive", p90),
                              fit_med=("fit", med), fit_p90=("fit", p90),
                              fit_bias=("fit", lambda s: float(np.exp(np.median(s)))))


def persistent_rows() -> list[dict]:
    """The H200 RNN rows PyTorch runs with cuDNN's persistent kernel (asicsim._src.hw.gpu_rnn)."""
    from gpu_measured import design_for

    from asicsim._src.hw.gpu_rnn import rnn_algo

    d = design_for("H200", "fp16")
    return [r for r in h200_rows() if r["kind"] == "rnn_fwd" and r["precision"] == "fp16"
            and rnn_algo(r["ops"][0], "fwd", d, "float16") != "standard"]


def fit_persistent(rows: list[dict], fit: dict) -> dict:
    """``persist_eff@Hopper`` and ``persist_step_us@Hopper`` by least squares on ln(pred/meas)."""
    from scipy.optimize import least_squares

    g = groups_of(rows)[0]
    keys = ("persist_eff@Hopper", "persist_step_us@Hopper")

    def resid(x):
        return np.log(g.predict(fit | dict(zip(keys, x, strict=True))) / g.measured)

    sol = least_squares(resid, [0.05, 1.0], bounds=([1e-3, 0.0], [1.0, 20.0]))
    return dict(zip(keys, sol.x.tolist(), strict=True))


def persistent_report(fit: dict) -> None:
    """The persistent constants fitted on all persistent H200 rows (what the fit file ships), and
    a two-fold check: fitted on the layers of hidden <= 512, predicting hidden 1024, and back."""
    rows = persistent_rows()
    print(f"# persistent RNN rows on the H200: {len(rows)}; constants on all of them:", fit_persistent(rows, fit))
    for name, train, test in (("h<=512 -> h1024", lambda h: h <= 512, lambda h: h > 512),
                              ("h1024 -> h<=512", lambda h: h > 512, lambda h: h <= 512)):
        f = fit | fit_persistent([r for r in rows if train(r["ops"][0].hidden)], fit)
        g = groups_of([r for r in rows if test(r["ops"][0].hidden)])[0]
        e = np.abs(np.log(g.predict(f) / g.measured))
        print(f"  {name}: {f['persist_eff@Hopper']:.4f}, {f['persist_step_us@Hopper']:.3f} us; held-out "
              f"median {np.median(e):.3f} p90 {np.quantile(e, 0.9):.3f} ({len(e)} rows)")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fit", help="a fit file written like asicsim/_src/hw/data/gpu_fit.toml")
    ap.add_argument("--worst", type=int, default=10, help="rows listed with the largest error")
    ap.add_argument("--persistent", action="store_true",
                    help="fit the persistent-RNN constants on the H200's persistent rows, with a two-fold check")
    ap.add_argument("--by-kind", action="store_true",
                    help="per device x precision x kind: the H100 set (fit, in sample) and the H200 set (held out)")
    args = ap.parse_args(argv)
    if args.by_kind:
        from gpu_measured import h100_rows

        fit = load_fit(args.fit) if args.fit else None
        df = pd.concat([heldout_frame(fit, h100_rows()), heldout_frame(fit)])
        print("# |ln(pred/meas)| median, p90; bias = exp(median signed); H100 in sample, H200 held out")
        print(table(df, ["device", "precision", "kind"]).round(3).to_string())
        return
    if args.persistent:
        persistent_report(load_fit(args.fit) if args.fit else load_fit())
        return
    df = heldout_frame(load_fit(args.fit) if args.fit else None)
    pd.set_option("display.width", 200)
    print(f"# H200 held out ({len(df)} rows): |ln(pred/meas)| median, p90; bias = exp(median signed)")
    print(table(df, ["device", "precision", "kind", "shape"]).round(3).to_string())
    print()
    print(table(df, ["device", "precision", "kind"]).round(3).to_string())
    print()
    a = np.abs(df.fit)
    print(f"all rows fit: median {a.median():.3f} p90 {a.quantile(0.9):.3f}; naive: median "
          f"{df.naive.abs().median():.3f} p90 {df.naive.abs().quantile(0.9):.3f}")
    print()
    worst = df.assign(err=a).nlargest(args.worst, "err")
    print(worst[["precision", "shape", "op", "meas_us", "pred_us", "fit"]].round(3).to_string(index=False))


if __name__ == "__main__":
    main()
