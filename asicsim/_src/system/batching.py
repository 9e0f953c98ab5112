"""Batching under a latency budget: dynamic batching of inference requests on one chip.

Requests arrive (Poisson at rate ``rate``, or evenly spaced); one server (one chip, running one
batch at a time) launches a batch when ``max_batch`` requests are waiting or the oldest has
waited ``max_wait_s``, whichever comes first, and only when it is free (a batch that could
launch while the chip is busy launches the moment it frees, with up to ``max_batch`` of the
waiting requests, oldest first). A batch of ``b`` requests takes the time and energy the cost
model gives the model's operations at batch ``b`` (``asicsim.hw.cost_many`` on the design, summed; the
operations run one after another), so the service table depends on the design and the formats.

Reported per run: throughput (requests served per second, first arrival to last completion),
p50/p99/mean latency (arrival -> completion), mean batch size, utilization (busy fraction),
energy per request (the energy of the batches that served it; an idle chip's static power is
not charged) and stability: when the arrival rate reaches the saturated service rate
``max_batch / service(max_batch)`` the queue grows without bound and the run is reported as
unstable, without percentiles. :func:`analytic` gives closed forms where they exist (saturated
throughput, M/D/1 for ``max_batch = 1``, evenly spaced arrivals); the tests hold the simulator to
them. :func:`asicsim._src.system.p99_budget.max_throughput_under_p99` finds the largest arrival rate
whose p99 meets a budget; :mod:`asicsim._src.system.weight_residency` compares a persistent RNN's
service with its recurrent weights resident or not.

Models (:data:`asicsim._src.system.inference_models.INFERENCE_MODELS`) are functions of the batch size returning asicsim operations:

- ``mlp``: 3 fully connected 2560 -> 2560 layers with ReLU. 2560 is the width of DeepSpeech-2's
  2560-unit layers in DeepBench's GEMM lists (e.g. inference_server rows 2, 6 and 8-10, K = 2560).
- ``gru_speech``: DeepSpeech-2-style recurrent stack: 3 unidirectional GRU layers, hidden 1024
  (DeepBench inference_server GEMM rows 25/30/35 "DeepSpeech / gru affine" 3072 x T x 1024, i.e.
  3 gates x 1024), 100 time steps (2 s of audio at DeepSpeech-2's 20 ms output stride: 10 ms
  frames, time stride 2; Amodei et al., ICML 2016), then the output layer to 35 characters
  (DeepBench inference_server rows 1/3/5/7 "DeepSpeech / output layer", M = 35). Choices: the
  layer count (DS2 uses up to 7, bidirectional in training) and the step count.
- ``deepbench_gemm_inference``: every DeepSpeech GEMM of DeepBench's inference_server set whose
  batch column N takes the values 1, 2, 4 (``DEEPBENCH_INFERENCE_GEMMS``), one after another with
  N = the batch. The language-model rows (K = 500000) are left out: a 0.5-1 GB vocabulary layer
  would dominate every other shape.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from asicsim._src.hw.cost import cost_many, parse_formats
from asicsim._src.hw.design_files import load_design
from asicsim._src.system.batching_errors import BatchingError as BatchingError
from asicsim._src.system.batching_errors import nonneg_float, positive_int
from asicsim._src.system.inference_models import INFERENCE_MODELS as INFERENCE_MODELS
from asicsim._src.system.inference_models import InferenceModel, get_model

ARRIVALS = ("poisson", "deterministic")

# DeepBench (github.com/baidu-research/DeepBench, commit da81ba78, code/kernels/gemm_problems.h,
# inference_server_set; tidy copy data/deepbench/gemm.csv): (M, K, rows) of the
# DeepSpeech GEMMs listed with N = 1, 2, 4. DeepBench's C(M x N) = A(M x K) B(K x N) has the weights
# as A and the batch as N; asicsim's Gemm(M, N, K) has the activations first, so each becomes
# Gemm(M=batch, N=M_deepbench, K=K_deepbench).
# --- service table --------------------------------------------------------------------------------

@dataclass(frozen=True)
class ServiceTable:
    """Time and energy of one batch of each size 1..max_batch (index ``b - 1``) on one design."""

    model: str
    design: str
    formats: dict
    time_s: np.ndarray = field(repr=False)
    energy_j: np.ndarray = field(repr=False)

    @property
    def max_batch(self) -> int:
        return len(self.time_s)

    def service_s(self, batch: int) -> float:
        return float(self.time_s[self._b(batch) - 1])

    def capacity(self, max_batch: int) -> float:
        """Saturated throughput (requests/s) with batches of ``max_batch``: ``B / service(B)``."""
        return self._b(max_batch) / self.service_s(max_batch)

    def _b(self, batch) -> int:
        b = positive_int("max_batch", batch)
        if b > self.max_batch:
            raise BatchingError(f"max_batch = {b}; allowed: 1 .. {self.max_batch} (the service table's size)")
        return b

    def rows(self, batches: Sequence[int] | None = None) -> list[dict]:
        bs = batches or sorted({1, 2, 4, 8, 16, 32, 64, 128, 256, self.max_batch} & set(range(1, self.max_batch + 1)))
        return [{"batch": b, "service_ms": self.service_s(b) * 1e3,
                 "energy_per_request_mj": float(self.energy_j[b - 1]) / b * 1e3,
                 "saturated_throughput_rps": self.capacity(b)} for b in bs]


@lru_cache(maxsize=256)
def _table(model: InferenceModel, design, formats: tuple, max_batch: int) -> ServiceTable:
    d = load_design(design)
    fm = dict(formats) or None
    ops = [model.ops(b) for b in range(1, max_batch + 1)]
    flat = [op for o in ops for op in o]
    price = cost_many(flat, d, fm).price  # the typed price over the operations (no records read)
    owner = np.repeat(np.arange(max_batch), [len(o) for o in ops])
    n = len(flat)  # bincount sums each batch's operations in order, as the records were summed
    t = np.bincount(owner, weights=np.broadcast_to(price.time_s, (n,)), minlength=max_batch)
    e = np.bincount(owner, weights=np.broadcast_to(price.energy_pj, (n,)), minlength=max_batch) * 1e-12
    return ServiceTable(model.name, d.name, dict(price.formats) if flat else {}, t, e)


def service_table(model: str | InferenceModel, design, formats: str | Mapping | None = None,
                  max_batch: int = 64) -> ServiceTable:
    """Per-batch service time and energy for batch sizes 1..max_batch (cached: deterministic)."""
    m = get_model(model)
    fm = tuple(sorted(parse_formats(formats).items()))
    return _table(m, design, fm, positive_int("max_batch", max_batch))


# --- policy, arrivals, simulation -----------------------------------------------------------------

@dataclass(frozen=True)
class BatchingPolicy:
    """Launch when ``max_batch`` requests wait or the oldest has waited ``max_wait_s``."""

    max_batch: int = 1
    max_wait_s: float = 0.0

    def __post_init__(self) -> None:
        positive_int("max_batch", self.max_batch)
        nonneg_float("max_wait_s", self.max_wait_s)


@lru_cache(maxsize=32)
def _unit_arrivals(n: int, seed: int, kind: str) -> np.ndarray:
    """Arrival times at rate 1 (scaled by 1/rate: common random numbers across rates)."""
    if kind == "deterministic":
        return np.arange(n, dtype=np.float64)
    return np.cumsum(np.random.default_rng(seed).exponential(1.0, n))


def arrival_times(rate: float, n: int, seed: int = 0, kind: str = "poisson") -> np.ndarray:
    """``n`` arrival times (s): a Poisson process (seeded) or evenly spaced at ``1/rate``."""
    rate = nonneg_float("rate", rate, positive=True)
    if kind not in ARRIVALS:
        raise BatchingError(f"arrivals = {kind!r}; allowed: {' | '.join(ARRIVALS)}")
    return _unit_arrivals(positive_int("requests", n), int(seed), kind) / rate


@dataclass(frozen=True)
class BatchingResult:
    """One simulated run. Percentiles are NaN when ``stable`` is False (the queue grows)."""

    model: str
    design: str
    rate_rps: float
    max_batch: int
    max_wait_s: float
    arrivals: str
    requests: int
    stable: bool
    load: float  # rate / saturated service rate
    throughput_rps: float
    latency_p50_s: float
    latency_p99_s: float
    latency_mean_s: float
    mean_batch: float
    utilization: float
    energy_per_request_j: float
    analytic: dict = field(default_factory=dict)

    def row(self) -> dict:
        r = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "analytic"}
        r = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
        r |= {f"analytic_{k}": v for k, v in self.analytic.items()}
        return r


def _run(a: list, S: list, B: int, W: float) -> tuple[list, list, list]:
    """Event loop: one iteration per batch. Returns launch times, sizes, completion times."""
    n, h, free = len(a), 0, -math.inf
    starts, sizes, ends = [], [], []
    while h < n:
        full = a[h + B - 1] if h + B - 1 < n else math.inf  # the moment B requests wait
        t = min(a[h] + W, full)
        if t < free:
            t = free
        k = bisect_right(a, t, h, min(h + B, n)) - h  # waiting at t, oldest first, at most B
        end = t + S[k - 1]
        starts.append(t)
        sizes.append(k)
        ends.append(end)
        free, h = end, h + k
    return starts, sizes, ends


def simulate(table: ServiceTable, rate: float, policy: BatchingPolicy | None = None, *,
             requests: int = 100_000, seed: int = 0, arrivals: str = "poisson",
             warmup: float = 0.05) -> BatchingResult:
    """Simulate ``requests`` arrivals at ``rate`` (requests/s) served with ``policy`` on one chip.

    ``warmup``: the fraction of the first requests left out of the latency statistics (the queue
    starts empty).
    """
    policy = policy or BatchingPolicy()
    B, W = table._b(policy.max_batch), policy.max_wait_s
    warmup = nonneg_float("warmup", warmup)
    if warmup >= 1:
        raise BatchingError(f"warmup = {warmup!r}; allowed: a fraction in [0, 1)")
    a = arrival_times(rate, requests, seed, arrivals)
    _, sizes, ends = _run(a.tolist(), table.time_s.tolist(), B, W)
    sizes_a = np.asarray(sizes)
    done = np.repeat(np.asarray(ends), sizes_a)
    lat = done - a
    span = ends[-1] - a[0]
    busy = float(table.time_s[sizes_a - 1].sum())
    energy = float(table.energy_j[sizes_a - 1].sum())
    load = rate / table.capacity(B)
    stable = load < 1
    tail = lat[int(warmup * requests):]
    p50, p99, mean = [*np.percentile(tail, [50, 99]).tolist(), float(tail.mean())] if stable else [math.nan] * 3
    return BatchingResult(
        model=table.model, design=table.design, rate_rps=float(rate), max_batch=B, max_wait_s=W,
        arrivals=arrivals, requests=requests, stable=bool(stable), load=float(load),
        throughput_rps=float(requests / span) if span > 0 else math.inf, latency_p50_s=p50, latency_p99_s=p99,
        latency_mean_s=mean, mean_batch=requests / len(sizes), utilization=float(busy / span) if span > 0 else 1.0,
        energy_per_request_j=energy / requests, analytic=analytic(table, rate, policy, arrivals))


def analytic(table: ServiceTable, rate: float, policy: BatchingPolicy, arrivals: str = "poisson") -> dict:
    """Closed forms where they exist.

    - always: ``saturated_throughput_rps = B / service(B)`` (a busy server launches full batches);
    - Poisson arrivals, ``max_batch = 1`` (M/D/1), load < 1: mean latency
      ``S + rho S / (2 (1 - rho))`` (Pollaczek-Khinchine with deterministic service S);
    - evenly spaced arrivals (period T) that the server keeps up with: every batch holds
      ``k = min(B, floor(max_wait / T) + 1)`` requests, launched ``L`` after its first arrives
      (``(k - 1) T`` when full, else ``max_wait``), so latencies are ``L - j T + S(k)``, j < k:
      mean ``L - (k - 1) T / 2 + S(k)``, max ``L + S(k)``; valid when ``S(k) <= k T``.
    """
    B, W = policy.max_batch, policy.max_wait_s
    out = {"saturated_throughput_rps": table.capacity(B)}
    if arrivals == "poisson" and B == 1:
        S = table.service_s(1)
        rho = rate * S
        if rho < 1:
            out["mean_latency_s"] = S + rho * S / (2 * (1 - rho))
    elif arrivals == "deterministic":
        T = 1.0 / rate
        k = min(B, math.floor(W / T + 1e-12) + 1)
        L = (k - 1) * T if k == B else W
        S = table.service_s(k)
        if S <= k * T:
            out |= {"batch": k, "mean_latency_s": L - (k - 1) * T / 2 + S, "max_latency_s": L + S}
    return out
