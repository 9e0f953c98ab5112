"""What every priced operation shares: its error (:class:`OperationError`, naming the operation,
the field, the value and what is allowed) and the checks of its counts, its lowered GEMMs' sizes
and its weight sparsity."""

from __future__ import annotations

from asicsim._src.hw import limits as lim
from asicsim._src.hw.limits import Limit

SPARSE_FORMATS = ("dense", "bitmask", "csr")


class OperationError(ValueError):
    """An operation with a bad field: names the operation, the field, the value and what is allowed."""


def check_int(op: str, name: str, value, limit: Limit = lim.OP_DIM) -> None:
    """Refuse a count outside ``limit`` (a dimension by default), naming the operation and field."""
    if not limit.ok(value):
        raise OperationError(f"{op}: {name} = {value!r}; allowed: {limit.allowed()}")


def check_lowered(op: str, lows: list) -> None:
    """Each lowered GEMM's A, B and C (and a conv's raw ifmap) within OP_ELEMENTS: element counts
    stay exact in the cost model's float64 (a 2**31 x 2**31 output is no workload)."""
    for g in lows:
        for what, n in (("A (M x K) elements", g.M * g.K), ("B (K x N) elements", g.K * g.N),
                        ("C (M x N) elements", g.M * g.N), ("ifmap elements", g.ifmap_elems or 0)):
            if n > lim.OP_ELEMENTS.hi:
                raise OperationError(f"{op}: {what} = {n} (GEMM {g.M}x{g.N}x{g.K}, {g.reps} "
                                     f"repetition(s)); allowed: {lim.OP_ELEMENTS.allowed()}")


def check_sparsity(op: str, sparsity, fmt) -> None:
    """Refuse a weight sparsity outside [0, 1) or an unknown sparse storage format."""
    if not (isinstance(sparsity, (int, float)) and not isinstance(sparsity, bool)
            and 0.0 <= sparsity < 1.0):
        raise OperationError(f"{op}: weight_sparsity = {sparsity!r}; allowed: a fraction of zeros in [0, 1)")
    if fmt not in SPARSE_FORMATS:
        raise OperationError(f"{op}: sparse_format = {fmt!r}; allowed: {' | '.join(SPARSE_FORMATS)}")
