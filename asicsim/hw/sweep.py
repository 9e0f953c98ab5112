"""Vectorised physical cost of a list of GEMM/conv layers over a grid of design variants.

>>> import numpy as np, asicsim as sim
>>> r = gemm_sweep([sim.Gemm(256, 256, 256)], "tpu_v1", rows=np.array([[64], [256]]))
>>> r["cycles_compute"].shape, r["cycles_compute"][:, 0, 0].tolist()
((2, 1, 1), [1024.0, 256.0])

The design variants are numpy arrays that broadcast against each other (``rows``, ``cols``,
``dataflow``, ``buffer_scale`` multiplying every buffer's capacity); layers form one more, last,
axis. The numbers are those of :func:`asicsim.cost` for each variant (a test checks that), made by
the same code (:mod:`asicsim.hw.physical`, :mod:`asicsim.hw.pricing`) in one pass of array
operations. Formats are a fixed choice per call (loop over formats in the caller).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from asicsim.hw.cost import buffer_layout, mac_execution, resolve_formats
from asicsim.hw.design import SystolicDesign
from asicsim.hw.design_files import load_design
from asicsim.hw.operations import Conv, Gemm, OperationError, weight_store_bits
from asicsim.hw.physical import ZERO_CODES, gemm_counts
from asicsim.hw.pricing import energy, traffic
from asicsim.hw.scalesim_compute import dataflow_codes

BOUNDS = ("compute", "bandwidth", "occupancy")


def _layers(ops: Sequence[Gemm | Conv], weight_bits: float) -> dict[str, np.ndarray]:
    cols: dict[str, list] = {k: [] for k in ("M", "N", "K", "reps", "ifmap", "density", "store")}
    for op in ops:
        if not isinstance(op, (Gemm, Conv)):
            raise OperationError(f"gemm_sweep takes Gemm and Conv operations; got {op!r}")
        (low,) = op.lower()
        for k, v in (("M", low.M), ("N", low.N), ("K", low.K), ("reps", low.reps),
                     ("ifmap", low.ifmap_elems or low.M * low.K), ("density", 1 - op.weight_sparsity),
                     ("store", weight_store_bits(weight_bits, op.weight_sparsity, op.sparse_format,
                                                 low.K, low.N))):
            cols[k].append(v)
    return {k: np.asarray(v, dtype=np.float64) for k, v in cols.items()}


def gemm_sweep(ops: Sequence[Gemm | Conv], design: str | SystolicDesign, *, rows=None, cols=None,
               dataflow=None, buffer_scale=1.0, formats: str | Mapping | None = None) -> dict:
    """Cycles, traffic, energy and bound of every layer on every design variant (arrays of shape
    ``broadcast(rows, cols, dataflow, buffer_scale) + (layers,)``). ``bound`` holds indices into
    :data:`BOUNDS`. Unset knobs keep the design's values."""
    d = load_design(design)
    fmts = resolve_formats(d, formats)
    bits = {r: float(f.storage_bits) for r, f in fmts.items()}  # memory words (tf32: 32)
    L = _layers(ops, bits["weight"])
    knobs = [np.asarray(d.array.rows if rows is None else rows),
             np.asarray(d.array.cols if cols is None else cols),
             dataflow_codes(d.array.dataflow if dataflow is None else dataflow),
             np.asarray(buffer_scale, dtype=np.float64)]
    shape = np.broadcast_shapes(*(k.shape for k in knobs))
    R, C, df, scale = (np.broadcast_to(k, shape)[..., None] for k in knobs)
    zero = ZERO_CODES[d.array.zero_weights]
    layout = buffer_layout(d)
    caps = [b.capacity_bytes * scale for b in d.buffers]
    t = gemm_counts(M=L["M"], N=L["N"], K=L["K"], rows=R, cols=C, dataflow=df, a_bits=bits["act"],
                    b_store_bits=L["store"], acc_bits=bits["acc"], out_bits=bits["out"],
                    layout=layout, capacity_bytes=caps, dram_holds=frozenset(d.dram.holds),
                    dram_bytes_per_cycle=d.dram_bytes_per_cycle, ifmap_elems=L["ifmap"],
                    reps=L["reps"], density=L["density"], zero_weights=zero,
                    mac_rate=mac_execution(d, fmts, formats).rate)  # asicsim.hw.native
    t["bytes.filter"] = L["store"] / 8
    tr = traffic(t, bits)
    pes = R * C
    e, _ = energy(t, tr, d, fmts, zero, pes=pes, buffer_kib=[b.capacity_kib * scale for b in d.buffers])
    busy = t["cycles_compute"] + t["cycles_fill_drain"]
    performed = t["macs_nonzero"] if zero == ZERO_CODES["skip"] else t["macs"]
    transfer = t["transfer_cycles"]
    bound = np.where((transfer > 0) & (transfer >= busy), 1, np.where(performed / pes < 0.5 * busy, 2, 0))
    cycles = busy + t["cycles_stall"]
    return {
        "cycles": cycles, "cycles_compute": t["cycles_compute"],
        "cycles_fill_drain": t["cycles_fill_drain"], "cycles_stall": t["cycles_stall"],
        "time_s": cycles / d.clock_hz, "utilization": performed / (cycles * pes),
        "mapping_efficiency": t["mapped_pes"] / t["mapping_slots"], "bound": bound,
        "dram_bytes": tr["dram_bytes"], "sram_array_bytes": tr["array_bytes"],
        "energy_pj": sum(e.values()), **{f"energy.{k}_pj": v for k, v in e.items()},
    }
