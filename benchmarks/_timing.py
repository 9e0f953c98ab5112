"""Shared timing helper for the benchmarks (run as scripts: ``python benchmarks/bench_*.py``)."""

from __future__ import annotations

import time


def best_of(fn, repeat: int) -> float:
    """Fastest of ``repeat`` wall-clock runs of ``fn()``, after one warm-up (compile) call."""
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)
