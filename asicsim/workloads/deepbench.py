"""DeepBench's kernel lists as workloads: load a suite, turn its rows into operations, price them.

>>> from asicsim.workloads import load_suite, suite_costs
>>> s = load_suite("deepbench_gemm_train")
>>> s.kind, len(s.shapes), s.operations()[0]
('gemm', 160, Gemm(M=1760, N=16, K=1760, weight_sparsity=0.0, sparse_format='dense', a_transposed=False, b_transposed=False, name='', kind='gemm'))

The suites are ``workloads/deepbench_<kind>_<set>.csv`` (``scripts/make_deepbench_workloads.py``
writes them from the tidy copies in ``data/deepbench/``, whose README documents every
column). A user's CSV written the same way works wherever a suite name does; its kind is told by
its columns. How each DeepBench row becomes an asicsim operation:

- ``gemm``: ``Gemm(M, N, K, a_transposed, b_transposed)``; DeepBench's ``flops`` = 2MNK.
- ``conv`` (NCHW; W = input width, H = input height, C in, K out channels, N batch, R = filter
  height, S = filter width): ``Conv(in_h=H, in_w=W, in_channels=C, out_channels=K, kernel_h=R,
  kernel_w=S, stride=stride_h, stride_w=stride_w, padding=pad_h, padding_w=pad_w, batch=N)``; its
  ``out_h``/``out_w`` are DeepBench's ``P_out_h``/``Q_out_w`` (checked on load when the file has
  them), ``flops_fwd`` = 2 N K C R S P Q = 2 x the lowered GEMM's MACs.
- ``rnn``: :class:`RecurrentRnn`, the recurrent part only: DeepBench calls cuDNN with
  ``CUDNN_SKIP_INPUT`` (no input projection W x), so its ``flops_fwd`` = 2 gates hidden^2 batch
  timesteps counts the ``timesteps`` recurrent GEMMs alone; the gate nonlinearities run on the
  design's vector unit (a design without one, e.g. the SCALE-Sim designs, prices the GEMMs only and
  says so in the ``note`` column). GPU designs price them without the input projection too (the
  GPU model's ``rnn_skip_input``, which :func:`asicsim.hw.cost_many` picks for such a lowering);
  a model that still counts other work than DeepBench gets a ``note`` saying by how much its flop
  count differs.
- ``sparse_gemm``: DeepBench's sparse operand is A (M x K, ``nnz_A`` nonzeros) times a dense B
  (K x N); asicsim's :class:`~asicsim.hw.operations.Gemm` puts sparsity on its weight operand B.
  The problem is transposed, ``C^T (N x M) = B^T (N x K) @ A^T (K x M)``, so the sparse matrix is
  the weight: ``Gemm(M=N, N=M, K=K, weight_sparsity=sparsity, sparse_format="csr")`` (DeepBench
  runs cuSPARSE CSR; every DeepBench sparse kernel is NN, and the layout flags, which the
  transposed problem would flip, stay in the shape columns only). Same MACs, same operands; ``tflops`` uses DeepBench's useful count
  ``sparse_useful_flops`` = 2 nnz_A N (``tops`` is the dense-equivalent 2MNK / time).
- ``allreduce``: ``AllReduce(elements=size_floats, ranks)`` (fp32, 32 bits per element); priced
  by the multi-chip ring model (:func:`asicsim.hw.links.allreduce_time`) on a link topology.
"""

from __future__ import annotations

import csv
import difflib
import functools
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

from asicsim._catalogs import shipped_dir
from asicsim._files import TextFileError, read_text_file
from asicsim.hw.operations import AllReduce, Conv, Elementwise, Gemm, GemmLowering, Rnn
from asicsim.hw.scopes import SCOPE_ENERGY_KEYS, SCOPES

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


class WorkloadError(ValueError):
    """A bad workload name or file: names the file, row, field, value and what is allowed."""


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


def _parse(path: Path, name: str) -> tuple[str, pd.DataFrame]:
    """Read and check a suite file: (kind, table with shape columns typed)."""
    import pandas as pd  # here: listing the suites (asicsim workloads) needs none

    kind, typed = _parse_columns(path, name)
    return kind, pd.DataFrame(typed)


def _parse_columns(path: Path, name: str) -> tuple[str, dict[str, list]]:
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


def _precisions(values) -> list[str]:
    """The DeepBench precisions named in a ``precisions`` column (``fp32;fp16_mixed`` cells)."""
    return sorted({p for v in values for p in str(v).split(";") if p})


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
        return _precisions(self.table["precisions"]) if "precisions" in self.table else []

    def operations(self, *, vector_gates: bool = True) -> list:
        """One asicsim operation per kernel (see the module docstring for the mapping)."""
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


def _designs(design) -> list:
    if isinstance(design, (str, Path)) or not isinstance(design, Sequence):
        return [design]
    return list(design)


#: The per-scope columns of :func:`suite_costs` (the record schema of issue 30).
SCOPED_COLUMNS = (*SCOPE_ENERGY_KEYS,
                  *(f"{k}_{s}{u}" for k, u in (("power", "_w"), ("tops_per_w", "")) for s in SCOPES),
                  "idle_power_chip_w", "idle_power_board_w", "launch_fraction", "sm_fraction", "objective")


def suite_costs(suite: str | Path | Suite, design, formats: str | Mapping | None = None,
                precision: str | None = None) -> pd.DataFrame:
    """Price every kernel of a suite on one design or several (a list): one row per (design, kernel).

    Columns: the suite's shape columns as in its file, ``time_us``, ``tflops`` (DeepBench's flop
    count / time, the throughput DeepBench reports), ``tops`` (the model's dense 2 x MACs / time),
    ``energy_j`` and its split ``energy_dynamic_j`` + ``energy_static_j``, the per-scope keys
    (:data:`SCOPED_COLUMNS`: energy, dynamic energy, power, achieved TOPS/W at core, chip and
    board; idle power; a GPU's ``launch_fraction`` and ``sm_fraction``; ``objective``), ``dram_bytes``,
    ``bound``, ``design``, ``precision`` and ``format_act``, ``format_weight``, ``format_acc``,
    ``format_out``, then ``suite``, ``idx``, ``application``,
    ``note``. The all-reduce suite is priced on link topologies instead of designs (names from
    ``asicsim.hw.links``: ``TOPOLOGIES`` such as ``deepbench_titanx_pascal``, or ``LINKS`` such
    as ``nvlink``) by the ring model: ``time_us``, ``bytes``, algorithm and bus bandwidth and the
    bottleneck link. ``precision``: a DeepBench precision (:data:`PRECISIONS`; e.g. ``fp16_mixed``) sets the
    formats; ``formats`` (``"act=fp16,weight=fp16,acc=fp32"``) sets or overrides roles; neither:
    the design's own formats.
    """
    import pandas as pd

    from asicsim.hw.cost import parse_formats, scheduled_for
    from asicsim.hw.design_files import labelled_designs
    from asicsim.hw.family import cost_designs

    s = load_suite(suite)
    if precision is not None and precision not in PRECISIONS:
        raise WorkloadError(f"precision = {precision!r}; allowed: {' | '.join(PRECISIONS)}")
    fmts = dict(PRECISIONS[precision]) if precision else {}
    fmts |= parse_formats(formats)
    if s.kind == "allreduce":
        if fmts:
            raise WorkloadError(f"suite {s.name!r}: precision/formats = {precision or formats!r}; "
                                "allowed: none (DeepBench's all-reduce moves fp32 values)")
        return _allreduce_costs(s, design)
    frames = []
    for label, spec in labelled_designs(_designs(design)):
        gates = spec.has_vector_unit
        pr = cost_designs(s.operations(vector_gates=gates), [spec], fmts or None).take(0)
        frames.append(kernel_table(s, pr, label, precision, gates, scheduled_for(spec)))
    return pd.concat(frames, ignore_index=True)


def kernel_table(s: Suite, pr, label: str, precision: str | None, gates: bool, objective: str) -> pd.DataFrame:
    """One design's price of a suite's kernels (``pr``: a :class:`~asicsim.hw.result.Price` over
    them, in order) as :func:`suite_costs`' rows: the one place a suite's price becomes columns."""

    from asicsim.hw.power import derived_power

    n = len(s.shapes)
    flops, t = s.flops(), np.broadcast_to(np.asarray(pr.time_s, dtype=np.float64), (n,))
    macs = np.broadcast_to(pr.macs, (n,))
    zeros = np.zeros(n)
    out = s.shapes.reset_index(drop=True).copy()
    out["time_us"] = t * 1e6
    out["tflops"] = np.divide(flops, t * 1e12, out=zeros.copy(), where=t > 0)
    out["tops"] = np.divide(2 * macs, t, out=zeros.copy(), where=t > 0) / 1e12  # the model's dense count
    e = pr.energy
    cols = {"energy_j": np.asarray(e.total) * 1e-12, "energy_dynamic_j": np.asarray(e.dynamic) * 1e-12,
            "energy_static_j": np.asarray(e.static) * 1e-12, "dram_bytes": pr.dram_bytes,
            "bound": pr.bound_names, **derived_power(e.scoped(), t, macs),
            **{f"idle_power_{k}_w": pr.idle_power_w(k) for k in ("chip", "board")},
            "launch_fraction": pr.launch_fraction, "sm_fraction": pr.sm_fraction, "objective": objective}
    for c in ("energy_j", "energy_dynamic_j", "energy_static_j", "dram_bytes", "bound", *SCOPED_COLUMNS):
        out[c] = np.broadcast_to(cols[c], (n,)) if np.ndim(cols[c]) else cols[c]
    out["design"] = label  # the name or path as given
    out["precision"] = precision
    for role, name in pr.formats.items():
        out[f"format_{role}"] = name
    out["suite"] = s.name
    for c in ("idx", "application"):
        if c in s.table:
            out[c] = s.table[c].to_numpy()
    notes = np.full(len(out), "" if gates or s.kind != "rnn" else
                    "design has no vector unit: gate nonlinearities not priced", dtype=object)
    if s.kind != "sparse_gemm":  # the model's dense flop count should be DeepBench's
        ratio = np.divide(out["tops"].to_numpy(), out["tflops"].to_numpy(),
                          out=np.ones(len(out)), where=out["tflops"].to_numpy() > 0)
        for i in np.flatnonzero(np.abs(ratio - 1) > 1e-6):
            notes[i] = "; ".join(filter(None, [notes[i], (
                f"the model prices {ratio[i]:.3g}x DeepBench's flops"
                + (" (it adds the input projection DeepBench skips)" if s.kind == "rnn" else ""))]))
    out["note"] = notes
    return out


def _allreduce_costs(s: Suite, topologies) -> pd.DataFrame:
    """All-reduce kernels on link topologies (the multi-chip model's ring all-reduce)."""
    import pandas as pd

    from asicsim.hw.links import LINKS, TOPOLOGIES, allreduce_time, get_topology

    frames = []
    for t in _designs(topologies):
        if isinstance(t, (str, Path)) and str(t) not in TOPOLOGIES and str(t) not in LINKS:
            raise WorkloadError(
                f"suite {s.name!r} is all-reduce, a multi-chip collective priced on a link topology, "
                f"not on a chip design: design = {str(t)!r}; allowed: {' | '.join([*TOPOLOGIES, *LINKS])} "
                "(asicsim.hw.links; `asicsim scaling` for training steps)")
        topo = get_topology(t if not isinstance(t, Path) else str(t))
        rows = [allreduce_time(op, topo).row() for op in s.operations()]
        f = pd.DataFrame(rows)
        out = s.shapes.reset_index(drop=True).copy()
        for c in ("time_us", "bytes", "algorithm_bandwidth_gbps", "bus_bandwidth_gbps", "bottleneck"):
            out[c] = f[c]
        out["design"] = topo.name  # the topology: all-reduce's "design"
        out["precision"] = "fp32"
        out["suite"] = s.name
        frames.append(out)
    return pd.concat(frames, ignore_index=True)


def suite_rows() -> list[dict]:
    """The shipped suites, one dict each: name, kind, kernel count and DeepBench precisions (read
    with the csv module: what ``asicsim workloads`` lists, without pandas)."""
    rows = []
    for name in list_suites():
        kind, typed = _parse_columns(workloads_dir() / f"{name}.csv", name)
        rows.append({"name": name, "kind": kind, "kernels": len(next(iter(typed.values()))),
                     "precisions": ";".join(_precisions(typed.get("precisions", ())))})
    return rows


def suites_table() -> pd.DataFrame:
    """The shipped suites: name, kind, kernel count and DeepBench precisions."""
    import pandas as pd

    return pd.DataFrame(suite_rows(), columns=["name", "kind", "kernels", "precisions"])
