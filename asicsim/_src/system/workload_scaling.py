"""Scaling a training workload's own step across chips: data, tensor and pipeline parallel.

One training step of a workload (``workloads/*.toml``) is its op trace
(:func:`asicsim._src.workloads.pricing.workload_trace`: every GEMM with its two gradient GEMMs, the
elementwise work, the optimizer update) priced on a design (:func:`~asicsim._src.workloads.pricing.trace_costs`,
as ``asicsim trace`` and ``batching --model`` price it). ``batch`` is the global batch ``B``;
``N`` chips split the step three ways:

- **data** (``split="data"``): every chip runs the whole trace on ``b = ceil(B / N)`` samples,
  then the gradients (all ``parameters``, biases included, in ``grad_format``) are all-reduced
  over the ring: the arithmetic of :func:`asicsim._src.system.scaling.training_step` without overlap
  (the same ``_step``), ``step = compute(b) + allreduce(parameters x grad_bits)``.
- **tensor** (``split="tensor"``): every chip runs the whole batch on ``1/N`` of each weight
  (Megatron-style, :mod:`asicsim._src.system.workload_split`), plus the activation all-reduces and
  all-gathers it needs per layer, which block the layer: ``step = compute(share) + collectives``.
- **pipeline** (``split="pipeline"``): the layers are cut into ``p = N`` stages and the batch into
  ``m`` micro-batches of ``ceil(B / m)`` (default ``m = 4p``, GPipe's ``M >= 4K``: Huang et al.
  2019, arXiv:1811.06965, §2.3). With ``t`` the slowest stage's time per micro-batch (forward +
  backward, plus its sends of the boundary activation and gradient, :func:`asicsim._src.hw.links.send_time`)
  the GPipe schedule takes ``(m + p - 1) t``, of which ``(p - 1) t`` is the bubble: the fraction
  ``(p - 1) / (m + p - 1)`` of the pipelined time (GPipe §2.3; Narayanan et al. 2021,
  arXiv:2104.04473, §2.2.1 give it as ``(p - 1) / m`` of the ideal time ``m t``), then the slowest
  stage's optimizer update.

Every result has ``compute_s + comm_s + bubble_s = step_s``; one chip gives the single-chip step
under every split.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from asicsim._src.hw.design_files import load_design
from asicsim._src.hw.links import (
    TopologyError,
    allgather_time,
    allreduce_time,
    get_topology,
    send_time,
)
from asicsim._src.hw.operations import AllReduce
from asicsim._src.numerics import get_format
from asicsim._src.system.scaling import _grad_bits, _step
from asicsim._src.system.workload_split import pipeline_stages, tensor_split, trace_sites

SPLITS = ("data", "tensor", "pipeline")
MICRO_BATCHES_PER_STAGE = 4  # GPipe §2.3: the bubble is negligible for M >= 4K
TENSOR_NOTE = ("elementwise work and the optimizer update split 1/N over the chips (Megatron replicates "
               "layer norm and dropout: a lower bound on that work)")


@dataclass(frozen=True)
class ParallelStep:
    """One training step of ``workload`` on ``chips`` chips split ``split`` (seconds)."""

    workload: str
    recipe: str
    design: str
    topology: str
    split: str
    chips: int
    global_batch: int
    batch_per_chip: int  # data: samples per chip; tensor: the global batch; pipeline: a micro-batch
    micro_batches: int
    compute_s: float  # the critical chip's compute
    comm_s: float  # communication on the critical path
    bubble_s: float  # pipeline: idle time of the fill and drain
    step_s: float
    comm_bytes: float  # bytes of the messages per step (a collective's elements x bits / 8; not ring traffic)
    parameters: int
    grad_bits: int
    fp32_grads_step_s: float  # the same step with 32-bit gradients on the wire (data parallel; else step_s)
    note: str = ""

    @property
    def saved_s(self) -> float:
        """Time ``grad_format`` saves per step against 32-bit gradients."""
        return self.fp32_grads_step_s - self.step_s

    @property
    def samples_per_s(self) -> float:
        return self.global_batch / self.step_s

    def row(self) -> dict:
        return asdict(self) | {"samples_per_s": self.samples_per_s}


@dataclass(frozen=True)
class _Parameters:
    """The gradient all-reduce's view of a workload's model (for :func:`scaling._step`)."""

    name: str
    parameters: int

    def layer_parameters(self) -> list[int]:
        return [self.parameters]


def _load(workload, scale):
    from asicsim._src.workloads import load_workload

    return load_workload(workload) if scale is None else load_workload(workload, scale=scale)


def _priced(w, recipe: str, batch: int, design):
    """The workload's training-step trace at ``batch`` and each trace row's price time (s) on
    ``design``, in trace order."""
    from asicsim._src.workloads.pricing import workload_trace

    trace = workload_trace(w, recipe, batch=batch)
    return trace, _times(trace, design, recipe, w.name)


def _times(trace, design, recipe: str, name: str) -> np.ndarray:
    """Each trace row's time (s, times its repetitions) on ``design``, in trace order, read from
    the typed trace price (:meth:`~asicsim._src.workloads.trace_price.TracePrice.row_figures`); an
    unpriced row is an error."""
    from asicsim._src.workloads.pricing import trace_price, unpriced_problem

    priced = trace_price(trace, [design], recipe)
    fig = priced.row_figures(0)
    if any(part.price is None for part in priced.parts):  # said as before: of the rows in trace order
        rows = priced.rows(0).set_axis(fig["index"]).sort_index()
        raise TopologyError(unpriced_problem(rows, recipe, design.name, name))
    pos = trace.index.get_indexer(fig["index"])
    if not (len(pos) == len(trace) and (pos >= 0).all() and len(np.unique(pos)) == len(pos)):
        raise AssertionError("trace_price rows do not map back onto the trace rows")  # a change in trace_price
    times = np.empty(len(trace))
    times[pos] = fig["time_s"]
    return times


def _bits(name: str) -> int:
    return get_format(name).storage_bits


def _positive_int(name: str, value, most: int | None = None) -> int:
    if not (isinstance(value, int) and not isinstance(value, bool) and value >= 1 and (most is None or value <= most)):
        allowed = "an integer >= 1" if most is None else f"an integer in 1 .. {most}"
        raise TopologyError(f"{name} = {value!r}; allowed: {allowed}")
    return value


def parallel_step(workload, design, chips: int, split: str = "data", *, batch: int | None = None,
                  micro_batches: int | None = None, recipe: str = "fp32", topology="nvlink",
                  grad_format: str | int = "fp32", scale: str | None = None) -> ParallelStep:
    """One step of ``workload`` on ``chips`` chips split ``split`` (module doc); ``batch``: the
    global batch (default the workload's); ``micro_batches``: pipeline only."""
    if split not in SPLITS:
        raise TopologyError(f"split = {split!r}; allowed: {' | '.join(SPLITS)}")
    w = _load(workload, scale)
    n = _positive_int("chips", chips)
    B = _positive_int("batch", w.batch if batch is None else batch)
    if micro_batches is not None and split != "pipeline":
        raise TopologyError(f"micro_batches = {micro_batches!r} with split = {split!r}; allowed: only with "
                            "split = 'pipeline'")
    d, topo, bits = load_design(design), get_topology(topology), _grad_bits(grad_format)
    base = {"workload": w.name, "recipe": str(recipe), "design": d.name, "topology": topo.name,
            "split": split, "chips": n, "global_batch": B, "grad_bits": bits}
    if split == "data":
        if n > B:
            raise TopologyError(f"chips = {n} > batch = {B} (data parallel); allowed: at most one chip per sample")
        b = math.ceil(B / n)
        trace, times = _priced(w, recipe, b, d)
        params = int(trace[trace["role"] == "optimizer"]["M"].sum())
        fwd = float(times[(trace["role"] == "forward").to_numpy()].sum())
        bwd = float(times.sum()) - fwd
        s, s32 = (_step(_Parameters(w.name, params), b, n, topo, k, False, ([fwd], [bwd], 0.0, d.name))
                  for k in (bits, 32))
        return ParallelStep(**base, batch_per_chip=b, micro_batches=1, compute_s=s.compute_s, comm_s=s.allreduce_s,
                            bubble_s=0.0, step_s=s.step_s, comm_bytes=s.gradient_bytes if n > 1 else 0.0,
                            parameters=params, fp32_grads_step_s=s32.step_s)
    if split == "tensor":
        return _tensor(w, d, topo, n, B, recipe, base)
    return _pipeline(w, d, topo, n, B, micro_batches, recipe, base)


def _tensor(w, d, topo, t: int, B: int, recipe, base: dict) -> ParallelStep:
    from asicsim._src.workloads.pricing import workload_trace

    full = workload_trace(w, recipe, batch=B)
    params = int(full[full["role"] == "optimizer"]["M"].sum())
    share, comms = tensor_split(full, t, _bits)
    compute = float(_times(share, d, recipe, w.name).sum())
    comm, nbytes = 0.0, 0.0
    for c in comms:
        op = AllReduce(c.elements, t, c.bits)
        one = (allreduce_time if c.kind == "allreduce" else allgather_time)(op, topo).time_s
        comm += c.count * one
        nbytes += c.count * op.bytes if t > 1 else 0.0
    return ParallelStep(**base, batch_per_chip=B, micro_batches=1, compute_s=compute, comm_s=comm, bubble_s=0.0,
                        step_s=compute + comm, comm_bytes=nbytes, parameters=params, fp32_grads_step_s=compute + comm,
                        note=TENSOR_NOTE if t > 1 else "")


def _pipeline(w, d, topo, p: int, B: int, micro_batches, recipe, base: dict) -> ParallelStep:
    m = micro_batches if micro_batches is not None else (1 if p == 1 else min(B, MICRO_BATCHES_PER_STAGE * p))
    m = _positive_int("micro_batches", m, B)
    mb = math.ceil(B / m)
    trace, times = _priced(w, recipe, mb, d)  # times in trace order
    params = int(trace[trace["role"] == "optimizer"]["M"].sum())
    sites, elementwise, optimizer = trace_sites(trace)
    site_t = [float(times[list(s.rows)].sum()) for s in sites]
    stages = pipeline_stages(site_t, p)
    gemm_total = sum(site_t) or 1.0
    ew_total, opt_total = float(times[elementwise].sum()), float(times[optimizer].sum())
    weights = [sum(s.weights for s in sites[a:e]) for a, e in stages]
    compute = [sum(site_t[a:e]) * (1 + ew_total / gemm_total) for a, e in stages]
    opt = [opt_total * (wt / sum(weights) if sum(weights) else 1 / p) for wt in weights]
    fwd_send, bwd_send, nbytes = [0.0] * p, [0.0] * p, 0.0
    for k, (_, e) in enumerate(stages[:-1]):  # stage k sends its last site's output on, gets its gradient back
        last = sites[e - 1]
        out_row = trace.iloc[last.rows[0]]
        nxt = {trace.iloc[i]["role"]: i for i in sites[e].rows}
        elements = last.batch * last.M * last.N * last.count
        grad_fmt = trace.iloc[nxt["grad-input"]]["format_out"] if "grad-input" in nxt else out_row["format_out"]
        b_fwd, b_bwd = elements * _bits(out_row["format_out"]) / 8, elements * _bits(grad_fmt) / 8
        fwd_send[k] = send_time(b_fwd, p, topo)
        bwd_send[k + 1] = send_time(b_bwd, p, topo)
        nbytes = max(nbytes, m * (b_fwd + b_bwd))
    per_micro = [c + f + g for c, f, g in zip(compute, fwd_send, bwd_send, strict=True)]
    k = max(range(p), key=per_micro.__getitem__)
    t = per_micro[k]
    step = (m + p - 1) * t + max(opt)
    return ParallelStep(**base, batch_per_chip=mb, micro_batches=m, compute_s=m * compute[k] + max(opt),
                        comm_s=m * (t - compute[k]), bubble_s=(p - 1) * t, step_s=step,
                        comm_bytes=nbytes, parameters=params, fp32_grads_step_s=step,
                        note=f"stages at GEMM sites {[a for a, _ in stages]} of {len(sites)}" if p > 1 else "")


def workload_scaling_curve(workload, design, chips=(1, 2, 4, 8), split: str = "data", **kw) -> list[dict]:
    """Strong scaling (fixed global batch) of ``workload`` over ``chips`` split ``split``: one row
    per chip count with :class:`ParallelStep`'s fields, ``speedup`` (T1 / TN) and ``efficiency``
    (T1 / (N TN)) against one chip under the same split (1 chip is computed even when not listed)."""
    chips = sorted(set(chips))
    for c in chips:
        _positive_int("chips", c)
    one = parallel_step(workload, design, 1, split, **kw)
    rows = []
    for n in chips:
        s = one if n == 1 else parallel_step(workload, design, n, split, **kw)
        rows.append(s.row() | {"saved_s": s.saved_s, "speedup": one.step_s / s.step_s,
                               "efficiency": one.step_s / (n * s.step_s)})
    return rows
