"""Precision policies ("recipes"): a format, rounding and scaling per tensor role.

One vocabulary of roles everywhere (recipes, ``--formats`` on the CLI, the op trace, reports):

=========== =============================================================================
``weight``  weights as the GEMMs see them (the working copy)
``act``     activations entering a GEMM or convolution
``out``     a GEMM/convolution result, after accumulation
``acc``     the accumulator of every GEMM (forward and backward)
``grad``    activation gradients entering the backward GEMMs (the cotangent dY)
``grad_out`` an activation gradient as the dX GEMM writes it (absent: ``grad``; fp8 and MX
            training keep it in bf16 and quantize it where the next GEMM reads it)
``wgrad``   weight gradients (dW)
``master``  the master copy of the weights the optimizer updates (absent: no master copy)
``opt_state`` optimizer state (momenta)
``update``  the weight update as applied (its rounding: e.g. stochastic)
=========== =============================================================================

A recipe is a TOML file (``formats/recipes/<name>.toml``) or a mapping; :func:`load_recipe` checks
every field and reports all problems at once (file, field, value, allowed). Tables:

``[roles]``         role -> format name, or ``{format, rounding, scaling, block_size, amax_history,
                    saturate, margin, amax_compute}``; ``scaling`` is none | tensor | channel | block |
                    delayed | static (``amax_history``, ``amax_compute`` = max | most_recent:
                    delayed only, the same for all delayed roles; ``margin``: delayed or static,
                    headroom of 2**margin above the amax: delayed casts x * (format max / amax)
                    / 2**margin as Transformer Engine does, static divides by amax * 2**margin /
                    format max)
``[loss_scaling]``  ``kind`` none | static | dynamic, ``init``, ``growth_interval``, ``factor``
``[mac]``           ``order`` (``fast``, or a bit-exact order: sequential, chunk:C, tree, ...; the
                    accumulator is role ``acc``) or ``spec`` (a whole MacSpec text such as ``v100``)
``[calibration]``   ``batches``: calibration batches for ``static`` scaling (post-training quantization)
``[first_last]``    roles overridden in the first and last layer
"""

from __future__ import annotations

import difflib
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from asicsim._catalogs import shipped_dir
from asicsim.numerics import FormatError, get_format
from asicsim.numerics.rounding import parse_rounding

ROLES = ("weight", "act", "out", "acc", "grad", "grad_out", "wgrad", "master", "opt_state", "update")
_FALLBACK = {"grad_out": "grad"}  # a role a recipe may leave out, and the one it then follows
SCALINGS = ("none", "tensor", "channel", "block", "delayed", "static")
LOSS_SCALING = ("none", "static", "dynamic")
AMAX_COMPUTE = ("max", "most_recent")  # Transformer Engine's amax_compute_algo


class RecipeError(ValueError):
    """Bad recipe fields, all of them: (field, value, allowed) in ``.problems``."""

    def __init__(self, problems: list[tuple[str, Any, str]], source: str | None = None) -> None:
        self.problems = problems
        where = f"{source}: " if source else ""
        lines = [f"  - {f} = {v!r}; allowed: {a}" for f, v, a in problems]
        super().__init__("\n".join([f"{where}{len(problems)} invalid recipe field(s):", *lines]))


@dataclass(frozen=True)
class RoleSpec:
    """How one role's tensors are rounded: onto ``format`` with ``rounding``, after ``scaling``
    (``tensor``: per-tensor current amax; ``channel``: per output channel (last axis);
    ``block``: per ``block_size`` elements along the last axis; ``delayed``: per tensor from an amax
    history, kept by the training loop (:mod:`asicsim.emulate.training`); ``static``: per tensor
    from calibration (:func:`asicsim.emulate.calibrate`); block formats such as MX bring their own)."""

    format: str
    rounding: str = "rne"
    scaling: str = "none"
    block_size: int | None = None
    amax_history: int = 16  # delayed scaling: steps of amax history
    saturate: bool | None = None  # None: the format's convention
    margin: int = 0  # delayed/static scaling: 2**margin of headroom above the amax (TE's margin)
    amax_compute: str = "max"  # delayed scaling: the history's max, or its most recent amax

    @property
    def spec(self):
        return get_format(self.format)

    @property
    def is_identity(self) -> bool:
        """fp32 with round-to-nearest: the emulation may skip rounding (float32 is the carrier)."""
        return self.spec.name == "float32" and self.rounding == "rne" and self.scaling == "none"


@dataclass(frozen=True)
class LossScaling:
    kind: str = "none"  # none | static | dynamic (skip the step and halve on overflow)
    init: float = 2.0**15
    growth_interval: int = 2000
    factor: float = 2.0


@dataclass(frozen=True)
class Policy:
    """A whole recipe; frozen and hashable (usable as a static argument under ``jax.jit``)."""

    name: str
    roles: tuple[tuple[str, RoleSpec], ...]
    loss_scaling: LossScaling = LossScaling()
    mac_order: str = "fast"  # "fast" or any asicsim MacSpec order (sequential, chunk:C, tree, ...)
    description: str = ""
    source: str = ""
    first_last: tuple[tuple[str, RoleSpec], ...] = ()  # roles overridden in the first and last layer
    extra: tuple = field(default=(), repr=False)
    mac: str = ""  # a full MacSpec text (e.g. "v100"; overrides mac_order), see asicsim.numerics.mac
    calibration_batches: int = 8  # static scaling: calibration batches asicsim infer uses
    # static scaling: per-GEMM-site amax of (lhs, rhs, grad) from calibration, ((site, (a, b, g)), ...)
    static_scales: tuple = field(default=(), repr=False)

    @property
    def has_master(self) -> bool:
        """Whether the optimizer updates a master copy (role ``master``) of the weights."""
        return self.role("master") is not None

    @property
    def scalings(self) -> set[str]:
        return {spec.scaling for _, spec in self.roles}

    @property
    def delayed(self) -> bool:
        """Some role uses delayed (amax-history) scaling: training keeps per-GEMM state."""
        return "delayed" in self.scalings

    @property
    def history_settings(self) -> tuple[int, str]:
        """(amax_history, amax_compute) of the delayed roles, which share one history per GEMM
        site ((1, "max") without any); a RecipeError where they disagree."""
        named = [(f"roles.{r}", s) for r, s in self.roles] + [(f"first_last.{r}", s) for r, s in self.first_last]
        problems = _history_problems(named)
        if problems:
            raise RecipeError(problems, self.name)
        delayed = [s for _, s in named if s.scaling == "delayed"]
        return (delayed[0].amax_history, delayed[0].amax_compute) if delayed else (1, "max")

    @property
    def needs_calibration(self) -> bool:
        """Some role uses static scales: :func:`asicsim.emulate.calibrate` sets them."""
        return "static" in self.scalings

    @property
    def stochastic(self) -> bool:
        """Some role rounds stochastically: the emulated function needs ``asicsim_key``."""
        return any(spec.rounding.startswith("sr") for _, spec in self.roles)

    def mac_spec(self):
        """The MacSpec of the bit-exact accumulation (None for ``mac_order = "fast"``)."""
        from asicsim.numerics import MacSpec

        if self.mac:
            return MacSpec.parse(self.mac)
        if self.mac_order == "fast":
            return None
        acc = self.role("acc")
        return MacSpec(a_fmt="fp32", acc=acc.format if acc else "fp32", order=self.mac_order)

    def role(self, name: str) -> RoleSpec | None:
        roles = dict(self.roles)
        if name not in roles and name in _FALLBACK:
            return roles.get(_FALLBACK[name])
        return roles.get(name)

    def __getitem__(self, name: str) -> RoleSpec:
        spec = self.role(name)
        if spec is None:
            raise KeyError(f"recipe {self.name!r} has no role {name!r}; it has {[r for r, _ in self.roles]}")
        return spec


def _role(table: Any, path: str, out: list) -> RoleSpec | None:
    if isinstance(table, str):
        table = {"format": table}
    if not isinstance(table, dict):
        out.append((path, table, "a format name or a table with format, rounding, scaling"))
        return None
    allowed = {"format", "rounding", "scaling", "block_size", "amax_history", "amax_compute", "saturate", "margin"}
    for k in sorted(set(table) - allowed):
        out.append((f"{path}.{k}", table[k], f"no such field; fields are {sorted(allowed)}"))
    n = len(out)
    if "format" not in table:
        out.append((f"{path}.format", "<missing>", "a format name (asicsim formats)"))
    else:
        try:
            get_format(table["format"])
        except FormatError as err:
            out.append((f"{path}.format", table["format"], str(err)))
    rounding = table.get("rounding", "rne")
    try:
        parse_rounding(rounding)
    except (ValueError, TypeError) as err:
        out.append((f"{path}.rounding", rounding, str(err)))
    scaling = table.get("scaling", "none")
    if scaling not in SCALINGS:
        out.append((f"{path}.scaling", scaling, " | ".join(SCALINGS)))
    bs = table.get("block_size")
    if scaling == "block" and not (isinstance(bs, int) and bs >= 1):
        out.append((f"{path}.block_size", bs, "an integer >= 1 (required by scaling = 'block')"))
    hist = table.get("amax_history", 16)
    if not (isinstance(hist, int) and not isinstance(hist, bool) and hist >= 1):
        out.append((f"{path}.amax_history", hist, "an integer >= 1"))
    elif "amax_history" in table and scaling != "delayed":
        out.append((f"{path}.amax_history", hist, "only with scaling = 'delayed'"))
    algo = table.get("amax_compute", "max")
    if algo not in AMAX_COMPUTE:
        out.append((f"{path}.amax_compute", algo, " | ".join(AMAX_COMPUTE)))
    elif "amax_compute" in table and scaling != "delayed":
        out.append((f"{path}.amax_compute", algo, "only with scaling = 'delayed'"))
    sat = table.get("saturate")
    if sat is not None and not isinstance(sat, bool):
        out.append((f"{path}.saturate", sat, "true or false"))
    margin = table.get("margin", 0)
    if not (isinstance(margin, int) and not isinstance(margin, bool) and margin >= 0):
        out.append((f"{path}.margin", margin, "an integer >= 0"))
    elif "margin" in table and scaling not in ("delayed", "static"):
        out.append((f"{path}.margin", margin, "only with scaling = 'delayed' or 'static'"))
    if len(out) > n:
        return None
    return RoleSpec(format=table["format"], rounding=rounding, scaling=scaling, block_size=bs,
                    amax_history=hist, saturate=sat, margin=margin, amax_compute=algo)


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


def policy_from_table(table: dict, source: str = "<table>") -> Policy:
    """Build a policy from a parsed recipe table; every problem in one :class:`RecipeError`."""
    out: list = []
    top = {"name", "description", "source", "roles", "loss_scaling", "mac", "first_last", "calibration"}
    for k in sorted(set(table) - top):
        out.append((k, table[k], f"no such field; fields are {sorted(top)}"))
    name = table.get("name", Path(source).stem)
    roles_t = table.get("roles", {})
    roles = []
    if not isinstance(roles_t, dict) or not roles_t:
        out.append(("roles", roles_t, f"a table of roles from {list(ROLES)}"))
        roles_t = {}
    for r, t in roles_t.items():
        if r not in ROLES:
            out.append((f"roles.{r}", t, f"a role from {list(ROLES)}"))
            continue
        spec = _role(t, f"roles.{r}", out)
        if spec is not None:
            roles.append((r, spec))
    for needed in ("weight", "act", "acc"):
        if roles_t and needed not in roles_t:
            out.append((f"roles.{needed}", "<missing>", "a format (required role)"))
    ls_t = table.get("loss_scaling", {})
    ls = LossScaling()
    if isinstance(ls_t, dict):
        allowed = {"kind", "init", "growth_interval", "factor"}
        for k in sorted(set(ls_t) - allowed):
            out.append((f"loss_scaling.{k}", ls_t[k], f"no such field; fields are {sorted(allowed)}"))
        kind = ls_t.get("kind", "none")
        if kind not in LOSS_SCALING:
            out.append(("loss_scaling.kind", kind, " | ".join(LOSS_SCALING)))
        init = ls_t.get("init", 2.0**15)
        if not (isinstance(init, (int, float)) and init > 0):
            out.append(("loss_scaling.init", init, "a number > 0"))
        ls = LossScaling(kind=kind, init=float(init), growth_interval=int(ls_t.get("growth_interval", 2000)),
                         factor=float(ls_t.get("factor", 2.0)))
    else:
        out.append(("loss_scaling", ls_t, "a table"))
    mac_t = table.get("mac", {})
    order = mac_t.get("order", "fast") if isinstance(mac_t, dict) else None
    mac_text = mac_t.get("spec", "") if isinstance(mac_t, dict) else ""
    if isinstance(mac_t, dict):
        for k in sorted(set(mac_t) - {"order", "spec"}):
            out.append((f"mac.{k}", mac_t[k], "no such field; fields are ['order', 'spec']"))
    if not isinstance(order, str):
        out.append(("mac.order", order, "'fast' or an asicsim MAC order (sequential, chunk:C, tree, ...)"))
    elif order != "fast":
        _check_mac(f"a=fp32,acc=fp32,order={order}", "mac.order", order, out)
    if not isinstance(mac_text, str):
        out.append(("mac.spec", mac_text, "a MacSpec text, e.g. 'v100' or 'a=fp16,acc=fp32,order=tensorcore:4'"))
    elif mac_text:
        _check_mac(mac_text, "mac.spec", mac_text, out)
    cal_t = table.get("calibration", {})
    batches = cal_t.get("batches", 8) if isinstance(cal_t, dict) else None
    if isinstance(cal_t, dict):
        for k in sorted(set(cal_t) - {"batches"}):
            out.append((f"calibration.{k}", cal_t[k], "no such field; fields are ['batches']"))
    if not (isinstance(batches, int) and not isinstance(batches, bool) and batches >= 1):
        out.append(("calibration.batches", batches, "an integer >= 1"))
    fl = []
    for r, t in (table.get("first_last") or {}).items():
        spec = _role(t, f"first_last.{r}", out) if r in ROLES else None
        if r not in ROLES:
            out.append((f"first_last.{r}", t, f"a role from {list(ROLES)}"))
        elif spec is not None:
            fl.append((r, spec))
    out += _history_problems([(f"roles.{r}", s) for r, s in roles] + [(f"first_last.{r}", s) for r, s in fl])
    if out:
        raise RecipeError(out, source)
    return Policy(name=name, roles=tuple(roles), loss_scaling=ls, mac_order=order,
                  description=table.get("description", ""), source=table.get("source", ""),
                  first_last=tuple(fl), mac=mac_text, calibration_batches=batches)


def _check_mac(text: str, path: str, value, out: list) -> None:
    from asicsim.numerics import MacSpec

    try:
        MacSpec.parse(text)
    except ValueError as err:
        out.append((path, value, str(err)))


def recipes_dir() -> Path:
    return shipped_dir("formats") / "recipes"


def list_recipes() -> list[str]:
    return sorted(p.stem for p in recipes_dir().glob("*.toml"))


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
        table = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as err:
        raise RecipeError([("<file>", str(path), f"valid TOML ({err})")], str(path)) from None
    return policy_from_table(table, str(path))
