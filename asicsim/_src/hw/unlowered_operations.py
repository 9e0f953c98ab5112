"""The operations the cost model prices without lowering them to GEMMs: elementwise work (the
vector unit beside the array: :class:`Elementwise`) and the gradient all-reduce across chips
(:class:`AllReduce`, priced by :mod:`asicsim._src.hw.links`). Frozen, checked when built."""

from __future__ import annotations

from dataclasses import dataclass, field

from asicsim._src.hw import limits as lim
from asicsim._src.hw.operation_checks import OperationError, check_int

#: What elementwise work is for (reported, and how the op trace groups it); the pricing is the same.
ELEMENTWISE_WORK = ("elementwise", "activation", "pooling", "normalisation", "reduction", "loss",
                    "optimizer", "rnn_gates", "rotation")  # rotation: a Hadamard transform of a GEMM operand


@dataclass(frozen=True)
class Elementwise:
    """``elements`` outputs, each ``ops_per_element`` vector operations on ``inputs`` operands.

    A reduction reads more than it writes: a max-pool output reads its ``inputs`` = window
    elements, a mean over ``D`` values reads ``D``. ``input_elements`` is how many *distinct*
    elements are read (what comes from DRAM: overlapping pooling windows read one pixel several
    times from the buffer, once from DRAM); None: ``elements * inputs`` (no reuse).
    """

    elements: int
    ops_per_element: int = 1
    inputs: int = 1
    on_chip: bool = False  # operands already on chip (e.g. an RNN's gates)
    work: str = "elementwise"  # see ELEMENTWISE_WORK
    input_elements: int | None = None
    name: str = ""
    kind: str = field(default="elementwise", init=False)

    def __post_init__(self) -> None:
        check_int("elementwise", "elements", self.elements, lim.OP_ELEMENTS)
        check_int("elementwise", "ops_per_element", self.ops_per_element)
        check_int("elementwise", "inputs", self.inputs)
        if self.work not in ELEMENTWISE_WORK:
            raise OperationError(f"elementwise: work = {self.work!r}; allowed: {' | '.join(ELEMENTWISE_WORK)}")
        if self.input_elements is not None:
            check_int("elementwise", "input_elements", self.input_elements, lim.OP_ELEMENTS)
            if self.input_elements > self.elements * self.inputs:
                raise OperationError(f"elementwise: input_elements = {self.input_elements}; allowed: at most "
                                     f"elements x inputs = {self.elements * self.inputs} (the reads)")

    @property
    def reads(self) -> int:
        """Operand elements read from the buffers (a window or reduction re-reads)."""
        return self.elements * self.inputs

    @property
    def distinct_reads(self) -> int:
        """Distinct operand elements (what DRAM supplies when the operands live there)."""
        return self.reads if self.input_elements is None else self.input_elements

    def lower(self) -> list:
        """No GEMMs: elementwise work runs on the vector unit."""
        return []

    @property
    def label(self) -> str:
        return self.name or f"{self.work} {self.elements}x{self.ops_per_element}"


@dataclass(frozen=True)
class AllReduce:
    """Sum ``elements`` values of ``bits_per_element`` across ``ranks`` chips (gradient all-reduce,
    DeepBench's all-reduce kernels). Priced by the multi-chip model, not by one chip's array."""

    elements: int
    ranks: int
    bits_per_element: int = 32
    name: str = ""
    kind: str = field(default="allreduce", init=False)

    def __post_init__(self) -> None:
        check_int("allreduce", "elements", self.elements, lim.OP_ELEMENTS)
        check_int("allreduce", "ranks", self.ranks)
        check_int("allreduce", "bits_per_element", self.bits_per_element, lim.ELEMENT_BITS)

    @property
    def bytes(self) -> float:
        return self.elements * self.bits_per_element / 8

    @property
    def label(self) -> str:
        return self.name or f"allreduce {self.elements} x {self.ranks}"
