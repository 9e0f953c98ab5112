"""Workloads: kernel suites priced without training (DeepBench) and, later, training workloads.

Kernel suites: :func:`list_suites`, :func:`load_suite` (a :class:`Suite` whose ``operations()``
the cost model prices) and :func:`suite_costs` (one pandas row per kernel and design).

Training workloads (``workloads/<name>.toml``: real data, real models): :func:`list_workloads`,
:func:`train` (a workload under a precision recipe: curves, final metric over seeds, divergence,
per-tensor numerics statistics), :func:`infer` (post-training quantization of the fp32 model) and
:func:`accuracy_drop_table`; datasets (:func:`load_dataset`) and models (:func:`make_model`).

The names below are the supported surface; the modules behind them live in
``asicsim._src.workloads`` and may change without notice.
"""

from asicsim._lazy import public_facade

public_facade(__name__, "asicsim._src.workloads")
