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
            ``*_bp`` formats: :mod:`asicsim._src.emulate.gemm`); ``[first_last]`` overrides only
            the roles it names (a ``weight_dx`` in ``[roles]`` applies to the edge layers too)
``query``, ``key`` the operands of attention's score GEMM (Q K^T), ``probabilities``, ``value``
            the operands of its output GEMM (P V), where the model marks them
            (:func:`asicsim.attention_role`; absent: ``act``); forward only (their
            gradient GEMMs read them as ``act_dx``); ``scaling = "head"``: one scale per index
            of the GEMM's batch axes (per sequence and head)
``vector``  the result of every float elementwise op, reduction and pooling outside the GEMMs
            (and its gradient; absent: not rounded), as microxcaling's ``bfloat`` rounds its
            vector ops (:mod:`asicsim._src.emulate.vector_roles` lists the primitives)
``transcendental`` exp, log, tanh, logistic, erf... results (absent: ``vector``)
``reduction`` sums, max/min reductions, cumulative sums, pooling (absent: ``vector``)
``master``  the master copy of the weights the optimizer updates (absent: no master copy)
``opt_state`` optimizer state (momenta)
``update``  the weight update as applied (its rounding: e.g. stochastic)
=========== =============================================================================

A recipe is a TOML file (``formats/recipes/<name>.toml``) or a mapping, read by
:mod:`asicsim._src.emulate.recipes`; every object here checks itself at construction, so a Policy built
in code is as checked as one loaded from a file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from asicsim._catalogs import shipped_dir
from asicsim._src.emulate.calibrated_scales import calibrated_scales
from asicsim._src.emulate.fields import (
    AmaxCompute,
    LossScalingKind,
    RoleScaling,
    RoundingName,
)
from asicsim._src.emulate.policy_checks import normal_rule, opaque_problems, policy_problems
from asicsim._src.emulate.role_spec import _FALLBACK, _settle
from asicsim._src.emulate.role_spec import ATTENTION_ROLES as ATTENTION_ROLES
from asicsim._src.emulate.role_spec import ROLES as ROLES
from asicsim._src.emulate.role_spec import LossScaling as LossScaling
from asicsim._src.emulate.role_spec import RecipeError as RecipeError
from asicsim._src.emulate.role_spec import RoleSpec as RoleSpec
from asicsim._src.emulate.tensor_core_checks import normal_tensor_core

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


@dataclass(frozen=True)
class Policy:
    """A whole recipe; frozen and hashable (usable as a static argument under ``jax.jit``).
    Checked at construction, as a recipe file is: roles from :data:`ROLES` with ``weight``,
    ``act`` and ``acc`` present, the MAC order or spec, calibration batches, method, percentile,
    granularity and bins, the delayed roles' shared history settings, the tensor cores' GPU and
    the operand roles they read (:mod:`.tensor_core_checks`; a :class:`RecipeError` lists every
    problem)."""

    name: str
    roles: tuple[tuple[str, RoleSpec], ...]
    loss_scaling: LossScaling = LossScaling()  # noqa: RUF009 (frozen: one shared default is safe)
    mac_order: str = "fast"  # "fast" or any asicsim MacSpec order (sequential, chunk:C, tree, ...)
    description: str = ""
    source: str = ""
    first_last: tuple[tuple[str, RoleSpec], ...] = ()  # roles overridden in the first and last GEMM row
    mac: str = ""  # a full MacSpec text (e.g. "v100"; overrides mac_order), see asicsim._src.numerics.mac
    calibration_batches: int = 8  # static scaling: calibration batches asicsim infer uses
    # static scaling: per-GEMM-row amax of (lhs, rhs, grad) from calibration, ((row, (a, b, g)), ...);
    # rows as asicsim._src.emulate.site_rows numbers them (a scan over stacked layers: a row per layer)
    static_scales: tuple = field(default=(), repr=False)
    # per-layer rules ((glob over the weight's pytree path, roles), ...), first match wins; see
    # asicsim._src.emulate.layer_rules (``[[layers]]`` in a recipe); first_last applies on top; a rule
    # naming a vector role matches non-GEMM ops by name scope/primitive (asicsim._src.emulate.op_rules)
    layers: tuple = ()
    # how calibrate() estimates static scales ([calibration] method, percentile, granularity, bins)
    calibration_method: str = "max"
    calibration_percentile: float = 99.99
    calibration_granularity: str = "tensor"
    calibration_bins: int = 2048
    # static scaling per channel: ((site, operand 0 | 1, (amax per contraction index, ...)), ...)
    channel_scales: tuple = field(default=(), repr=False)
    # primitives run unemulated, with a warning, where the emulation cannot see their work
    # (Pallas kernels, ffi/cuDNN calls, callbacks); absent: refused (asicsim._src.emulate.opaque)
    opaque: tuple[str, ...] = ()
    # static scaling: ((row, operand 0 | 1), ...) calibration did not observe (never executed on its
    # batches, or only zeros): no static scale, scaled by their current amax (asicsim._src.emulate.ptq)
    uncalibrated: tuple = field(default=(), repr=False)
    # the GPU whose tensor cores run the GEMMs ("h100"), or per GEMM ((role it writes: out,
    # grad_out, wgrad), GPU) pairs; "": none (asicsim._src.emulate.tensor_core_gemm)
    tensor_core: str | tuple = ""

    def __post_init__(self) -> None:
        fixed = {k: tuple(v.items()) if isinstance(v, dict) else tuple(v)
                 for k, v in (("roles", self.roles), ("first_last", self.first_last))
                 if isinstance(v, (dict, list, tuple))}
        if isinstance(self.layers, (list, tuple)):
            fixed["layers"] = tuple(normal_rule(r) for r in self.layers)
        if isinstance(self.opaque, list):
            fixed["opaque"] = tuple(self.opaque)
        fixed["tensor_core"] = normal_tensor_core(self.tensor_core)
        _settle(self, fixed, [], "")
        scales, bad_scales = calibrated_scales(self.static_scales, self.channel_scales, self.uncalibrated)
        _settle(self, scales, policy_problems(self) + opaque_problems(self.opaque) + bad_scales,
                f"recipe {self.name!r}")

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
    def lsq(self) -> bool:
        """Some role has a learned step size (``scaling = "lsq"``/``"lsq_channel"``): training keeps
        a trainable step per GEMM operand it rounds (:mod:`asicsim._src.emulate.lsq_sites`)."""
        return bool({"lsq", "lsq_channel"} & self.scalings)

    @property
    def history_settings(self) -> tuple[int, str]:
        """(amax_history, amax_compute) of the delayed roles, which share one history per GEMM
        site (checked at construction); (1, "max") without any."""
        delayed = [s for _, s in self.all_roles if s.scaling == "delayed"]
        return (delayed[0].amax_history, str(delayed[0].amax_compute)) if delayed else (1, "max")

    @property
    def needs_calibration(self) -> bool:
        """Some role uses static scales: :func:`asicsim.calibrate` sets them."""
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
        from asicsim._src.numerics import MacSpec

        if self.mac:
            return MacSpec.parse(self.mac)
        if self.mac_order == "fast":
            return None
        acc = self.role("acc")
        return MacSpec(a_fmt="fp32", acc=acc.format if acc else "fp32", order=self.mac_order)

    def tensor_core_gpu(self, gemm: str) -> str | None:
        """The GPU whose tensor cores run the GEMM that writes role ``gemm`` (``out``: forward,
        ``grad_out``: dX, ``wgrad``: dW), or None (:mod:`asicsim._src.emulate.tensor_core_gemm`)."""
        from asicsim._src.emulate.tensor_core_checks import gpu_for

        return gpu_for(self.tensor_core, gemm)

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


def recipes_dir() -> Path:
    return shipped_dir("formats") / "recipes"


def list_recipes() -> list[str]:
    return sorted(p.stem for p in recipes_dir().glob("*.toml"))
