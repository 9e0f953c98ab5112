"""System-level questions built on the per-chip cost model: scaling training across chips
(``asicsim._src.system.scaling``, a workload's own step split data, tensor or pipeline parallel in
``asicsim._src.system.workload_scaling``, links and all-reduce in ``asicsim._src.hw.links``); batching
inference requests under a latency budget (``asicsim._src.system.batching``).

The names below are the supported surface; the modules behind them live in
``asicsim._src.system`` and may change without notice.
"""

from asicsim._lazy import public_facade

public_facade(__name__, "asicsim._src.system")
