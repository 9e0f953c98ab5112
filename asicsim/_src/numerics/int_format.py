"""Two's-complement integer and fixed-point formats: :class:`IntFormat` (``int{N}``, ``q{I}.{F}``,
``uq{I}.{F}``)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .format_checks import FormatError, check_field_types, word_storage_bits


@dataclass(frozen=True, kw_only=True)
class IntFormat:
    """Two's-complement integer or fixed point: value = k * 2**-frac_bits.

    ``q{I}.{F}`` is signed (1 sign + I integer + F fraction bits); ``uq{I}.{F}`` unsigned.
    ``symmetric`` drops the most negative code (int8 in [-127, 127], as MXINT8 requires).
    """

    name: str
    bits: int
    signed: bool = True
    frac_bits: int = 0
    symmetric: bool = False
    saturate: bool = True
    description: str = field(default="", compare=False)
    source: str = field(default="", compare=False)

    kind = "int"

    @property
    def storage_bits(self) -> int:
        """Bits one element takes in memory (:func:`word_storage_bits`)."""
        return word_storage_bits(self.bits)

    def __post_init__(self) -> None:
        check_field_types(f"integer format {self.name!r}", vars(self), {
            "name": str, "bits": int, "signed": bool, "frac_bits": int, "symmetric": bool,
            "saturate": bool, "description": str, "source": str,
        })
        if not 1 + int(self.signed) <= self.bits <= 32:
            raise FormatError(
                f"integer format {self.name!r}: bits={self.bits} (allowed {1 + int(self.signed)}..32)"
            )
        if not -64 <= self.frac_bits <= 64:
            raise FormatError(
                f"integer format {self.name!r}: frac_bits={self.frac_bits} (allowed -64..64)"
            )

    @property
    def kmax(self) -> int:
        return (1 << (self.bits - int(self.signed))) - 1

    @property
    def kmin(self) -> int:
        if not self.signed:
            return 0
        return -self.kmax if self.symmetric else -self.kmax - 1

    @property
    def max(self) -> float:
        return math.ldexp(self.kmax, -self.frac_bits)

    @property
    def min(self) -> float:
        return math.ldexp(self.kmin, -self.frac_bits)

    @property
    def eps(self) -> float:
        """Spacing of the grid (one unit in the last place)."""
        return math.ldexp(1.0, -self.frac_bits)

    resolution = eps
    smallest_subnormal = eps
    smallest_normal = eps

    @property
    def float32_exact(self) -> bool:
        """Whether every value fits the float32 carrier exactly (24-bit significand)."""
        return self.bits - int(self.signed) <= 24
