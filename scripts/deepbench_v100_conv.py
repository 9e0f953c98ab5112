"""Write ``data/deepbench/measured/v100_conv_results.csv``: the convolution rows of DeepBench's V100 sheet.

Source: ``results/train/DeepBench_NV_V100.xlsx`` of github.com/baidu-research/DeepBench (commit
da81ba7820739e2e506dc27f382d15be5479f98f), sheets "Results FP32" and "Results - FP16 ip, Mixed
math" (16-bit inputs, 32-bit accumulation: tensor cores), rows 176-269 (Convolution): forward,
"wrt Inputs" (``bwd_data``) and "wrt Parameters" (``bwd_filter``) times, one row per pass; "N/A*"
(no data gradient for an input layer) and blank cells are left out. Columns as ``conv_results.csv``
(its README); the xlsx is read with the standard library only (``deepbench_v100_gemm.sheet_rows``).

    python scripts/deepbench_v100_conv.py PATH/TO/DeepBench_NV_V100.xlsx
"""

from __future__ import annotations

import csv
import sys
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from deepbench_v100_gemm import SHEETS, sheet_rows

OUT = Path(__file__).resolve().parents[1] / "data" / "deepbench" / "measured" / "v100_conv_results.csv"
COLUMNS = ["kind", "set", "device", "precision", "W", "H", "C", "N", "K", "R", "S", "pad_w", "pad_h",
           "stride_w", "stride_h", "P_out_h", "Q_out_w", "pass", "time_us", "tflops", "flops",
           "tflops_recomputed", "fwd_algo", "padded", "notes", "source_file", "sheet", "xlsx_row"]
#: sheet column of each pass's time (msec) and its TERAFLOPS
PASSES = {"fwd": ("N", "U"), "bwd_data": ("O", "V"), "bwd_filter": ("P", "W")}


def _num(s: str | None) -> float | None:
    try:
        return float(s)
    except (TypeError, ValueError):
        return None


def main(xlsx: str) -> None:
    out = []
    with zipfile.ZipFile(xlsx) as z:
        for index, (sheet, precision) in SHEETS.items():
            for n, v in sheet_rows(z, index):
                if not 176 <= n <= 269 or not all(k in v for k in "CDEFGHIJKLMRS"):
                    continue
                w, h, c, nb, k, s, r, pw, ph, sw, sh, p, q = (int(float(v[x])) for x in "CDEFGHIJKLMRS")  # p, q: the sheet's P (output width), Q (height)
                flops = 2 * nb * k * c * r * s * p * q  # DeepBench's count (README), the sheet's shape
                for ps, (tc, fc) in PASSES.items():
                    ms = _num(v.get(tc))
                    if ms is None:
                        continue
                    t = ms * 1000.0
                    out.append(dict(kind="conv", set="train", device="V100", precision=precision, W=w, H=h, C=c,
                                    N=nb, K=k, R=r, S=s, pad_w=pw, pad_h=ph, stride_w=sw, stride_h=sh,
                                    P_out_h=q, Q_out_w=p, **{"pass": ps}, time_us=round(t, 6),
                                    tflops=_num(v.get(fc)) or "", flops=flops,
                                    tflops_recomputed=round(flops / t / 1e6, 6),
                                    fwd_algo=v.get("X", "") if ps == "fwd" else "", padded="", notes="",
                                    source_file="results/train/DeepBench_NV_V100.xlsx", sheet=sheet, xlsx_row=n))
    with OUT.open("w", newline="") as f:
        wr = csv.DictWriter(f, COLUMNS)
        wr.writeheader()
        wr.writerows(out)
    print(f"{len(out)} rows -> {OUT}")


if __name__ == "__main__":
    main(sys.argv[1])
