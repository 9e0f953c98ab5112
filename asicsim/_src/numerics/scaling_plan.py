"""How a tensor is scaled before rounding: :class:`Scaling` (granularity, axis, block size and
2-D tiles, scale format and rule, two-level block scales), checked at construction, and
:func:`resolve_scaling`, which turns a format and the ``axis``/``block_size``/``scaling``
arguments of ``quantize`` into (element format, Scaling). The arithmetic is in
:mod:`asicsim._src.numerics.scaling`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from .formats import BLOCK_SIZES, MAX_BLOCK_SIZE, BlockFormat, FloatFormat


@dataclass(frozen=True, kw_only=True)
class Scaling:
    """How to scale a tensor before rounding it onto an element format.

    granularity: ``tensor`` (one scale), ``channel`` (one per index of ``axis``), ``block``
      (one per ``block_size`` consecutive elements along ``axis``; a short last block is its own).
    symmetric: scale from amax; ``False`` adds an integer zero point (integer formats, fp32 scale).
    scale_format: ``fp32`` (amax / max), ``pow2`` (a power of two, within float32) or ``e8m0``
      (a power of two in [2**-127, 2**127], stored as float8_e8m0fnu).
    rule: how a power-of-two scale is picked: ``floor`` (OCP MX: floor(log2 amax) - emax_elem),
      ``up`` (smallest scale with no saturation), ``nearest`` (log2(amax / max) rounded).
    across: block granularity over 2-D tiles: a block is ``block_size`` elements along ``axis``
      by ``across`` consecutive lines of the other axes (flattened in order), e.g. DeepSeek-V3's
      128x128 weight tiles; 1 (default) is a block along ``axis`` only.
    block_scale: the float format a block scale is rounded onto (E4M3, bf16, fp32) with
      ``tensor_scale`` (a per-tensor fp32 scale above the block scales) -- a two-level block
      format such as NVFP4, computed by :mod:`asicsim._src.numerics.two_level`; None: ``scale_format``.
    """

    granularity: Literal["tensor", "channel", "block"] = "tensor"
    axis: int = -1
    block_size: int | None = None
    symmetric: bool = True
    scale_format: Literal["fp32", "pow2", "e8m0"] = "fp32"
    rule: Literal["floor", "up", "nearest"] = "floor"
    exp_range: tuple[int, int] | None = None
    across: int = 1
    block_scale: FloatFormat | None = None
    tensor_scale: bool = False

    @property
    def exponent_range(self) -> tuple[int, int]:
        """Allowed scale exponents: ``exp_range``, else e8m0's [-127, 127] or float32's normal
        powers of two [-126, 127] for ``pow2``."""
        if self.exp_range is not None:
            lo, hi = self.exp_range
        else:
            lo, hi = (-127, 127) if self.scale_format == "e8m0" else (-126, 127)
        if self.scale_format == "e8m0":
            lo, hi = max(lo, -127), min(hi, 127)
        return lo, hi

    def __post_init__(self) -> None:
        checks = [
            (self.granularity in ("tensor", "channel", "block"), "granularity", "'tensor', 'channel', 'block'"),
            (self.scale_format in ("fp32", "pow2", "e8m0"), "scale_format", "'fp32', 'pow2', 'e8m0'"),
            (self.rule in ("floor", "up", "nearest"), "rule", "'floor', 'up', 'nearest'"),
            (
                self.granularity != "block" or 1 <= (self.block_size or 0) <= MAX_BLOCK_SIZE,
                "block_size",
                f"{BLOCK_SIZES} for block granularity",
            ),
            (self.symmetric or self.scale_format == "fp32", "symmetric", "True unless scale_format='fp32'"),
        ]
        if not (isinstance(self.axis, (int, np.integer)) and not isinstance(self.axis, bool)):
            raise ValueError(f"Scaling: axis={self.axis!r}; allowed: an integer")
        if not isinstance(self.symmetric, (bool, np.bool_)):  # 'no' is truthy: it was symmetric
            raise ValueError(f"Scaling: symmetric={self.symmetric!r}; allowed: True or False")
        if self.block_size is not None and not (
                isinstance(self.block_size, (int, np.integer)) and not isinstance(self.block_size, bool)):
            raise ValueError(f"Scaling: block_size={self.block_size!r}; allowed: {BLOCK_SIZES} or None")
        checks += [
            (isinstance(self.across, (int, np.integer)) and not isinstance(self.across, bool)
             and 1 <= self.across <= MAX_BLOCK_SIZE and (self.across == 1 or self.granularity == "block"),
             "across", f"{BLOCK_SIZES}, and above 1 only with block granularity"),
            (self.block_scale is None or isinstance(self.block_scale, FloatFormat), "block_scale",
             "a float format (e.g. float8_e4m3fn) or None"),
            (isinstance(self.tensor_scale, (bool, np.bool_)) and (not self.tensor_scale or self.block_scale is not None),
             "tensor_scale", "True (with a block_scale) or False"),
            (self.block_scale is None or self.symmetric, "symmetric", "True with a block_scale"),
        ]
        for ok, name, allowed in checks:
            if not ok:
                raise ValueError(f"Scaling: {name}={getattr(self, name)!r}; allowed: {allowed}")


def resolve_scaling(spec, *, axis=None, block_size=None, scaling=None):
    """(element format, Scaling) for a scaled quantization, or None for plain rounding."""
    if isinstance(spec, BlockFormat):
        if scaling is not None:
            raise ValueError(f"{spec.name!r} brings its own block scaling; do not pass scaling=")
        if spec.two_level:
            return spec.element, Scaling(
                granularity="tensor" if spec.block_size is None else "block",
                axis=-1 if axis is None else axis,
                block_size=spec.block_size if block_size is None else block_size,
                block_scale=spec.scale, tensor_scale=spec.tensor_scale is not None,
            )
        lo, hi = spec.scale.emin, spec.scale.emax
        plan = Scaling(
            granularity="tensor" if spec.block_size is None else "block",
            axis=-1 if axis is None else axis,
            block_size=spec.block_size if block_size is None else block_size,
            scale_format="e8m0" if spec.scale.name == "float8_e8m0fnu" else "pow2",
            rule=spec.scale_rule,
            exp_range=(lo, hi),
        )
        return spec.element, plan
    if isinstance(scaling, str):
        scaling = {
            "tensor": Scaling(),
            "channel": Scaling(granularity="channel", axis=-1 if axis is None else axis),
        }.get(scaling) or _bad_scaling(scaling)
    if scaling is None and (axis is not None or block_size is not None):
        if block_size is not None:
            scaling = Scaling(granularity="block", axis=-1 if axis is None else axis, block_size=block_size)
        else:
            scaling = Scaling(granularity="channel", axis=axis)
    if scaling is None:
        return None
    if not scaling.symmetric and spec.kind != "int":
        raise ValueError(f"asymmetric scaling needs an integer format, got {spec.name!r}")
    return spec, scaling


def _bad_scaling(name):
    raise ValueError(f"scaling={name!r}; allowed: 'tensor', 'channel', or a Scaling(...)")
