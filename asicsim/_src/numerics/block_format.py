"""Block formats: :class:`BlockFormat`, elements of a float or integer format sharing one scale per
block (OCP MX, shared-exponent block floating point, Flexpoint, NVFP4's two levels), and the
element exponent OCP MX's scale rule subtracts (:func:`emax_of`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from .float_format import FloatFormat
from .format_checks import BLOCK_SIZES, MAX_BLOCK_SIZE, FormatError, check_field_types
from .int_format import IntFormat

_FLOAT32_MAX = 3.4028234663852886e38


@dataclass(frozen=True, kw_only=True)
class BlockFormat:
    """Elements in ``element`` format sharing one scale per block.

    ``block_size=None`` shares the scale over the whole tensor (Flexpoint). ``scale`` is the
    format that stores the block scale: a pure exponent (``float8_e8m0fnu`` for OCP MX), whose
    exponent ``scale_rule`` picks (``floor`` is OCP MX v1.0, floor(log2(amax)) - emax_elem; ``up``
    never saturates, ceil(log2(amax / max_elem)); ``nearest`` rounds log2(amax / max_elem)), or
    any float format (E4M3, bf16, fp32): the scale is ``amax / max_elem`` rounded onto it.
    ``tensor_scale`` (a float format, e.g. float32) adds a second level, one scale per tensor
    above the block scales, as NVFP4 does (:mod:`asicsim._src.numerics.two_level` says how both are
    computed: Transformer Engine's NVFP4 quantizer, bit for bit).
    """

    name: str
    element: FloatFormat | IntFormat
    scale: FloatFormat
    block_size: int | None = 32
    scale_rule: Literal["floor", "up", "nearest"] = "floor"
    tensor_scale: FloatFormat | None = None
    description: str = field(default="", compare=False)
    source: str = field(default="", compare=False)

    kind = "block"

    def __post_init__(self) -> None:
        what = f"block format {self.name!r}"
        check_field_types(what, vars(self), {"name": str, "scale_rule": str, "description": str, "source": str})
        if not isinstance(self.element, (FloatFormat, IntFormat)):  # a block of blocks: no such unit
            raise FormatError(f"{what}: field 'element' = {_spec_name(self.element)}; allowed: a float or "
                              "integer format")
        if not isinstance(self.scale, FloatFormat):
            raise FormatError(f"{what}: field 'scale' = {_spec_name(self.scale)}; allowed: a float format")
        if self.block_size is not None:
            check_field_types(what, vars(self), {"block_size": int})
        if self.block_size is not None and not 1 <= self.block_size <= MAX_BLOCK_SIZE:
            raise FormatError(f"{what}: field 'block_size' = {self.block_size}; allowed: {BLOCK_SIZES}, "
                              "or 'tensor' (None in code) for one scale per tensor")
        if self.scale_rule not in ("floor", "up", "nearest"):
            raise FormatError(
                f"block format {self.name!r}: scale_rule={self.scale_rule!r} "
                "(allowed 'floor', 'up', 'nearest')"
            )
        if self.tensor_scale is not None and not isinstance(self.tensor_scale, FloatFormat):
            raise FormatError(f"{what}: field 'tensor_scale' = {_spec_name(self.tensor_scale)}; allowed: a "
                              "float format (e.g. float32), or absent")
        if self.tensor_scale is not None and not self.element.max * self.scale.max < _FLOAT32_MAX:
            raise FormatError(f"{what}: field 'tensor_scale' = {self.tensor_scale.name!r} with scale "
                              f"{self.scale.name!r}: element max * scale max = {self.element.max * self.scale.max:g} "
                              "overflows float32, where the tensor scale is computed; allowed: a block scale "
                              "format of smaller range (e.g. float8_e4m3fn), or no tensor scale")

    @property
    def two_level(self) -> bool:
        """Scales are values of a float format (not pure exponents) or there is a per-tensor
        scale above the block scales: :mod:`asicsim._src.numerics.two_level` computes them."""
        return self.scale.man_bits != 0 or self.tensor_scale is not None

    @property
    def bits(self) -> float:
        """Average storage bits per element, the shared scale included."""
        per_block = self.scale.bits / self.block_size if self.block_size else 0.0
        return self.element.bits + per_block

    @property
    def storage_bits(self) -> float:
        """Bits per element in memory: the element's storage plus the amortised scale (as ``bits``
        for every OCP MX format, whose elements are at most 8 bits and packed)."""
        per_block = self.scale.storage_bits / self.block_size if self.block_size else 0.0
        return self.element.storage_bits + per_block

    @property
    def max(self) -> float:
        if self.tensor_scale is not None:  # the tensor scale reaches as far as its own format
            return self.tensor_scale.max
        return self.element.max * self.scale.max


def _spec_name(spec) -> str:
    name = getattr(spec, "name", None)
    return f"{getattr(spec, 'kind', '?')} format {name!r}" if isinstance(name, str) else repr(spec)


def emax_of(fmt: FloatFormat | IntFormat) -> int:
    """floor(log2(max)): the element exponent that OCP MX's scale rule subtracts."""
    return math.frexp(fmt.max)[1] - 1


def element_qmin(element: FloatFormat | IntFormat) -> int:
    """Exponent of the element format's smallest nonzero magnitude."""
    return element.smallest_subnormal_exp if element.kind == "float" else -element.frac_bits
