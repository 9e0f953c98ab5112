"""A loaded DeepBench suite: :func:`load_suite` (a shipped name or a CSV path, cached per file
version), :class:`Suite` with its kernels as asicsim operations and DeepBench's flop counts, and
:class:`RecurrentRnn`, an RNN kernel as DeepBench times it."""

from __future__ import annotations

import difflib
import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

from asicsim._src.hw.operations import AllReduce, Conv, Elementwise, Gemm, GemmLowering, Rnn
from asicsim._src.workloads.deepbench_files import (
    FLOPS_COLUMN,
    SHAPE_COLUMNS,
    list_suites,
    parse_columns,
    precisions_of,
    suite_rows,
    workloads_dir,
)
from asicsim._src.workloads.errors import WorkloadError


@dataclass(frozen=True)
class RecurrentRnn(Rnn):
    """An RNN kernel as DeepBench times it: the ``steps`` recurrent GEMMs ``(batch x hidden) @
    (hidden x gates*hidden)`` and the gate nonlinearities, without the input projection
    (``CUDNN_SKIP_INPUT``). ``vector_gates=False`` leaves the nonlinearities out (designs that
    have no vector unit)."""

    vector_gates: bool = True

    def lower(self) -> list[GemmLowering]:
        return [low for low in super().lower() if low.shared_weights]

    def elementwise(self) -> Elementwise | None:  # type: ignore[override]
        return super().elementwise() if self.vector_gates else None


def _parse(path: Path, name: str) -> tuple[str, pd.DataFrame]:
    """Read and check a suite file: (kind, table with shape columns typed)."""
    import pandas as pd  # here: listing the suites (asicsim workloads) loads no pandas

    kind, typed = parse_columns(path, name)
    return kind, pd.DataFrame(typed)


@dataclass(frozen=True, eq=False)
class Suite:
    """One kernel suite: its ``name``, ``kind`` (gemm, conv, rnn, sparse_gemm, allreduce), the
    ``shapes`` (a DataFrame of the shape columns as in the file), the whole ``table`` (idx,
    application, DeepBench's flop counts, precisions, notes) and the file it came from."""

    name: str
    kind: str
    shapes: pd.DataFrame = field(repr=False)
    table: pd.DataFrame = field(repr=False)
    path: Path = field(repr=False)

    def __len__(self) -> int:
        return len(self.shapes)

    @property
    def precisions(self) -> list[str]:
        """The DeepBench precisions of this suite's kernels (empty: no published results)."""
        return precisions_of(self.table["precisions"]) if "precisions" in self.table else []

    def operations(self, *, vector_gates: bool = True) -> list:
        """One asicsim operation per kernel (:mod:`asicsim._src.workloads.deepbench` says how each kind maps)."""
        s, n = self.shapes, len(self.shapes)
        col = {c: s[c].tolist() for c in s.columns}
        if self.kind == "gemm":
            return [Gemm(col["M"][i], col["N"][i], col["K"][i], a_transposed=col["a_transposed"][i],
                         b_transposed=col["b_transposed"][i]) for i in range(n)]
        if self.kind == "sparse_gemm":  # transposed: the sparse A becomes the weight operand
            return [Gemm(col["N"][i], col["M"][i], col["K"][i], weight_sparsity=col["sparsity"][i],
                         sparse_format="csr") for i in range(n)]
        if self.kind == "conv":
            return [Conv(in_h=col["H"][i], in_w=col["W"][i], in_channels=col["C"][i],
                         out_channels=col["K"][i], kernel_h=col["R"][i], kernel_w=col["S"][i],
                         stride=col["stride_h"][i], stride_w=col["stride_w"][i],
                         padding=col["pad_h"][i], padding_w=col["pad_w"][i], batch=col["N"][i])
                    for i in range(n)]
        if self.kind == "rnn":
            return [RecurrentRnn(col["type"][i], col["hidden"][i], col["batch"][i], col["timesteps"][i],
                                 vector_gates=vector_gates) for i in range(n)]
        return [AllReduce(col["size_floats"][i], col["ranks"][i]) for i in range(n)]

    def flops(self) -> np.ndarray:
        """DeepBench's flop count per kernel (its column when the file has it, else from the shape)."""
        column = FLOPS_COLUMN[self.kind]
        if column is None:
            return np.zeros(len(self))
        if column in self.table and self.table[column].notna().all():
            return self.table[column].to_numpy(dtype=np.float64)
        return np.array([_flops(op) for op in self.operations()], dtype=np.float64)


def _flops(op) -> float:
    """2 x the MACs of an operation's lowered GEMMs (x density for sparse weights)."""
    macs = sum(low.M * low.N * low.K * low.reps for low in op.lower())
    return 2.0 * macs * (1.0 - getattr(op, "weight_sparsity", 0.0))


@functools.lru_cache(maxsize=64)
def _load(path: str, mtime: float, name: str) -> Suite:
    kind, table = _parse(Path(path), name)
    suite = Suite(name, kind, table[list(SHAPE_COLUMNS[kind])].copy(), table, Path(path))
    if kind == "conv" and {"P_out_h", "Q_out_w"} <= set(table.columns):
        for i, op in enumerate(suite.operations()):
            for ours, col in (("out_h", "P_out_h"), ("out_w", "Q_out_w")):
                given = table[col].iloc[i]
                if given is not None and getattr(op, ours) != given:
                    raise WorkloadError(f"{path}: row {i + 1} (line {i + 2}): field {col} = {given}; "
                                        f"allowed: {getattr(op, ours)}, the output size its shape gives")
    return suite


def load_suite(name: str | Path) -> Suite:
    """A shipped suite by name (:func:`list_suites`), or a path to a CSV written the same way."""
    if isinstance(name, Suite):
        return name
    text = str(name)
    path = Path(text)
    if not (text.endswith(".csv") or path.is_file()):
        path = workloads_dir() / f"{text}.csv"
        if not path.is_file():
            names = list_suites()
            close = difflib.get_close_matches(text, names, n=3, cutoff=0.5)
            hint = f"; did you mean {' or '.join(close)}?" if close else ""
            raise WorkloadError(f"workload {text!r} is not a shipped suite{hint} allowed: "
                                f"{', '.join(names)}, or a path to a .csv file")
    elif not path.is_file():
        raise WorkloadError(f"workload file {text!r} does not exist; allowed: a shipped suite name "
                            "(asicsim workloads) or a path to a .csv file")
    return _load(str(path.resolve()), path.stat().st_mtime, path.stem)


def suites_table() -> pd.DataFrame:
    """The shipped suites: name, kind, kernel count and DeepBench precisions."""
    import pandas as pd  # here: listing the suites (asicsim workloads) loads no pandas

    return pd.DataFrame(suite_rows(), columns=["name", "kind", "kernels", "precisions"])
