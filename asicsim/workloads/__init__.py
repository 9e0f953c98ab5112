"""Workloads: kernel suites priced without training (DeepBench) and, later, training workloads.

Kernel suites: :func:`list_suites`, :func:`load_suite` (a :class:`Suite` whose ``operations()``
the cost model prices) and :func:`suite_costs` (one pandas row per kernel and design).
"""

from asicsim.workloads.deepbench import (
    PRECISIONS,
    Suite,
    WorkloadError,
    list_suites,
    load_suite,
    suite_costs,
    suites_table,
    workloads_dir,
)

__all__ = [
    "PRECISIONS",
    "Suite",
    "WorkloadError",
    "list_suites",
    "load_suite",
    "suite_costs",
    "suites_table",
    "workloads_dir",
]
