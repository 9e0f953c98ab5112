"""The typed fields of a recipe and their checks.

Each check returns ``(field, value, allowed)`` problems (none for a good value) so that a recipe
file reports all of its problems at once, and an object built in code (``RoleSpec``,
``LossScaling``, ``Policy`` in :mod:`.policy`) is checked by the same code at construction.

Names are normalised: ``"SR"`` and ``" Tensor"`` mean ``sr`` and ``tensor`` (rounding names as
:func:`asicsim._src.numerics.rounding.parse_rounding` reads them); an unknown name is a problem that
lists the allowed ones. The enums are ``str`` subclasses: they compare with, print as and
serialise to their plain names.
"""

from __future__ import annotations

import enum
import math
from typing import Any

from asicsim._src.numerics import FormatError, get_format
from asicsim._src.numerics.formats import MAX_BLOCK_SIZE
from asicsim._src.numerics.rotation_sizes import MAX_ROTATION
from asicsim._src.numerics.rounding import ALLOWED as ROUNDINGS
from asicsim._src.numerics.rounding import Rounding, parse_rounding

Problems = list[tuple[str, Any, str]]


class _Name(enum.StrEnum):
    """A name from a fixed list; its repr is the plain name's (a RoleSpec's repr is unchanged)."""

    def __repr__(self) -> str:
        return repr(self.value)


class RoleScaling(_Name):
    """How a role's tensors are scaled before rounding (see :class:`asicsim.RoleSpec`;
    :class:`asicsim.numerics.Scaling` is the scaling of one quantize call)."""

    NONE = "none"
    TENSOR = "tensor"
    CHANNEL = "channel"
    BLOCK = "block"
    DELAYED = "delayed"
    STATIC = "static"
    GROUP = "group"  # integer codes per group of group_size along the contraction, see numerics.group_quant
    HEAD = "head"  # attention roles only: one current-amax scale per index of the GEMM's batch axes
    LSQ = "lsq"  # a learned step size per tensor (Esser et al. 2020), trained with the weights
    LSQ_CHANNEL = "lsq_channel"  # role weight only: a learned step size per output channel


#: the learned-step-size scalings (:mod:`asicsim._src.emulate.lsq_sites`)
LSQ_SCALINGS = (RoleScaling.LSQ, RoleScaling.LSQ_CHANNEL)


class LossScalingKind(_Name):
    NONE = "none"
    STATIC = "static"
    DYNAMIC = "dynamic"


class AmaxCompute(_Name):
    """Delayed scaling's estimate from the history (Transformer Engine's ``amax_compute_algo``)."""

    MAX = "max"
    MOST_RECENT = "most_recent"


class RoundingName(str):
    """A rounding mode's canonical name (``rne``, ``rna``, ``rtz``, ``rup``, ``rdn``, ``sr``,
    ``sr{N}``): a ``str`` that knows its parse (``sr{N}`` is parametrised, so not an enum)."""

    __slots__ = ()

    def __new__(cls, value) -> RoundingName:
        return super().__new__(cls, str(parse_rounding(value)))

    @property
    def parsed(self) -> Rounding:
        return parse_rounding(str(self))

    @property
    def stochastic(self) -> bool:
        return self.parsed.stochastic


def _enum(cls, name: str, value, out: Problems):
    """``value`` as a member of ``cls`` (case and surrounding blanks ignored), else a problem."""
    if isinstance(value, str):
        try:
            return cls(value.strip().lower())
        except ValueError:
            pass
    out.append((name, value, " | ".join(m.value for m in cls)))
    return value


def _int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


#: steps of amax history of a delayed-scaling role that does not say
DEFAULT_HISTORY = 16
#: the largest delayed/static scaling margin: 2**margin must be a float32
MAX_MARGIN = 127
#: the largest finite float32: the loss scale is a float32
FLOAT32_MAX = 3.4028234663852886e38
#: the range a dynamic loss scale stays in; a step skipped at ``MIN_SCALE`` overflowed with its
#: gradients scaled down 2**24 times: the loss scale has collapsed (a divergence)
MIN_SCALE = 2.0**-24
MAX_SCALE = 2.0**64


def role_fields(spec) -> tuple[dict, Problems]:
    """The normalised fields of a RoleSpec-like ``spec`` and the problems of its values."""
    out: Problems = []
    fixed: dict = {}
    try:
        fmt = get_format(spec.format)
    except FormatError as err:
        fmt = None
        out.append(("format", spec.format, str(err)))
    try:
        fixed["rounding"] = RoundingName(spec.rounding)
    except (ValueError, TypeError):
        out.append(("rounding", spec.rounding, ROUNDINGS))
    scaling = fixed["scaling"] = _enum(RoleScaling, "scaling", spec.scaling, out)
    fixed["amax_compute"] = _enum(AmaxCompute, "amax_compute", spec.amax_compute, out)
    bs = spec.block_size
    tile = _tile_fields(spec, scaling, fmt is not None and fmt.kind == "block", out)
    if tile:
        fixed["tile"] = tile
    if tile and scaling == RoleScaling.BLOCK:
        fixed["block_size"] = bs = tile[0]
    if scaling == RoleScaling.BLOCK and not (_int(bs) and bs >= 1):
        out.append(("block_size", bs, "an integer >= 1 (required by scaling = 'block')"))
    elif scaling != RoleScaling.BLOCK and bs is not None:
        out.append(("block_size", bs, "only with scaling = 'block'"))
    if scaling == RoleScaling.BLOCK and fmt is not None and fmt.kind == "block":
        out.append(("scaling", spec.scaling, f"not 'block' with a block format: {fmt.name} has its own blocks "
                                             f"({fmt.block_size or 'the whole tensor'}) and scales; a scalar "
                                             "format (e.g. fp8_e4m3) takes scaling = 'block' with block_size"))
    if not (_int(spec.amax_history) and spec.amax_history >= 1):
        out.append(("amax_history", spec.amax_history, "an integer >= 1"))
    elif spec.amax_history != DEFAULT_HISTORY and scaling != RoleScaling.DELAYED:
        out.append(("amax_history", spec.amax_history, "only with scaling = 'delayed'"))
    algo = fixed["amax_compute"]
    if isinstance(algo, AmaxCompute) and algo != AmaxCompute.MAX and scaling != RoleScaling.DELAYED:
        out.append(("amax_compute", spec.amax_compute, "only with scaling = 'delayed'"))
    if spec.saturate is not None and not isinstance(spec.saturate, bool):
        out.append(("saturate", spec.saturate, "true or false (absent: the format's convention)"))
    fixed.update(_group_fields(spec, scaling, fixed.get("rounding"), out))
    _rotation_fields(spec, scaling, out)
    if scaling in LSQ_SCALINGS:
        _lsq_fields(spec, fmt, fixed.get("rounding"), out)
    if not (_int(spec.margin) and 0 <= spec.margin <= MAX_MARGIN):
        out.append(("margin", spec.margin, f"an integer in 0 .. {MAX_MARGIN}"))
    elif spec.margin and scaling not in (RoleScaling.DELAYED, RoleScaling.STATIC):
        out.append(("margin", spec.margin, "only with scaling = 'delayed' or 'static'"))
    return fixed, out


def _lsq_fields(spec, fmt, rounding, out: Problems) -> None:
    """Checks of a learned step size (``scaling = "lsq"``/``"lsq_channel"``): an integer format
    without fraction bits (LSQ's grid, Esser et al. 2020 Eq. 1), round to nearest, codes that clip."""
    if fmt is not None and not (fmt.kind == "int" and getattr(fmt, "frac_bits", 0) == 0 and fmt.float32_exact):
        out.append(("format", spec.format, f"an integer format without fraction bits (int8, int4, uint4, ...) with "
                                           f"scaling = {spec.scaling!r}: LSQ's step multiplies integer codes"))
    if rounding is not None and rounding != "rne":
        out.append(("rounding", spec.rounding, f"rne with scaling = {spec.scaling!r} (LSQ rounds to nearest, "
                                               "its step's gradient assumes it)"))
    if spec.saturate is not None:
        out.append(("saturate", spec.saturate, f"absent with scaling = {spec.scaling!r} (LSQ clips to its codes)"))


def _rotation_fields(spec, scaling, out: Problems) -> None:
    """Checks of ``rotation`` (a power of two) and ``rotation_seed`` (an integer >= 0, only with
    a rotation); delayed, static and group scaling keep unrotated tensors (their amax history,
    calibration and exported codes are of the tensor itself)."""
    n, seed = spec.rotation, spec.rotation_seed
    if n is not None:
        if not (_int(n) and 2 <= n <= MAX_ROTATION and not n & (n - 1)):
            out.append(("rotation", n, f"a power of two in 2 .. {MAX_ROTATION} (the Hadamard block along the "
                                       "contraction, e.g. 16 as Transformer Engine's NVFP4 wgrad), or absent"))
        if scaling in (RoleScaling.DELAYED, RoleScaling.STATIC, RoleScaling.GROUP, *LSQ_SCALINGS):
            out.append(("rotation", n, "with scaling = none | tensor | channel | block (delayed, static, group "
                                       "and learned scales are of the unrotated tensor)"))
    if not (_int(seed) and seed >= 0):
        out.append(("rotation_seed", seed, "an integer >= 0"))
    elif seed and n is None:
        out.append(("rotation_seed", seed, "only with rotation"))


def _tile_fields(spec, scaling, block_format: bool, out: Problems) -> tuple[int, int] | None:
    """The normalised 2-D tile of ``scaling = "block"`` or of a block format's blocks (elements
    along the contraction, lines across it), or None (absent, or a problem added to ``out``)."""
    tile = spec.tile
    if tile is None:
        return None
    allowed = ("[elements along the contraction, lines across it]: two integers in 1 .. "
               f"{MAX_BLOCK_SIZE}, e.g. [128, 128] (DeepSeek-V3's weight tiles)")
    if scaling != RoleScaling.BLOCK and not (block_format and scaling == RoleScaling.NONE):
        out.append(("tile", tile, "only with scaling = 'block', or with a block format (e.g. nvfp4: [16, 16])"))
    elif not (isinstance(tile, (list, tuple)) and len(tile) == 2 and all(_int(t) and 1 <= t <= MAX_BLOCK_SIZE
                                                                          for t in tile)):
        out.append(("tile", tile, allowed))
    elif spec.block_size is not None and spec.block_size != tile[0]:
        out.append(("block_size", spec.block_size, f"absent or {tile[0]} (the tile's first size) with tile = {list(tile)}"))
    else:
        return int(tile[0]), int(tile[1])
    return None


def _group_fields(spec, scaling, rounding, out: Problems) -> dict:
    """Checks of the group-quantization fields (``scaling = "group"``: LLM weight PTQ, GPTQ/AWQ
    conventions, see :mod:`asicsim._src.numerics.group_quant`); the normalised scale format."""
    from asicsim._src.numerics.group_codes import SCALE_FORMATS, code_range

    gs, zp, sf = spec.group_size, spec.zero_point, spec.scale_format
    if scaling != RoleScaling.GROUP:
        for name, v, default in (("group_size", gs, None), ("zero_point", zp, False), ("scale_format", sf, None)):
            if v != default or (name == "zero_point" and not isinstance(v, bool)):
                out.append((name, v, "only with scaling = 'group'"))
        return {}
    if not (_int(gs) and gs >= 1):
        out.append(("group_size", gs, "an integer >= 1 (required by scaling = 'group'; e.g. 32, 64, 128)"))
    if not isinstance(zp, bool):
        out.append(("zero_point", zp, "true (asymmetric, unsigned codes: uint4, uint8) or false (symmetric: int4, int8)"))
    else:
        try:
            code_range(spec.format, zp)
        except (ValueError, FormatError) as err:
            out.append(("format", spec.format, f"with scaling = 'group': {err}"))
    fixed = {"scale_format": "fp32" if sf is None else sf}
    if isinstance(sf, str) and sf.strip().lower() in SCALE_FORMATS:
        fixed["scale_format"] = sf.strip().lower()
    elif sf is not None:
        out.append(("scale_format", sf, " | ".join(SCALE_FORMATS)))
    if rounding is not None and rounding != "rne":
        out.append(("rounding", spec.rounding, "rne with scaling = 'group' (round half to even, as torch.round)"))
    return fixed


def loss_scaling_fields(ls) -> tuple[dict, Problems]:
    """The normalised fields of a LossScaling-like ``ls`` and the problems of its values."""
    out: Problems = []
    fixed = {"kind": _enum(LossScalingKind, "kind", ls.kind, out)}
    dynamic = fixed["kind"] == LossScalingKind.DYNAMIC
    lo, hi = (MIN_SCALE, MAX_SCALE) if dynamic else (0.0, FLOAT32_MAX)
    if _number(ls.init) and lo <= ls.init <= hi and ls.init > 0:
        fixed["init"] = float(ls.init)
    else:
        out.append(("init", ls.init, "a finite number in 2**-24 .. 2**64 (the dynamic scale's range) for kind = "
                    "'dynamic'" if dynamic else "a finite number > 0 (a float32: at most 3.4e38)"))
    if not (_int(ls.growth_interval) and ls.growth_interval >= 1):
        out.append(("growth_interval", ls.growth_interval, "an integer >= 1 (clean steps before the scale grows)"))
    if _number(ls.factor) and ls.factor > 1:
        fixed["factor"] = float(ls.factor)
    else:
        out.append(("factor", ls.factor, "a finite number > 1 (the scale is multiplied by it to grow and "
                                         "divided by it on overflow)"))
    return fixed, out


#: roles of the ops outside the GEMMs (:mod:`asicsim._src.emulate.vector_roles`)
VECTOR_ROLES = ("vector", "transcendental", "reduction")
