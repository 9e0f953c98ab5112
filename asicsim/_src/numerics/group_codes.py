"""The codes and scale formats of per-group integer quantization (:mod:`.group_quant`): what a
recipe's ``scaling = "group"`` fields are checked against, without JAX (``asicsim recipes``
lists the recipes without it)."""

from __future__ import annotations

from asicsim._src.numerics.catalog import get_format

#: The formats a group's scale is rounded to.
SCALE_FORMATS = ("fp32", "fp16", "bf16", "e8m0")


def code_range(fmt: str, zero_point: bool) -> tuple[int, int]:
    """The codes of integer format ``fmt`` (``uint4``: 0..15 with a zero point; ``int4``: -8..7)."""
    spec = get_format(fmt)
    lo, hi = int(spec.min), int(spec.max)
    if spec.kind != "int" or hi - lo > 255:
        raise ValueError(f"group quantization: format {fmt!r} is not an integer format of at most 8 bits")
    if zero_point and lo != 0:
        raise ValueError(f"group quantization: a zero point needs unsigned codes (uint4, uint8), not {fmt!r}")
    if not zero_point and lo >= 0:
        raise ValueError(f"group quantization: symmetric (no zero point) needs signed codes (int4, int8), not {fmt!r}")
    return lo, hi
