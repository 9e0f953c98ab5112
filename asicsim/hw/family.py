"""Many variants of one systolic design priced in one vectorised pass: a design space.

Designs that differ only in :data:`VECTOR_FIELDS` (array rows, columns and dataflow, buffer
capacities) form a *family*: ``family_key`` is equal for all of them. ``cost_family`` prices a list
of operations on every member at once — the arrays :func:`asicsim.hw.physical.gemm_counts` works on
get one more, leading, axis for the designs — with the same code and the same numbers as
:func:`asicsim.hw.cost.cost_many` on each member (a test checks equality). Sweeps use it for cost
points over design spaces: hundreds of thousands of design points per minute.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np

from asicsim.hw.cost import (
    _NOT_ADDITIVE,
    _gemm_arrays,
    _lower,
    _vector_counts,
    mac_execution,
    resolve_formats,
)
from asicsim.hw.design import SystolicDesign
from asicsim.hw.operations import Operation
from asicsim.hw.physical import ZERO_CODES, gemm_counts
from asicsim.hw.pricing import energy, traffic

#: The fields a family's members may differ in (``buffers.<name>.capacity_kib`` for any buffer).
VECTOR_FIELDS = ("array.rows", "array.cols", "array.dataflow", "buffers.*.capacity_kib")
_DATAFLOW = {"os": 0, "ws": 1, "is": 2}


def family_key(design) -> tuple | None:
    """Every field of the design but its name, description and :data:`VECTOR_FIELDS`: equal keys,
    one family. None for a design that cannot join one (a GPU)."""
    if not isinstance(design, SystolicDesign):
        return None

    def fields(obj, skip: tuple) -> tuple:
        return tuple((f.name, getattr(obj, f.name)) for f in dataclasses.fields(obj) if f.name not in skip)

    return (fields(design, ("name", "description", "array", "buffers")),
            fields(design.array, ("rows", "cols", "dataflow")),
            tuple(fields(b, ("capacity_kib",)) for b in design.buffers))


def cost_family(ops: Sequence[Operation], designs: Sequence[SystolicDesign],
                formats: str | Mapping | None = None) -> dict[str, np.ndarray]:
    """Every operation on every design of one family: arrays of shape ``(designs, ops)`` —
    ``time_s``, ``cycles``, ``utilization``, ``dram_bytes``, ``sram_array_bytes``, ``bound``
    (``compute`` | ``bandwidth`` | ``occupancy``), ``energy_pj`` and ``energy.<component>_pj``."""
    d0 = designs[0]
    key = family_key(d0)
    bad = [d.name for d in designs if family_key(d) != key]
    if bad:
        raise ValueError(f"cost_family: designs {bad[:3]} differ from {d0.name!r} in more than "
                         f"{list(VECTOR_FIELDS)}; price them separately")
    fmts = resolve_formats(d0, formats)
    bits = {r: float(f.storage_bits) for r, f in fmts.items()}  # memory words (tf32: 32)
    zero = ZERO_CODES[d0.array.zero_weights]
    N, n = len(designs), len(ops)
    rows = np.array([d.array.rows for d in designs], dtype=np.float64)[:, None]
    cols = np.array([d.array.cols for d in designs], dtype=np.float64)[:, None]
    flow = np.array([_DATAFLOW[d.array.dataflow] for d in designs])[:, None]
    caps = [np.array([d.buffers[j].capacity_bytes for d in designs], dtype=np.float64)[:, None]
            for j in range(len(d0.buffers))]
    lowered = [_lower(op) for op in ops]
    owner, lows = [], []
    for i, (ls, _) in enumerate(lowered):
        owner += [i] * len(ls)
        lows += ls
    t: dict[str, np.ndarray] = {}
    if lows:
        args = _gemm_arrays(lows, [ops[i] for i in owner], d0, bits, zero)
        args.update(rows=rows, cols=cols, dataflow=flow, capacity_bytes=caps,
                    mac_rate=mac_execution(d0, fmts, formats).rate)  # asicsim.hw.native
        c = gemm_counts(**args)
        L = len(lows)
        onehot = np.zeros((L, n))
        onehot[np.arange(L), owner] = 1.0
        first = np.unique(np.asarray(owner), return_index=True)[1]
        for k, v in c.items():
            if k in _NOT_ADDITIVE:
                continue
            v = np.broadcast_to(np.asarray(v, dtype=np.float64), (N, L))
            if k == "bytes.filter":
                t[k] = np.full((N, n), bits["weight"] / 8)
                t[k][:, np.asarray(owner)[first]] = v[:, first]
            elif not k.startswith("bytes."):
                t[k] = v @ onehot
    for i, (_, vec) in enumerate(lowered):
        if vec is not None:  # the vector unit's work does not depend on the varied fields
            for k, v in _vector_counts(vec, d0, bits).items():
                if not k.startswith("bytes."):
                    t.setdefault(k, np.zeros((N, n)))[:, i] += v
    t.setdefault("bytes.filter", np.full((N, n), bits["weight"] / 8))
    tr = traffic(t, bits)
    kib = [cap / 1024 for cap in caps]
    e, _ = energy(t, tr, d0, fmts, zero, pes=rows * cols, buffer_kib=kib)
    z = np.zeros((N, n))
    g = lambda k: np.broadcast_to(t.get(k, z), (N, n))  # noqa: E731 - absent counts are zero
    macs = g("macs")
    performed = g("macs_nonzero") if zero == ZERO_CODES["skip"] else macs
    busy = g("cycles_compute") + g("cycles_fill_drain")
    cycles = busy + g("cycles_stall")
    pes = rows * cols
    transfer = g("transfer_cycles")
    ideal = performed / pes
    bound = np.where((transfer > 0) & (transfer >= busy), "bandwidth",
                     np.where((macs > 0) & (ideal < 0.5 * busy), "occupancy", "compute"))
    util = np.divide(performed, cycles * pes, out=np.zeros((N, n)), where=cycles > 0)
    out = {"cycles": cycles, "time_s": cycles / d0.clock_hz, "utilization": util, "bound": bound,
           "macs": macs, "dram_bytes": np.broadcast_to(tr["dram_bytes"], (N, n)),
           "sram_array_bytes": np.broadcast_to(tr["array_bytes"], (N, n)),
           "energy_pj": sum(np.broadcast_to(v, (N, n)) for v in e.values())}
    out |= {f"energy.{k}_pj": np.broadcast_to(v, (N, n)) for k, v in e.items()}
    return out
