"""What a :class:`~asicsim._src.numerics.mac.MacSpec` allows: its fields' types, formats, roundings,
order and the tensor-core options, checked when it is built (each error names the field, the value
and what is allowed); the normalised fields are stored through
:func:`~asicsim._src.numerics.frozen_fields.settle`."""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from .catalog import get_format
from .formats import FormatError
from .frozen_fields import settle
from .inputs import check_flag
from .rounding import parse_rounding

ORDERS = "sequential, folded:R, chunk:C, tree, fast, tensorcore:k"
_PARAM_ORDERS = ("folded", "chunk", "tensorcore")
_ORDER_RE = re.compile(r"^([a-z]+)(?::(-?\d+))?$")
TC_EXPONENTS = ("product", "operands")
TC_FLUSH = ("none", "in", "out", "both")


def check_mac(spec) -> None:
    """Check a :class:`~asicsim._src.numerics.mac.MacSpec` (a ``ValueError`` or ``TypeError`` names the
    field, the value and what is allowed) and store its normalised fields (``b_fmt``, ``order``,
    rounding names)."""
    check_flag(spec.saturate, "MacSpec saturate")
    for name in ("fused", "tc_sticky", "tc_product_limit"):
        value = getattr(spec, name)
        if not isinstance(value, bool | np.bool_):
            raise TypeError(f"MacSpec {name}={value!r} ({type(value).__name__}); allowed: True or False")
    for name in ("guard_bits", "carry_bits", "tc_min_exp"):
        value = getattr(spec, name)
        if value is None and name == "tc_min_exp":
            continue
        if not isinstance(value, int | np.integer) or isinstance(value, bool):
            raise TypeError(f"MacSpec {name}={value!r} ({type(value).__name__}); allowed: an integer")
    settle(spec, b_fmt=spec.a_fmt if spec.b_fmt is None else spec.b_fmt,
           order=str(spec.order).strip().lower())
    specs = {}
    for name in ("a_fmt", "b_fmt", "acc", "out", "product"):
        value = getattr(spec, name)
        if value is None:
            continue
        try:
            specs[name] = get_format(value)
        except FormatError as e:
            raise ValueError(f"MacSpec {name}={value!r}: {e}") from None
        if specs[name].kind == "block":
            raise ValueError(
                f"MacSpec {name}={value!r}: block formats are not MAC formats; quantize with "
                "the block format first and give its element format here"
            )
    for name in ("product_rounding", "acc_rounding", "out_rounding", "tc_late_c"):
        value = getattr(spec, name)
        if value is None:
            continue
        try:
            rnd = parse_rounding(value)
        except ValueError as e:
            raise ValueError(f"MacSpec {name}: {e}") from None
        if rnd.stochastic:
            raise ValueError(f"MacSpec {name}={value!r}: stochastic MAC rounding is not supported")
        settle(spec, **{name: str(rnd)})
    kind, param = parse_order(spec.order)
    acc = specs["acc"]
    if spec.fused and spec.product is not None:
        raise ValueError(
            f"MacSpec: fused=True rounds a*b + acc once, so product={spec.product!r} cannot "
            "apply; give product=None or fused=False"
        )
    if spec.overflow not in ("wrap", "saturate"):
        raise ValueError(f"MacSpec overflow={spec.overflow!r}: allowed 'wrap', 'saturate'")
    if acc.kind == "int":
        bad = [n for n in ("a_fmt", "b_fmt") if specs[n].kind != "int"]
        if bad or any(specs[n].frac_bits for n in ("a_fmt", "b_fmt", "acc")):
            raise ValueError(
                f"MacSpec acc={spec.acc!r}: an integer accumulator needs integer operands "
                "without fraction bits (int8 x int8 -> int32)"
            )
        if spec.product is not None or (spec.out is not None and specs["out"] != acc):
            raise ValueError("MacSpec: an integer MAC has an exact product and no out format")
        if spec.saturate is not None:
            raise ValueError(
                f"MacSpec saturate={spec.saturate}: an integer accumulator wraps or saturates as "
                "overflow='wrap' or 'saturate' says; saturate applies to float roundings"
            )
        if kind == "tensorcore":
            raise ValueError("MacSpec: order tensorcore:k needs a float accumulator")
    elif spec.out is not None and specs["out"].kind != "float":
        raise ValueError(f"MacSpec out={spec.out!r}: a float accumulator needs a float out format")
    _check_tensorcore(spec, kind, param, acc)

def _check_tensorcore(spec, kind: str, param: int | None, acc) -> None:
    if kind != "tensorcore":
        changed = [f.name for f in dataclasses.fields(spec)
                   if f.name.startswith("tc_") and getattr(spec, f.name) != f.default]
        if changed:
            raise ValueError(f"MacSpec {', '.join(changed)}: tensorcore:k options; order is {spec.order!r}")
        return
    if spec.product is not None or not spec.fused:
        raise ValueError("MacSpec: tensorcore:k multiplies exactly (product=None, fused)")
    if spec.tc_exponent not in TC_EXPONENTS:
        raise ValueError(f"MacSpec tc_exponent={spec.tc_exponent!r}: allowed {', '.join(TC_EXPONENTS)}")
    if spec.tc_flush not in TC_FLUSH:
        raise ValueError(f"MacSpec tc_flush={spec.tc_flush!r}: allowed {', '.join(TC_FLUSH)}")
    width = acc.man_bits + spec.guard_bits  # fraction bits kept at alignment
    if not 0 <= width <= 43:
        raise ValueError(
            f"MacSpec guard_bits={spec.guard_bits}: acc man_bits + guard_bits = {width}; "
            "allowed 0..43 (the block sum must stay exact in 53 bits)"
        )
    if spec.carry_bits < 1:
        raise ValueError(f"MacSpec carry_bits={spec.carry_bits}: must be >= 1")
    if param > 64:
        raise ValueError(f"MacSpec {spec.order}: block too large (k <= 64, exact in 53 bits)")
    if spec.tc_min_exp is not None and not -400 <= spec.tc_min_exp <= 400:
        raise ValueError(f"MacSpec tc_min_exp={spec.tc_min_exp}: allowed -400..400 or None")

def parse_order(order: str) -> tuple[str, int | None]:
    """(kind, size) of a MAC order text (``chunk:32`` -> ("chunk", 32)), or a ``ValueError``."""
    m = _ORDER_RE.match(order)
    kind = m[1] if m else None
    if kind not in ("sequential", "tree", "fast", *_PARAM_ORDERS):
        raise ValueError(f"MacSpec order={order!r}: unknown order; allowed: {ORDERS}")
    if kind in _PARAM_ORDERS:
        if m[2] is None:
            raise ValueError(f"MacSpec order={order!r}: needs a size, e.g. {kind}:32")
        if int(m[2]) < 1:
            raise ValueError(f"MacSpec order={order!r}: size must be >= 1, got {m[2]}")
        return kind, int(m[2])
    if m[2] is not None:
        raise ValueError(f"MacSpec order={order!r}: {kind} takes no size")
    return kind, None
