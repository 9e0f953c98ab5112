"""Vectorised physical cost of a list of GEMM/conv layers over a grid of design variants.

>>> import numpy as np, asicsim as sim
>>> r = gemm_sweep([sim.Gemm(256, 256, 256)], "tpu_v1", rows=np.array([[64], [256]]))
>>> r.cycles_compute.shape, r.cycles_compute[:, 0, 0].tolist(), r.bound_names[:, 0, 0].tolist()
((2, 1, 1), [1024.0, 256.0], ['compute', 'occupancy'])

The design variants are numpy arrays that broadcast against each other (``rows``, ``cols``,
``dataflow``, ``buffer_scale`` multiplying every buffer's capacity); layers form one more, last,
axis. The numbers are those of :func:`asicsim.cost` for each variant (a test checks that), made by
the same code (:func:`asicsim._src.hw.pipeline.price`) in one pass of array operations. Formats are a fixed choice per call (loop over formats in the caller).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from asicsim._src.hw import limits as lim
from asicsim._src.hw.counts import ZERO_CODES
from asicsim._src.hw.design import SystolicDesign
from asicsim._src.hw.design_files import load_design
from asicsim._src.hw.objectives import DEFAULT_OBJECTIVE
from asicsim._src.hw.operations import Conv, Gemm, OperationError
from asicsim._src.hw.pipeline import price
from asicsim._src.hw.result import BOUNDS as BOUNDS
from asicsim._src.hw.result import Price
from asicsim._src.hw.roles import bytes_per_element, mac_execution, resolve_formats
from asicsim._src.hw.scalesim_compute import dataflow_codes


def _knob(name: str, value, limit: lim.Limit) -> np.ndarray:
    return limit.check_array("gemm_sweep", name, value)


def gemm_sweep(ops: Sequence[Gemm | Conv], design: str | SystolicDesign, *, rows=None, cols=None,
               dataflow=None, buffer_scale=1.0, formats: str | Mapping | None = None,
               objective: str = DEFAULT_OBJECTIVE) -> Price:
    """Cycles, traffic, energy and bound of every layer on every design variant: a
    :class:`~asicsim._src.hw.result.Price` of shape ``broadcast(rows, cols, dataflow, buffer_scale) +
    (layers,)`` (``bound`` holds :class:`~asicsim._src.hw.result.Bound` codes). Unset knobs keep the
    design's values."""
    d = load_design(design)
    bad = [op for op in ops if not isinstance(op, (Gemm, Conv))]
    if bad:
        raise OperationError(f"gemm_sweep takes Gemm and Conv operations; got {bad[0]!r}")
    fmts = resolve_formats(d, formats)
    knobs = [_knob("rows", d.array.rows if rows is None else rows, lim.ARRAY_SIDE),
             _knob("cols", d.array.cols if cols is None else cols, lim.ARRAY_SIDE),
             dataflow_codes(d.array.dataflow if dataflow is None else dataflow),
             _knob("buffer_scale", buffer_scale, lim.BUFFER_SCALE)]
    for b in d.buffers:  # every scaled capacity in the SRAM range, before any work
        lim.SRAM_KIB.check_array("gemm_sweep", f"buffer_scale x buffers.{b.name}.capacity_kib "
                                 f"({b.capacity_kib:g} KiB)", knobs[3] * b.capacity_kib)
    # each knob keeps its own shape (padded to the grid's rank): what depends only on the buffers
    # (the mapper's tile search) is then computed once per buffer size, not per array shape
    ndim = len(np.broadcast_shapes(*(k.shape for k in knobs)))
    R, C, df, scale = (k.reshape((1,) * (ndim - k.ndim) + k.shape) for k in knobs)
    zero = ZERO_CODES[d.array.zero_weights]
    return price(ops, d, fmts, bytes_per_element(fmts), rows=R, cols=C, dataflow=df,
                 capacity_bytes=[b.capacity_bytes * scale for b in d.buffers], objective=objective, zero=zero,
                 rate=mac_execution(d, fmts, formats).rate if ops else 1.0)  # asicsim._src.hw.native
