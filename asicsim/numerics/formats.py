"""Number-format specs: frozen, hashable records whose derived numbers are properties.

Three kinds of format share one vocabulary (numpy ``finfo`` names: ``bits``, ``max``,
``smallest_normal``, ``smallest_subnormal``, ``eps``, ``nmant``, ``nexp``):

* :class:`FloatFormat` -- ``e{E}m{M}`` binary floats with IEEE-like, ``fn``, ``fnuz`` or ``fnu``
  conventions (see ``NanPolicy``).
* :class:`IntFormat` -- two's-complement integers and fixed point ``q{I}.{F}`` / ``uq{I}.{F}``.
* :class:`BlockFormat` -- an element format sharing one power-of-two scale per block (OCP MX,
  shared-exponent block floating point, Flexpoint).

Every value of every format must be exactly representable in float32 (the carrier that
``quantize`` returns), so wider formats are refused here, at construction, with the reason.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Literal

NanPolicy = Literal["ieee", "ones", "negzero", "none"]
#: ieee     -- all-ones exponent: mantissa 0 is inf, anything else NaN (float16, bfloat16, e5m2)
#: ones     -- no inf; the single all-ones code (per sign) is NaN (OCP E4M3 = float8_e4m3fn)
#: negzero  -- no inf, no -0; the negative-zero code is the one NaN (fnuz types)
#: none     -- no inf, no NaN: every code is a finite number (float6/float4 fn types)

# The float32 carrier: its exponent range bounds what a format may contain.
_F32_MIN_EXP = -149  # exponent of the smallest float32 subnormal
_F32_MAX_EXP = 127


#: The most elements one scale may share (``block_size``, group sizes): as many as float32 counts
#: exactly. One scale per tensor is its own setting, not a huge block.
MAX_BLOCK_SIZE = 1 << 24
BLOCK_SIZES = f"an integer in 1..{MAX_BLOCK_SIZE} (2**24)"


class FormatError(ValueError):
    """A format name, file or parameter that cannot be turned into a valid spec."""


_ALLOWED_TYPE = {int: "an integer", bool: "true or false", str: "a string"}


def check_field_types(what: str, values: dict[str, object], types: dict[str, type]) -> None:
    """Refuse a field of the wrong type before any arithmetic uses it: a format file's
    ``saturate = "no"`` would otherwise read as true, ``bits = 8.0`` as a float width. ``bool`` is
    not an integer here (TOML's ``true`` is not a bit count)."""
    for key, want in types.items():
        v = values[key]
        ok = isinstance(v, want) and (want is bool or not isinstance(v, bool))
        if want is int and not ok:
            ok = isinstance(v, numbers.Integral) and not isinstance(v, bool)  # numpy integers
        if not ok:
            raise FormatError(
                f"{what}: field {key!r} = {v!r} ({type(v).__name__}); allowed: {_ALLOWED_TYPE[want]}"
            )


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


@dataclass(frozen=True, kw_only=True)
class BlockFormat:
    """Elements in ``element`` format sharing one scale per block.

    ``block_size=None`` shares the scale over the whole tensor (Flexpoint). ``scale`` is the
    format that stores the block scale: a pure exponent (``float8_e8m0fnu`` for OCP MX), whose
    exponent ``scale_rule`` picks (``floor`` is OCP MX v1.0, floor(log2(amax)) - emax_elem; ``up``
    never saturates, ceil(log2(amax / max_elem)); ``nearest`` rounds log2(amax / max_elem)), or
    any float format (E4M3, bf16, fp32): the scale is ``amax / max_elem`` rounded onto it.
    ``tensor_scale`` (a float format, e.g. float32) adds a second level, one scale per tensor
    above the block scales, as NVFP4 does (:mod:`asicsim.numerics.two_level` says how both are
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
        scale above the block scales: :mod:`asicsim.numerics.two_level` computes them."""
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


_FLOAT32_MAX = 3.4028234663852886e38

Format = FloatFormat | IntFormat | BlockFormat


def values_fit(fmt, target) -> bool:
    """Whether every finite value of float format ``fmt`` is a value of float format ``target``
    (a cast from one to the other loses nothing): no more significand bits, no larger values, no
    smaller subnormals, and a sign only where ``target`` has one."""
    return (fmt.kind == "float" and target.kind == "float"
            and fmt.man_bits <= target.man_bits and fmt.max <= target.max
            and fmt.smallest_subnormal >= target.smallest_subnormal
            and (target.signed or not fmt.signed))


def _spec_name(spec) -> str:
    name = getattr(spec, "name", None)
    return f"{getattr(spec, 'kind', '?')} format {name!r}" if isinstance(name, str) else repr(spec)


def word_storage_bits(bits: int) -> int:
    """Bits an element of ``bits`` significant bits occupies in byte-addressed memory.

    Elements of up to 8 bits are packed (the OCP MX v1.0 formats count fp4/fp6 elements at their
    width, and int4 weights ship two per byte), so they keep their width; wider ones take the next
    power-of-two number of bytes, the widths loads and stores move (9-16 bits -> 16, 17-32 -> 32).
    NVIDIA's rule for TF32 is the case in point: "The storage size of this type is 32 bits in total
    and it requires a 4-byte alignment" (CUDA Math API, ``__nv_tf32``); its 19 value bits are an
    fp32 word whose low 13 mantissa bits the tensor cores ignore.
    """
    if bits <= 8:
        return bits
    return 8 * (1 << (math.ceil(bits / 8) - 1).bit_length())


def default_bias(exp_bits: int, nan: NanPolicy) -> int:
    """IEEE bias ``2**(E-1) - 1``; fnuz types use one more (``2**(E-1)``). An ``exp_bits`` below 1
    gets 0, so the spec's own check can report the width (``e0m3``), not a shift error."""
    if exp_bits < 1:
        return 0
    return (1 << (exp_bits - 1)) - (0 if nan == "negzero" else 1)


def emax_of(fmt: FloatFormat | IntFormat) -> int:
    """floor(log2(max)): the element exponent that OCP MX's scale rule subtracts."""
    return math.frexp(fmt.max)[1] - 1
