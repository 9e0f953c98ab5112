"""The ring all-reduce model against DeepBench's measured all-reduce sheets (time and bus bandwidth).

Error is |ln(predicted time / measured time)| (the same for bus bandwidth, which is bytes / time up
to a constant), median and 90th percentile per device x rank count, for four predictors:

- ``fit``: the device's own fitted topology (``deepbench_<device>``: overhead, and latency and
  effective bandwidth for <= 4 ranks, 5-8 ranks and > 8 ranks = InfiniBand; 7 constants fitted on
  that device's 28-35 rows) - in sample;
- ``loso``: the same fit redone without one message size, predicting that size (out of sample);
- ``sibling``: the fit of the other device of the same machine kind (TitanX_Pascal <-> GTX1080Ti,
  M40 <-> P100), never fitted on the predicted device;
- ``preset``: the generic ``pcie3`` link up to 8 ranks, ``infiniband_fdr`` above (datasheet
  bandwidths x fractions fitted on TitanX_Pascal; no per-call overhead, no socket level).

Then, per link kind, where data-parallel strong scaling stops paying (efficiency < 0.5) for the
preset models on dc_bf16_128x128 and gpu_v100 (fp16 tensor cores) (global batch 4096, 1..64
chips), without and with overlap, and weak scaling efficiency at 64 chips (per-chip batch 64).

    python benchmarks/allreduce_validation.py [--design dc_bf16_128x128 ...]
"""

from __future__ import annotations

import argparse
import platform

import numpy as np
import pandas as pd

from asicsim._src.hw.links import (
    LINKS,
    TOPOLOGIES,
    Topology,
    fit_topology,
    get_topology,
    measured_allreduce,
    predict_rows,
)
from asicsim._src.system.scaling import scaling_curve, stops_paying

#: the scaling table's designs: the illustrative bf16 accelerator, and V100 on its tensor cores
DEFAULT_DESIGNS = (("dc_bf16_128x128", None), ("gpu_v100", "act=fp16,weight=fp16,acc=fp32"))
SCALING_LINKS = ("nvlink", "nvlink3", "pcie3", "pcie4", "infiniband_fdr", "infiniband_edr",
                 "infiniband_hdr", ("nvlink", "infiniband_edr"), "deepbench_titanx_pascal")

SIBLING = {"TitanX_Pascal": "GTX1080Ti", "GTX1080Ti": "TitanX_Pascal", "M40": "P100", "P100": "M40"}


def predictions() -> pd.DataFrame:
    d = measured_allreduce()
    preset = Topology.hierarchy(LINKS["pcie3"], LINKS["infiniband_fdr"], 8)
    parts = []
    for dev, g in d.groupby("device", sort=False):
        fit = predict_rows(g, TOPOLOGIES[f"deepbench_{dev.lower()}"])
        loso = pd.concat([predict_rows(g[g.bytes == size], fit_topology(g[g.bytes != size], dev))
                          for size in g.bytes.unique()]).loc[g.index]
        sib = SIBLING[dev]
        sibling = predict_rows(g, fit_topology(d[d.device == sib], sib))
        pre = predict_rows(g, preset)
        out = fit.rename(columns={"pred_time_us": "pred_fit_us", "pred_busbw_gbps": "busbw_fit",
                                  "abs_log_err": "err_fit"})
        out["busbw_preset"] = pre["pred_busbw_gbps"]
        for name, p in (("loso", loso), ("sibling", sibling), ("preset", pre)):
            out[f"err_{name}"] = p["abs_log_err"]
        parts.append(out)
    return pd.concat(parts)


def table(p: pd.DataFrame) -> pd.DataFrame:
    def summarise(g: pd.DataFrame) -> pd.Series:
        big = g[g.bytes == g.bytes.max()].iloc[0]
        s = {"rows": len(g), "busbw_meas": big.busbw_gbps_recomputed, "busbw_fit": big.busbw_fit,
             "busbw_preset": big.busbw_preset}
        for k in ("fit", "loso", "sibling", "preset"):
            s[f"med_{k}"] = g[f"err_{k}"].median()
            s[f"p90_{k}"] = g[f"err_{k}"].quantile(0.9)
        return pd.Series(s)

    rows = [summarise(g).rename((dev, str(n))) for (dev, n), g in p.groupby(["device", "ranks"], sort=False)]
    rows += [summarise(g).rename((dev, "all")) for dev, g in p.groupby("device", sort=False)]
    rows.append(summarise(p).rename(("ALL", "all")))
    nccl = p[p.algorithm.str.startswith("NCCL")]
    rows.append(summarise(nccl).rename(("ALL NCCL rows", "all")))
    loso_ok = p[p.bytes > p.bytes.min()]
    rows.append(summarise(loso_ok).rename(("ALL but 0.4 MB", "all")))
    t = pd.DataFrame(rows)
    pooled = [i for i, (_, r) in enumerate(t.index) if r == "all"]
    t.iloc[pooled, 1:4] = np.nan  # busbw of pooled rows: no single measurement to show
    t.index = pd.MultiIndex.from_tuples(t.index, names=["device", "ranks"])
    t["rows"] = t["rows"].astype(int)
    return t


def scaling_table(design: str, formats: str | None = None, models=("mlp_2560", "rnn_2560"),
                  batch: int = 4096) -> None:
    chips = (1, 2, 4, 8, 16, 32, 64)
    print(f"strong scaling, global batch {batch}, design {design} ({formats or 'its own formats'}), "
          "fp32 gradients: first chip count with efficiency < 0.5 "
          "(per-chip batch there); weak scaling efficiency at 64 chips, per-chip batch 64")
    print(f"{'model':9s} {'link':28s} {'T1 ms':>8s} {'stops at (b/chip)':>18s} {'overlap: stops at':>18s} "
          f"{'eff@8':>6s} {'eff@64':>6s} {'weak eff@64':>11s}")
    for model in models:
        for spec in SCALING_LINKS:
            topo = get_topology(*spec, 8) if isinstance(spec, tuple) else get_topology(spec)
            plain = scaling_curve(model, design, topo, chips, batch, formats=formats)
            over = scaling_curve(model, design, topo, chips, batch, formats=formats, overlap=True)
            weak = scaling_curve(model, design, topo, (1, 64), 64, mode="weak", formats=formats,
                                 overlap=True)

            def at(points):
                s = stops_paying(points)
                return "pays to 64" if s is None else f"{s['chips']} ({s['batch_per_chip']})"
            eff = {p.chips: p.efficiency for p in plain}
            print(f"{model:9s} {topo.name:28s} {plain[0].step.step_s * 1e3:8.2f} {at(plain):>18s} "
                  f"{at(over):>18s} {eff[8]:6.3f} {eff[64]:6.3f} {weak[-1].efficiency:11.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--design", action="append", help="designs for the scaling table (repeatable)")
    args = ap.parse_args()
    print(f"python {platform.python_version()}, numpy {np.__version__}, pandas {pd.__version__}")
    print("fitted DeepBench topologies (effective GB/s, latency us per ring step; overhead us per call):")
    for name, topo in TOPOLOGIES.items():
        levels = ", ".join(f"<={s or 'inf'}: {link.effective_gbps:.2f} GB/s {link.latency_us:.2f} us"
                           for s, link in topo.levels)
        print(f"  {name:28s} overhead {topo.overhead_us:5.2f} us; {levels}")
    p = predictions()
    print("|ln(pred/meas)| of all-reduce time (= of bus bandwidth); busbw GB/s at the largest message")
    with pd.option_context("display.width", 200, "display.max_columns", 30):
        print(table(p).to_string(float_format=lambda v: f"{v:.3f}"))
    print("loso is out of sample across message sizes; its error comes from the 0.4 MB size, the only\n"
          "latency-bound message (without it the latency terms are unidentified): see 'ALL but 0.4 MB'.")
    worst = p.nlargest(5, "err_fit")[["device", "size_floats", "ranks", "algorithm", "time_us",
                                      "pred_fit_us", "err_fit"]]
    print("largest in-sample errors:")
    print(worst.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    designs = [(d, None) for d in args.design] if args.design else DEFAULT_DESIGNS
    for design, formats in designs:
        scaling_table(design, formats)


if __name__ == "__main__":
    main()
