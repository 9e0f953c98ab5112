"""Write ``data/deepbench/measured/v100_gemm_results.csv``: the GEMM rows of DeepBench's V100 sheet.

Source: ``results/train/DeepBench_NV_V100.xlsx`` of github.com/baidu-research/DeepBench (commit
da81ba7820739e2e506dc27f382d15be5479f98f), sheets "Results FP32" and "Results - FP16 ip, Mixed
math" (16-bit inputs, 32-bit accumulation: tensor cores), rows 5-169 (Dense Matrix Multiplication).
Columns as ``gemm_results.csv`` (its README); the xlsx is read with the standard library only.

    python scripts/deepbench_v100_gemm.py PATH/TO/DeepBench_NV_V100.xlsx
"""

from __future__ import annotations

import csv
import re
import sys
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "data" / "deepbench" / "measured" / "v100_gemm_results.csv"
NS = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
SHEETS = {1: ("Results FP32", "fp32"), 2: ("Results - FP16 ip, Mixed math", "fp16_mixed")}
COLUMNS = ["kind", "set", "device", "precision", "M", "N", "K", "a_transposed", "b_transposed", "time_us",
           "tflops", "flops", "tflops_recomputed", "padded", "M_label", "K_label", "notes", "source_file",
           "sheet", "xlsx_row"]


def sheet_rows(z: zipfile.ZipFile, index: int) -> list[tuple[int, dict[str, str]]]:
    strings = ["".join(s.itertext()) for s in ET.fromstring(z.read("xl/sharedStrings.xml")).findall(f"{NS}si")]
    rows = []
    for r in ET.fromstring(z.read(f"xl/worksheets/sheet{index}.xml")).iter(f"{NS}row"):
        vals = {}
        for c in r.findall(f"{NS}c"):
            v = c.find(f"{NS}v")
            if v is not None:
                col = re.match(r"[A-Z]+", c.get("r")).group()
                vals[col] = strings[int(v.text)] if c.get("t") == "s" else v.text
        rows.append((int(r.get("r")), vals))
    return rows


def main(xlsx: str) -> None:
    out = []
    with zipfile.ZipFile(xlsx) as z:
        for index, (sheet, precision) in SHEETS.items():
            for n, v in sheet_rows(z, index):
                if not 5 <= n <= 169 or not all(k in v for k in "CDEFGIJ"):
                    continue
                m, nn, k = (int(float(v[c])) for c in "CDE")
                labels = (m, k)
                notes = ""
                if 1530 in (m, k):  # as gemm_results.csv: the benchmark code runs 1536
                    m, k = (1536 if x == 1530 else x for x in (m, k))
                    notes = "sheet labels K=1530; benchmark code runs K=1536 (code/kernels/gemm_problems.h)"
                t = float(v["I"]) * 1000.0
                flops = 2 * m * nn * k
                out.append(dict(kind="gemm", set="train", device="V100", precision=precision, M=m, N=nn, K=k,
                                a_transposed=int(v["F"] == "T"), b_transposed=int(v["G"] == "T"),
                                time_us=round(t, 6), tflops=float(v["J"]), flops=flops,
                                tflops_recomputed=round(flops / t / 1e6, 6), padded="", M_label=labels[0],
                                K_label=labels[1], notes=notes, source_file="results/train/DeepBench_NV_V100.xlsx",
                                sheet=sheet, xlsx_row=n))
    with OUT.open("w", newline="") as f:
        w = csv.DictWriter(f, COLUMNS)
        w.writeheader()
        w.writerows(out)
    print(f"{len(out)} rows -> {OUT}")


if __name__ == "__main__":
    main(sys.argv[1])
