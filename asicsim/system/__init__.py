"""System-level questions built on the per-chip cost model: scaling training across chips
(:mod:`asicsim.system.scaling`, links and all-reduce in :mod:`asicsim.system.links`)."""

from asicsim.system.links import (
    LINKS,
    TOPOLOGIES,
    AllReduceResult,
    Link,
    Topology,
    allreduce_time,
    get_topology,
)
from asicsim.system.scaling import (
    MODELS,
    ScalingPoint,
    StepResult,
    TrainingModel,
    scaling_curve,
    stops_paying,
    training_step,
)

__all__ = [
    "LINKS",
    "MODELS",
    "TOPOLOGIES",
    "AllReduceResult",
    "Link",
    "ScalingPoint",
    "StepResult",
    "Topology",
    "TrainingModel",
    "allreduce_time",
    "get_topology",
    "scaling_curve",
    "stops_paying",
    "training_step",
]
