"""Chip-to-chip links, multi-level topologies and the ring all-reduce model.

The model (NCCL's and Baidu's ring all-reduce): ``n`` ranks in a ring move ``bytes`` in
``2(n - 1)`` steps (``n - 1`` reduce-scatter, ``n - 1`` all-gather), each step sending one chunk of
``bytes / n`` to the ring neighbour while receiving one. All hops of a step run in parallel, so a
step takes as long as its slowest hop::

    time = overhead + 2(n - 1) * max over crossed links l of (latency_l + bytes / (n * bw_l))

``bw_l`` is the link's effective bandwidth per direction (datasheet x achieved fraction),
``latency_l`` the per-step cost (wire, protocol and library), ``overhead`` a fixed cost per call.
A :class:`Topology` nests links by ring size: a ring of up to ``span`` ranks stays on a level's
link (GPUs under one PCIe root, one node), a larger ring also crosses the next level's link (the
socket interconnect, InfiniBand between nodes). Bus bandwidth, as DeepBench and nccl-tests report
it, is ``2(n - 1)/n * bytes / time`` (what each link carries per second); algorithm bandwidth is
``bytes / time``.

The presets' datasheet figures carry their sources; their achieved fractions and latencies are
fitted on DeepBench's measured all-reduce sheets (:func:`fit_topology`,
``benchmarks/allreduce_validation.py`` prints the fit and its error).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

from asicsim._src.hw.link_model import AllReduceResult as AllReduceResult
from asicsim._src.hw.link_model import Link as Link
from asicsim._src.hw.link_model import Topology as Topology
from asicsim._src.hw.link_model import TopologyError as TopologyError
from asicsim._src.hw.link_model import check_positive, ring_time
from asicsim._src.hw.operations import AllReduce, OperationError

MEASURED_CSV = Path(__file__).parent / "data" / "deepbench_allreduce_measured.csv"
#: DeepBench's machines: 4 GPUs under one CPU socket's PCIe root, 8 per node (two sockets), nodes
#: joined by InfiniBand FDR (16 ranks = 2 nodes, 32 = 4 nodes; DeepBench README).
DEEPBENCH_SPANS = (4, 8)


# Datasheet bandwidths per direction. Achieved fractions and per-step latencies: fitted on DeepBench
# TitanX (Pascal) all-reduce (fit_topology; levels <= 4 ranks and > 8 ranks) where the link was
# measured, else assumed equal to the fitted one of the same family, as each source says.
_PCIE_FIT = "achieved fraction 0.749 (11.81 of 15.75 GB/s) and latency 3.2 us fitted on DeepBench TitanX_Pascal all-reduce (<= 4 ranks)"
_IB_FIT = "achieved fraction 0.800 (5.46 of 6.82 GB/s) and latency 9.7 us fitted on DeepBench TitanX_Pascal all-reduce (16, 32 ranks)"
LINKS: dict[str, Link] = {link.name: link for link in (
    Link("nvlink", 150.0, 3.2, 0.749,
         "NVIDIA Tesla V100 datasheet: NVLink 2.0, 6 links x 25 GB/s per direction (300 GB/s "
         "bidirectional), as in DGX-1V; fraction and latency assumed = PCIe 3's fitted ones"),
    Link("nvlink3", 300.0, 3.2, 0.749,
         "NVIDIA A100 datasheet: NVLink 3, 12 links x 25 GB/s per direction (600 GB/s total); "
         "fraction and latency assumed = PCIe 3's fitted ones"),
    Link("pcie3", 15.754, 3.2, 0.749,
         "PCIe 3.0 x16: 16 lanes x 8 GT/s x 128b/130b = 15.75 GB/s per direction (PCI-SIG); " + _PCIE_FIT),
    Link("pcie4", 31.508, 3.2, 0.749,
         "PCIe 4.0 x16: 16 lanes x 16 GT/s x 128b/130b = 31.5 GB/s per direction (PCI-SIG); fraction "
         "and latency assumed = PCIe 3's fitted ones"),
    Link("infiniband_fdr", 6.818, 9.7, 0.800,
         "InfiniBand 4x FDR: 4 x 14.0625 Gb/s x 64b/66b = 54.5 Gb/s = 6.82 GB/s (IBTA); " + _IB_FIT),
    Link("infiniband_edr", 12.5, 9.7, 0.800,
         "InfiniBand 4x EDR: 4 x 25.78125 Gb/s x 64b/66b = 100 Gb/s = 12.5 GB/s (IBTA); fraction and "
         "latency assumed = FDR's fitted ones"),
    Link("infiniband_hdr", 25.0, 9.7, 0.800,
         "InfiniBand 4x HDR: 200 Gb/s = 25 GB/s (IBTA); fraction and latency assumed = FDR's fitted ones"),
)}


def _fitted(device: str, overhead: float, levels: tuple[tuple[float, float], ...]) -> Topology:
    names = ("pcie_socket", "pcie_node", "infiniband_fdr")
    src = f"fitted on DeepBench {device} all-reduce (fit_topology, spans {DEEPBENCH_SPANS})"
    links = [Link(f"{device.lower()}_{n}", bw, lat, 1.0, src) for n, (bw, lat) in zip(names, levels, strict=True)]
    return Topology(f"deepbench_{device.lower()}",
                    ((DEEPBENCH_SPANS[0], links[0]), (DEEPBENCH_SPANS[1], links[1]), (None, links[2])),
                    overhead, src)


#: DeepBench's own machines, fitted on its sheets: (effective GB/s, latency us) per level.
TOPOLOGIES: dict[str, Topology] = {t.name: t for t in (
    _fitted("TitanX_Pascal", 21.61, ((11.807, 3.238), (8.860, 3.535), (5.456, 9.694))),
    _fitted("GTX1080Ti", 21.72, ((11.670, 3.065), (8.766, 3.310), (4.966, 10.01))),
    _fitted("M40", 24.45, ((5.905, 8.595), (6.059, 7.757), (4.084, 8.423))),
    _fitted("P100", 16.33, ((5.755, 7.770), (5.763, 6.913), (2.676, 5.588))),
)}


def get_topology(spec: str | Link | Topology, inter: str | Link | None = None,
                 ranks_per_node: int = 8) -> Topology:
    """A topology from a preset name (:data:`TOPOLOGIES`, or a :data:`LINKS` name: flat, or with
    ``inter`` above ``ranks_per_node`` ranks), a :class:`Link` or a :class:`Topology`."""
    if isinstance(spec, Topology):
        return spec
    if isinstance(spec, str) and spec in TOPOLOGIES:
        if inter is not None:
            raise TopologyError(f"inter_link = {inter!r} with the fitted topology {spec!r}; allowed: none "
                                "(it has its own levels), or a link name from LINKS as link")
        return TOPOLOGIES[spec]
    link = _link(spec, "link")
    if inter is None:
        return Topology.flat(link)
    return Topology.hierarchy(link, _link(inter, "inter_link"), ranks_per_node)


def _link(spec: str | Link, field: str) -> Link:
    if isinstance(spec, Link):
        return spec
    if spec not in LINKS:
        allowed = " | ".join(list(LINKS) + (list(TOPOLOGIES) if field == "link" else []))
        raise TopologyError(f"{field} = {spec!r}; allowed: {allowed}")
    return LINKS[spec]


def allreduce_time(op: AllReduce, topology: str | Link | Topology) -> AllReduceResult:
    """Ring all-reduce time of ``op`` (its elements, ranks and bits) on a topology (module doc)."""
    if not isinstance(op, AllReduce):
        raise OperationError(f"allreduce_time: op = {op!r}; allowed: an AllReduce")
    return ring_time(op, get_topology(topology), 2)


def allgather_time(op: AllReduce, topology: str | Link | Topology) -> AllReduceResult:
    """Ring all-gather of ``op.elements`` in all (each rank holding ``1/n`` of them): the
    all-reduce's second half, ``overhead + (n - 1) * step`` with the module doc's step."""
    if not isinstance(op, AllReduce):
        raise OperationError(f"allgather_time: op = {op!r}; allowed: an AllReduce (elements, ranks, bits)")
    return ring_time(op, get_topology(topology), 1)


def send_time(nbytes: float, ranks: int, topology: str | Link | Topology) -> float:
    """One point-to-point send of ``nbytes`` between neighbours of a ring of ``ranks`` ranks
    (seconds): ``latency + bytes / bw`` on the slowest link that ring crosses (0 for one rank)."""
    topo = get_topology(topology)
    check_positive("send_time", "nbytes", nbytes, strict=False)
    return max((link.latency_us * 1e-6 + nbytes / (link.effective_gbps * 1e9) for link in topo.crossed(ranks)),
               default=0.0)


def measured_allreduce() -> pd.DataFrame:
    """DeepBench's measured all-reduce rows (device, bytes, ranks, time_us, busbw, algorithm...)."""
    import pandas as pd  # here: the link models need none (asicsim --help imports this module)

    return pd.read_csv(MEASURED_CSV, comment="#")


def fit_topology(rows: pd.DataFrame, device: str, spans: tuple[int, ...] = DEEPBENCH_SPANS) -> Topology:
    """Fit ``overhead`` and per level (latency, effective bandwidth) on measured all-reduce rows.

    Each row is assigned to the outermost level its ring crosses; the model is then linear in
    ``(overhead, latency_l, 1/bw_l)`` and is fitted by non-negative least squares on the relative
    error (each equation divided by the measured time). Predictions use the max over crossed
    links (module doc), which may differ slightly from this assignment where an inner link is slower.
    """
    from scipy.optimize import nnls  # scipy ships with jax

    levels = len(spans) + 1
    n, size, t = (rows[c].to_numpy(dtype=np.float64) for c in ("ranks", "bytes", "time_us"))
    level = np.searchsorted(np.asarray(spans), n, side="left")
    x = np.zeros((len(n), 1 + 2 * levels))
    x[:, 0] = 1.0
    rows_idx = np.arange(len(n))
    x[rows_idx, 1 + 2 * level] = 2 * (n - 1)
    x[rows_idx, 2 + 2 * level] = 2 * (n - 1) / n * size / 1e3  # us per (GB/s)^-1 -> bytes/1e3
    p, _ = nnls(x / t[:, None], np.ones(len(n)))
    used = np.bincount(level, minlength=levels) > 0
    links = []
    for i in range(levels):
        inv = p[2 + 2 * i]
        bw = 1.0 / inv if (used[i] and inv > 0) else 1e6
        links.append(Link(f"{device.lower()}_level{i}", bw, float(p[1 + 2 * i]), 1.0,
                          f"fitted on DeepBench {device} all-reduce"))
    return Topology(f"fit_{device.lower()}",
                    tuple(zip((*spans, None), links, strict=True)), float(p[0]),
                    f"fitted on DeepBench {device} all-reduce, spans {spans}")


def predict_rows(rows: pd.DataFrame, topology: str | Link | Topology) -> pd.DataFrame:
    """Measured rows with the model's ``pred_time_us``, ``pred_busbw_gbps`` and ``abs_log_err``."""
    topo = get_topology(topology)
    pred = [allreduce_time(AllReduce(int(r.size_floats), int(r.ranks),
                                     round(8 * r.bytes / r.size_floats)), topo)
            for r in rows.itertuples()]
    out = rows.copy()
    out["pred_time_us"] = [p.time_s * 1e6 for p in pred]
    out["pred_busbw_gbps"] = [p.bus_bandwidth_gbps for p in pred]
    out["abs_log_err"] = np.abs(np.log(out["pred_time_us"] / out["time_us"]))
    return out
