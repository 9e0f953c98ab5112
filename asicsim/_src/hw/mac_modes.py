"""A systolic design's native MAC modes (``[[pe.modes]]``): :class:`MacMode` (operand formats
``a`` and ``b``, accumulator ``acc``, rate, operand gating), checked when built, the checks of a
PE's list of modes, and whether an accumulator holds every product of its operands. Which mode
runs a request, and how, is :mod:`asicsim._src.hw.native`'s job."""

from __future__ import annotations

from dataclasses import dataclass

from asicsim._src.hw.operations import OperationError
from asicsim._src.numerics import FormatError, get_format
from asicsim._src.numerics.embed import embeds
from asicsim._src.numerics.formats import Format, IntFormat
from asicsim._src.numerics.frozen_fields import convert_fields, converted

MODE_FIELDS = ("a", "b", "acc", "rate", "source", "operand_gating", "operand_gating_source")


@dataclass(frozen=True, kw_only=True)
class MacMode:
    """One native MAC mode: multiplier operands ``a`` (ifmap) and ``b`` (filter), accumulator
    ``acc``, and ``rate``, the fraction of the design's peak MAC rate it runs at.
    ``operand_gating``: narrower operands run with the unused multiplier bits gated off, so they
    cost their own multiplier's energy (``operand_gating_source`` says who says so; required)."""

    a: Format = converted(get_format)  # a name, alias or path; stored resolved
    b: Format = converted(get_format)
    acc: Format = converted(get_format)
    rate: float = 1.0
    source: str = ""
    operand_gating: bool = False
    operand_gating_source: str = ""

    def __post_init__(self) -> None:
        probs = mode_problems({k: getattr(self, k) for k in MODE_FIELDS}, "mode")
        if probs:
            raise OperationError("; ".join(f"{k} = {v!r}; allowed: {a}" for k, v, a in probs))
        convert_fields(self)

    @property
    def label(self) -> str:
        return f"{self.a.name} x {self.b.name} -> {self.acc.name} at {self.rate:g}"


def modes_problems(v: dict) -> list[tuple[str, object, str]]:
    """Problems of a PE table's ``modes`` list (each entry, and duplicates; the PE's own formats
    must be full rate), as (field path, value, allowed)."""
    modes = v.get("modes", ())
    if not isinstance(modes, (list, tuple)):
        return [("modes", modes, "a list of tables with fields a, b, acc, rate (and source)")]
    out: list[tuple[str, object, str]] = []
    seen: dict[tuple, int] = {}
    try:
        own = tuple(get_format(v[k]) for k in ("a_format", "b_format", "acc_format"))
    except (KeyError, FormatError, TypeError):
        own = None
    for i, m in enumerate(modes):
        entry = vars(m) if isinstance(m, MacMode) else m
        probs = mode_problems(entry, f"modes[{i}]")
        out.extend(probs)
        if probs:
            continue
        key = tuple(get_format(entry[k]) for k in ("a", "b", "acc"))
        if key in seen:
            out.append((f"modes[{i}]", f"{key[0].name} x {key[1].name} -> {key[2].name}",
                        f"distinct (a, b, acc) modes (the same as modes[{seen[key]}])"))
        seen.setdefault(key, i)
        if key == own and entry["rate"] != 1:
            out.append((f"modes[{i}].rate", entry["rate"],
                        "1: the PE's own a/b/acc formats are its full-rate mode (they define the peak)"))
    return out


def product_format(a: Format, b: Format) -> Format | None:
    """A format holding every product of an ``a`` value and a ``b`` value exactly, for integer
    (fixed-point) operands: ``a.bits + b.bits`` bits, signed when either is, the fractions added
    (int8 x int8 -> int16); None for float operands (a float product is rounded anyway)."""
    a, b = (f.element if f.kind == "block" else f for f in (a, b))
    if not (isinstance(a, IntFormat) and isinstance(b, IntFormat)):
        return None
    signed = a.signed or b.signed
    return IntFormat(name=f"{'' if signed else 'u'}int{a.bits + b.bits}", bits=a.bits + b.bits,
                     signed=signed, frac_bits=a.frac_bits + b.frac_bits)


def accumulator_problem(a, b, acc) -> str | None:
    """Why ``acc`` cannot accumulate ``a`` x ``b`` products (None when it can): integer operands
    need an accumulator holding every product exactly (:func:`product_format`: int8 x int8 needs
    16 bits, so int4 is an error and int32 or fp32 hold it); float (or mixed) operands one whose
    every value of each operand is a value of it (fp32 for bf16, not fp8 for fp32)."""
    try:
        a, b, acc = (get_format(f) for f in (a, b, acc))
    except (FormatError, TypeError):
        return None  # reported as a bad format name
    if acc.kind == "block":
        return "a scalar format (an accumulator holds one sum per output, not blocks)"
    ints = [f.element if f.kind == "block" else f for f in (a, b)]
    if all(isinstance(f, IntFormat) for f in ints) and sum(f.bits for f in ints) > 32:
        return (f"none: a {ints[0].name} x {ints[1].name} product takes {ints[0].bits + ints[1].bits} bits, "
                "more than any accumulator format (at most 32 bits); narrower operands")
    prod = product_format(a, b)
    if prod is not None:
        if not embeds(prod, acc):
            fits = ("int32" if prod.bits - prod.signed > 24 else "int32 or fp32") if not prod.frac_bits else (
                f"{'' if prod.signed else 'u'}q{prod.bits - prod.signed - prod.frac_bits}.{prod.frac_bits}")
            return (f"a format holding every {a.name} x {b.name} product exactly ({prod.bits} bits"
                    f"{', signed' if prod.signed else ''}: e.g. {fits})")
        return None
    narrow = [f.name for f in (a, b) if not embeds(f.element if f.kind == "block" else f, acc)]
    if narrow:
        return (f"a format holding every value of the operands ({', '.join(narrow)}): the same kind, "
                "at least as wide (e.g. fp32)")
    return None


def mode_problems(entry, where: str) -> list[tuple[str, object, str]]:
    """Problems of one ``[[pe.modes]]`` entry (a table), as (field path, value, allowed)."""
    if not isinstance(entry, dict):
        return [(where, entry, f"a table with fields {list(MODE_FIELDS)}")]
    out = [(f"{where}.{k}", v, f"no such field; fields are {list(MODE_FIELDS)}")
           for k, v in entry.items() if k not in MODE_FIELDS]
    for key in ("a", "b", "acc"):
        if key not in entry:
            out.append((f"{where}.{key}", "<missing>", "a format name (required)"))
            continue
        try:
            get_format(entry[key])
        except (FormatError, TypeError) as err:
            out.append((f"{where}.{key}", entry[key], f"a format name, alias or .toml path ({err})"))
    if all(k in entry for k in ("a", "b", "acc")):
        why = accumulator_problem(entry["a"], entry["b"], entry["acc"])
        if why:
            out.append((f"{where}.acc", entry["acc"], why))
    rate = entry.get("rate", "<missing>")
    if not (isinstance(rate, (int, float)) and not isinstance(rate, bool) and 0 < rate <= 1):
        out.append((f"{where}.rate", rate, "a number in (0, 1]: the fraction of the design's peak "
                                           "MAC rate (1 full, 0.5 half)"))
    if not isinstance(entry.get("source", ""), str):
        out.append((f"{where}.source", entry["source"], "a string"))
    gating = entry.get("operand_gating", False)
    if not isinstance(gating, bool):
        out.append((f"{where}.operand_gating", gating, "true or false (a TOML boolean, unquoted)"))
    why = entry.get("operand_gating_source", "")
    if not isinstance(why, str) or (gating is True and not why.strip()):
        out.append((f"{where}.operand_gating_source", why,
                     "a non-empty string naming who says the unused operand bits are gated off "
                     "(required with operand_gating = true)" if gating is True else "a string"))
    return out
