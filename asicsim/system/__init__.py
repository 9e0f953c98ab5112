"""System-level questions built on the per-chip cost model: scaling training across chips
(:mod:`asicsim.system.scaling`, links and all-reduce in :mod:`asicsim.hw.links`); batching
inference requests under a latency budget (:mod:`asicsim.system.batching`)."""

from asicsim._lazy import lazy_package

lazy_package(__name__, {
    "asicsim.hw.links": ["LINKS", "TOPOLOGIES", "AllReduceResult", "Link", "Topology",
        "allreduce_time", "get_topology"],
    ".batching": ["BatchingPolicy", "BatchingResult", "ServiceTable", "service_table", "simulate"],
    ".batching_errors": ["BatchingError"],
    ".inference_models": ["INFERENCE_MODELS", "InferenceModel"],
    ".p99_budget": ["BudgetResult", "max_throughput_under_p99"],
    ".weight_residency": ["residency_comparison"],
    ".scaling": ["MODELS", "ScalingPoint", "StepResult", "TrainingModel", "scaling_curve",
        "stops_paying", "training_step"],
})

__all__ = [
    "INFERENCE_MODELS",
    "LINKS",
    "MODELS",
    "TOPOLOGIES",
    "AllReduceResult",
    "BatchingError",
    "BatchingPolicy",
    "BatchingResult",
    "BudgetResult",
    "InferenceModel",
    "Link",
    "ScalingPoint",
    "ServiceTable",
    "StepResult",
    "Topology",
    "TrainingModel",
    "allreduce_time",
    "get_topology",
    "max_throughput_under_p99",
    "residency_comparison",
    "scaling_curve",
    "service_table",
    "simulate",
    "stops_paying",
    "training_step",
]
