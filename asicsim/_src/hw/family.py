"""Many variants of one systolic design priced in one vectorised pass: a design space.

Designs that differ only in :data:`VECTOR_FIELDS` (array rows, columns and dataflow, buffer
capacities) form a *family*: ``family_key`` is equal for all of them. ``cost_family`` prices a list
of operations on every member at once — :func:`asicsim._src.hw.pipeline.price` gets one more, leading,
axis for the designs — with the same code and the same numbers as :func:`asicsim._src.hw.cost.cost_many`
on each member (a test checks equality). Sweeps use it for cost
points over design spaces: hundreds of thousands of design points per minute.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np

from asicsim._src.hw.cost import cost_many
from asicsim._src.hw.cost_tables import stack_designs
from asicsim._src.hw.counts import ZERO_CODES
from asicsim._src.hw.design import SystolicDesign
from asicsim._src.hw.objectives import DEFAULT_OBJECTIVE
from asicsim._src.hw.operations import Operation
from asicsim._src.hw.pipeline import price
from asicsim._src.hw.result import Price
from asicsim._src.hw.roles import bytes_per_element, mac_execution, resolve_formats

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
                formats: str | Mapping | None = None, *, objective: str = DEFAULT_OBJECTIVE) -> Price:
    """Every operation on every design of one family: a :class:`~asicsim._src.hw.result.Price` of shape
    ``(designs, ops)`` (time, cycles, utilization, typed traffic and energy, bound codes, mapping)."""
    d0 = designs[0]
    key = family_key(d0)
    bad = [d.name for d in designs if family_key(d) != key]
    if bad:
        raise ValueError(f"cost_family: designs {bad[:3]} differ from {d0.name!r} in more than "
                         f"{list(VECTOR_FIELDS)}; price them separately")
    fmts = resolve_formats(d0, formats)
    rows = np.array([d.array.rows for d in designs], dtype=np.float64)
    cols = np.array([d.array.cols for d in designs], dtype=np.float64)
    flow = np.array([_DATAFLOW[d.array.dataflow] for d in designs])
    caps = [np.array([d.buffers[j].capacity_bytes for d in designs], dtype=np.float64)
            for j in range(len(d0.buffers))]
    zero = ZERO_CODES[d0.array.zero_weights]
    gemms = any(op.kind in ("gemm", "conv", "rnn") for op in ops)
    return price(ops, d0, fmts, bytes_per_element(fmts), rows=rows, cols=cols, dataflow=flow,
                 capacity_bytes=caps, objective=objective, zero=zero,
                 rate=mac_execution(d0, fmts, formats).rate if gemms else 1.0)  # asicsim._src.hw.native


def cost_designs(ops: Sequence[Operation], designs: Sequence, formats: str | Mapping | None = None, *,
                 objective: str = DEFAULT_OBJECTIVE) -> Price:
    """Every operation on each of ``designs``: one :class:`~asicsim._src.hw.result.Price` of shape
    ``(designs, ops)``, whatever the kind. Several designs of one family are priced in one
    vectorised pass (:func:`cost_family`); one design alone (any kind) by
    :func:`asicsim._src.hw.cost.cost_many`, its price given a designs axis
    (:func:`asicsim._src.hw.cost_tables.stack_designs`)."""
    designs = list(designs)
    if len(designs) == 1:  # alone: its own price (a systolic design's notes on its own buffers)
        d = designs[0]
        return stack_designs([cost_many(list(ops), d, formats, objective=objective).price], [getattr(d, "name", str(d))])
    if family_key(designs[0]) is None:
        raise ValueError(f"cost_designs: {designs[0].name!r} joins no family (a GPU); allowed: it alone")
    return cost_family(ops, designs, formats, objective=objective)
