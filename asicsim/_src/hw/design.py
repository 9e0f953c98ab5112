"""Systolic-array design specs: frozen, hashable dataclasses with their units in the field names.

A design is data (see ``designs/*.toml``); these classes only hold it, check it and derive plain
numbers from it (PE count, peak MAC rate, buffer word widths). No cost is computed here.

Every class validates at construction and raises one :class:`DesignError` listing every bad field
with its value and what is allowed, so ``SystolicDesign(...)`` built in Python is held to the same
rules as a TOML file (:mod:`asicsim._src.hw.design_files` adds the file name and the field paths).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from asicsim._src.hw import limits as lim
from asicsim._src.hw.design_checks import DesignError as DesignError
from asicsim._src.hw.design_checks import Problem, in_range, own_fields, raise_if, text
from asicsim._src.hw.design_parts import DATAFLOWS as DATAFLOWS
from asicsim._src.hw.design_parts import DRAM_KINDS as DRAM_KINDS
from asicsim._src.hw.design_parts import OPERANDS as OPERANDS
from asicsim._src.hw.design_parts import ZERO_WEIGHTS as ZERO_WEIGHTS
from asicsim._src.hw.design_parts import ArraySpec as ArraySpec
from asicsim._src.hw.design_parts import BufferSpec as BufferSpec
from asicsim._src.hw.design_parts import DramSpec as DramSpec
from asicsim._src.hw.design_parts import PESpec as PESpec
from asicsim._src.hw.design_parts import VectorUnitSpec as VectorUnitSpec
from asicsim._src.hw.design_parts import WeightBuffer
from asicsim._src.hw.operations import OperationError
from asicsim._src.hw.power_spec import PowerSpec as PowerSpec
from asicsim._src.hw.roles import mac_execution, resolve_formats
from asicsim._src.numerics.frozen_fields import convert_fields, converted


@dataclass(frozen=True, kw_only=True)
class SystolicDesign:
    """A whole systolic accelerator; hashable, so usable as a dict key or a ``jax.jit`` static arg."""

    name: str
    description: str = ""
    source: str = ""
    technology_nm: float
    clock_mhz: float
    static_power_w: float | None = None  # the chip's published idle power; None: the power model's components
    tdp_w: float | None = None  # thermal design power, for reference and power caps
    array: ArraySpec
    pe: PESpec
    buffers: tuple[BufferSpec, ...] = converted(tuple)  # a list would not hash
    dram: DramSpec
    vector: VectorUnitSpec | None = None
    power: PowerSpec | None = None  # [power]: overrides of the power model's defaults (asicsim._src.hw.power)

    @staticmethod
    def problems(v: dict) -> list[Problem]:
        """Problems of the scalar fields and of the buffer names (nested specs check themselves)."""
        out: list[Problem] = []
        text(out, v, "name", nonempty=True)
        text(out, v, "description")
        text(out, v, "source")
        in_range(out, v, "technology_nm", lim.NODE_NM)
        in_range(out, v, "clock_mhz", lim.CLOCK_MHZ)
        in_range(out, v, "static_power_w", lim.STATIC_POWER_W, optional=True)
        in_range(out, v, "tdp_w", lim.TDP_W, optional=True)
        bufs = v.get("buffers", ())
        if "buffers" in v and not (isinstance(bufs, (list, tuple)) and bufs
                                   and all(isinstance(b, BufferSpec) for b in bufs)):
            out.append(("buffers", bufs, "a non-empty tuple of BufferSpec (the cost model needs a "
                                         "buffer for each of ifmap, filter and ofmap)"))
        buffers = [b for b in bufs if isinstance(b, BufferSpec)] if isinstance(bufs, tuple | list) else []
        names = [b.name for b in buffers]
        if len(set(names)) != len(names):
            out.append(("buffers", names, "distinct buffer names"))
        for op in OPERANDS:  # the cost model needs one home per operand (psum may share ofmap's)
            homes = [b.name for b in buffers if op in b.holds]
            if len(homes) > 1 or (not homes and op != "psum" and buffers):
                out.append((f"buffers.*.holds ({op})", homes,
                            f"exactly one buffer holding {op!r}" + (" (or none: psums then "
                                                                    "accumulate in the ofmap buffer)"
                                                                    if op == "psum" else "")))
        out.extend(_power_problems(v))
        if isinstance(v.get("pe"), PESpec) and isinstance(v.get("array"), ArraySpec):
            out.extend(_buffer_fit_problems(buffers, v["pe"], v["array"]))
        spill = [b.name for b in buffers if b.psum_spill]
        if len(spill) > 1 or any("psum" in b.holds for b in buffers if b.psum_spill):
            out.append(("buffers.*.psum_spill", spill,
                        "at most one buffer, not the one holding 'psum' (where partial sums that "
                        "outgrow it may be kept)"))
        return out

    def __post_init__(self) -> None:
        own = own_fields(self)
        problems = self.problems(own)
        for key, cls in (("array", ArraySpec), ("pe", PESpec), ("dram", DramSpec)):
            if not isinstance(own[key], cls):
                problems.append((key, own[key], f"an {cls.__name__}"))
        if self.vector is not None and not isinstance(self.vector, VectorUnitSpec):
            problems.append(("vector", self.vector, "a VectorUnitSpec or None"))
        if self.power is not None and not isinstance(self.power, PowerSpec):
            problems.append(("power", self.power, "a PowerSpec or None"))
        raise_if(problems)
        convert_fields(self)

    # --- derived numbers -------------------------------------------------------------------
    @property
    def pes(self) -> int:
        return self.array.pes

    @property
    def clock_hz(self) -> float:
        return self.clock_mhz * 1e6

    @property
    def peak_macs_per_s(self) -> float:
        return self.pes * self.clock_hz

    @property
    def peak_tops(self) -> float:
        return self.peak_ops_per_s() / 1e12

    @property
    def sram_kib(self) -> float:
        return sum(b.capacity_kib for b in self.buffers)

    @property
    def dram_bytes_per_cycle(self) -> float:
        return self.dram.bandwidth_gbps * 1e9 / self.clock_hz

    def operand_bits(self, operand: str) -> float:
        """Bits of one element of ``operand`` as the array sees it (block formats: amortised scale)."""
        if operand not in OPERANDS:
            raise ValueError(f"operand {operand!r}; allowed: {list(OPERANDS)}")
        # ofmap and psum leave the array in the accumulator's format unless a buffer says otherwise
        fmt = {"ifmap": self.pe.a_format, "filter": self.pe.b_format}.get(operand, self.pe.acc_format)
        return fmt.storage_bits  # memory words: tf32 is stored in 32 bits

    def buffer(self, name: str) -> BufferSpec:
        for b in self.buffers:
            if b.name == name:
                return b
        raise KeyError(f"design {self.name!r} has no buffer {name!r}; it has "
                       f"{[b.name for b in self.buffers]}")

    def buffers_holding(self, operand: str) -> tuple[BufferSpec, ...]:
        return tuple(b for b in self.buffers if operand in b.holds)

    def word_bits(self, buffer: str) -> float:
        """A buffer's word: its ``word_bits``, else the widest format among what it holds."""
        b = self.buffer(buffer)
        if b.word_bits is not None:
            return b.word_bits
        return max(self.operand_bits(op) for op in b.holds)

    # --- the design interface (asicsim._src.hw.interface.Design) ---------------------------------
    @property
    def kind(self) -> str:
        return "systolic"

    def peak_ops_per_s(self, formats=None) -> float:
        """Dense peak, 2 ops (multiply and add) per MAC as vendors count TOPS: PEs x clock x 2, times
        the rate of the native mode ``formats`` run in (asicsim._src.hw.native: TPU v1 at 16 x 16 bits
        is a quarter of its int8 peak); NaN for formats the design does not execute (pricing them
        is the error that names its modes)."""
        if formats is None:
            return 2 * self.peak_macs_per_s
        try:
            rate = mac_execution(self, resolve_formats(self, formats), formats).rate
        except OperationError:
            return float("nan")
        return 2 * self.peak_macs_per_s * rate

    @property
    def dram_bytes_per_s(self) -> float:
        return self.dram.bandwidth_gbps * 1e9

    @property
    def power_w(self) -> float:
        """The published TDP (``tdp_w``); NaN when the design gives none (no estimate is made)."""
        return float(self.tdp_w) if self.tdp_w else float("nan")

    @property
    def has_vector_unit(self) -> bool:
        return self.vector is not None

    def weight_buffer(self):
        """The buffer holding ``filter`` (construction checks there is one) as a
        :class:`~asicsim._src.hw.interface.WeightBuffer`."""
        bufs = self.buffers_holding("filter")
        return WeightBuffer(capacity_kib=sum(b.capacity_kib for b in bufs),
                            resident_kib=sum(b.capacity_kib for b in bufs),  # the mapper may use it whole
                            double_buffered=any(b.double_buffered for b in bufs),
                            weight_bits=self.pe.b_format.storage_bits)

    def with_weight_buffer(self, capacity_kib: float) -> SystolicDesign:
        """This design with every weight-holding buffer resized to ``capacity_kib`` (name suffixed)."""
        from dataclasses import replace

        bufs = tuple(replace(b, capacity_kib=capacity_kib) if "filter" in b.holds else b for b in self.buffers)
        return replace(self, name=f"{self.name}_wbuf{capacity_kib:g}KiB", buffers=bufs)


def _power_problems(v: dict) -> list[Problem]:
    """Static (leakage) power is part of the total: it cannot exceed the TDP."""
    static, tdp = v.get("static_power_w"), v.get("tdp_w")
    if (isinstance(static, int | float) and isinstance(tdp, int | float) and not isinstance(static, bool)
            and not isinstance(tdp, bool) and lim.STATIC_POWER_W.ok(static) and lim.TDP_W.ok(tdp) and static > tdp):
        return [("static_power_w", static, f"at most tdp_w ({tdp:g} W): static power is part of the chip's total")]
    return []


#: The width an operand takes in a buffer at the least: outputs may leave requantized to the
#: input format (a unified activation buffer of int8 words holds int8 outputs).
_OPERAND_FORMAT = {"ifmap": "a_format", "filter": "b_format", "ofmap": "a_format", "psum": "acc_format"}


def _buffer_fit_problems(buffers, pe: PESpec, array: ArraySpec) -> list[Problem]:
    """Each buffer's word holds one element of each operand it holds (``word_bits = 3`` under
    int8 is an error; outputs may leave requantized to the input format)."""
    out: list[Problem] = []
    for b in buffers:
        bits = _operand_bits(b, pe)
        if b.word_bits is not None and b.word_bits < max(bits.values()):
            widest = max(bits, key=bits.get)
            out.append((f"buffers.{b.name}.word_bits", b.word_bits,
                        f"at least {bits[widest]} bits: one {getattr(pe, _OPERAND_FORMAT[widest]).name} "
                        f"element of {widest!r} (or omitted: the widest format it holds)"))
    return out


def _operand_bits(b: BufferSpec, pe: PESpec) -> dict[str, int]:
    return {op: math.ceil(getattr(pe, _OPERAND_FORMAT[op]).storage_bits) for op in b.holds}


def buffer_tile_note(design: SystolicDesign) -> str | None:
    """A warning when a buffer cannot hold one array tile (rows x cols elements) of each operand it
    holds: the array then starves (a 32x32 int8 array behind a 1-byte buffer ran at 0.013 %
    utilisation), a price worth a remark, not an error (hand-checked tests use tiny buffers)."""
    small = []
    for b in design.buffers:
        tile_kib = sum(design.array.rows * design.array.cols * n for n in _operand_bits(b, design.pe).values()) / 8192
        if b.capacity_kib < tile_kib:
            small.append(f"{b.name} ({b.capacity_kib:g} KiB < {tile_kib:g} KiB)")
    if not small:
        return None
    return (f"buffer(s) smaller than one {design.array.rows}x{design.array.cols} array tile of what they hold: "
            f"{', '.join(small)}; the array waits on them (low utilisation)")
