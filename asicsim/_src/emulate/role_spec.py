"""A recipe's role names and the settings of one role: :class:`RoleSpec` (how a role's tensors are
rounded), :class:`LossScaling`, and :class:`RecipeError`, which lists every bad field.

Below :mod:`asicsim._src.emulate.policy` (the whole recipe) so that the recipe's checks
(:mod:`asicsim._src.emulate.policy_checks`) can name these classes without importing the recipe.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from asicsim._src.emulate.fields import (
    DEFAULT_HISTORY,
    AmaxCompute,
    LossScalingKind,
    RoleScaling,
    RoundingName,
    loss_scaling_fields,
    role_fields,
)
from asicsim._src.numerics import get_format
from asicsim._src.numerics.frozen_fields import settle

ROLES = ("weight", "act", "out", "acc", "grad", "grad_out", "wgrad", "master", "opt_state", "update",
         "grad_dx", "grad_dw", "act_dx", "act_dw", "weight_dx", "weight_dw",
         "vector", "transcendental", "reduction", "query", "key", "probabilities", "value")
#: attention's GEMM operand roles (Q K^T and P V), each ``act`` where a recipe leaves it out
ATTENTION_ROLES = ("query", "key", "probabilities", "value")
# a role a recipe may leave out, and the one it then follows (a backward GEMM operand role equal
# to its forward role reads the forward-rounded operand: see asicsim._src.emulate.gemm)
_FALLBACK = {"grad_out": "grad", "grad_dx": "grad", "grad_dw": "grad", "act_dx": "act", "act_dw": "act",
             "weight_dx": "weight", "weight_dw": "weight", "transcendental": "vector", "reduction": "vector",
             **{r: "act" for r in ATTENTION_ROLES}}
_REQUIRED = ("weight", "act", "acc")


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
    settle(obj, **fixed)


@dataclass(frozen=True)
class RoleSpec:
    """How one role's tensors are rounded: onto ``format`` with ``rounding``, after ``scaling``
    (``tensor``: per-tensor current amax; ``channel``: per output channel (last axis);
    ``block``: per ``block_size`` elements along the last axis (a GEMM operand: along its
    contraction), or per 2-D ``tile`` of (elements along the contraction, lines across it), as
    DeepSeek-V3's 128x128 weight tiles; ``rotation``: the tensor is rotated by a seeded random
    Hadamard transform of blocks of ``rotation`` elements along the contraction before rounding
    and rotated back after (:mod:`asicsim._src.numerics.rotation`); ``group``: integer codes per
    ``group_size`` elements along the GEMM's contraction with a ``scale_format`` scale and, with
    ``zero_point``, a zero point (GPTQ/AWQ weights, :mod:`asicsim._src.numerics.group_quant`); ``delayed``: per tensor from an amax
    history, kept by the training loop (:mod:`asicsim._src.emulate.training`); ``static``: per tensor
    from calibration (:func:`asicsim._src.emulate.calibrate`); block formats such as MX bring their own).

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
    tile: tuple[int, int] | None = None  # scaling = "block" or a block format: 2-D tiles (along the contraction, across)
    rotation: int | None = None  # a seeded random Hadamard rotation of this size along the contraction
    rotation_seed: int = 0  # the rotation's random signs

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
        return (self.spec.name == "float32" and self.rounding == "rne" and self.scaling == "none"
                and self.rotation is None)


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
