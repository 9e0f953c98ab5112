"""Elementwise work (activations, pooling, normalisation, optimizer updates, RNN gates) on the
vector unit a systolic design describes (``[vector]``: ``lanes`` and their ``clock_mhz``).

The unit does ``lanes`` operations per vector clock, so ``ops`` operations take
``ceil(ops / lanes)`` vector cycles, ``x clock_mhz / vector.clock_mhz`` in the array's cycles
(the design's clock is the unit of every cycle count). Operands stream from the buffers: a
reduction reads ``inputs`` elements per output (a pooling window, a row of a norm's statistics)
and writes one; DRAM supplies only the distinct elements, and those transfers overlap the stream
(a stall only for what the stream cannot hide).

A design with no vector unit does the work elsewhere (a host CPU, a separate chip): it is priced
at zero time and energy on this design, and :func:`vector_note` says so, so the cost result can
carry the note; never an error, never silent.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from asicsim._src.hw.design import SystolicDesign
from asicsim._src.hw.operations import Elementwise


def vector_note(op: Elementwise, design: SystolicDesign) -> str | None:
    """Why ``op`` costs nothing on ``design`` (it has no vector unit), or None."""
    if design.vector is not None:
        return None
    return (f"design {design.name!r} has no [vector] unit: {op.work} work is done elsewhere "
            "(priced at zero time and energy here)")


def vector_counts(op: Elementwise, design: SystolicDesign, bits: Mapping[str, float]) -> dict[str, float]:
    """Counts of ``op`` on ``design``'s vector unit: ``cycles_compute``, ``cycles_stall``,
    ``transfer_cycles``, ``vector_ops``, ``sram.ifmap.reads``, ``sram.ofmap.writes`` (elements) and
    ``dram.ifmap.reads_bytes``, ``dram.ofmap.writes_bytes`` (the pricing pipeline adds them to an
    operation's counts). ``bits``: element bits of ``act`` (operands) and ``out``.
    All counts are zero on a design without a vector unit (see :func:`vector_note`)."""
    if design.vector is None:
        return dict.fromkeys(("cycles_compute", "vector_ops", "transfer_cycles", "cycles_stall",
                              "sram.ifmap.reads", "sram.ofmap.writes", "dram.ifmap.reads_bytes",
                              "dram.ofmap.writes_bytes"), 0.0)
    ops = op.elements * op.ops_per_element
    ratio = design.clock_mhz / (design.vector.clock_mhz or design.clock_mhz)
    cycles = math.ceil(ops / design.vector.lanes) * ratio
    holds = set() if op.on_chip else set(design.dram.holds)
    dram_in = op.distinct_reads * bits["act"] / 8 if "ifmap" in holds else 0.0
    dram_out = op.elements * bits["out"] / 8 if "ofmap" in holds else 0.0
    transfer = (dram_in + dram_out) / design.dram_bytes_per_cycle
    return {"cycles_compute": cycles, "vector_ops": float(ops), "transfer_cycles": transfer,
            "cycles_stall": max(transfer - cycles, 0.0),
            "sram.ifmap.reads": float(op.reads), "sram.ofmap.writes": float(op.elements),
            "dram.ifmap.reads_bytes": dram_in, "dram.ofmap.writes_bytes": dram_out}
