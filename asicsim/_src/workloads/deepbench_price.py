"""A DeepBench suite priced: :func:`suite_costs` (every kernel on one design or several, or an
all-reduce suite on link topologies) and :func:`kernel_table`, the one place a suite's price
becomes columns."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

from asicsim._src.hw.cost import parse_formats, scheduled_for
from asicsim._src.hw.design_files import labelled_designs
from asicsim._src.hw.family import cost_designs
from asicsim._src.hw.links import LINKS, TOPOLOGIES, allreduce_time, get_topology
from asicsim._src.hw.power import derived_power
from asicsim._src.hw.scopes import SCOPE_ENERGY_KEYS, SCOPES
from asicsim._src.workloads.deepbench_files import PRECISIONS
from asicsim._src.workloads.deepbench_suite import Suite, load_suite
from asicsim._src.workloads.errors import WorkloadError


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
    ``asicsim._src.hw.links``: ``TOPOLOGIES`` such as ``deepbench_titanx_pascal``, or ``LINKS`` such
    as ``nvlink``) by the ring model: ``time_us``, ``bytes``, algorithm and bus bandwidth and the
    bottleneck link. ``precision``: a DeepBench precision (:data:`PRECISIONS`; e.g. ``fp16_mixed``) sets the
    formats; ``formats`` (``"act=fp16,weight=fp16,acc=fp32"``) sets or overrides roles; neither:
    the design's own formats.
    """
    import pandas as pd  # here: importing the suite names (asicsim workloads) loads no pandas

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
    """One design's price of a suite's kernels (``pr``: a :class:`~asicsim._src.hw.result.Price` over
    them, in order) as :func:`suite_costs`' rows: the one place a suite's price becomes columns."""
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
    import pandas as pd  # here: importing the suite names (asicsim workloads) loads no pandas

    frames = []
    for t in _designs(topologies):
        if isinstance(t, (str, Path)) and str(t) not in TOPOLOGIES and str(t) not in LINKS:
            raise WorkloadError(
                f"suite {s.name!r} is all-reduce, a multi-chip collective priced on a link topology, "
                f"not on a chip design: design = {str(t)!r}; allowed: {' | '.join([*TOPOLOGIES, *LINKS])} "
                "(asicsim._src.hw.links; `asicsim scaling` for training steps)")
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
