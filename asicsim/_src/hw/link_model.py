"""The ring all-reduce model's parts: a chip-to-chip :class:`Link`, a :class:`Topology` nesting
links by ring size, each checked when built (a :class:`TopologyError` names the field, the value
and what is allowed), and the time of ``phases`` rounds of ring steps on a topology
(:func:`ring_time`, :class:`AllReduceResult`). :mod:`asicsim._src.hw.links` states the model and holds
the presets, their lookup and the fit on DeepBench's measurements."""

from __future__ import annotations

import math
from dataclasses import dataclass

from asicsim._src.hw.operations import AllReduce


class TopologyError(ValueError):
    """A bad link, topology or all-reduce argument: names the field, the value and what is allowed."""


def check_positive(where: str, name: str, value, minimum: float = 0.0, strict: bool = True) -> None:
    """Refuse a value that is not a finite number above (``strict``) or at least ``minimum``."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or (value <= minimum if strict else value < minimum):
        rel = ">" if strict else ">="
        raise TopologyError(f"{where}: {name} = {value!r}; allowed: a finite number {rel} {minimum}")


@dataclass(frozen=True)
class Link:
    """One chip-to-chip link as a ring hop sees it."""

    name: str
    bandwidth_gbps: float  # GB/s per direction, datasheet (all lanes / sub-links one chip uses)
    latency_us: float  # per ring step: wire, protocol and library
    efficiency: float = 1.0  # achieved fraction of bandwidth_gbps for large messages
    source: str = ""

    def __post_init__(self) -> None:
        check_positive(f"link {self.name!r}", "bandwidth_gbps", self.bandwidth_gbps)
        check_positive(f"link {self.name!r}", "latency_us", self.latency_us, strict=False)
        check_positive(f"link {self.name!r}", "efficiency", self.efficiency)
        if self.efficiency > 1.0:
            raise TopologyError(f"link {self.name!r}: efficiency = {self.efficiency!r}; allowed: (0, 1]")

    @property
    def effective_gbps(self) -> float:
        return self.bandwidth_gbps * self.efficiency


@dataclass(frozen=True)
class Topology:
    """Links nested by ring size: ``levels = ((span, link), ..., (None, link))``."""

    name: str
    levels: tuple[tuple[int | None, Link], ...]
    overhead_us: float = 0.0  # fixed cost per all-reduce call
    source: str = ""

    def __post_init__(self) -> None:
        where = f"topology {self.name!r}"
        if not self.levels or self.levels[-1][0] is not None:
            raise TopologyError(f"{where}: levels = {self.levels!r}; allowed: (span, Link) pairs with "
                                "increasing integer spans, the last span None (every larger ring)")
        spans = [s for s, _ in self.levels[:-1]]
        if any(not isinstance(s, int) or s < 1 for s in spans) or spans != sorted(set(spans)):
            raise TopologyError(f"{where}: spans = {spans!r}; allowed: increasing integers >= 1")
        if not all(isinstance(link, Link) for _, link in self.levels):
            raise TopologyError(f"{where}: levels must hold Link specs")
        check_positive(where, "overhead_us", self.overhead_us, strict=False)

    @classmethod
    def flat(cls, link: Link) -> Topology:
        return cls(link.name, ((None, link),), source=link.source)

    @classmethod
    def hierarchy(cls, intra: Link, inter: Link, ranks_per_node: int, overhead_us: float = 0.0) -> Topology:
        """Rings of up to ``ranks_per_node`` ranks on ``intra``, larger ones also cross ``inter``."""
        if not (isinstance(ranks_per_node, int) and ranks_per_node >= 1):
            raise TopologyError(f"ranks_per_node = {ranks_per_node!r}; allowed: an integer >= 1")
        return cls(f"{intra.name}x{ranks_per_node}+{inter.name}", ((ranks_per_node, intra), (None, inter)),
                   overhead_us)

    def crossed(self, ranks: int) -> list[Link]:
        """The links a ring of ``ranks`` ranks uses."""
        out, inner = [], 1
        for span, link in self.levels:
            if ranks > inner:
                out.append(link)
            if span is None or ranks <= span:
                break
            inner = span
        return out


@dataclass(frozen=True)
class AllReduceResult:
    """One ring all-reduce on one topology."""

    elements: int
    ranks: int
    bytes: float
    time_s: float
    bottleneck: str  # the link whose hop sets the step time ("" for one rank)
    topology: str

    @property
    def algorithm_bandwidth_gbps(self) -> float:
        return self.bytes / self.time_s / 1e9 if self.time_s > 0 else math.nan

    @property
    def bus_bandwidth_gbps(self) -> float:
        n = self.ranks
        return 2 * (n - 1) / n * self.algorithm_bandwidth_gbps if n > 1 else math.nan

    def row(self) -> dict:
        return {"topology": self.topology, "elements": self.elements, "ranks": self.ranks,
                "bytes": self.bytes, "time_s": self.time_s, "time_us": self.time_s * 1e6,
                "algorithm_bandwidth_gbps": self.algorithm_bandwidth_gbps,
                "bus_bandwidth_gbps": self.bus_bandwidth_gbps, "bottleneck": self.bottleneck}


def ring_time(op: AllReduce, topo: Topology, phases: int) -> AllReduceResult:
    """``phases`` rounds of ``n - 1`` ring steps (2: all-reduce, 1: all-gather or reduce-scatter)
    of ``op`` on ``topo``, each as long as its slowest hop (:mod:`asicsim._src.hw.links`' model)."""
    n, size = op.ranks, op.bytes
    if n == 1:
        return AllReduceResult(op.elements, 1, size, 0.0, "", topo.name)
    steps = [(link.latency_us * 1e-6 + size / (n * link.effective_gbps * 1e9), link.name)
             for link in topo.crossed(n)]
    step, name = max(steps)
    return AllReduceResult(op.elements, n, size, topo.overhead_us * 1e-6 + phases * (n - 1) * step, name,
                           topo.name)
