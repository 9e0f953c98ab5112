"""The workloads' own error, in a module of its own so that every workload module (suites,
workload files, training, pruning) can raise it without importing the others."""

from __future__ import annotations


class WorkloadError(ValueError):
    """A bad workload name or file: names the file, row, field, value and what is allowed."""
