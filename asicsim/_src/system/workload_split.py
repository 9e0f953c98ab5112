"""A workload's training-step op trace as layers, and its tensor- and pipeline-parallel shares.

The trace (:func:`asicsim._src.workloads.pricing.workload_trace`) lists each GEMM site's ``forward``
row followed by its ``grad-input`` (dX) and ``grad-weight`` (dW) rows, then the elementwise rows
(summed over equal shapes, so not attributable to a layer) and one ``optimizer`` row.
:func:`trace_sites` groups the GEMM rows into sites in program order; a site with a ``weight``
operand is a layer's weight GEMM.

**Tensor parallel** over ``t`` chips (Megatron-LM: Shoeybi et al. 2019, arXiv:1909.08053, §3,
Fig. 3): each weight GEMM's weight is split. Consecutive weight sites ``A -> B`` on the same
rows where ``B`` consumes ``A``'s output (``B.K == A.N``: the MLP block) or only head-split
attention GEMMs lie between them (QKV projection -> attention -> output projection: the attention
block) form Megatron's pair: ``A`` column-parallel (its ``N`` split), ``B`` row-parallel (its
``K`` split); the pair needs one all-reduce of ``B``'s
output in the forward pass (the ``g`` operator) and one all-reduce of ``A``'s input gradient in
the backward pass (``f``). A weight site left unpaired is column-parallel with an all-gather of
its output (forward) and an all-reduce of its input gradient (backward). Every site's input
gradient is summed where the trace has its dX GEMM: the first site's feeds an embedding's gradient
in a transformer; where it reads the data, the dX and its all-reduce are work nobody needs (the
trace's own over-count, kept so that the split prices what the trace does). Collectives repeat
``count`` times (a GEMM in a scan: once per time step) and carry ``batch x M x N`` (or ``x K``)
elements in the row's output format. A GEMM without a weight (attention scores) is split over
its batch (heads) where ``batch >= t``, else run whole on every chip. Elementwise work and the
optimizer update are split ``1/t`` (each chip owns ``1/t`` of the activations after a
column-parallel GEMM and ``1/t`` of the parameters; Megatron replicates layer norm and dropout,
so this is a lower bound on that work: the result's ``note`` says so).

**Pipeline parallel** over ``p`` stages: the sites are cut into ``p`` contiguous stages that
minimise the slowest stage's GEMM time (:func:`pipeline_stages`); elementwise time is shared
in proportion to each stage's GEMM time, the optimizer's in proportion to its weights.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from asicsim._src.hw.links import TopologyError


@dataclass(frozen=True)
class Site:
    """One GEMM site: its trace rows (``forward`` first), whether it has a weight, its shape."""

    rows: tuple[int, ...]
    weighted: bool
    M: int
    N: int
    K: int
    batch: int
    count: int

    @property
    def weights(self) -> int:
        return self.K * self.N if self.weighted else 0


def trace_sites(trace: pd.DataFrame) -> tuple[list[Site], list[int], list[int]]:
    """(GEMM sites in program order, elementwise row indices, optimizer row indices)."""
    sites, elementwise, optimizer, cur = [], [], [], None
    for i, r in enumerate(trace.itertuples(index=False)):
        if r.role == "optimizer":
            optimizer.append(i)
        elif r.kind == "elementwise":
            elementwise.append(i)
        elif r.role == "forward":
            cur = [i]
            weighted = "weight" in (r.lhs_role, r.rhs_role)
            sites.append((cur, weighted, (int(r.M), int(r.N), int(r.K), int(r.batch), int(r.count))))
        else:
            if cur is None:
                raise TopologyError(f"trace row {i}: a {r.role!r} GEMM before any forward GEMM; allowed: "
                                    "a trace from workload_trace (forward row, then its gradients)")
            cur.append(i)
    return [Site(tuple(rows), w, *dims) for rows, w, dims in sites], elementwise, optimizer


@dataclass(frozen=True)
class Collective:
    """One activation collective of a tensor-parallel step: ``kind`` all-reduce or all-gather of
    ``elements`` in ``bits``-bit words, ``count`` times, in the ``phase`` forward or backward."""

    kind: str
    phase: str
    elements: int
    bits: int
    count: int
    site: int


def tensor_split(trace: pd.DataFrame, t: int, bits_of) -> tuple[pd.DataFrame, list[Collective]]:
    """The trace one chip of ``t`` runs, and the collectives between them (module doc).
    ``bits_of(format_name)``: a format's storage bits."""
    sites, elementwise, optimizer = trace_sites(trace)
    out = trace.copy()
    comms: list[Collective] = []

    def shrink(row: int, col: str) -> None:
        out.loc[out.index[row], col] = math.ceil(int(out.iloc[row][col]) / t)

    def role_rows(site: Site) -> dict[str, int]:
        return {trace.iloc[i]["role"]: i for i in site.rows}

    weighted = [i for i, s in enumerate(sites) if s.weighted]
    j = 0
    while j < len(weighted):
        a = sites[weighted[j]]
        nxt = sites[weighted[j + 1]] if j + 1 < len(weighted) else None
        between = sites[weighted[j] + 1:weighted[j + 1]] if nxt is not None else []
        paired = (nxt is not None and nxt.M == a.M and nxt.batch == a.batch and nxt.count == a.count
                  and (nxt.K == a.N or (between and all(s.batch >= t for s in between))))
        ra = role_rows(a)
        for role, col in (("forward", "N"), ("grad-input", "K"), ("grad-weight", "N")):  # column-parallel
            if role in ra:
                shrink(ra[role], col)
        fwd_bits = bits_of(trace.iloc[ra["forward"]]["format_out"])
        if "grad-input" in ra:  # the input gradient: partial sums on every chip
            comms.append(Collective("allreduce", "backward", a.batch * a.M * a.K,
                                    bits_of(trace.iloc[ra["grad-input"]]["format_out"]), a.count, weighted[j]))
        if paired:
            rb = role_rows(nxt)
            for role, col in (("forward", "K"), ("grad-input", "N"), ("grad-weight", "M")):  # row-parallel
                if role in rb:
                    shrink(rb[role], col)
            comms.append(Collective("allreduce", "forward", nxt.batch * nxt.M * nxt.N,
                                    bits_of(trace.iloc[rb["forward"]]["format_out"]), nxt.count, weighted[j + 1]))
            j += 2
        else:
            comms.append(Collective("allgather", "forward", a.batch * a.M * a.N, fwd_bits, a.count, weighted[j]))
            j += 1
    for s in sites:
        if not s.weighted and s.batch >= t:  # attention: heads split over the chips
            for i in s.rows:
                shrink(i, "batch")
    for i in elementwise:  # the vector unit's elements in and out (M repeats elements_out)
        for col in ("M", "elements_out", "elements_in"):
            shrink(i, col)
    for i in optimizer:  # each chip updates its 1/t of the parameters
        shrink(i, "M")
    out["macs"] = out.M * out.N * out.K * out.batch * out["count"]
    return out, comms


def pipeline_stages(times: list[float], p: int) -> list[tuple[int, int]]:
    """Cut ``times`` (per site, in order) into ``p`` contiguous non-empty stages ``[start, end)``
    that minimise the largest stage sum (the linear partition problem, by dynamic programming)."""
    n = len(times)
    if not (isinstance(p, int) and not isinstance(p, bool) and 1 <= p <= n):
        raise TopologyError(f"pipeline stages = {p!r}; allowed: an integer in 1 .. {n} (the workload's "
                            f"{n} GEMM sites: a stage holds at least one)")
    prefix = [0.0]
    for x in times:
        prefix.append(prefix[-1] + x)
    inf = math.inf
    best = [[inf] * (n + 1) for _ in range(p + 1)]
    cut = [[0] * (n + 1) for _ in range(p + 1)]
    best[0][0] = 0.0
    for k in range(1, p + 1):
        for e in range(k, n + 1):
            for s in range(k - 1, e):
                v = max(best[k - 1][s], prefix[e] - prefix[s])
                if v < best[k][e]:
                    best[k][e], cut[k][e] = v, s
    stages, e = [], n
    for k in range(p, 0, -1):
        s = cut[k][e]
        stages.append((s, e))
        e = s
    return stages[::-1]
