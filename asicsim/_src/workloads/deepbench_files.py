"""DeepBench suite files: where the shipped ones are, the columns each kernel kind has, reading and
checking one file into typed columns (with the csv module: listing the suites loads no pandas),
and the listing ``asicsim workloads`` prints."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path

from asicsim._catalogs import shipped_dir
from asicsim._files import TextFileError, read_text_file
from asicsim._src.workloads.errors import WorkloadError

#: Columns that describe a kernel's shape, per kind, in the order DeepBench's CSVs give them.
SHAPE_COLUMNS: dict[str, tuple[str, ...]] = {
    "gemm": ("M", "N", "K", "a_transposed", "b_transposed"),
    "conv": ("W", "H", "C", "N", "K", "R", "S", "pad_w", "pad_h", "stride_w", "stride_h"),
    "rnn": ("type", "hidden", "batch", "timesteps"),
    "sparse_gemm": ("M", "N", "K", "a_transposed", "b_transposed", "sparsity"),
    "allreduce": ("size_floats", "ranks"),
}
#: DeepBench's flop count per kind (what its TFLOPS divide by); all-reduce moves bytes, no flops.
FLOPS_COLUMN = {"gemm": "flops", "conv": "flops_fwd", "rnn": "flops_fwd",
                "sparse_gemm": "sparse_useful_flops", "allreduce": None}
#: Precisions DeepBench publishes results in (the ``precisions`` column) as asicsim formats.
#: ``fp16_fp32math`` (P100 "pseudo fp16") stores fp16 and computes in fp32; the systolic model sees
#: fp16 operands and an fp32 accumulator, as for ``fp16_mixed`` (tensor cores). int8 GEMMs write
#: int32 C (cuBLAS ``CUDA_R_32I``).
PRECISIONS: dict[str, dict[str, str]] = {
    "fp32": {"act": "fp32", "weight": "fp32", "acc": "fp32", "out": "fp32"},
    "fp16_fp32math": {"act": "fp16", "weight": "fp16", "acc": "fp32", "out": "fp16"},
    "fp16_mixed": {"act": "fp16", "weight": "fp16", "acc": "fp32", "out": "fp16"},
    "int8": {"act": "int8", "weight": "int8", "acc": "int32", "out": "int32"},
}
RNN_TYPES = ("vanilla", "lstm", "gru")


def workloads_dir() -> Path:
    """The shipped ``workloads/`` folder (inside the wheel, or at the repository root)."""
    return shipped_dir("workloads")


def list_suites() -> list[str]:
    """Names of the shipped kernel suites (``workloads/*.csv``)."""
    return sorted(p.stem for p in workloads_dir().glob("*.csv"))


def _kind_of(columns: Sequence[str]) -> str | None:
    cols = set(columns)
    for kind in ("sparse_gemm", "conv", "rnn", "allreduce", "gemm"):  # most specific first
        if set(SHAPE_COLUMNS[kind]) <= cols:
            return kind
    return None


def _int(value: str, where: str, name: str, minimum: int) -> int:
    try:
        v = int(value)
    except ValueError:
        v = None
    if v is None or v < minimum or str(v) != value.strip():
        raise WorkloadError(f"{where}: field {name} = {value!r}; allowed: an integer >= {minimum}")
    return v


def parse_columns(path: Path, name: str) -> tuple[str, dict[str, list]]:
    """Read and check a suite file: (kind, column -> typed values)."""
    try:
        text = read_text_file(path)
    except TextFileError as err:
        raise WorkloadError(str(err)) from None
    reader = csv.DictReader(io.StringIO(text, newline=""))
    columns = [c.strip() for c in reader.fieldnames or []]
    rows = list(reader)
    kind = _kind_of(columns)
    if kind is None:
        allowed = "; ".join(f"{k}: {', '.join(c)}" for k, c in SHAPE_COLUMNS.items())
        raise WorkloadError(f"{path}: columns {columns} name no kernel kind; allowed (one set of "
                            f"shape columns): {allowed}")
    if not rows:
        raise WorkloadError(f"{path}: no kernels (rows); allowed: at least one row")
    typed: dict[str, list] = {c: [] for c in columns}
    for i, raw in enumerate(rows, start=1):
        r = {k.strip(): (v or "").strip() for k, v in raw.items() if k is not None}
        where = f"{path}: row {i} (line {i + 1})"
        for c in columns:
            v = r.get(c, "")
            if c in ("a_transposed", "b_transposed"):
                if v not in ("0", "1"):
                    raise WorkloadError(f"{where}: field {c} = {v!r}; allowed: 0 or 1")
                v = bool(int(v))
            elif c == "type":
                if v not in RNN_TYPES:
                    raise WorkloadError(f"{where}: field type = {v!r}; allowed: {' | '.join(RNN_TYPES)}")
            elif c == "sparsity":
                try:
                    v = float(v)
                except ValueError:
                    v = -1.0
                if not 0.0 <= v < 1.0:
                    raise WorkloadError(f"{where}: field sparsity = {r.get(c)!r}; allowed: a fraction "
                                        "of zeros in [0, 1)")
            elif c in ("pad_w", "pad_h"):
                v = _int(v, where, c, 0)
            elif c in SHAPE_COLUMNS[kind]:
                v = _int(v, where, c, 1)
            elif c in ("idx", "P_out_h", "Q_out_w", "gates", "nnz_A", "bytes_fp32", "repeats_in_code") \
                    or c.startswith(("flops", "dense_flops", "sparse_useful_flops")):
                v = _int(v, where, c, 0) if v != "" else None
            elif c == "precisions":
                bad = [p for p in v.split(";") if p and p not in PRECISIONS]
                if bad:
                    raise WorkloadError(f"{where}: field precisions = {v!r}; allowed: tokens "
                                        f"{' | '.join(PRECISIONS)} separated by ';', or empty")
            typed[c].append(v)
    return kind, typed


def precisions_of(values) -> list[str]:
    """The DeepBench precisions named in a ``precisions`` column (``fp32;fp16_mixed`` cells)."""
    return sorted({p for v in values for p in str(v).split(";") if p})


def suite_rows() -> list[dict]:
    """The shipped suites, one dict each: name, kind, kernel count and DeepBench precisions (read
    with the csv module: what ``asicsim workloads`` lists, without pandas)."""
    rows = []
    for name in list_suites():
        kind, typed = parse_columns(workloads_dir() / f"{name}.csv", name)
        rows.append({"name": name, "kind": kind, "kernels": len(next(iter(typed.values()))),
                     "precisions": ";".join(precisions_of(typed.get("precisions", ())))})
    return rows
