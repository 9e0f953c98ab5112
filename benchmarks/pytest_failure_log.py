"""A pytest plugin for ``benchmarks/gpu_emulate.py``: every failing test's id, message and
traceback appended to the JSON-lines file ``$ASICSIM_FAILURE_LOG`` the moment it fails (also
under pytest-xdist, whose reports reach the controller), so a run cut off at its deadline keeps
the failures it had seen. Loaded with ``-p pytest_failure_log`` (benchmarks/ on ``PYTHONPATH``)."""

from __future__ import annotations

import json
import os

TRACEBACK_CHARS = 4000
_worker = False


def pytest_configure(config) -> None:
    # An xdist worker has ``workerinput`` (the PYTEST_XDIST_WORKER variable is no test: a pytest
    # started from inside an xdist worker inherits it, and then nothing was logged).
    global _worker
    _worker = hasattr(config, "workerinput")


def pytest_runtest_logreport(report) -> None:
    path = os.environ.get("ASICSIM_FAILURE_LOG")
    # An xdist worker sees its own reports too: only the controller, which receives them all,
    # writes (else each failure was logged twice).
    if not path or not report.failed or _worker:
        return
    text = report.longreprtext
    lines = text.strip().splitlines() or [""]
    message = next((ln[1:].strip() for ln in lines if ln.startswith("E ")), lines[-1])  # pytest's "E   ..." lines
    row = {"failed": report.nodeid, "when": report.when, "message": message[:500], "traceback": text[-TRACEBACK_CHARS:]}
    with open(path, "a") as f:
        f.write(json.dumps(row) + "\n")
