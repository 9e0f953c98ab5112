"""The checks of a recipe's ``tensor_core`` field (:mod:`.tensor_core_gemm` runs it): a GPU
with presets per GEMM, operand roles its tensor cores read (a preset for the pair of formats and
the ``acc`` format; a per-tensor scaling). Imports no emulate module, so that the Policy's checks
can use it without an import cycle (the role fallbacks and spec type come in as arguments)."""

from __future__ import annotations

import functools
from typing import Any

from asicsim._src.numerics import get_format, tensor_core
from asicsim._src.numerics.tc_presets import PRESETS, gpus

#: The GEMMs, by the role each writes.
TC_GEMMS = {"out": "the forward GEMM", "grad_out": "the dX GEMM", "wgrad": "the dW GEMM"}
#: The scalings a tensor-core GEMM takes: one scale per tensor, applied to its result.
TC_SCALINGS = ("none", "tensor", "delayed", "static")
# (lhs, rhs) operand roles of each GEMM (gemm.py: a dX GEMM reads grad_dx and <role>_dx)
_PAIRS = {"out": (("act", "weight"), ("act", "act"), ("weight", "weight")),
          "grad_out": (("grad_dx", "weight_dx"), ("grad_dx", "act_dx")),
          "wgrad": (("act_dw", "grad_dw"), ("weight_dw", "grad_dw"))}


def normal_tensor_core(value):
    """A ``tensor_core`` field as the Policy stores it: a GPU name (lower case) or
    ((gemm role, GPU), ...) sorted; other values unchanged (the checks report them)."""
    if isinstance(value, str):
        return value.strip().lower()
    if isinstance(value, dict):
        value = tuple(value.items())
    if isinstance(value, (list, tuple)) and all(isinstance(p, (list, tuple)) and len(p) == 2 for p in value):
        return tuple(sorted((str(k), v.strip().lower() if isinstance(v, str) else v) for k, v in value))
    return value


def gpu_for(field, gemm: str) -> str | None:
    """The GPU whose tensor cores run GEMM ``gemm`` (``out``, ``grad_out``, ``wgrad``), or None."""
    if isinstance(field, str):
        return field or None
    return dict(field).get(gemm) or None


def _combos(gpu: str) -> str:
    """What ``gpu``'s presets take: input formats per output format."""
    outs: dict = {}
    for g, a, o in PRESETS:
        if g == gpu:
            outs.setdefault(o, []).append(a)
    return "; ".join(f"{', '.join(a)} -> {o}" for o, a in outs.items())


def tensor_core_problems(pol, fallback: dict) -> list[tuple[str, Any, str]]:
    """Problems of a Policy's ``tensor_core`` field: a known GPU per GEMM, no ``[mac]`` beside it,
    and in every table of roles (``roles``, ``first_last``, each layer rule) operand roles a
    tensor core reads (a preset for the pair and the ``acc`` format, a per-tensor scaling);
    ``fallback``: the role a role left out follows (``role_spec._FALLBACK``)."""
    field, out = pol.tensor_core, []
    if not (isinstance(field, str) or (isinstance(field, tuple) and all(
            isinstance(p, tuple) and len(p) == 2 for p in field))):
        return [("tensor_core", field, f"a GPU name ({', '.join(gpus())}) or a table of GEMM role = GPU "
                                       f"(roles {', '.join(TC_GEMMS)})")]
    pairs = [("", field)] if isinstance(field, str) else [(f".{k}", g) for k, g in field]
    used = {}
    for key, gpu in pairs:
        if key and key[1:] not in TC_GEMMS:
            out.append((f"tensor_core{key}", gpu, f"a GEMM by the role it writes: {', '.join(TC_GEMMS)}"))
        elif gpu and gpu not in gpus():
            out.append((f"tensor_core{key}", gpu, f"a GPU with tensor-core presets: {', '.join(gpus())}"))
        elif gpu:
            used.update({g: gpu for g in (TC_GEMMS if not key else (key[1:],))})
    if not used or not all(isinstance(p, tuple) and len(p) == 2 and hasattr(p[1], "scaling")
                           for p in (*pol.roles, *pol.first_last)):
        return out  # bad role tables are reported by their own checks
    if pol.mac or pol.mac_order != "fast":
        out.append(("mac", pol.mac or pol.mac_order, "absent with tensor_core (both say how the GEMMs accumulate)"))
    if pol.calibration_granularity == "channel" and pol.needs_calibration:
        out.append(("calibration.granularity", "channel", "tensor with tensor_core (a scale per contraction "
                                                         "index cannot be applied to the GEMM's result)"))
    return out + _table_problems(pol, used, fallback)


def _tables(pol):
    """(where, role -> spec) of every table a GEMM may run under."""
    base = dict(pol.roles)
    out = [("roles", base)]
    if pol.first_last:
        out.append(("first_last", base | dict(pol.first_last)))
    for i, rule in enumerate(pol.layers):
        if isinstance(rule, tuple) and len(rule) == 2 and isinstance(rule[1], tuple):
            out.append((f"layers[{i}].roles", base | {r: s for r, s in rule[1] if hasattr(s, "scaling")}))
    return out


def _lookup(table: dict, role: str, fallback: dict):
    return table.get(role, table.get(fallback.get(role, role)))


def _operand_problem(spec) -> str | None:
    if spec is None or spec.is_identity:
        return "a tensor-core input format (fp8_e4m3, fp8_e5m2, fp16, bf16, tf32), not float32"
    if spec.spec.kind == "block":
        return (f"a scalar input format, not the block format {spec.spec.name} (a block-scaled MMA "
                "applies its scales inside the tensor core: no published model)")
    if str(spec.scaling) not in TC_SCALINGS or spec.rotation is not None:
        return (f"scaling {' | '.join(TC_SCALINGS)} without rotation: one scale per tensor, which the "
                "library applies to the GEMM's result (per-channel, block, group scales and rotations "
                "have no published tensor-core model)")
    return None


def _table_problems(pol, used: dict, fallback: dict) -> list:
    out, seen = [], set()
    for where, table in _tables(pol):
        acc = _lookup(table, "acc", fallback)
        for gemm, gpu in used.items():
            for lhs, rhs in _PAIRS[gemm]:
                bad = [(r, p) for r in (lhs, rhs) if (p := _operand_problem(_lookup(table, r, fallback))) is not None]
                for r, p in bad:
                    if (where, r) not in seen:
                        seen.add((where, r))
                        spec = _lookup(table, r, fallback)
                        out.append((f"{where}.{r}", None if spec is None else f"{spec.format} ({spec.scaling})",
                                    f"under tensor_core = {gpu!r}: {p}"))
                if bad or acc is None:
                    continue
                fa, fb = _lookup(table, lhs, fallback).format, _lookup(table, rhs, fallback).format
                try:
                    gemm_mac(gpu, fa, fb, acc.format)
                except ValueError:
                    key = (where, gpu, fa, fb, acc.format)
                    if key not in seen:
                        seen.add(key)
                        out.append((f"tensor_core{'' if isinstance(pol.tensor_core, str) else '.' + gemm}", gpu,
                                    f"{TC_GEMMS[gemm]} under {where} reads {lhs} = {fa} and {rhs} = {fb} into "
                                    f"acc = {acc.format}: no {gpu} preset; {gpu} takes {_combos(gpu)} "
                                    "(both operands one format, or E4M3 x E5M2)"))
    return out


@functools.lru_cache(maxsize=256)
def gemm_mac(gpu: str, lhs_fmt: str, rhs_fmt: str, acc_fmt: str):
    """The MacSpec of ``gpu``'s tensor cores for a GEMM of ``lhs_fmt`` x ``rhs_fmt`` operands
    into the ``acc_fmt`` role's format (the preset's output)."""
    return tensor_core(gpu, lhs_fmt, out=get_format(acc_fmt).name, b_fmt=rhs_fmt)
