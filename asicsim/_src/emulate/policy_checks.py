"""The checks a :class:`~asicsim._src.emulate.policy.Policy` runs at construction: its role tables,
``[first_last]``, per-layer rules, the delayed roles' shared history settings, MAC order,
calibration and vector-role fields; every problem as (field, value, allowed)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from asicsim._src.emulate.fields import VECTOR_ROLES, Problems, RoleScaling, _int, _number
from asicsim._src.emulate.role_spec import (
    _FALLBACK,
    _REQUIRED,
    ATTENTION_ROLES,
    ROLES,
    LossScaling,
    RoleSpec,
)
from asicsim._src.emulate.tensor_core_checks import tensor_core_problems
from asicsim._src.numerics import FormatError, MacSpec, get_format
from asicsim._src.numerics.embed import embeds

if TYPE_CHECKING:
    from asicsim._src.emulate.policy import Policy

#: The most calibration batches a recipe may ask for: they are drawn and held in memory at once
#: (TensorRT's calibrators take a few hundred images; 10000 batches is far beyond).
MAX_CALIBRATION_BATCHES = 10_000
#: The roles whose formats enter a GEMM's multiplier (an accumulator must hold their values).
GEMM_OPERANDS = ("act", "weight", "grad", "act_dx", "act_dw", "weight_dx", "weight_dw", "grad_dx", "grad_dw")


def _role_table_problems(table: str, entries, out: list) -> list[tuple[str, RoleSpec]]:
    """Problems of ``roles``/``first_last`` entries (role name, RoleSpec); the good ones."""
    good, seen = [], set()
    if not isinstance(entries, tuple):
        out.append((table, entries, "a tuple of (role, RoleSpec) pairs or a mapping"))
        return good
    for item in entries:
        if not (isinstance(item, tuple) and len(item) == 2):
            out.append((table, item, "a (role, RoleSpec) pair"))
            continue
        r, spec = item
        if r not in ROLES:
            out.append((f"{table}.{r}", spec, f"a role from {list(ROLES)}"))
        elif r in seen:
            out.append((f"{table}.{r}", spec, "once per role"))
        elif not isinstance(spec, RoleSpec):
            out.append((f"{table}.{r}", spec, "a RoleSpec"))
        else:
            good.append((r, spec))
        seen.add(r)
    return good


def policy_problems(pol: Policy) -> list[tuple[str, Any, str]]:
    out: list = []
    if not (isinstance(pol.name, str) and pol.name):
        out.append(("name", pol.name, "a non-empty string"))
    for k in ("description", "source"):
        if not isinstance(getattr(pol, k), str):
            out.append((k, getattr(pol, k), "a string"))
    roles = _role_table_problems("roles", pol.roles, out)
    if isinstance(pol.roles, tuple):
        have = {r for r, _ in roles}
        out += [(f"roles.{r}", "<missing>", "a format (required role)") for r in _REQUIRED if r not in have]
    edges = _role_table_problems("first_last", pol.first_last, out)
    rules = _layer_problems(pol.layers, out)
    out += vector_role_problems(roles, edges)
    if not isinstance(pol.loss_scaling, LossScaling):
        out.append(("loss_scaling", pol.loss_scaling, "a LossScaling"))
    out += mac_problems(pol.mac_order, pol.mac)
    b = pol.calibration_batches
    if not (isinstance(b, int) and not isinstance(b, bool) and 1 <= b <= MAX_CALIBRATION_BATCHES):
        out.append(("calibration.batches", b, f"an integer in 1 .. {MAX_CALIBRATION_BATCHES} (the batches "
                                              "are drawn and held in memory at once)"))
    out += _format_problems(roles, edges, pol.layers)
    out += calibration_problems(pol.calibration_method, pol.calibration_percentile, pol.calibration_granularity,
                                pol.calibration_bins)
    named = [(f"roles.{r}", s) for r, s in roles] + [(f"first_last.{r}", s) for r, s in edges] + rules
    out += [(f"{path}.rotation", s.rotation, f"only on a GEMM operand role ({', '.join(OPERAND_ROLES)}): "
             "the rotation runs along the GEMM's contraction") for path, s in named
            if s.rotation is not None and path.rsplit(".", 1)[-1] not in OPERAND_ROLES]
    out += [(f"{path}.scaling", "head", f"only on an attention role ({', '.join(ATTENTION_ROLES)}): one scale "
             "per index of the attention GEMM's batch axes (sequence, head)") for path, s in named
            if s.scaling == "head" and path.rsplit(".", 1)[-1] not in ATTENTION_ROLES]
    out += _lsq_problems(pol, named)
    return out + _history_problems(named) + tensor_core_problems(pol, _FALLBACK)


#: the roles a learned step size (``scaling = "lsq"``) may round: forward GEMM operands (an
#: attention role reads an activation); ``lsq_channel`` only ``weight`` (a step per output channel)
LSQ_ROLES = ("weight", "act", *ATTENTION_ROLES)


def _lsq_problems(pol: Policy, named) -> list[tuple[str, Any, str]]:
    """Learned step sizes on forward operand roles only, per channel on weights only, and not
    beside ``tensor_core`` (a tensor core reads codes and one scale the recipe computes)."""
    out = []
    for path, s in named:
        role = path.rsplit(".", 1)[-1]
        if s.scaling == "lsq" and role not in LSQ_ROLES:
            out.append((f"{path}.scaling", "lsq", f"only on a forward GEMM operand role ({', '.join(LSQ_ROLES)}): "
                                                  "a learned step size is trained through the forward pass"))
        elif s.scaling == "lsq_channel" and role != "weight":
            out.append((f"{path}.scaling", "lsq_channel", "only on role weight (one step per output channel); "
                                                          "activations take scaling = 'lsq' (one step per tensor)"))
        elif s.scaling in ("lsq", "lsq_channel") and pol.tensor_core:
            out.append((f"{path}.scaling", str(s.scaling), "not with tensor_core (a tensor core reads the "
                                                           "recipe's own codes and scales)"))
    return out


#: the roles of GEMM operands, which a Hadamard rotation along the contraction may apply to
OPERAND_ROLES = ("weight", "act", "grad", "grad_dx", "grad_dw", "act_dx", "act_dw", "weight_dx", "weight_dw")


def normal_rule(rule):
    """A layer rule with its roles as a tuple of pairs (a mapping accepted); others unchanged."""
    if isinstance(rule, (list, tuple)) and len(rule) == 2 and isinstance(rule[1], (dict, list)):
        roles = rule[1]
        return (rule[0], tuple(roles.items()) if isinstance(roles, dict) else tuple(roles))
    return tuple(rule) if isinstance(rule, list) else rule


def _layer_problems(layers, out: list) -> list[tuple[str, RoleSpec]]:
    """Problems of the layer rules ((pattern, roles), ...); (field path, spec) of their good roles."""
    if not isinstance(layers, tuple):
        out.append(("layers", layers, "a tuple of (pattern, roles) pairs"))
        return []
    good, seen = [], set()
    for i, rule in enumerate(layers):
        if not (isinstance(rule, tuple) and len(rule) == 2):
            out.append((f"layers[{i}]", rule, "a (pattern, roles) pair"))
            continue
        pattern, roles = rule
        if not (isinstance(pattern, str) and pattern):
            out.append((f"layers[{i}].match", pattern, "a non-empty glob over weight paths, e.g. '*/attn/*'"))
        elif pattern in seen:
            out.append((f"layers[{i}].match", pattern, "each pattern once (the first match wins)"))
        seen.add(pattern)
        specs = _role_table_problems(f"layers[{i}].roles", roles, out)
        out += _op_rule_problems(i, pattern, specs)
        if isinstance(roles, tuple) and not roles:
            out.append((f"layers[{i}].roles", roles, f"at least one role from {list(ROLES)}"))
        good += [(f"layers[{i}].roles.{r}", s) for r, s in specs]
    return good


def _op_rule_problems(i: int, pattern, specs) -> list[tuple[str, Any, str]]:
    """Problems of rule ``i``'s vector roles (an op rule, :mod:`.op_rules`): no delayed or static
    scaling (an op has no amax history or calibration row), and a pattern that can name an op
    (``<act>`` and ``<const>`` name GEMMs only)."""
    vector = [(r, s) for r, s in specs if r in VECTOR_ROLES]
    out = [(f"layers[{i}].roles.{r}.scaling", str(s.scaling), "none | tensor | channel | block (a vector op has "
            "no amax history or calibration)") for r, s in vector if s.scaling in ("delayed", "static")]
    if vector and pattern in ("<act>", "<const>"):
        out.append((f"layers[{i}].match", pattern, "a glob over op names (name scope/primitive, e.g. "
                                                   "'*/softmax/*') for a rule of vector roles: <act> and <const> "
                                                   "name GEMMs"))
    return out


def _history_problems(named: list[tuple[str, RoleSpec]]) -> list[tuple[str, Any, str]]:
    """Problems where the delayed roles among ``named`` (field path, spec) disagree on their
    history settings: one history per GEMM site serves them all, as Transformer Engine's
    DelayedScaling has one amax_history_len and amax_compute_algo."""
    delayed = [(path, s) for path, s in named if s.scaling == "delayed"]
    out = []
    for attr in ("amax_history", "amax_compute"):
        if len({getattr(s, attr) for _, s in delayed}) > 1:
            out += [(f"{path}.{attr}", getattr(s, attr), "the same for every delayed role (one history per GEMM site)")
                    for path, s in delayed]
    return out


def _scalar(fmt):
    """A role's format as its elements hold values (a block format: its element format)."""
    f = get_format(fmt)
    return f.element if f.kind == "block" else f


def _format_problems(roles, edges, layers) -> list[tuple[str, Any, str]]:
    """The accumulator of every table of roles holds every value of the GEMM operands it sums
    (``acc = "fp8_e4m3"`` under fp32 operands, or an int32 accumulator under floats, is an error;
    int8 operands into fp32 are exact), and the master copy of the weights is a float format
    holding every value of the weight format (``master = "int8"`` is an error)."""
    out: list = []
    try:
        base = {r: get_format(s.format) for r, s in roles}
        tables = [("roles", base), ("first_last", base | {r: get_format(s.format) for r, s in edges})]
        for i, rule in enumerate(layers if isinstance(layers, tuple) else ()):
            if isinstance(rule, tuple) and len(rule) == 2 and isinstance(rule[1], tuple):
                tables.append((f"layers[{i}].roles", base | {r: get_format(s.format) for r, s in rule[1]
                                                            if isinstance(s, RoleSpec)}))
    except (FormatError, TypeError):
        return out  # a bad format name is reported by its role
    for where, t in tables:
        acc = t.get("acc")
        if acc is None or (where != "roles" and t == base):
            continue
        if acc.kind == "block":
            out.append((f"{where}.acc", acc.name, "a scalar format: an accumulator holds one sum per output"))
            continue
        narrow = [f"{r} ({f.name})" for r, f in t.items() if r in GEMM_OPERANDS and not embeds(_scalar(f), acc)]
        if narrow:
            out.append((f"{where}.acc", acc.name, f"a format holding every value of {', '.join(narrow)}: "
                                                  "the same kind and at least as wide (e.g. fp32)"))
    master, weight = base.get("master"), base.get("weight")
    if master is not None and (master.kind != "float" or (weight is not None and not embeds(_scalar(weight), master))):
        out.append(("roles.master", master.name, "a float format holding every value of the weight format "
                                                 f"({weight.name if weight is not None else '?'}), e.g. fp32: "
                                                 "the optimizer updates it by small steps"))
    return out


#: calibration methods of static scales (TensorRT / pytorch-quantization's calibrators)
CALIBRATION_METHODS = ("max", "percentile", "mse", "entropy")
CALIBRATION_GRANULARITY = ("tensor", "channel")


def calibration_problems(method, percentile, granularity, bins) -> Problems:
    """Problems of a recipe's ``[calibration]`` method, percentile, granularity and bins."""
    out: Problems = []
    if method not in CALIBRATION_METHODS:
        out.append(("calibration.method", method, " | ".join(CALIBRATION_METHODS)))
    if not (_number(percentile) and 0 < percentile <= 100):
        out.append(("calibration.percentile", percentile, "a number in (0, 100], e.g. 99.99"))
    elif percentile != 99.99 and method != "percentile":
        out.append(("calibration.percentile", percentile, "only with method = 'percentile'"))
    if granularity not in CALIBRATION_GRANULARITY:
        out.append(("calibration.granularity", granularity, " | ".join(CALIBRATION_GRANULARITY)))
    elif granularity == "channel" and method in ("mse", "entropy"):
        out.append(("calibration.granularity", granularity, "'tensor' with method = 'mse' or 'entropy' "
                    "(per-channel scales: method = 'max' or 'percentile'; pytorch-quantization's "
                    "histogram calibrator is per tensor too)"))
    if not (_int(bins) and bins >= 256):
        out.append(("calibration.bins", bins, "an integer >= 256 (histogram bins; default 2048 as TensorRT)"))
    return out


def check_mac(text: str, path: str, value, out: Problems) -> None:
    try:
        MacSpec.parse(text)
    except ValueError as err:
        out.append((path, value, str(err)))


def mac_problems(mac_order, mac) -> Problems:
    out: Problems = []
    if not isinstance(mac_order, str):
        out.append(("mac.order", mac_order, "'fast' or an asicsim MAC order (sequential, chunk:C, tree, ...)"))
    elif mac_order != "fast":
        check_mac(f"a=fp32,acc=fp32,order={mac_order}", "mac.order", mac_order, out)
    if not isinstance(mac, str):
        out.append(("mac.spec", mac, "a MacSpec text, e.g. 'v100' or 'a=fp16,acc=fp32,order=tensorcore:4'"))
    elif mac:
        check_mac(mac, "mac.spec", mac, out)
    return out


def vector_role_problems(roles, first_last) -> Problems:
    """Problems of the vector roles among ``roles`` and ``first_last`` ((role, RoleSpec) pairs):
    no delayed or static scaling (a vector op has no amax history or calibration row), and not in
    ``first_last`` (which overrides the roles of the first and last GEMM)."""
    out: Problems = []
    for r, spec in roles:
        if r in VECTOR_ROLES and spec.scaling in (RoleScaling.DELAYED, RoleScaling.STATIC):
            out.append((f"roles.{r}.scaling", str(spec.scaling), "none | tensor | channel | block (a vector op has "
                                                                 "no amax history or calibration)"))
    out += [(f"first_last.{r}", spec.format, "a GEMM role (first_last overrides the first and last GEMM's roles)")
            for r, spec in first_last if r in VECTOR_ROLES]
    return out


def opaque_problems(opaque) -> Problems:
    """Problems of a recipe's ``opaque`` list: names of primitives to pass through unemulated
    (:mod:`asicsim._src.emulate.opaque`; an emulated call that refuses one names it)."""
    if isinstance(opaque, tuple) and all(isinstance(n, str) and n.strip() == n and n for n in opaque):
        return []
    return [("opaque", opaque, "a list of primitive names, e.g. ['pallas_call', 'pure_callback'] (an "
                               "emulated call that meets one names it)")]
