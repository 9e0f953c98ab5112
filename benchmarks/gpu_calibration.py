"""The GPU model against measured kernel times: fit, error tables, leave-one-device-out.

Rows (:mod:`gpu_measured`, beside this file): DeepBench's published sheets (P100 PCIe, TitanX
Pascal, M40, GTX 1080 Ti, T4; GEMM, GEMM-based conv, RNN without input projections, sparse GEMM;
V100 GEMMs and convs; tensor-core GEMMs and convs priced padded, as DeepBench ran them)
and the H100 set (fp32 and fp16 GEMMs, fp32 convolutions in three passes, fp32 RNN layers with
their input projections, and the two sustained tensor-core rates under the 700 W cap). Every row is
priced with ``operands="warm"``: both protocols time back-to-back calls on the same operands; and
with its set's ``sustained`` (:mod:`gpu_measured`: the H100 set's graph replays are bursts that the
power cap does not reach, its power-cap rows and DeepBench's 400-call loops are sustained).

For each row the model (the same kernels and times :func:`asicsim._src.hw.gpu_cost.gpu_cost_many`
returns; ``--check-public`` asserts it) predicts the time; the error is ``|ln(predicted /
measured)|``, reported per device x precision x kind as median and 90th percentile for

* ``naive``: the datasheet roofline ``max(flops / peak of the precision, ideal bytes / datasheet
  bandwidth)`` (P100 fp16 at its half2 rate, T4 int8 at its tensor rate): the floor to beat;
* ``fit``: the shipped constants (``asicsim/_src/hw/data/gpu_fit.toml``; ``--refit`` refits them on all
  devices first, ``--write`` stores the refit);
* ``loo``: each device held out in turn: the constants refit from their priors on the other
  devices, then the held-out device predicted. Nothing is fitted per device; constants of a
  generation (``name@Gen``) are fitted only when a device of that generation is in the training
  rows, so holding out the only device of a generation (M40: Maxwell, V100: Volta, T4: Turing, H100: Hopper)
  predicts it with the nearest generation's constants, as a GPU without measurements is priced.

The fit is ``scipy.optimize.least_squares`` on ``ln(predicted / measured)``, soft-L1 loss, rows
weighted so that every device x precision x kind group counts equally.

    python benchmarks/gpu_calibration.py [--refit] [--write] [--no-loo] [--check-public]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))  # gpu_measured, beside this file

from gpu_measured import DESIGNS, FORMATS, all_rows, design_for

from asicsim._src.cli_progress import StepProgress
from asicsim._src.hw.gpu import precision_path
from asicsim._src.hw.gpu_cost import gpu_cost_many, resolve_gpu_formats, rnn_algos
from asicsim._src.hw.gpu_kernels import Kernels, conv_chunk, conv_pad, op_kernels, stored_bytes
from asicsim._src.hw.gpu_model import (
    FIT_FILE,
    fit_table,
    generation_constants,
    kernel_times,
    load_fit,
)


class Group:
    """The rows of one device x precision, with their kernels built once for fast refits."""

    def __init__(self, device: str, precision: str, rows: list[dict]):
        self.device, self.precision, self.rows = device, precision, rows
        self.design = design_for(device, precision)
        self.formats = resolve_gpu_formats(self.design, FORMATS[precision])
        self.path = precision_path(self.design, self.formats)
        self.skip = rows[0]["skip_input"]
        ops = [op for r in rows for op in r["ops"]]
        self.passes = [p for r in rows for p in r["passes"]]
        self.ops = ops
        self.op_row = np.repeat(np.arange(len(rows)), [len(r["ops"]) for r in rows])
        algos = rnn_algos(ops, self.passes, self.design, self.formats)
        # the convolutions' layout: one per device x precision (its protocol)
        self.layout = next((r["layout"] for r in rows if "layout" in r), "NHWC")
        krows = [k for i, (op, p) in enumerate(zip(ops, self.passes, strict=True))
                 for k in op_kernels(op, i, p, rnn_skip_input=self.skip, rnn_algo=algos[i],
                                     conv_pad=conv_pad(self.path), conv_layout=self.layout,
                                     conv_chunk=conv_chunk(self.path, generation_constants(
                                         load_fit(), self.design.architecture)[0]))]
        by = {r: self.formats[r].storage_bits / 8 for r in ("act", "weight", "out")}
        self.kernels = Kernels.build(krows, by["act"], by["weight"], by["out"])
        self.row_sustained = np.array([r.get("sustained", True) for r in rows], dtype=bool)
        self.sustained = self.row_sustained[self.op_row][self.kernels.owner]  # per kernel
        self.measured = np.array([r["time_us"] for r in rows]) * 1e-6
        self.kinds = np.array([r["kind"] for r in rows])

    def predict(self, fit: dict) -> np.ndarray:
        c, _ = generation_constants(fit, self.design.architecture)
        t = kernel_times(self.kernels, self.design, self.path, c, operands="warm",
                         sustained=self.sustained)["time"]
        per_op = np.bincount(self.kernels.owner, weights=t, minlength=len(self.ops))
        return np.bincount(self.op_row, weights=per_op, minlength=len(self.rows))

    def predict_public(self, fit: dict) -> np.ndarray:
        """The same through gpu_cost_many (what asicsim.cost returns)."""
        per_op = np.zeros(len(self.ops))
        for sustained in (True, False):
            m = self.row_sustained[self.op_row] == sustained
            res = gpu_cost_many([o for o, k in zip(self.ops, m, strict=True) if k], self.design,
                                FORMATS[self.precision], fit=fit, passes=[p for p, k in zip(self.passes, m, strict=True) if k],
                                rnn_skip_input=self.skip, operands="warm", sustained=sustained,
                                conv_layout=self.layout)
            per_op[m] = [r.time_s for r in res]
        return np.bincount(self.op_row, weights=per_op, minlength=len(self.rows))

    def naive(self) -> np.ndarray:
        """The datasheet roofline: flops at the precision's peak, each operand once at the bandwidth."""
        d, p = self.design, self.precision
        peak = {"fp32": d.fp32_tflops, "fp16_fp32math": d.fp16_nontensor_tflops or d.fp32_tflops,
                "fp16_mixed": d.fp16_tensor_tflops, "fp16": d.fp16_tensor_tflops, "bf16": d.fp16_tensor_tflops,
                "tf32": d.tf32_tflops, "fp8": d.fp8_tflops,
                "int8": d.int8_tops or 4 * d.fp32_tflops}[p] * 1e12
        k = self.kernels
        by = stored_bytes(k) * k.batch + k.stream_bytes * k.a_bytes
        per_op = np.bincount(k.owner, weights=by, minlength=len(self.ops))
        nbytes = np.bincount(self.op_row, weights=per_op, minlength=len(self.rows))
        flops = np.array([r["flops"] for r in self.rows])
        return np.maximum(flops / peak, nbytes / (d.bandwidth_bytes_per_s))


def groups_of(rows: list[dict]) -> list[Group]:
    keys = sorted({(r["device"], r["precision"]) for r in rows})
    return [Group(dv, pr, [r for r in rows if (r["device"], r["precision"]) == (dv, pr)]) for dv, pr in keys]


def free_keys(groups: list[Group], table: dict) -> list[str]:
    """Constants the rows of ``groups`` inform: shared ones with lower < upper, and a generation's
    own (``name@Gen``) only when a device of that generation is among the rows."""
    gens = {g.design.architecture for g in groups}
    return [k for k, v in table.items() if v["lower"] < v["upper"] and ("@" not in k or k.split("@")[1] in gens)]


def restrict(fit: dict, groups: list[Group]) -> dict:
    """``fit`` without the generation constants of generations absent from ``groups`` (a held-out
    device's generation then borrows the nearest fitted one, as a GPU without measurements does)."""
    gens = {g.design.architecture for g in groups}
    return {k: v for k, v in fit.items() if "@" not in k or k.split("@")[1] in gens}


def refit(groups: list[Group], start: dict, table: dict, tick=None) -> dict:
    """Least squares on ln(pred/meas) over ``groups``; constants with lower == upper stay fixed.
    ``tick()`` after each evaluation of the residuals (a progress line's heartbeat)."""
    from scipy.optimize import least_squares

    free = free_keys(groups, table)
    start = restrict(start, groups)
    lo = np.array([table[k]["lower"] for k in free])
    hi = np.array([table[k]["upper"] for k in free])
    x0 = np.clip(np.array([start[k] for k in free]), lo, hi)
    weights = []
    for g in groups:
        w = np.ones(len(g.rows))
        for kind in set(g.kinds):
            m = g.kinds == kind
            w[m] = 1.0 / np.sqrt(m.sum())
        weights.append(w)

    def resid(x):
        if tick is not None:
            tick()
        fit = dict(start) | dict(zip(free, x, strict=True))
        return np.concatenate([w * np.log(g.predict(fit) / g.measured)
                               for g, w in zip(groups, weights, strict=True)])

    sol = least_squares(resid, x0, bounds=(lo, hi), loss="soft_l1", f_scale=0.1, diff_step=1e-3,
                        x_scale=np.maximum(np.abs(x0), 0.05), max_nfev=400)
    return dict(start) | dict(zip(free, sol.x.tolist(), strict=True))


def error_frame(groups: list[Group], preds: dict[str, list[np.ndarray]]) -> pd.DataFrame:
    recs = []
    for gi, g in enumerate(groups):
        for i, r in enumerate(g.rows):
            rec = {"device": g.device, "precision": g.precision, "kind": r["kind"], "path": g.path.name}
            for name, p in preds.items():
                rec[name] = abs(np.log(p[gi][i] / g.measured[i]))
            rec["fit_signed"] = np.log(preds["fit"][gi][i] / g.measured[i])
            recs.append(rec)
    return pd.DataFrame(recs)


def summary(df: pd.DataFrame, cols: list[str], by: list[str]) -> pd.DataFrame:
    agg = {}
    for c in cols:
        agg[f"{c}_med"] = (c, "median")
        agg[f"{c}_p90"] = (c, lambda s: float(np.quantile(s, 0.9)))
    agg["fit_bias"] = ("fit_signed", lambda s: float(np.exp(np.median(s))))  # pred/meas at the median
    return df.groupby(by).agg(n=(cols[0], "size"), **agg)


def write_fit(fit: dict, table: dict, path: Path, note: str) -> None:
    lines = [
        "# Constants of the GPU cost model (asicsim/_src/hw/gpu_model.py); `name@Generation` is a constant",
        "# of that GPU generation (a generation without its own takes the nearest generation's).",
        "# \"fitted\": least squares on ln(predicted / measured) over data/deepbench/measured/ (P100 PCIe,",
        "# TitanX Pascal, M40, GTX 1080 Ti, T4: GEMM, GEMM-based conv, RNN, sparse GEMM; V100: GEMM, conv) and",
        "# data/measured/h100/ (GEMM fp32/fp16, conv fp32 three passes, RNN fp32 layers), all devices at",
        "# once; refit and rewrite with `python benchmarks/gpu_calibration.py --refit --write`.",
        "# \"assumption\": not identifiable from the measured set (lower == upper: never fitted).",
        "# data/measured/h200/ is never fitted (benchmarks/gpu_heldout.py checks against it); the few",
        "# constants read off its notes or rows (no other set has them) say so in their `how`.",
        "# prior: the start of every fit (also of the leave-one-device-out fits).",
        f"# {note}",
    ]
    for k, v in table.items():
        head = f'[constants."{k}"]' if "@" in k else f"[constants.{k}]"
        lines += ["", head, f"value = {fit.get(k, v['value']):.6g}", f"prior = {v['prior']:g}",
                  f"lower = {v['lower']:g}", f"upper = {v['upper']:g}", f"how = {json.dumps(v['how'])}"]
    path.write_text("\n".join(lines) + "\n")


def loo_predictions(groups: list[Group], priors: dict, table: dict, progress=None) -> list[np.ndarray]:
    """Each device held out in turn: the constants refit on the others, then the device predicted.
    ``progress(devices_done, devices)`` as it goes (and as each fit evaluates)."""
    out: list = [None] * len(groups)
    for i, dev in enumerate(DESIGNS):
        train = [g for g in groups if g.device != dev]
        tick = None if progress is None else (lambda i=i: progress(i, len(DESIGNS)))
        f = restrict(refit(train, priors, table, tick), train)
        for gi, g in enumerate(groups):
            if g.device == dev:
                out[gi] = g.predict(f)
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--refit", action="store_true", help="refit the constants on all devices")
    ap.add_argument("--write", action="store_true", help="store the refit in gpu_fit.toml")
    ap.add_argument("--no-loo", action="store_true", help="skip the leave-one-device-out fits")
    ap.add_argument("--check-public", action="store_true",
                    help="also predict through gpu_cost_many and check it equals the fast path")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    # minutes on a busy machine: a progress line on stderr (every few seconds in a log)
    stages = 3 + bool(args.refit) + (0 if args.no_loo else len(DESIGNS))
    bar = StepProgress("gpu_calibration", f"stages (rows, {'fit, ' if args.refit else ''}predictions, "
                       f"{'' if args.no_loo else f'{len(DESIGNS)} devices held out, '}tables)")
    done = 0

    def stage(finished: int = 0) -> None:
        nonlocal done
        done += finished
        bar.update(done, stages)

    try:
        table = fit_table()
        priors = {k: v["prior"] for k, v in table.items()}
        rows = all_rows()
        groups = groups_of(rows)
        stage(1)
        fit = refit(groups, priors, table, stage) if args.refit else load_fit()
        stage(int(args.refit))
        if args.write:
            write_fit(fit, table, FIT_FILE, f"fitted {datetime.date.today()} on {len(rows)} rows")
        preds = {"naive": [g.naive() for g in groups], "fit": [g.predict(fit) for g in groups]}
        if args.check_public:
            for g in groups:
                assert np.allclose(g.predict_public(fit), g.predict(fit), rtol=1e-9), g.device
        stage(1)
        cols = ["naive", "fit"]
        if not args.no_loo:
            preds["loo"] = loo_predictions(groups, priors, table, lambda i, n: bar.update(done + i, stages))
            stage(len(DESIGNS))
            cols.append("loo")
        df = error_frame(groups, preds)
        stage(1)
    finally:
        bar.close()
    pd.set_option("display.width", 200)
    print(f"# GPU model vs measured kernel times ({len(rows)} rows; {platform.machine()}, "
          f"{os.cpu_count()} cpus, Python {platform.python_version()})")
    print("# |ln(predicted / measured)|: median and 90th percentile; naive = datasheet roofline;")
    print("# fit = shipped constants; loo = the device held out of the fit")
    print(summary(df, cols, ["device", "precision", "kind"]).round(3).to_string())
    print()
    print(summary(df, cols, ["device", "precision"]).round(3).to_string())
    print()
    print(summary(df, cols, ["device"]).round(3).to_string())
    print()
    print("# DeepBench devices (loo: held out) by kind")
    print(summary(df[df.device != "H100"], cols, ["kind"]).round(3).to_string())
    for c in cols:
        print(f"all rows {c}: median {df[c].median():.3f} p90 {df[c].quantile(0.9):.3f}")
    print()
    print("constants:", {k: round(v, 4) for k, v in fit.items()})
    print(f"# {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
