"""Reading recipes: a name (``formats/recipes/<name>.toml``), a TOML path or a mapping becomes a
:class:`~asicsim._src.emulate.policy.Policy`, with every problem of the file in one
:class:`~asicsim._src.emulate.policy.RecipeError` (file, field, value, allowed).
Tables (the objects check the values: see :mod:`asicsim._src.emulate.fields`):

``[roles]``         role -> format name, or ``{format, rounding, scaling, block_size, amax_history,
                    saturate, margin, amax_compute, group_size, zero_point, scale_format, tile,
                    rotation, rotation_seed}``; ``scaling``
                    is none | tensor | channel | block | delayed | static | group | head | lsq |
                    lsq_channel (``head``: attention roles only, a scale per sequence and head;
                    ``lsq``: a learned step size per tensor on weight, act or an attention role,
                    ``lsq_channel``: per output channel on weight, integer formats, trained by
                    ``make_train_step``, :mod:`asicsim._src.emulate.lsq_sites`; ``tile`` = [r, c]:
                    block only, 2-D tiles of r elements along the contraction by c across it;
                    ``rotation`` = n: a random Hadamard rotation of n-element blocks along the
                    contraction before rounding, undone after, signs from ``rotation_seed``; ``group_size``,
                    ``zero_point``, ``scale_format`` = fp32 | fp16 | bf16 | e8m0: group only, integer
                    codes per group along the contraction, GPTQ/AWQ weights; ``amax_history``, ``amax_compute`` = max | most_recent:
                    delayed only, the same for all delayed roles; ``margin``: delayed or static,
                    headroom of 2**margin above the amax: delayed casts x * (format max / amax)
                    / 2**margin as Transformer Engine does, static divides by amax * 2**margin /
                    format max). Optional roles (:data:`~asicsim._src.emulate.policy.ROLES`): the gradient
                    GEMMs' own operand formats ``grad_dx``/``grad_dw`` (dY as the dX/dW GEMM reads
                    it), ``weight_dx``, ``act_dw`` (and ``act_dx``, ``weight_dw`` for GEMMs of two
                    activations or two weights), each absent = its forward role (AQT's dlhs/drhs,
                    microxcaling's ``w_elem_format_bp``, ``a_elem_format_bp``, ``a_elem_format_bp_os``,
                    ``a_elem_format_bp_ex``); the non-GEMM ops' ``vector``, ``transcendental`` and
                    ``reduction`` (microxcaling's ``bfloat = 16``: e.g. ``vector = "bf16"``; no
                    delayed/static scaling, not in ``[first_last]``). ``acc`` holds every value of
                    the GEMM operands of its table (fp32 under int8 or bf16, not fp8 under fp32);
                    ``master`` is a float format holding every value of ``weight``; a block format
                    (MX) has its own blocks (no ``scaling = "block"``); a format path is relative
                    to the recipe file's folder
``[loss_scaling]``  ``kind`` none | static | dynamic, ``init``, ``growth_interval``, ``factor``
``[mac]``           ``order`` (``fast``, or a bit-exact order: sequential, chunk:C, tree, ...; the
                    accumulator is role ``acc``) or ``spec`` (a whole MacSpec text such as ``v100``)
``[calibration]``   for ``static`` scaling (post-training quantization): ``batches``; ``method`` = max |
                    percentile | mse | entropy (TensorRT's calibrators, :mod:`.calibrators`);
                    ``percentile`` (99.99); ``granularity`` = tensor | channel (one scale per
                    contraction index of an activation: max or percentile); ``bins`` (2048)
``[first_last]``    roles overridden in the first and last layer (a table like ``[roles]``): the
                    first and last GEMM row, a scan over stacked layers counted per layer
``[[layers]]``      per-layer rules, first match wins: ``match`` (a glob over the weight's pytree
                    path, ``"*/attn/*"``) and ``roles`` (a table like ``[roles]``, overriding the
                    recipe's for GEMMs whose weight matches); ``[first_last]`` applies on top
                    (:mod:`asicsim._src.emulate.layer_rules`); a rule naming a vector role matches
                    non-GEMM ops by name scope/primitive, ``"*/softmax/*"`` (:mod:`.op_rules`)
``tensor_core``     the GPU whose tensor cores run every GEMM (``"h100"``), or a table of the GEMMs
                    by the role each writes (``out``, ``grad_out``, ``wgrad``) = GPU: the GEMMs
                    compute on the operands' codes with that GPU's MAC and apply the scales after
                    (:mod:`asicsim._src.emulate.tensor_core_gemm`)
``opaque``          primitives to run unemulated, with a warning, where the emulation cannot see
                    their work (``["pallas_call"]``; absent: such a primitive is an error naming
                    it, :mod:`asicsim._src.emulate.opaque`)
"""

from __future__ import annotations

import difflib
import tomllib
from pathlib import Path
from typing import Any

from asicsim._files import beside, read_text_file
from asicsim._src.emulate.policy import (
    ROLES,
    LossScaling,
    Policy,
    RecipeError,
    RoleSpec,
    list_recipes,
    recipes_dir,
)

_ROLE_KEYS = ("format", "rounding", "scaling", "block_size", "amax_history", "amax_compute", "saturate", "margin",
              "group_size", "zero_point", "scale_format", "tile", "rotation", "rotation_seed")
_CALIBRATION_KEYS = {"batches": "calibration_batches", "method": "calibration_method",
                     "percentile": "calibration_percentile", "granularity": "calibration_granularity",
                     "bins": "calibration_bins"}
_LOSS_KEYS = ("kind", "init", "growth_interval", "factor")


def _built(cls, table: dict, keys, path: str, out: list):
    """``cls`` from the fields of ``table`` it has (unknown ones are problems); None where a
    field is bad, its problems added to ``out`` under ``path``."""
    out += [(f"{path}.{k}", table[k], f"no such field; fields are {sorted(keys)}") for k in sorted(set(table) - set(keys))]
    try:
        obj = cls(**{k: table[k] for k in keys if k in table})
    except RecipeError as err:
        out += [(f"{path}.{f}", v, a) for f, v, a in err.problems]
        return None
    return obj


def _role(table: Any, path: str, out: list) -> RoleSpec | None:
    if isinstance(table, str):
        table = {"format": table}
    if not isinstance(table, dict):
        out.append((path, table, "a format name or a table with format, rounding, scaling"))
        return None
    if "format" not in table:
        out.append((f"{path}.format", "<missing>", "a format name (asicsim formats)"))
        table = {**table, "format": "fp32"}  # the other fields are still checked
    return _built(RoleSpec, table, _ROLE_KEYS, path, out)


def _roles(t: Any, table: str, out: list) -> list[tuple[str, RoleSpec]]:
    if not isinstance(t, dict):
        out.append((table, t, f"a table of role = format (or {{format, rounding, scaling, ...}}); "
                              f"roles are {list(ROLES)}"))
        return []
    roles = []
    for r, spec_t in t.items():
        spec = _role(spec_t, f"{table}.{r}", out)
        if spec is not None:
            roles.append((r, spec))
        elif r not in ROLES:
            out.append((f"{table}.{r}", spec_t, f"a role from {list(ROLES)}"))
    return roles


def _layers(t: Any, out: list) -> tuple:
    """``[[layers]]``: a list of tables ``{match, roles}``; (pattern, roles) rules."""
    if not isinstance(t, list):
        out.append(("layers", t, '[[layers]] tables: match = "<glob over weight paths>", roles = {...}'))
        return ()
    rules = []
    for i, rule in enumerate(t):
        if not isinstance(rule, dict):
            out.append((f"layers[{i}]", rule, "a table with match and roles"))
            rules.append(rule)  # kept, so the rules after it keep their numbers
            continue
        out += [(f"layers[{i}].{k}", rule[k], "no such field; fields are ['match', 'roles']")
                for k in sorted(set(rule) - {"match", "roles"})]
        for k in ("match", "roles"):
            if k not in rule:
                out.append((f"layers[{i}].{k}", "<missing>", "a glob over weight paths, e.g. '*/attn/*'"
                            if k == "match" else "a table of role = format"))
        roles = _roles(rule.get("roles", {}), f"layers[{i}].roles", out)
        rules.append((rule.get("match", ""), tuple(roles)))  # the Policy checks the pattern
    return tuple(rules)


def policy_from_table(table: dict, source: str = "<table>") -> Policy:
    """Build a policy from a parsed recipe table; every problem in one :class:`RecipeError`."""
    out: list = []
    top = {"name", "description", "source", "roles", "loss_scaling", "mac", "first_last", "calibration", "layers",
           "opaque", "tensor_core"}
    for k in sorted(set(table) - top):
        out.append((k, table[k], f"no such field; fields are {sorted(top)}"))
    roles_t = table.get("roles", {})
    if isinstance(roles_t, dict) and not roles_t:
        out.append(("roles", roles_t, f"a table of roles from {list(ROLES)}"))
    roles = _roles(roles_t, "roles", out)
    first_last = _roles(table.get("first_last", {}), "first_last", out)
    layers = _layers(table.get("layers", []), out)
    ls_t = table.get("loss_scaling", {})
    ls = None
    if isinstance(ls_t, dict):
        ls = _built(LossScaling, ls_t, _LOSS_KEYS, "loss_scaling", out)
    else:
        out.append(("loss_scaling", ls_t, "a table with kind, init, growth_interval, factor"))
    subtables = {}
    for name, keys in (("mac", ("order", "spec")), ("calibration", tuple(_CALIBRATION_KEYS))):
        t = table.get(name, {})
        if not isinstance(t, dict):
            out.append((name, t, f"a table with {', '.join(keys)}"))
            t = {}
        out += [(f"{name}.{k}", t[k], f"no such field; fields are {list(keys)}") for k in sorted(set(t) - set(keys))]
        subtables[name] = t
    fields = dict(name=table.get("name", Path(source).stem), roles=tuple(roles), first_last=tuple(first_last),
                  layers=layers,
                  loss_scaling=ls or LossScaling(), mac_order=subtables["mac"].get("order", "fast"),
                  mac=subtables["mac"].get("spec", ""), description=table.get("description", ""),
                  source=table.get("source", ""), opaque=table.get("opaque", ()),
                  tensor_core=table.get("tensor_core", ""),
                  **{f: subtables["calibration"][k] for k, f in _CALIBRATION_KEYS.items() if k in subtables["calibration"]})
    try:
        policy = Policy(**fields)
    except RecipeError as err:  # a role reported above is not also "missing"
        out += [p for p in err.problems if not any(f.startswith(f"{p[0]}.") or f == p[0] for f, _, _ in out)]
        policy = None
    if out:
        raise RecipeError(out, source)
    return policy


def load_recipe(recipe: str | Path | Policy | dict) -> Policy:
    """A recipe by name (``formats/recipes/<name>.toml``), TOML path, mapping, or a Policy."""
    if isinstance(recipe, Policy):
        return recipe
    if isinstance(recipe, dict):
        return policy_from_table(recipe)
    text = str(recipe)
    path = Path(text) if (text.endswith(".toml") or "/" in text) else recipes_dir() / f"{text}.toml"
    if not path.is_file():
        names = list_recipes()
        close = difflib.get_close_matches(text, names, n=3, cutoff=0.5)
        hint = f"did you mean {', '.join(map(repr, close))}? " if close else ""
        raise RecipeError([("recipe", text, f"{hint}one of {names}, or a .toml path")])
    try:
        table = tomllib.loads(read_text_file(path))
    except (tomllib.TOMLDecodeError, ValueError) as err:
        raise RecipeError([("<file>", str(path), f"valid TOML ({err})")], str(path)) from None
    return policy_from_table(_formats_beside(table, path.parent), str(path))


def _formats_beside(table: dict, folder: Path) -> dict:
    """The recipe table with the format files its role tables name (``[roles]``,
    ``[first_last]``, ``[[layers]]`` roles) resolved against the recipe file's folder."""
    def roles(t):
        if not isinstance(t, dict):
            return t
        return {r: ({**v, "format": beside(v.get("format"), folder)} if isinstance(v, dict) and "format" in v
                    else beside(v, folder)) for r, v in t.items()}

    out = {**table, **{k: roles(table[k]) for k in ("roles", "first_last") if k in table}}
    if isinstance(table.get("layers"), list):
        out["layers"] = [{**rule, "roles": roles(rule["roles"])} if isinstance(rule, dict) and "roles" in rule
                         else rule for rule in table["layers"]]
    return out
