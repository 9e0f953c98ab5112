"""What every design answers, whatever its kind: the one interface consumers price through.

Sweeps, batching, DeepBench pricing and the report take a design (a systolic array,
:class:`~asicsim._src.hw.design.SystolicDesign`, or a GPU, :class:`~asicsim._src.hw.gpu.GpuDesign`) and ask
it the questions below; they never ask which class it is (``tests/hw/test_design_interface.py``
fails if a module outside ``asicsim/hw`` does). Each kind answers from its own model. A design
describes hardware and does not price: :func:`asicsim._src.hw.cost.cost_many` prices operations on any
kind, and :func:`asicsim._src.hw.family.family_key` says which designs one vectorised pass can price.

- ``peak_ops_per_s(formats)``: dense peak, 2 ops per MAC as vendors count TOPS/FLOPS. A GPU's
  depends on the precision path the formats take (:func:`asicsim._src.hw.gpu.precision_path`: the
  datasheet's tensor-core, DP4A or SIMT rate); a systolic array's is PEs x clock x 2 times the
  rate of the native mode the formats run in (:mod:`asicsim._src.hw.native`). NaN for formats the
  design does not execute (nor emulates at a stated slowdown).
- ``dram_bytes_per_s``: the off-chip memory's peak bandwidth from the design file (bytes/s).
- ``power_w``: the power the design *publishes*: its TDP (thermal design power, the datasheet's
  board or chip power cap, or an envelope the design chose: ``edge_int8_32x32``'s 2 W). NaN when
  the design file gives none (``dc_bf16_128x128``, ``fp8_128x128``, the SCALE-Sim designs): no
  estimate is made here; the cost model's energy over time is the figure to read then.
  The report's peak-flops-per-watt column divides by it and leaves such designs out.
- ``has_vector_unit``: whether elementwise work (activations, an RNN's gate nonlinearities) runs
  on the chip: a systolic design's ``[vector]`` table, a GPU's SIMT cores (always).
- ``weight_buffer()`` / ``with_weight_buffer(kib)``: the on-chip buffer(s) that hold weights, for
  weight-residency studies; None / a :class:`DesignError` on a GPU, whose L2 is a cache the model
  does not schedule.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, runtime_checkable

from asicsim._src.hw.design_parts import WeightBuffer as WeightBuffer

#: The kinds of design there are (a design's ``kind``; the records' ``design_kind`` column).
DESIGN_KINDS = ("systolic", "gpu")


@runtime_checkable
class Design(Protocol):
    """A design any consumer can price on (see the module docstring for what each member means)."""

    name: str

    @property
    def kind(self) -> str:
        """One of :data:`DESIGN_KINDS`: a label for tables, never a reason to branch."""
        ...

    def peak_ops_per_s(self, formats: str | Mapping | None = None) -> float: ...

    @property
    def dram_bytes_per_s(self) -> float: ...

    @property
    def power_w(self) -> float: ...

    @property
    def has_vector_unit(self) -> bool: ...

    def weight_buffer(self) -> WeightBuffer | None: ...

    def with_weight_buffer(self, capacity_kib: float) -> Design: ...


def roof(design: Design, formats: str | Mapping | None = None) -> dict:
    """A design's roofline roof and power as a record's columns: ``design_kind``,
    ``peak_ops_per_s``, ``dram_bytes_per_s``, ``power_w`` (TDP), ``idle_power_chip_w``,
    ``idle_power_board_w`` and ``peak_flops_per_w_board`` (peak flop/s per board watt,
    :func:`asicsim._src.hw.efficiency.peak_tops_per_w`: a GPU's peak over its TDP, an accelerator's array at
    full rate with its board's idle power; NaN where the design does not execute the formats)."""
    from asicsim._src.hw.efficiency import power_figures

    idle, per_w = {}, float("nan")
    if design.kind in ("systolic", "gpu"):
        idle, peak = power_figures(design, formats)  # the energy rates built once for both
        per_w = peak["board"] * 1e12 if peak else per_w  # None: formats the design does not execute
    return {"design_kind": design.kind, "peak_ops_per_s": design.peak_ops_per_s(formats),
            "dram_bytes_per_s": design.dram_bytes_per_s, "power_w": design.power_w,
            **{f"idle_power_{s}_w": idle.get(s, float("nan")) for s in ("chip", "board")},
            "peak_flops_per_w_board": per_w}
