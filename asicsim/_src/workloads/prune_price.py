"""A pruned model's measured weight sparsity in the cost model: the trace rows that read a pruned
weight are priced with its ``weight_sparsity`` and a sparse storage format
(:func:`asicsim._src.hw.operations.weight_store_bits`), so one run reports both its accuracy and the
sparse data movement.

:func:`sparse_trace` marks an op trace (:func:`asicsim._src.workloads.pricing.workload_trace`): a GEMM
row whose weight operand (``weight_path``, the leaf path the trace records) has a measured
sparsity gets it in column ``weight_sparsity`` and ``sparse_format`` -- the ``forward`` GEMM
(``Y = X W``) and the ``grad-input`` GEMM (``dX = dY W^T``) read the weight; ``grad-weight``
(``dW = X^T dY``) reads no weight and writes a dense gradient, so it stays dense.
:func:`gemm_sparsity` is what :mod:`.trace_price` reads from each row.

``bitmask`` (the default) stores the nonzeros and one bit per position; for a 2:4 mask that is
exactly NVIDIA's compressed format's size (the two kept values of every four and a 2-bit index
for each: 4 bits per 4 positions; Mishra et al., arXiv:2104.08378, Section 2).
"""

from __future__ import annotations

import pandas as pd

from asicsim._src.hw.operations import SPARSE_FORMATS
from asicsim._src.workloads.deepbench import WorkloadError

#: trace roles whose GEMM reads the weight operand (the B operand): priced sparse
WEIGHT_READING_ROLES = ("forward", "grad-input")


def sparse_trace(trace: pd.DataFrame, sparsity: dict[str, float], sparse_format: str = "bitmask") -> pd.DataFrame:
    """``trace`` with columns ``weight_sparsity`` (by ``weight_path``, from ``sparsity``: a pruned
    run's :attr:`~asicsim._src.workloads.training.RunResult.sparsity`) and ``sparse_format``."""
    if sparse_format not in SPARSE_FORMATS:
        raise WorkloadError(f"sparse_format = {sparse_format!r}: allowed: {' | '.join(SPARSE_FORMATS)}")
    for path, s in sparsity.items():
        if not (isinstance(s, float | int) and 0.0 <= s < 1.0):
            raise WorkloadError(f"weight sparsity of {path!r} = {s!r}: allowed: a fraction of zeros in [0, 1) "
                                "(a weight matrix that is all zeros cannot be priced as a GEMM)")
    if "weight_path" not in trace:
        raise WorkloadError("the trace has no weight_path column: make it with asicsim.op_trace")
    reads = (trace["rhs_role"] == "weight") & trace["role"].isin(WEIGHT_READING_ROLES) & (trace["kind"] != "elementwise")
    s = trace["weight_path"].map(lambda p: float(sparsity.get(p, 0.0))).where(reads, 0.0)
    missing = sorted(set(sparsity) - set(trace.loc[reads, "weight_path"]))
    if missing:
        raise WorkloadError(f"weight sparsity given for {missing}: no GEMM of the trace reads them; "
                            f"its weights are {sorted(set(trace.loc[reads, 'weight_path']))}")
    return trace.assign(weight_sparsity=s.astype(float),
                        sparse_format=[sparse_format if v > 0 else "dense" for v in s])


def gemm_sparsity(row) -> dict:
    """``weight_sparsity`` and ``sparse_format`` of one trace row (a namedtuple from
    ``itertuples``) for :class:`~asicsim._src.hw.operations.Gemm`; dense where the trace has none."""
    s = getattr(row, "weight_sparsity", 0.0)
    if not s or s != s:  # absent, 0 or NaN (a row the frame filled)
        return {}
    return {"weight_sparsity": float(s), "sparse_format": str(row.sparse_format)}
