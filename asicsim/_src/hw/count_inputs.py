"""What a count of a scheduled GEMM reads: the problem, the hardware as the counts see it and the
schedule (arrays, so sweeps broadcast), with the codes of dataflows, loop-order families and zero
handling. :mod:`asicsim._src.hw.counts` prices one :class:`Schedule` of a :class:`GemmProblem` on an
:class:`ArrayHardware`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

OS, WS, IS = 0, 1, 2
ZERO_CODES = {"compute": 0, "gate": 1, "skip": 2}
#: Loop-order families by the operand resident in SRAM while the innermost tile loop runs.
FAMILIES = ("outputs", "weights", "activations")
OUTPUTS, WEIGHTS, ACTIVATIONS = 0, 1, 2
#: the operands a double-buffered schedule may double (asicsim._src.hw.design_parts.OPERANDS)
DOUBLE_ALL = ("ifmap", "filter", "ofmap", "psum")


def ceil_div(a, b):
    """ceil(a / b) of whole numbers below 2**26 held as floats: exact (a / b is correctly rounded,
    so it is a whole number only when b divides a)."""
    return np.ceil(np.divide(a, b))


@dataclass(frozen=True)
class BufferLayout:
    """A design's buffer topology (static across a sweep): which operands each buffer holds.
    Capacities are arrays passed beside it, so they can be swept."""

    names: tuple[str, ...]
    holds: tuple[tuple[str, ...], ...]
    psum_spill: int | None = None  # the buffer partial sums may also be kept in, if any

    def home(self, operand: str) -> int:
        """Index of the buffer holding ``operand`` (psum falls back to the ofmap buffer)."""
        for i, h in enumerate(self.holds):
            if operand in h:
                return i
        if operand == "psum":
            return self.home("ofmap")
        raise KeyError(f"no buffer holds {operand!r}; buffers hold {dict(zip(self.names, self.holds, strict=True))}")


@dataclass(frozen=True)
class GemmProblem:
    """``reps`` sequential GEMMs; every field an array (one element per lowered GEMM, broadcastable).
    Byte widths are per element as stored (``b_bytes``: sparse formats amortise their metadata);
    ``a_footprint`` is the raw ifmap bytes per repetition (a conv's tensor, not its im2col matrix)."""

    M: np.ndarray
    N: np.ndarray
    K: np.ndarray
    a_bytes: np.ndarray
    b_bytes: np.ndarray
    acc_bytes: np.ndarray
    out_bytes: np.ndarray
    a_footprint: np.ndarray
    reps: np.ndarray
    shared_weights: np.ndarray  # the repetitions reuse one weight matrix (RNN steps)
    density: np.ndarray  # fraction of nonzero weights
    off_chip: dict  # operand ("ifmap", "filter", "ofmap") -> bool array: lives in DRAM between ops


@dataclass(frozen=True)
class ArrayHardware:
    """The design as the counts see it; every number an array (sweeps broadcast design axes)."""

    rows: np.ndarray
    cols: np.ndarray
    dataflow: np.ndarray  # OS / WS / IS codes
    capacity: tuple  # bytes per buffer of ``layout``
    layout: BufferLayout
    dram_bytes_per_cycle: np.ndarray
    zero_weights: int = 0  # ZERO_CODES
    mac_rate: float = 1.0  # MACs per PE per cycle in the formats' native mode (asicsim._src.hw.native)
    bypass_unused: bool = False  # operands bypass unused rows/columns: fill/drain of the used block only
    whole_tiles: bool = False  # the stationary operand moves in whole R x C tiles (asicsim._src.hw.whole_tiles)
    #: the operands whose tiles a double-buffered schedule doubles (their transfers overlap the
    #: work; the others' stall): :data:`DOUBLE_ALL` doubles every tile, as before the field
    double_buffers: tuple = ("ifmap", "filter", "ofmap", "psum")

    @property
    def doubles_all(self) -> bool:
        """Whether a double-buffered schedule doubles every tile (the default)."""
        return set(self.double_buffers) >= set(DOUBLE_ALL)


@dataclass(frozen=True)
class Schedule:
    """One schedule per element: family code, tile sizes and double buffering (arrays)."""

    family: np.ndarray
    Mt: np.ndarray
    Nt: np.ndarray
    Kt: np.ndarray
    double_buffered: np.ndarray
    psum_spill: np.ndarray = np.False_  # partial sums kept in the layout's psum_spill buffer
    #: the array's tile (the partial sums' ``Ma x Na`` block) inside the resident block: the
    #: weights family works through its ``Kt x Nt`` block ``Na`` columns at a time, the activations
    #: family through its ``Mt x Kt`` block ``Ma`` rows at a time (None: the whole tile)
    Ma: np.ndarray | None = None
    Na: np.ndarray | None = None
    #: the operands kept on chip whose overflow streams from DRAM, bits of
    #: :data:`asicsim._src.hw.residency.STREAM_BITS` (1 ifmap, 2 filter, 4 ofmap; 0: every kept tensor
    #: stays whole): their tiles take buffer space, the buffer keeps what is left of them
    streamed: np.ndarray | float = 0.0
    #: the share of a buffer a streamed kept tensor is homed in (of what the tensors kept whole
    #: leave) its tiles may take; the rest keeps the streamed tensors (:mod:`asicsim._src.hw.residency`)
    tile_share: np.ndarray | float = 1.0
    #: the rows (columns) of the array one fold of the array's tile takes (0: the array's rows
    #: (columns); more than the array: the array's): a fold smaller than the array
    #: (:mod:`asicsim._src.hw.counts`, "Folds smaller than the array")
    fold_rows: np.ndarray | float = 0.0
    fold_cols: np.ndarray | float = 0.0
