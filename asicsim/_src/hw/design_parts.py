"""The parts of a systolic design: the array, the PEs, the on-chip buffers, DRAM and the vector
unit. Each is a frozen dataclass with its units in the field names that validates itself at
construction (one :class:`DesignError` listing every bad field); :mod:`asicsim._src.hw.design` puts them
together.
"""

from __future__ import annotations

from dataclasses import dataclass

from asicsim._src.hw import limits as lim
from asicsim._src.hw.design_checks import DesignError as DesignError
from asicsim._src.hw.design_checks import (
    Problem,
    choice,
    flag,
    in_range,
    own_fields,
    raise_if,
    sourced_flag,
    text,
)
from asicsim._src.hw.native import MacMode, accumulator_problem, modes_problems
from asicsim._src.numerics import FormatError, get_format
from asicsim._src.numerics.formats import Format
from asicsim._src.numerics.frozen_fields import convert_fields, converted, settle

DATAFLOWS = ("os", "ws", "is")
#: What the PEs do with a zero weight: multiply it like any value, gate the MAC off (no switching:
#: energy saved, same cycles) or skip it (the array only sees nonzeros: cycles saved too).
ZERO_WEIGHTS = ("compute", "gate", "skip")
OPERANDS = ("ifmap", "filter", "ofmap", "psum")
DRAM_KINDS = ("DDR3", "DDR4", "DDR5", "LPDDR4", "LPDDR4X", "LPDDR5", "GDDR5", "GDDR6", "GDDR6X",
              "HBM", "HBM2", "HBM2E", "HBM3", "HBM3E")


@dataclass(frozen=True, kw_only=True)
class ArraySpec:
    """The PE grid: ``rows`` x ``cols`` MAC units and the dataflow (what stays in each PE)."""

    rows: int
    cols: int
    dataflow: str  # "os" output-, "ws" weight-, "is" input-stationary (SCALE-Sim's names)
    zero_weights: str = "compute"  # see ZERO_WEIGHTS
    # Cycles every operation (layer) waits for synchronisation its array does not overlap (a host
    # issuing the next layer's instructions, a barrier); 0: none, or none published.
    sync_cycles: float = 0
    # Whether operands and results bypass the rows and columns a tile does not use, so the one-time
    # fill/drain crosses only the used block (``2 r + c - 2``, asicsim._src.hw.counts) instead of the
    # whole array (``2 R + C - 2``). Default False: the operands cross every PE, as in a plain
    # systolic array, in SCALE-Sim (its compatibility mode does not read this field) and in
    # Gemmini, whose mesh runs one primitive matmul of its full dimension that software pads
    # smaller matrices into (github.com/ucb-bar/gemmini README.md, "meshRows, meshColumns"); no
    # shipped design has a source saying otherwise. True needs ``bypass_unused_source``.
    bypass_unused: bool = False
    bypass_unused_source: str = ""
    # Whether the operand the dataflow keeps stationary and loads from DRAM (ws: the weights, is:
    # the inputs) is stored and fetched in whole ``rows x cols`` tiles: every fold's stationary
    # tile moves as one array-sized tile, padded where the matrix does not fill it (asicsim._src.hw.counts).
    # TPU v1 feeds its Weight FIFO with 256x256 tiles from its Weight Memory (Jouppi et al. 2017,
    # Sec. 2). Default False: only the matrix's bytes move. Under os it changes nothing (its
    # stationary outputs are not fetched), so a sweep over dataflows keeps it. True needs
    # ``whole_tiles_source``.
    whole_tiles: bool = False
    whole_tiles_source: str = ""
    # The operands whose tiles a double-buffered schedule keeps two copies of, so that their DRAM
    # transfers overlap the work (asicsim._src.hw.counts); the others' tiles are kept once and their
    # transfers stall the array. "psum" is the partial-sum (output) block, "ofmap" the outputs'
    # staging tile where they leave through another buffer. Default: all four (a schedule doubles
    # every tile or none). TPU v1 double-buffers its weights in a Weight FIFO four tiles deep
    # (Jouppi et al. 2017, Sec. 2), apart from its accumulators. Any other set needs
    # ``double_buffers_source``.
    double_buffers: tuple[str, ...] = converted(tuple, default=OPERANDS)  # a list would not hash
    double_buffers_source: str = ""

    @staticmethod
    def problems(v: dict) -> list[Problem]:
        out: list[Problem] = []
        in_range(out, v, "rows", lim.ARRAY_SIDE)
        in_range(out, v, "cols", lim.ARRAY_SIDE)
        in_range(out, v, "sync_cycles", lim.SYNC_CYCLES)
        sourced_flag(out, v, "bypass_unused", "the array bypasses unused rows and columns")
        sourced_flag(out, v, "whole_tiles", "the stationary operand moves in whole array-sized tiles")
        _double_buffers_problems(out, v)
        choice(out, v, "dataflow", DATAFLOWS, " | ".join(repr(d) for d in DATAFLOWS))
        choice(out, v, "zero_weights", ZERO_WEIGHTS, " | ".join(repr(d) for d in ZERO_WEIGHTS))
        return out

    def __post_init__(self) -> None:
        raise_if(self.problems(own_fields(self)))
        convert_fields(self)

    @property
    def pes(self) -> int:
        return self.rows * self.cols


def _double_buffers_problems(out: list[Problem], v: dict) -> None:
    """``double_buffers``: distinct names from :data:`OPERANDS`; a set other than all four needs
    ``double_buffers_source``."""
    text(out, v, "double_buffers_source")
    if "double_buffers" not in v:
        return
    h = v["double_buffers"]
    if (not isinstance(h, (list, tuple)) or any(not isinstance(x, str) or x not in OPERANDS for x in h)
            or len(set(h)) != len(h)):
        out.append(("double_buffers", h, f"a list of distinct names from {list(OPERANDS)}"))
        return
    why = v.get("double_buffers_source", "")
    if set(h) != set(OPERANDS) and isinstance(why, str) and not why.strip():
        out.append(("double_buffers_source", why, "a non-empty string saying who says these operands alone are "
                                                  "double-buffered (required unless double_buffers lists all of "
                                                  f"{list(OPERANDS)})"))


@dataclass(frozen=True, kw_only=True)
class PESpec:
    """One MAC unit: multiplier operand formats (a = ifmap, b = filter) and the accumulator format.

    Format names go through :func:`asicsim.numerics.get_format` (names, aliases, grammar, .toml
    paths); the resolved frozen specs are stored, so ``"bf16"`` and ``"bfloat16"`` give equal PEs.
    ``modes`` lists the MAC formats the PE executes natively and at what fraction of the peak
    (:mod:`asicsim._src.hw.native`; tables with ``a``, ``b``, ``acc``, ``rate``, ``source``); the PE's own
    formats are the full-rate mode and are added first when not listed.
    """

    a_format: Format = converted(get_format)  # a name, alias or path; stored resolved
    b_format: Format = converted(get_format)
    acc_format: Format = converted(get_format)
    mac_energy_pj: float | None = None  # None: derived from the formats and node by the cost model
    # per MAC: the PE's own operand and partial-sum register accesses (ZigZag and Eyeriss count them
    # apart from the arithmetic); None: not priced, which design_energy_table and every result say
    register_energy_pj: float | None = None
    modes: tuple[MacMode, ...] = ()

    @staticmethod
    def problems(v: dict) -> list[Problem]:
        out: list[Problem] = []
        for key in ("a_format", "b_format", "acc_format"):
            if key in v:
                try:
                    get_format(v[key])
                except FormatError as err:
                    out.append((key, v[key], f"a format name, alias or .toml path ({err})"))
        if not out and all(k in v for k in ("a_format", "b_format", "acc_format")):
            why = accumulator_problem(v["a_format"], v["b_format"], v["acc_format"])
            if why:
                out.append(("acc_format", v["acc_format"], why))
        in_range(out, v, "mac_energy_pj", lim.MAC_ENERGY_PJ, optional=True)
        in_range(out, v, "register_energy_pj", lim.MAC_ENERGY_PJ, optional=True)
        out.extend(modes_problems(v))
        return out

    def __post_init__(self) -> None:
        raise_if(self.problems(own_fields(self)))
        convert_fields(self)
        modes = tuple(m if isinstance(m, MacMode) else MacMode(**m) for m in self.modes)
        own = (self.a_format, self.b_format, self.acc_format)
        if not any((m.a, m.b, m.acc) == own for m in modes):
            modes = (MacMode(a=own[0], b=own[1], acc=own[2], rate=1.0,
                             source="the design's [pe] formats (its peak)"), *modes)
        settle(self, modes=modes)


@dataclass(frozen=True, kw_only=True)
class BufferSpec:
    """One on-chip SRAM buffer. A unified buffer lists several operands in ``holds``.

    ``capacity_kib`` is the total. ``double_buffered`` is SCALE-Sim's schedule (the compatibility
    mode halves the buffer); the physical model's mapper chooses double buffering per operation,
    doubling the tiles of the operands ``ArraySpec.double_buffers`` lists.
    ``word_bits`` None means the width of the format of what it holds; ``banks`` None a bank count
    from the size; per-word energies None a size- and node-derived default chosen by the cost model.
    """

    name: str
    holds: tuple[str, ...] = converted(tuple)  # a list would not hash
    capacity_kib: float
    word_bits: int | None = None
    banks: int | None = None  # None: derived from the capacity (asicsim._src.hw.sram_banks)
    double_buffered: bool = False
    # partial sums that outgrow the buffer holding "psum" may be kept (read-modify-written) here
    psum_spill: bool = False
    read_energy_pj: float | None = None  # per word read
    write_energy_pj: float | None = None  # per word written

    @staticmethod
    def problems(v: dict) -> list[Problem]:
        out: list[Problem] = []
        text(out, v, "name", nonempty=True)
        if "holds" in v:
            h = v["holds"]
            if (not isinstance(h, (list, tuple)) or not h
                    or any(not isinstance(x, str) or x not in OPERANDS for x in h)
                    or len(set(h)) != len(h)):
                out.append(("holds", h, f"a non-empty list of distinct names from {list(OPERANDS)}"))
        in_range(out, v, "capacity_kib", lim.SRAM_KIB)
        in_range(out, v, "word_bits", lim.WORD_BITS, optional=True)
        in_range(out, v, "banks", lim.BANKS, optional=True)
        flag(out, v, "double_buffered")
        flag(out, v, "psum_spill")
        in_range(out, v, "read_energy_pj", lim.WORD_ENERGY_PJ, optional=True)
        in_range(out, v, "write_energy_pj", lim.WORD_ENERGY_PJ, optional=True)
        return out

    def __post_init__(self) -> None:
        raise_if(self.problems(own_fields(self)))
        convert_fields(self)

    @property
    def capacity_bytes(self) -> int:
        return round(self.capacity_kib * 1024)


@dataclass(frozen=True, kw_only=True)
class DramSpec:
    """Off-chip memory: kind, peak bandwidth in GB/s (1e9 bytes/s), optional energy and size.

    ``holds`` names the operands that live off chip between operations (default: ifmap, filter and
    ofmap). An operand it does not hold lives in its on-chip buffer (TPU v1 keeps activations in
    its unified buffer and only weights in DRAM); only what does not fit there goes off chip.
    """

    kind: str
    bandwidth_gbps: float
    energy_pj_per_bit: float | None = None  # None: the kind's published default (cost model)
    capacity_gib: float | None = None
    holds: tuple[str, ...] = converted(tuple, default=("ifmap", "filter", "ofmap"))  # a list would not hash

    @staticmethod
    def problems(v: dict) -> list[Problem]:
        out: list[Problem] = []
        choice(out, v, "kind", DRAM_KINDS, " | ".join(DRAM_KINDS))
        if "holds" in v:
            h = v["holds"]
            allowed = ("ifmap", "filter", "ofmap")
            if (not isinstance(h, (list, tuple))
                    or any(not isinstance(x, str) or x not in allowed for x in h)
                    or len(set(h)) != len(h)):
                out.append(("holds", h, f"a list of distinct names from {list(allowed)}"))
        in_range(out, v, "bandwidth_gbps", lim.DRAM_GBPS)
        in_range(out, v, "energy_pj_per_bit", lim.DRAM_PJ_PER_BIT, optional=True)
        in_range(out, v, "capacity_gib", lim.DRAM_GIB, optional=True)
        return out

    def __post_init__(self) -> None:
        raise_if(self.problems(own_fields(self)))
        convert_fields(self)


@dataclass(frozen=True, kw_only=True)
class VectorUnitSpec:
    """Elementwise unit beside the array (activations, normalisation): lanes and their clock."""

    lanes: int
    clock_mhz: float | None = None  # None: the design's clock

    @staticmethod
    def problems(v: dict) -> list[Problem]:
        out: list[Problem] = []
        in_range(out, v, "lanes", lim.VECTOR_LANES)
        in_range(out, v, "clock_mhz", lim.CLOCK_MHZ, optional=True)
        return out

    def __post_init__(self) -> None:
        raise_if(self.problems(own_fields(self)))


@dataclass(frozen=True)
class WeightBuffer:
    """The buffer(s) holding weights (``filter``): total capacity, the part that can keep weights
    resident (all of it: the mapper double-buffers per operation, and a resident weight block
    needs no second half), whether the design file calls it double-buffered (SCALE-Sim's
    schedule), and the bits of one stored weight in the design's own weight format."""

    capacity_kib: float
    resident_kib: float
    double_buffered: bool
    weight_bits: float
