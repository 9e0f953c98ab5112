"""Binary floating-point formats: :class:`FloatFormat` (``e{E}m{M}`` with IEEE-like, ``fn``,
``fnuz`` or ``fnu`` conventions), its default bias, and whether one float format's values fit
another's."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from .format_checks import FormatError, check_field_types, word_storage_bits

NanPolicy = Literal["ieee", "ones", "negzero", "none"]
#: ieee     -- all-ones exponent: mantissa 0 is inf, anything else NaN (float16, bfloat16, e5m2)
#: ones     -- no inf; the single all-ones code (per sign) is NaN (OCP E4M3 = float8_e4m3fn)
#: negzero  -- no inf, no -0; the negative-zero code is the one NaN (fnuz types)
#: none     -- no inf, no NaN: every code is a finite number (float6/float4 fn types)

# The float32 carrier: its exponent range bounds what a format may contain.
_F32_MIN_EXP = -149  # exponent of the smallest float32 subnormal
_F32_MAX_EXP = 127


@dataclass(frozen=True, kw_only=True)
class FloatFormat:
    """A binary floating-point format ``e{exp_bits}m{man_bits}``.

    Attributes:
      name: canonical name (``float8_e4m3fn``); aliases live in the catalog.
      exp_bits, man_bits: field widths; ``man_bits`` excludes the hidden bit.
      bias: exponent bias; the IEEE default is ``2**(exp_bits-1) - 1``.
      nan: NaN/inf convention, see ``NanPolicy``.
      signed: ``False`` for unsigned scale formats such as ``float8_e8m0fnu``.
      subnormals: ``False`` rounds onto {0, smallest_normal, ...} with no subnormal codes.
      has_zero: ``False`` for ``e8m0``, whose smallest code is ``2**-127``.
      saturate: default overflow behaviour of ``quantize`` (``True`` clamps to ``max``).
    """

    name: str
    exp_bits: int
    man_bits: int
    bias: int
    nan: NanPolicy = "ieee"
    signed: bool = True
    subnormals: bool = True
    has_zero: bool = True
    saturate: bool = False
    description: str = field(default="", compare=False)
    source: str = field(default="", compare=False)

    kind = "float"

    def __post_init__(self) -> None:
        check_field_types(f"float format {self.name!r}", vars(self), {
            "name": str, "exp_bits": int, "man_bits": int, "bias": int, "nan": str, "signed": bool,
            "subnormals": bool, "has_zero": bool, "saturate": bool, "description": str, "source": str,
        })
        problems = []
        if not 1 <= self.exp_bits <= 8:
            problems.append(f"exp_bits={self.exp_bits} (allowed 1..8)")
        if not 0 <= self.man_bits <= 23:
            problems.append(f"man_bits={self.man_bits} (allowed 0..23)")
        if self.nan not in ("ieee", "ones", "negzero", "none"):
            problems.append(f"nan={self.nan!r} (allowed 'ieee', 'ones', 'negzero', 'none')")
        if self.nan == "ones" and self.man_bits == 0 and self.signed and self.exp_bits == 1:
            problems.append("nan='ones' leaves no finite value in e1m0")
        if self.nan == "ieee" and self.man_bits == 0:
            problems.append(
                "an IEEE-like format with no mantissa bits has no NaN code (its all-ones exponent "
                "is infinity); use the fn or fnu convention"
            )
        if self.nan == "ieee" and self.exp_bits == 1:
            problems.append(
                "an IEEE-like e1 format has no normal numbers (its only other exponent is "
                "infinity/NaN); use the fn convention"
            )
        if problems:
            raise FormatError(f"float format {self.name!r}: " + "; ".join(problems))
        if self.smallest_subnormal_exp < _F32_MIN_EXP or self.emax > _F32_MAX_EXP:
            raise FormatError(
                f"float format {self.name!r} (e{self.exp_bits}m{self.man_bits}, bias {self.bias}) "
                f"spans 2**{self.smallest_subnormal_exp} .. 2**{self.emax}, outside what the float32 "
                f"carrier holds exactly (2**{_F32_MIN_EXP} .. 2**{_F32_MAX_EXP}); "
                "choose a bias that keeps the range inside float32"
            )

    # --- field layout -------------------------------------------------------------------
    @property
    def bits(self) -> int:
        return int(self.signed) + self.exp_bits + self.man_bits

    @property
    def storage_bits(self) -> int:
        """Bits one element takes in memory (:func:`word_storage_bits`): tf32 is 32."""
        return word_storage_bits(self.bits)

    @property
    def nexp(self) -> int:
        return self.exp_bits

    @property
    def nmant(self) -> int:
        return self.man_bits

    @property
    def has_inf(self) -> bool:
        return self.nan == "ieee"

    @property
    def has_nan(self) -> bool:
        return self.nan != "none"

    # --- exponent range -----------------------------------------------------------------
    @property
    def emin(self) -> int:
        """Unbiased exponent of the smallest normal number."""
        return 1 - self.bias if self.subnormals or self.has_zero else -self.bias

    @property
    def _top_field(self) -> int:
        """Largest exponent field that holds finite numbers."""
        top = (1 << self.exp_bits) - 1
        return top - 1 if self.nan == "ieee" else top

    @property
    def emax(self) -> int:
        """Unbiased exponent of the largest finite number."""
        top = self._top_field
        if self.nan == "ones" and self.man_bits == 0:
            top -= 1  # the all-ones code is NaN and there is no mantissa to step down
        return top - self.bias

    @property
    def max_mantissa(self) -> int:
        """Largest mantissa field (without hidden bit) at exponent ``emax``."""
        full = (1 << self.man_bits) - 1
        if self.nan == "ones" and self.man_bits > 0:
            return full - 1  # the all-ones mantissa at the top exponent is NaN
        return full

    @property
    def smallest_subnormal_exp(self) -> int:
        return self.emin - self.man_bits if self.subnormals else self.emin

    # --- finfo-style values ---------------------------------------------------------------
    @property
    def max(self) -> float:
        return math.ldexp(1.0 + self.max_mantissa / (1 << self.man_bits), self.emax)

    @property
    def min(self) -> float:
        if self.signed:
            return -self.max
        return 0.0 if self.has_zero else self.smallest_normal

    @property
    def smallest_normal(self) -> float:
        return math.ldexp(1.0, self.emin)

    tiny = smallest_normal

    @property
    def smallest_subnormal(self) -> float:
        return math.ldexp(1.0, self.smallest_subnormal_exp)

    @property
    def eps(self) -> float:
        return math.ldexp(1.0, -self.man_bits)

    @property
    def machep(self) -> int:
        return -self.man_bits

    @property
    def minexp(self) -> int:
        return self.emin

    @property
    def maxexp(self) -> int:
        return self.emax + 1

    @property
    def precision(self) -> int:
        """Decimal digits, as ``np.finfo.precision`` defines it."""
        return int(-math.log10(self.eps))

    @property
    def resolution(self) -> float:
        return 10.0 ** -self.precision

    @property
    def grammar_name(self) -> str:
        """The ``e{E}m{M}[suffix][b{bias}]`` spelling of this spec."""
        suffix = {"ieee": "", "ones": "fn", "negzero": "fnuz", "none": "fn"}[self.nan]
        if not self.signed:
            suffix = "fnu"
        name = f"e{self.exp_bits}m{self.man_bits}{suffix}"
        if self.bias != default_bias(self.exp_bits, self.nan):
            name += f"b{self.bias}"
        return name


def default_bias(exp_bits: int, nan: NanPolicy) -> int:
    """IEEE bias ``2**(E-1) - 1``; fnuz types use one more (``2**(E-1)``). An ``exp_bits`` below 1
    gets 0, so the spec's own check can report the width (``e0m3``), not a shift error."""
    if exp_bits < 1:
        return 0
    return (1 << (exp_bits - 1)) - (0 if nan == "negzero" else 1)


def values_fit(fmt, target) -> bool:
    """Whether every finite value of float format ``fmt`` is a value of float format ``target``
    (a cast from one to the other loses nothing): no more significand bits, no larger values, no
    smaller subnormals, and a sign only where ``target`` has one."""
    return (fmt.kind == "float" and target.kind == "float"
            and fmt.man_bits <= target.man_bits and fmt.max <= target.max
            and fmt.smallest_subnormal >= target.smallest_subnormal
            and (target.signed or not fmt.signed))
