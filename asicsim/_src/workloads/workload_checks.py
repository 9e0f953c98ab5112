"""The checks of a workload's settings beyond ``[train]``: the model's sizes (per model kind), the
dataset's name and the ``[reference]`` metrics, each problem as ``field = value: allowed: ...``
(:class:`asicsim._src.workloads.workload.Workload` runs them at construction, so a workload made in
code is as checked as one loaded from a file).

The bounds are generous (orders of magnitude beyond the shipped workloads, whose widest layer is
1760 units): they catch typos and unit slips (``hidden = [100000000000]``, a zero width that divides
by zero when the model runs), not choices.
"""

from __future__ import annotations

import math
import numbers

#: The model kinds a workload file may name (asicsim._src.workloads.models builds them).
MODELS = ("logreg", "mlp", "cnn1d", "cnn2d", "gru", "lstm", "transformer", "ds2")
#: The widest layer (units, channels, d_model, context) a workload may ask for: 2**16 (GPT-3's
#: d_model is 12288); a 65536-wide MLP layer over 784 inputs is already 51 M parameters.
MAX_WIDTH = 65536
#: The most layers, heads, kernel taps or stride a model may have.
MAX_COUNT = 1024
#: The most optimizer steps of one run (a run draws ``steps x batch`` examples: see MAX_EXAMPLES).
MAX_STEPS = 10**7
#: The largest batch: 2**20 examples.
MAX_BATCH = 2**20
#: The most examples a run draws, ``steps x batch``: its example order is one int32 table of that
#: many entries (2**28 entries: 1 GiB).
MAX_EXAMPLES = 2**28
#: The most seeds one command runs (each a whole training run).
MAX_SEEDS = 1000
#: Metrics a ``[reference]`` table may give, and the range each lies in.
REFERENCE_METRICS = {"test_accuracy": (0.0, 1.0), "val_loss": (0.0, math.inf), "test_loss": (0.0, math.inf),
                     "test_cer": (0.0, math.inf), "test_wer": (0.0, math.inf)}


def _int(v, lo: int, hi: int) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool) and lo <= v <= hi


def _ints(v, lo: int, hi: int, n: int | None = None) -> bool:
    """A non-empty list of integers in ``[lo, hi]`` (``n`` of them when given)."""
    return (isinstance(v, (list, tuple)) and len(v) >= 1 and (n is None or len(v) == n)
            and all(_int(x, lo, hi) for x in v))


def _pairs(v, lo: int, hi: int, n: int) -> bool:
    """``n`` [time, frequency] pairs of integers in ``[lo, hi]`` (ds2's kernels and strides)."""
    return isinstance(v, (list, tuple)) and len(v) == n and all(_ints(p, lo, hi, 2) for p in v)


W = f"an integer in 1 .. {MAX_WIDTH}"
C = f"an integer in 1 .. {MAX_COUNT}"


def _size_rules(kind: str, s: dict) -> dict:
    """field -> (ok, allowed) for model ``kind`` given sizes ``s`` (lengths follow ``channels``)."""
    n = len(s["channels"]) if isinstance(s.get("channels"), (list, tuple)) and s["channels"] else None
    per = f" per layer ({n}, as channels)" if n else " per layer, as channels"
    if kind == "logreg":
        return {}
    if kind == "mlp":
        return {"hidden": (lambda v: _ints(v, 1, MAX_WIDTH), f"a non-empty list of widths, each {W}"),
                "residual": (lambda v: isinstance(v, bool), "true or false")}
    if kind in ("cnn1d", "cnn2d"):
        return {"channels": (lambda v: _ints(v, 1, MAX_WIDTH), f"a non-empty list of channel counts, each {W}"),
                "kernels": (lambda v: _ints(v, 1, MAX_COUNT, n), f"one kernel size{per}, each {C}"),
                "strides": (lambda v: _ints(v, 1, MAX_COUNT, n), f"one stride{per}, each {C}"),
                "pads": (lambda v: _ints(v, 0, MAX_COUNT, n), f"one padding{per}, each an integer in 0 .. {MAX_COUNT}")}
    if kind in ("gru", "lstm"):
        return {"hidden": (lambda v: _int(v, 1, MAX_WIDTH), W),
                "bidirectional": (lambda v: isinstance(v, bool), "true or false"),
                "readout": (lambda v: v in ("all", "last"), "'all' | 'last'")}
    if kind == "transformer":
        return {"d_model": (lambda v: _int(v, 1, MAX_WIDTH), W),
                "heads": (lambda v: _int(v, 1, MAX_COUNT), C), "layers": (lambda v: _int(v, 1, MAX_COUNT), C),
                "mlp_ratio": (lambda v: _int(v, 1, MAX_COUNT), C)}
    if kind == "ds2":
        return {"channels": (lambda v: _ints(v, 1, MAX_WIDTH), f"a non-empty list of channel counts, each {W}"),
                "kernels": (lambda v: _pairs(v, 1, MAX_COUNT, n), f"one [time, frequency] pair{per}, each {C}"),
                "strides": (lambda v: _pairs(v, 1, MAX_COUNT, n), f"one [time, frequency] pair{per}, each {C}"),
                "hidden": (lambda v: _int(v, 1, MAX_WIDTH), W), "layers": (lambda v: _int(v, 1, MAX_COUNT), C),
                "bidirectional": (lambda v: isinstance(v, bool), "true or false"),
                "batch_norm": (lambda v: isinstance(v, bool), "true or false"),
                "lookahead": (lambda v: _int(v, 0, MAX_COUNT), f"an integer in 0 .. {MAX_COUNT} (future frames)")}
    return {}


def size_problems(kind: str, sizes: dict, prefix: str = "model") -> list[str]:
    """What is wrong with model ``kind``'s ``sizes`` (unknown fields included)."""
    if not isinstance(sizes, dict):
        return []  # the Workload reports a sizes value that is no table
    rules = _size_rules(kind, sizes)
    out = [f"{prefix}.{k}: no such field of a {kind} model; fields are {sorted(rules) or 'none'}"
           for k in sorted(set(sizes) - set(rules))]
    out += [f"{prefix}.{k} = {sizes[k]!r}: allowed: {allowed}" for k, (ok, allowed) in rules.items()
            if k in sizes and not ok(sizes[k])]
    if kind in ("cnn1d", "cnn2d", "ds2") and "channels" not in sizes:  # the defaults' lengths
        out += [f"{prefix}.{k} = {sizes[k]!r}: allowed: given with channels (one per layer)"
                for k in ("kernels", "strides", "pads") if k in sizes]
    if kind == "ds2" and sizes.get("lookahead") and sizes.get("bidirectional", True) is not False:
        out.append(f"{prefix}.lookahead = {sizes['lookahead']!r}: allowed only with bidirectional = false "
                   "(the row convolution is the unidirectional model's lookahead)")
    d, h = sizes.get("d_model", 64), sizes.get("heads", 4)
    if kind == "transformer" and _int(d, 1, MAX_WIDTH) and _int(h, 1, MAX_COUNT) and d % h:
        out.append(f"{prefix}.d_model = {d!r}: allowed: a multiple of heads ({h})")
    return out


def reference_problems(reference, prefix: str = "reference") -> list[str]:
    """What is wrong with a ``[reference]`` table (the published or measured fp32 metrics)."""
    if not isinstance(reference, dict):
        return [f"{prefix} = {reference!r}: allowed: a table of metric = value"]
    out = []
    for k, v in reference.items():
        if k not in REFERENCE_METRICS:
            out.append(f"{prefix}.{k}: no such metric; metrics are {list(REFERENCE_METRICS)}")
            continue
        lo, hi = REFERENCE_METRICS[k]
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not (math.isfinite(v) and lo <= v <= hi):
            out.append(f"{prefix}.{k} = {v!r}: allowed: a finite number in [{lo:g}, {hi:g}]"
                       + (" (a fraction: 0.96, not 96)" if k == "test_accuracy" else ""))
    return out
