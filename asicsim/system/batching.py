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
them. :func:`max_throughput_under_p99` finds the largest arrival rate whose p99 meets a budget.

Models (:data:`INFERENCE_MODELS`) are functions of the batch size returning asicsim operations:

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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache

import numpy as np

from asicsim.hw.cost import cost_many, parse_formats
from asicsim.hw.design_files import load_design
from asicsim.hw.operations import Elementwise, Gemm, Rnn

ARRIVALS = ("poisson", "deterministic")

# DeepBench (github.com/baidu-research/DeepBench, commit da81ba78, code/kernels/gemm_problems.h,
# inference_server_set; tidy copy data/deepbench/gemm.csv): (M, K, rows) of the
# DeepSpeech GEMMs listed with N = 1, 2, 4. DeepBench's C(M x N) = A(M x K) B(K x N) has the weights
# as A and the batch as N; asicsim's Gemm(M, N, K) has the activations first, so each becomes
# Gemm(M=batch, N=M_deepbench, K=K_deepbench).
DEEPBENCH_INFERENCE_GEMMS = (
    (7680, 2560, "8-10"),   # DeepSpeech (GRU 2560: 3 gates x 2560)
    (3072, 1024, "11-13"),  # DeepSpeech (GRU 1024)
    (6144, 2048, "36,39,42"),  # DeepSpeech / gru
    (4608, 1536, "37,40,43"),  # DeepSpeech / gru
    (8448, 2816, "38,41,44"),  # DeepSpeech / gru
    (512, 512, "53,63,73"),    # DeepSpeech
    (1024, 512, "54,64,74"),   # DeepSpeech
)


class BatchingError(ValueError):
    """Bad input to the batching model: names the field, the bad value and what is allowed."""


def _positive_int(name: str, v) -> int:
    if not (isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= 1):
        raise BatchingError(f"{name} = {v!r}; allowed: an integer >= 1")
    return int(v)


def _nonneg_float(name: str, v, *, positive: bool = False) -> float:
    ok = isinstance(v, (int, float, np.floating, np.integer)) and not isinstance(v, bool)
    if ok:
        v = float(v)
        ok = math.isfinite(v) and (v > 0 if positive else v >= 0)
    if not ok:
        raise BatchingError(f"{name} = {v!r}; allowed: a finite number {'> 0' if positive else '>= 0'}")
    return v


# --- models ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class InferenceModel:
    """A named inference model: ``ops(batch)`` lists the asicsim operations one batch runs."""

    name: str
    build: Callable[..., list] = field(repr=False)
    params: tuple[tuple[str, object], ...] = ()
    description: str = ""

    def ops(self, batch: int) -> list:
        return self.build(_positive_int("batch", batch), **dict(self.params))

    def recurrent_weight_elems(self) -> int:
        """Weight elements of the largest recurrent matrix (one layer's), 0 without RNN layers."""
        from asicsim.hw.operations import RNN_CELLS

        return max((RNN_CELLS[op.cell] * op.hidden * op.hidden for op in self.ops(1) if isinstance(op, Rnn)),
                   default=0)


def _mlp(batch: int, width: int = 2560, layers: int = 3) -> list:
    out = []
    for i in range(layers):
        out += [Gemm(batch, width, width, name=f"fc{i + 1} {width}x{width}"),
                Elementwise(batch * width, 1, on_chip=True, name=f"relu{i + 1}")]
    return out


def _gru_speech(batch: int, hidden: int = 1024, layers: int = 3, steps: int = 100, outputs: int = 35) -> list:
    ops: list = [Rnn("gru", hidden, batch, steps, name=f"gru{i + 1} h{hidden} t{steps}") for i in range(layers)]
    return [*ops, Gemm(batch * steps, outputs, hidden, name=f"output {hidden}->{outputs}")]


def _deepbench_gemms(batch: int) -> list:
    return [Gemm(batch, m, k, name=f"deepbench inference_server rows {rows}: {m}x{k}")
            for m, k, rows in DEEPBENCH_INFERENCE_GEMMS]


INFERENCE_MODELS: dict[str, InferenceModel] = {
    "mlp": InferenceModel("mlp", _mlp, (("width", 2560), ("layers", 3)),
                          "3 fully connected 2560x2560 layers + ReLU (DeepSpeech-2 widths, DeepBench)"),
    "gru_speech": InferenceModel(
        "gru_speech", _gru_speech, (("hidden", 1024), ("layers", 3), ("steps", 100), ("outputs", 35)),
        "3 GRU layers, hidden 1024, 100 steps, output layer to 35 characters (DeepSpeech-2 / DeepBench)"),
    "deepbench_gemm_inference": InferenceModel(
        "deepbench_gemm_inference", _deepbench_gemms, (),
        "DeepBench inference_server DeepSpeech GEMMs with N = batch, one after another"),
}


def get_model(model: str | InferenceModel, **params) -> InferenceModel:
    """A preset by name (``params`` override its defaults, e.g. ``hidden=1536``) or a model itself."""
    if isinstance(model, InferenceModel):
        m = model
    elif model in INFERENCE_MODELS:
        m = INFERENCE_MODELS[model]
    else:
        raise BatchingError(f"model = {model!r}; allowed: {' | '.join(INFERENCE_MODELS)} or an InferenceModel")
    if params:
        bad = sorted(set(params) - {k for k, _ in m.params})
        if bad:
            raise BatchingError(f"model {m.name}: parameter(s) {bad}; allowed: {[k for k, _ in m.params]}")
        m = replace(m, params=tuple((k, params.get(k, v)) for k, v in m.params))
    return m


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
        b = _positive_int("max_batch", batch)
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
    res = cost_many(flat, d, fm)
    owner = np.repeat(np.arange(max_batch), [len(o) for o in ops])
    t = np.bincount(owner, weights=[r.time_s for r in res], minlength=max_batch)
    e = np.bincount(owner, weights=[r.energy_total_pj for r in res], minlength=max_batch) * 1e-12
    return ServiceTable(model.name, d.name, res[0].formats if res else {}, t, e)


def service_table(model: str | InferenceModel, design, formats: str | Mapping | None = None,
                  max_batch: int = 64) -> ServiceTable:
    """Per-batch service time and energy for batch sizes 1..max_batch (cached: deterministic)."""
    m = get_model(model)
    fm = tuple(sorted(parse_formats(formats).items()))
    return _table(m, design, fm, _positive_int("max_batch", max_batch))


# --- policy, arrivals, simulation -----------------------------------------------------------------

@dataclass(frozen=True)
class BatchingPolicy:
    """Launch when ``max_batch`` requests wait or the oldest has waited ``max_wait_s``."""

    max_batch: int = 1
    max_wait_s: float = 0.0

    def __post_init__(self) -> None:
        _positive_int("max_batch", self.max_batch)
        _nonneg_float("max_wait_s", self.max_wait_s)


@lru_cache(maxsize=32)
def _unit_arrivals(n: int, seed: int, kind: str) -> np.ndarray:
    """Arrival times at rate 1 (scaled by 1/rate: common random numbers across rates)."""
    if kind == "deterministic":
        return np.arange(n, dtype=np.float64)
    return np.cumsum(np.random.default_rng(seed).exponential(1.0, n))


def arrival_times(rate: float, n: int, seed: int = 0, kind: str = "poisson") -> np.ndarray:
    """``n`` arrival times (s): a Poisson process (seeded) or evenly spaced at ``1/rate``."""
    rate = _nonneg_float("rate", rate, positive=True)
    if kind not in ARRIVALS:
        raise BatchingError(f"arrivals = {kind!r}; allowed: {' | '.join(ARRIVALS)}")
    return _unit_arrivals(_positive_int("requests", n), int(seed), kind) / rate


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
    warmup = _nonneg_float("warmup", warmup)
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


# --- the largest throughput under a p99 budget ----------------------------------------------------

@dataclass(frozen=True)
class BudgetResult:
    """The largest arrival rate (over the policy grid) whose simulated p99 meets ``budget_s``."""

    model: str
    design: str
    budget_s: float
    rate_rps: float  # 0 when no policy meets the budget
    max_batch: int
    max_wait_s: float
    best: BatchingResult | None
    grid: list = field(default_factory=list, repr=False)  # one row per policy tried

    def row(self) -> dict:
        r = {"model": self.model, "design": self.design, "p99_budget_ms": self.budget_s * 1e3,
             "max_rate_rps": self.rate_rps, "max_batch": self.max_batch, "max_wait_ms": self.max_wait_s * 1e3}
        if self.best is not None:
            b = self.best
            r |= {"throughput_rps": b.throughput_rps, "latency_p99_ms": b.latency_p99_s * 1e3,
                  "latency_p50_ms": b.latency_p50_s * 1e3, "mean_batch": b.mean_batch,
                  "energy_per_request_mj": b.energy_per_request_j * 1e3}
        return r


def max_throughput_under_p99(model: str | InferenceModel | ServiceTable, design, budget_s: float, *,
                             formats: str | Mapping | None = None,
                             max_batches: Sequence[int] = (1, 2, 4, 8, 16, 32, 64),
                             max_waits_s: Sequence[float] | None = None, requests: int = 20_000,
                             seed: int = 0, arrivals: str = "poisson", max_load: float = 0.95,
                             scan: int = 12, bisections: int = 7) -> BudgetResult:
    """Largest arrival rate whose simulated p99 latency meets ``budget_s``, over a policy grid.

    For each policy (``max_batches`` x ``max_waits_s``, default waits 0, budget/4, budget/2) rates
    are scanned at 0.1 %, 0.3 %, 1 %, 3 % and ``scan`` evenly spaced loads up to ``max_load`` of
    the saturated rate ``B / service(B)`` (p99 need not be monotone in the rate: a long max_wait
    hurts light load most, and p99 can fall again once batches form), then the gap above the
    highest feasible load is bisected
    ``bisections`` times. Every run of a policy reuses one unit-rate arrival sequence scaled by
    1/rate (common random numbers), so p99(rate) is smooth. Loads above ``max_load`` are not
    searched: near saturation a finite run underestimates the steady-state tail (a queue's
    relaxation time grows as 1/(1 - load)^2). Runs hold ``max(requests, 2000 min(B, load B))``
    requests, so big batches still see a couple of thousand launches (a run's first requests are
    the same at every length: the prefix of one seeded sequence). Policies whose full batch alone exceeds the budget are
    skipped (under load their batches fill), and so are those whose saturated rate is below the
    best rate already found. It is a grid search, not a proof: a feasible window narrower than
    the grid's spacing (``max_load / scan``) can be missed. ``model`` may be a :class:`ServiceTable` (``design`` and ``formats``
    are then ignored).
    """
    budget_s = _nonneg_float("budget_s", budget_s, positive=True)
    max_load = _nonneg_float("max_load", max_load, positive=True)
    if max_load >= 1:
        raise BatchingError(f"max_load = {max_load!r}; allowed: a fraction of the saturated rate in (0, 1)")
    waits = [0.0, budget_s / 4, budget_s / 2] if max_waits_s is None else [
        _nonneg_float("max_wait_s", w) for w in max_waits_s]
    bs = sorted({_positive_int("max_batch", b) for b in max_batches})
    table = model if isinstance(model, ServiceTable) else service_table(get_model(model), design, formats, max(bs))
    best: tuple | None = None
    grid = []
    loads = sorted({0.001, 0.003, 0.01, 0.03, *np.linspace(max_load / scan, max_load, scan).tolist()})
    loads = [f for f in loads if f <= max_load]

    for B in reversed(bs):  # big batches first: a policy whose saturated rate is below the best
        if table.service_s(B) > budget_s:  # found so far cannot win and is skipped
            continue
        cap = table.capacity(B)
        _positive_int("requests", requests)
        for W in waits:
            if best is not None and cap <= best[0]:
                grid.append({"max_batch": B, "max_wait_ms": W * 1e3, "max_rate_rps": None,
                             "skipped": "saturated rate below the best found"})
                continue
            pol = BatchingPolicy(B, W)

            def ok(load, pol=pol, cap=cap, B=B):
                n = max(requests, int(2000 * min(B, max(1.0, load * B))))  # ~2000 launches or more
                r = simulate(table, load * cap, pol, requests=n, seed=seed, arrivals=arrivals)
                return r.stable and r.latency_p99_s <= budget_s, r

            lo, hi, res_lo = None, None, None
            for i, f in enumerate(loads):  # every load: p99 can dip again once batches form
                good, res = ok(f)
                if good:
                    lo, res_lo, hi = f, res, (loads[i + 1] if i + 1 < len(loads) else None)
            if lo is None:
                grid.append({"max_batch": B, "max_wait_ms": W * 1e3, "max_rate_rps": 0.0})
                continue
            for _ in range(bisections if hi is not None else 0):
                mid = 0.5 * (lo + hi)
                good, res = ok(mid)
                if good:
                    lo, res_lo = mid, res
                else:
                    hi = mid
            grid.append({"max_batch": B, "max_wait_ms": W * 1e3, "max_rate_rps": lo * cap, "load": lo,
                         "latency_p99_ms": res_lo.latency_p99_s * 1e3, "mean_batch": res_lo.mean_batch})
            if best is None or lo * cap > best[0]:
                best = (lo * cap, pol, res_lo)
    if best is None:
        return BudgetResult(table.model, table.design, budget_s, 0.0, 0, 0.0, None, grid)
    return BudgetResult(table.model, table.design, budget_s, best[0], best[1].max_batch, best[1].max_wait_s,
                        best[2], grid)


# --- persistent RNN: weight residency -------------------------------------------------------------

def weight_residency(model: str | InferenceModel, design) -> dict | None:
    """Whether one recurrent layer's weights fit the resident part of the weight buffer(s).

    ``None`` for a model without recurrent layers or a design without on-chip buffers (GPU). The
    resident capacity is what the cost model uses: a double-buffered buffer keeps half; a buffer
    shared with other operands shares it (so "fits" here is an upper bound).
    """
    m = get_model(model)
    elems = m.recurrent_weight_elems()
    d = load_design(design)
    wb = d.weight_buffer()
    if not elems or wb is None:
        return None
    need = elems * wb.weight_bits / 8
    have = wb.resident_kib * 1024
    return {"design": d.name, "recurrent_weights_mib": need / 2**20, "resident_capacity_mib": have / 2**20,
            "fits": bool(need <= have)}


def with_weight_buffer(design, capacity_kib: float):
    """The design with every weight-holding buffer resized to ``capacity_kib`` (name suffixed)."""
    d = load_design(design)
    kib = _nonneg_float("capacity_kib", capacity_kib, positive=True)
    if d.weight_buffer() is None:
        raise BatchingError(f"design = {d.name!r}; allowed: a systolic design with a weight buffer")
    return d.with_weight_buffer(kib)


def residency_variant(model: str | InferenceModel, design):
    """The same design with the other answer to "do the recurrent weights stay on chip?".

    When one layer's recurrent weights fit, the weight buffer shrinks to a quarter of them; when
    they do not, it grows to twice what they need (room for the step's other tiles), rounded up
    to a power of two KiB. ``None`` when the model has no recurrent layer or the design no buffer.
    """
    res = weight_residency(model, design)
    if res is None:
        return None
    d = load_design(design)
    need_kib = res["recurrent_weights_mib"] * 1024
    kib = need_kib / 4 if res["fits"] else 2 ** math.ceil(math.log2(2 * need_kib))
    return with_weight_buffer(d, kib)


def residency_comparison(model: str | InferenceModel, design, formats=None,
                         batches: Sequence[int] = (1, 4, 16, 64, 256)) -> list[dict]:
    """Per-batch service time and energy per request on the design and on :func:`residency_variant`."""
    other = residency_variant(model, design)
    if other is None:
        return []
    rows = []
    for d in (load_design(design), other):
        t = service_table(model, d, formats, max(batches))
        fits = weight_residency(model, d)["fits"]
        weight_kib = round(d.weight_buffer().capacity_kib)
        for r in t.rows(list(batches)):
            rows.append({"design": d.name, "weight_buffer_kib": weight_kib, "weights_resident": fits, **r})
    return rows
