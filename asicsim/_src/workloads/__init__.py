"""Workloads: kernel suites priced without training (DeepBench) and, later, training workloads.

Kernel suites: :func:`list_suites`, :func:`load_suite` (a :class:`Suite` whose ``operations()``
the cost model prices) and :func:`suite_costs` (one pandas row per kernel and design).

Training workloads (``workloads/<name>.toml``: real data, real models): :func:`list_workloads`,
:func:`train` (a workload under a precision recipe: curves, final metric over seeds, divergence,
per-tensor numerics statistics), :func:`infer` (post-training quantization of the fp32 model) and
:func:`accuracy_drop_table`; datasets (:func:`load_dataset`) and models (:func:`make_model`).
"""

from asicsim._lazy import lazy_package

lazy_package(__name__, {
    ".prune_rules": ["PruneRule"],
    ".prune_price": ["sparse_trace"],
    ".pricing": ["price_trace", "workload_trace"],
    ".ctc": ["greedy_decode", "prefix_beam_search"],
    ".datasets": ["DATASETS", "Dataset", "DatasetUnavailable", "load_dataset"],
    ".deepbench": ["PRECISIONS", "Suite", "WorkloadError", "list_suites", "load_suite",
        "suite_costs", "suites_table", "workloads_dir"],
    ".models": ["MODELS", "Model", "make_model"],
    ".stats": ["tensor_stats"],
    ".post_training": ["InferResult", "accuracy_drop_table", "infer"],
    ".training": ["TrainResult", "train"],
    ".workload": ["Workload", "list_workloads", "load_workload"],
})

__all__ = [
    "DATASETS",
    "MODELS",
    "PRECISIONS",
    # training workloads
    "Dataset",
    "DatasetUnavailable",
    "InferResult",
    "Model",
    "PruneRule",
    "Suite",
    "TrainResult",
    "Workload",
    "WorkloadError",
    "accuracy_drop_table",
    "greedy_decode",
    "infer",
    "list_suites",
    "list_workloads",
    "load_dataset",
    "load_suite",
    "load_workload",
    "make_model",
    "prefix_beam_search",
    "price_trace",
    "sparse_trace",
    "suite_costs",
    "suites_table",
    "tensor_stats",
    "train",
    "workload_trace",
    "workloads_dir",
]
