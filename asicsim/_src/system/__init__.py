"""System-level questions built on the per-chip cost model: scaling training across chips
(:mod:`asicsim._src.system.scaling`, a workload's own step split data, tensor or pipeline parallel in
:mod:`asicsim._src.system.workload_scaling`, links and all-reduce in :mod:`asicsim._src.hw.links`); batching
inference requests under a latency budget (:mod:`asicsim._src.system.batching`)."""

from asicsim._lazy import lazy_package

lazy_package(__name__, {
    "asicsim._src.hw.links": ["LINKS", "TOPOLOGIES", "AllReduceResult", "Link", "Topology",
        "allreduce_time", "get_topology"],
    ".batching": ["BatchingPolicy", "BatchingResult", "ServiceTable", "service_table", "simulate"],
    ".batching_errors": ["BatchingError"],
    ".inference_models": ["INFERENCE_MODELS", "InferenceModel"],
    ".p99_budget": ["BudgetResult", "max_throughput_under_p99"],
    ".weight_residency": ["residency_comparison"],
    ".scaling": ["MODELS", "ScalingPoint", "StepResult", "TrainingModel", "scaling_curve",
        "stops_paying", "training_step"],
    ".workload_scaling": ["SPLITS", "ParallelStep", "parallel_step", "workload_scaling_curve"],
})

__all__ = [
    "INFERENCE_MODELS",
    "LINKS",
    "MODELS",
    "SPLITS",
    "TOPOLOGIES",
    "AllReduceResult",
    "BatchingError",
    "BatchingPolicy",
    "BatchingResult",
    "BudgetResult",
    "InferenceModel",
    "Link",
    "ParallelStep",
    "ScalingPoint",
    "ServiceTable",
    "StepResult",
    "Topology",
    "TrainingModel",
    "allreduce_time",
    "get_topology",
    "max_throughput_under_p99",
    "parallel_step",
    "residency_comparison",
    "scaling_curve",
    "service_table",
    "simulate",
    "stops_paying",
    "training_step",
    "workload_scaling_curve",
]
