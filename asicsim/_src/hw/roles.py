"""Which formats an operation is priced in: the roles (``act``, ``weight``, ``acc``, ``out``), their
parsing and checking, their stored bytes per operand, and how the array runs their MACs.

Low in the hw package (it knows designs only by their fields), so a design, the GPU model and the
pricing front ends all take their formats from here.
"""

from __future__ import annotations

from collections.abc import Mapping

from asicsim._src.hw.native import ExecutionMode, execution_mode, parse_emulate, storage_bits
from asicsim._src.hw.operations import OperationError
from asicsim._src.numerics import FormatError, get_format

ROLES = ("act", "weight", "acc", "out")
OPERAND_OF_ROLE = {"act": "ifmap", "weight": "filter", "acc": "psum", "out": "ofmap"}


def parse_formats(formats: str | Mapping | None) -> dict[str, str]:
    """``"act=int8,weight=int8,acc=int32"`` or a mapping -> {role: format name}; checked.
    An ``emulate`` key (``auto`` or a slowdown) asks for software emulation (asicsim._src.hw.native)."""
    if formats is None:
        return {}
    if isinstance(formats, str):
        pairs = {}
        for item in filter(None, (s.strip() for s in formats.split(","))):
            role, eq, name = item.partition("=")
            if not eq or not name.strip():
                raise OperationError(f"formats: {item!r}; allowed: ROLE=FORMAT pairs separated by commas, "
                                     f"roles {list(ROLES)}")
            pairs[role.strip()] = name.strip()
        formats = pairs
    bad = sorted(set(formats) - set(ROLES) - {"emulate"})
    if bad:
        raise OperationError(f"formats: unknown role(s) {bad}; allowed: {list(ROLES)} and 'emulate'")
    parse_emulate(formats.get("emulate"))
    for role, name in formats.items():
        if role == "emulate":
            continue
        try:
            get_format(name)
        except FormatError as err:
            raise OperationError(f"formats: {role} = {name!r}; allowed: {err}") from None
    return dict(formats)


def resolve_formats(design, formats=None) -> dict:
    """Format specs per role: the design's PE formats unless overridden; ``out`` defaults to ``act``."""
    given = parse_formats(formats)
    f = {"act": design.pe.a_format, "weight": design.pe.b_format, "acc": design.pe.acc_format}
    f = {r: get_format(given[r]) if r in given else v for r, v in f.items()}
    f["out"] = get_format(given["out"]) if "out" in given else f["act"]
    return f


def mac_execution(design, fmts: dict, formats=None) -> ExecutionMode:
    """How the array runs MACs in ``fmts`` (rate of the peak, emulated or not; the ``emulate`` key of
    ``formats``): :func:`asicsim._src.hw.native.execution_mode`, which raises for formats the design
    does not execute. Only GEMM work needs it: the vector unit takes any format."""
    return execution_mode(design, fmts, parse_formats(formats).get("emulate"))


def bytes_per_element(fmts: dict) -> dict[str, float]:
    """Stored bytes per element of each operand, in memory words (tf32: 4 bytes; block formats
    count their shared scales): :func:`asicsim._src.hw.native.storage_bits`."""
    return {OPERAND_OF_ROLE[r]: storage_bits(f) / 8 for r, f in fmts.items()}
