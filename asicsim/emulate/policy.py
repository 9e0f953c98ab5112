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
``grad_dx`` dY as a dX GEMM reads it (absent: ``grad``); ``grad_dw``: as a dW GEMM reads it
``weight_dx`` the weight as the dX GEMM reads it (absent: the forward-rounded weight)
``act_dw``  the activation as the dW GEMM reads it (absent: the forward-rounded activation)
``act_dx``, ``weight_dw`` the other operand of a GEMM of two activations (attention: both
            gradient GEMMs are dX GEMMs) or of two weights (AQT's dlhs/drhs, microxcaling's
            ``*_bp`` formats: :mod:`asicsim.emulate.gemm`); ``[first_last]`` overrides only
            the roles it names (a ``weight_dx`` in ``[roles]`` applies to the edge layers too)
``vector``  the result of every float elementwise op, reduction and pooling outside the GEMMs
            (and its gradient; absent: not rounded), as microxcaling's ``bfloat`` rounds its
            vector ops (:mod:`asicsim.emulate.vector_roles` lists the primitives)
``transcendental`` exp, log, tanh, logistic, erf... results (absent: ``vector``)
``reduction`` sums, max/min reductions, cumulative sums, pooling (absent: ``vector``)
``master``  the master copy of the weights the optimizer updates (absent: no master copy)
``opt_state`` optimizer state (momenta)
``update``  the weight update as applied (its rounding: e.g. stochastic)
=========== =============================================================================

A recipe is a TOML file (``formats/recipes/<name>.toml``) or a mapping, read by
:mod:`asicsim.emulate.recipes`; every object here checks itself at construction, so a Policy built
in code is as checked as one loaded from a file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from asicsim._catalogs import shipped_dir
from asicsim.emulate.fields import (
    DEFAULT_HISTORY,
    AmaxCompute,
    LossScalingKind,
    RoleScaling,
    RoundingName,
    calibration_problems,
    loss_scaling_fields,
    mac_problems,
    role_fields,
    vector_role_problems,
)
from asicsim.numerics import get_format

ROLES = ("weight", "act", "out", "acc", "grad", "grad_out", "wgrad", "master", "opt_state", "update",
         "grad_dx", "grad_dw", "act_dx", "act_dw", "weight_dx", "weight_dw",
         "vector", "transcendental", "reduction")
# a role a recipe may leave out, and the one it then follows (a backward GEMM operand role equal
# to its forward role reads the forward-rounded operand: see asicsim.emulate.gemm)
_FALLBACK = {"grad_out": "grad", "grad_dx": "grad", "grad_dw": "grad", "act_dx": "act", "act_dw": "act",
             "weight_dx": "weight", "weight_dw": "weight", "transcendental": "vector", "reduction": "vector"}
_REQUIRED = ("weight", "act", "acc")
SCALINGS = tuple(m.value for m in RoleScaling)
LOSS_SCALING = tuple(m.value for m in LossScalingKind)
AMAX_COMPUTE = tuple(m.value for m in AmaxCompute)  # Transformer Engine's amax_compute_algo
__all__ = [
    "AmaxCompute",
    "LossScaling",
    "LossScalingKind",
    "Policy",
    "RecipeError",
    "RoleScaling",
    "RoleSpec",
    "RoundingName",
    "list_recipes",
    "recipes_dir",
]


class RecipeError(ValueError):
    """Bad recipe fields, all of them: (field, value, allowed) in ``.problems``."""

    def __init__(self, problems: list[tuple[str, Any, str]], source: str | None = None) -> None:
        self.problems = problems
        where = f"{source}: " if source else ""
        lines = [f"  - {f} = {v!r}; allowed: {a}" for f, v, a in problems]
        super().__init__("\n".join([f"{where}{len(problems)} invalid recipe field(s):", *lines]))


def _settle(obj, fixed: dict, problems: list, what: str) -> None:
    """Raise the problems of a frozen dataclass ``obj``, or store its normalised ``fixed`` fields."""
    if problems:
        raise RecipeError(problems, what)
    for k, v in fixed.items():
        object.__setattr__(obj, k, v)


@dataclass(frozen=True)
class RoleSpec:
    """How one role's tensors are rounded: onto ``format`` with ``rounding``, after ``scaling``
    (``tensor``: per-tensor current amax; ``channel``: per output channel (last axis);
    ``block``: per ``block_size`` elements along the last axis; ``group``: integer codes per
    ``group_size`` elements along the GEMM's contraction with a ``scale_format`` scale and, with
    ``zero_point``, a zero point (GPTQ/AWQ weights, :mod:`asicsim.numerics.group_quant`); ``delayed``: per tensor from an amax
    history, kept by the training loop (:mod:`asicsim.emulate.training`); ``static``: per tensor
    from calibration (:func:`asicsim.emulate.calibrate`); block formats such as MX bring their own).

    Checked at construction (a :class:`RecipeError` lists every bad field); ``rounding`` becomes a
    :class:`RoundingName` (``"SR"`` -> ``sr``), ``scaling`` a :class:`RoleScaling` and
    ``amax_compute`` an :class:`AmaxCompute` (both compare equal to their plain names)."""

    format: str
    rounding: RoundingName | str = "rne"
    scaling: RoleScaling | str = "none"
    block_size: int | None = None  # scaling = "block" only
    amax_history: int = DEFAULT_HISTORY  # delayed scaling: steps of amax history
    saturate: bool | None = None  # None: the format's convention
    margin: int = 0  # delayed/static scaling: 2**margin of headroom above the amax (TE's margin)
    amax_compute: AmaxCompute | str = "max"  # delayed scaling: the history's max, or its most recent amax
    group_size: int | None = None  # scaling = "group" only: elements per group along the contraction
    zero_point: bool = False  # scaling = "group": asymmetric (uint codes, a zero point per group)
    scale_format: str | None = None  # scaling = "group": fp32 (default) | fp16 | bf16 | e8m0

    def __post_init__(self) -> None:
        _settle(self, *role_fields(self), "RoleSpec")

    @property
    def spec(self):
        return get_format(self.format)

    @property
    def stochastic(self) -> bool:
        """Rounds stochastically (``sr``, ``sr{N}``): the emulated function needs random bits."""
        return self.rounding.stochastic

    @property
    def is_identity(self) -> bool:
        """fp32 with round-to-nearest: the emulation may skip rounding (float32 is the carrier)."""
        return self.spec.name == "float32" and self.rounding == "rne" and self.scaling == "none"


@dataclass(frozen=True)
class LossScaling:
    """``kind`` none | static | dynamic (skip the step and divide the scale by ``factor`` on
    overflow, multiply it by ``factor`` after ``growth_interval`` clean steps), from ``init``.
    Checked at construction: init a finite float32 > 0, factor > 1, growth_interval >= 1."""

    kind: LossScalingKind | str = "none"
    init: float = 2.0**15
    growth_interval: int = 2000
    factor: float = 2.0

    def __post_init__(self) -> None:
        _settle(self, *loss_scaling_fields(self), "LossScaling")


@dataclass(frozen=True)
class Policy:
    """A whole recipe; frozen and hashable (usable as a static argument under ``jax.jit``).
    Checked at construction, as a recipe file is: roles from :data:`ROLES` with ``weight``,
    ``act`` and ``acc`` present, the MAC order or spec, calibration batches, method, percentile,
    granularity and bins, the delayed roles' shared history settings (a :class:`RecipeError`
    lists every problem)."""

    name: str
    roles: tuple[tuple[str, RoleSpec], ...]
    loss_scaling: LossScaling = LossScaling()
    mac_order: str = "fast"  # "fast" or any asicsim MacSpec order (sequential, chunk:C, tree, ...)
    description: str = ""
    source: str = ""
    first_last: tuple[tuple[str, RoleSpec], ...] = ()  # roles overridden in the first and last GEMM row
    extra: tuple = field(default=(), repr=False)
    mac: str = ""  # a full MacSpec text (e.g. "v100"; overrides mac_order), see asicsim.numerics.mac
    calibration_batches: int = 8  # static scaling: calibration batches asicsim infer uses
    # static scaling: per-GEMM-row amax of (lhs, rhs, grad) from calibration, ((row, (a, b, g)), ...);
    # rows as asicsim.emulate.site_rows numbers them (a scan over stacked layers: a row per layer)
    static_scales: tuple = field(default=(), repr=False)
    # per-layer rules ((glob over the weight's pytree path, roles), ...), first match wins; see
    # asicsim.emulate.layer_rules (``[[layers]]`` in a recipe); first_last applies on top
    layers: tuple = ()
    # how calibrate() estimates static scales ([calibration] method, percentile, granularity, bins)
    calibration_method: str = "max"
    calibration_percentile: float = 99.99
    calibration_granularity: str = "tensor"
    calibration_bins: int = 2048
    # static scaling per channel: ((site, operand 0 | 1, (amax per contraction index, ...)), ...)
    channel_scales: tuple = field(default=(), repr=False)

    def __post_init__(self) -> None:
        fixed = {k: tuple(v.items()) if isinstance(v, dict) else tuple(v)
                 for k, v in (("roles", self.roles), ("first_last", self.first_last))
                 if isinstance(v, (dict, list, tuple))}
        if isinstance(self.layers, (list, tuple)):
            fixed["layers"] = tuple(_normal_rule(r) for r in self.layers)
        _settle(self, fixed, [], "")
        _settle(self, {}, _policy_problems(self), f"recipe {self.name!r}")

    @property
    def has_master(self) -> bool:
        """Whether the optimizer updates a master copy (role ``master``) of the weights."""
        return self.role("master") is not None

    @property
    def all_roles(self) -> list[tuple[str, RoleSpec]]:
        """(role, spec) of the recipe's roles, ``first_last`` and every layer rule."""
        return [*self.roles, *self.first_last, *(rs for _, roles in self.layers for rs in roles)]

    @property
    def scalings(self) -> set[str]:
        """Scalings of any role (first/last layer and layer rules included)."""
        return {spec.scaling for _, spec in self.all_roles}

    @property
    def delayed(self) -> bool:
        """Some role uses delayed (amax-history) scaling: training keeps per-GEMM state."""
        return "delayed" in self.scalings

    @property
    def history_settings(self) -> tuple[int, str]:
        """(amax_history, amax_compute) of the delayed roles, which share one history per GEMM
        site (checked at construction); (1, "max") without any."""
        delayed = [s for _, s in self.all_roles if s.scaling == "delayed"]
        return (delayed[0].amax_history, str(delayed[0].amax_compute)) if delayed else (1, "max")

    @property
    def needs_calibration(self) -> bool:
        """Some role uses static scales: :func:`asicsim.emulate.calibrate` sets them."""
        return "static" in self.scalings

    @property
    def inference_only(self) -> bool:
        """Static scales come from calibrating a trained model (post-training quantization): a
        training step changes the weights and activations they were measured on."""
        return self.needs_calibration

    @property
    def stochastic(self) -> bool:
        """Some role (first and last layer included) rounds stochastically: the emulated
        function needs ``asicsim_key``."""
        return any(spec.stochastic for _, spec in self.all_roles)

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


def _policy_problems(pol: Policy) -> list[tuple[str, Any, str]]:
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
    if not (isinstance(b, int) and not isinstance(b, bool) and b >= 1):
        out.append(("calibration.batches", b, "an integer >= 1"))
    out += calibration_problems(pol.calibration_method, pol.calibration_percentile, pol.calibration_granularity,
                                pol.calibration_bins)
    return out + _history_problems([(f"roles.{r}", s) for r, s in roles]
                                   + [(f"first_last.{r}", s) for r, s in edges] + rules)


def _normal_rule(rule):
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
        if isinstance(roles, tuple) and not roles:
            out.append((f"layers[{i}].roles", roles, f"at least one role from {list(ROLES)}"))
        good += [(f"layers[{i}].roles.{r}", s) for r, s in specs]
    return good


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


def recipes_dir() -> Path:
    return shipped_dir("formats") / "recipes"


def list_recipes() -> list[str]:
    return sorted(p.stem for p in recipes_dir().glob("*.toml"))
