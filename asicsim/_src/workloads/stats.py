"""Per-tensor numerics statistics: how a tensor fares in a role's format.

For a float32 tensor ``x`` and a role (format, rounding, scaling) of a recipe:

``underflow``  fraction of the nonzero elements that round to zero
``overflow``   fraction of the finite elements beyond the format's largest finite value (they
               become inf/NaN or saturate, as the format says); with ``tensor``/``channel``/
               ``block`` scaling (and block formats) the scale fits the tensor, so only non-finite
               results count; ``static``/``delayed`` scaling is evaluated with the current amax
``nonfinite``  fraction of elements that are inf/NaN after rounding
``zero``       fraction that is exactly zero before rounding (ReLU zeros, not underflow)
``exp_hist``   counts of floor(log2 |x|) over the nonzero finite elements, bins
               ``EXP_LO .. EXP_HI`` (values outside are counted in the end bins), beside the format's
               range: ``fmt_min_exp`` (log2 of its smallest positive value) and ``fmt_max_exp``

and, of the tensor itself (before rounding; the format plays no part), the outlier measures:

``amax``       the largest magnitude of a finite element (the "infinity norm" Bondarenko et al.
               2023 track per layer, and what per-tensor fp8 scaling divides by)
``outliers``   fraction of the finite elements with magnitude >= :data:`OUTLIER_THRESHOLD` (6):
               LLM.int8()'s definition of an outlier (Dettmers et al. 2022, "LLM.int8(): 8-bit
               Matrix Multiplication for Transformers at Scale", section 4: hidden-state features
               "with a magnitude of at least 6"). It is a threshold on activations, whose
               LayerNorm-ed scale is about 1; weights are at another scale, where it mostly reads
               0, and training's gradient statistics are taken times the loss scale, where it
               would count nearly everything, so training reports it as NaN for gradients (their
               amax and kurtosis still compare across recipes)
``kurtosis``   Pearson kurtosis E[(x - mean)^4] / var^2 of the finite elements (3 for a Gaussian;
               large when a few elements dominate), Bondarenko et al. 2023 ("Quantizable
               Transformers: Removing Outliers by Helping Attention Heads Do Nothing", section 5)
               report it beside the infinity norm; NaN for a constant tensor (undefined)

:func:`extremes` keeps these three per tensor; training records them at every evaluation
(``numerics_curve[i]["tensors"]``), one entry per tapped tensor, so per layer.

Everything is a fixed-shape JAX computation (one ``jit`` for all tensors of a model).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from asicsim._src.emulate.policy import RoleSpec
from asicsim._src.emulate.transform import round_role
from asicsim._src.numerics import BlockFormat, FloatFormat, IntFormat, get_format

EXP_LO, EXP_HI = -48, 24
EXP_BINS = tuple(range(EXP_LO, EXP_HI + 1))
OUTLIER_THRESHOLD = 6.0  # LLM.int8() (Dettmers et al. 2022, section 4): |x| >= 6
EXTREMES = ("amax", "outliers", "kurtosis")


def format_range(fmt: str) -> tuple[float | None, float | None]:
    """(log2 of the smallest positive value, log2 of the largest finite value) of ``fmt``
    (a block format: of its element format; the scales shift both)."""
    spec = get_format(fmt)
    if isinstance(spec, BlockFormat):
        spec = spec.element
    if isinstance(spec, FloatFormat):
        small = spec.smallest_subnormal if spec.subnormals else spec.smallest_normal
    elif isinstance(spec, IntFormat):
        small = spec.eps
    else:  # pragma: no cover - every format is one of the above
        return None, None
    return math.log2(small), math.log2(spec.max)


def tensor_stats(x: jax.Array, spec: RoleSpec | None, *, key=None) -> dict:
    """Statistics of ``x`` against role ``spec`` (None: float32) as JAX scalars / a histogram.

    Stochastic rounding is evaluated with ``key`` (default: a fixed key).
    """
    x = jnp.asarray(x, jnp.float32).ravel()
    if spec is None:
        spec = RoleSpec("fp32")
    if spec.stochastic and key is None:
        key = jax.random.key(0)
    q = round_role(x, spec, key=key)
    n = x.size
    finite = jnp.isfinite(x)
    nonzero = (x != 0) & finite
    under = jnp.sum(nonzero & (q == 0))
    fmt = get_format(spec.format)
    if spec.scaling == "none" and not isinstance(fmt, BlockFormat):  # block formats scale per block
        beyond = finite & (jnp.abs(x) > min(float(fmt.max), float(np.finfo(np.float32).max)))
    else:
        beyond = jnp.zeros_like(finite)
    over = jnp.sum(beyond | (finite & ~jnp.isfinite(q)))
    # frexp: |x| = m * 2**k with m in [0.5, 1), so floor(log2 |x|) = k - 1 exactly (a float32 log2
    # rounds the values just below a power of two onto it, one bin too high)
    e = jnp.frexp(jnp.where(nonzero, x, 1.0))[1] - 1
    idx = jnp.clip(e, EXP_LO, EXP_HI).astype(jnp.int32) - EXP_LO
    hist = jnp.zeros(len(EXP_BINS), jnp.int32).at[idx].add(nonzero.astype(jnp.int32))
    return {"size": n, **_extremes(x, finite),
            "underflow": under / jnp.maximum(jnp.sum(nonzero), 1),
            "overflow": over / max(n, 1),
            "nonfinite": jnp.mean(~jnp.isfinite(q)),
            "zero": jnp.mean(x == 0),
            "exp_hist": hist}


def _extremes(x: jax.Array, finite: jax.Array) -> dict:
    """amax, outlier fraction and kurtosis of the finite elements of flat ``x``."""
    count = jnp.maximum(jnp.sum(finite), 1).astype(jnp.float32)
    mag = jnp.abs(jnp.where(finite, x, 0.0))
    amax = jnp.max(mag, initial=0.0)
    y = jnp.where(finite, x, 0.0) / jnp.where(amax > 0, amax, 1.0)  # kurtosis is scale-free: no overflow in y**4
    dev = jnp.where(finite, y - jnp.sum(y) / count, 0.0)
    var = jnp.sum(dev * dev) / count
    m4 = jnp.sum((dev * dev) ** 2) / count
    return {"amax": amax,
            "outliers": jnp.sum(finite & (mag >= OUTLIER_THRESHOLD)).astype(jnp.float32) / count,
            "kurtosis": jnp.where(var > 0, m4 / jnp.where(var > 0, var * var, 1.0), jnp.nan)}


#: what :func:`extremes` keeps of an LSQ operand's statistics (:mod:`.lsq_stats`, which have ``step``)
LSQ_EXTREMES = ("step", "overflow", "rel_error")


def extremes(stats: dict) -> dict:
    """``{tensor: {amax, outliers, kurtosis}}`` of :func:`describe`'d (or raw) statistics
    (an LSQ operand's: ``{step, overflow, rel_error}``)."""
    return {name: {k: float(s[k]) for k in (LSQ_EXTREMES if "step" in s else EXTREMES)}
            for name, s in stats.items()}


def describe(stats: dict, spec: RoleSpec | None, *, histogram: bool = True) -> dict:
    """Host-side (plain Python) form of :func:`tensor_stats`'s result, with the format's range."""
    spec = spec or RoleSpec("fp32")
    lo, hi = format_range(spec.format)
    out = {"format": spec.format, "rounding": spec.rounding, "scaling": spec.scaling,
           "size": int(stats["size"])}
    for k in ("underflow", "overflow", "nonfinite", "zero", *EXTREMES):
        out[k] = float(stats[k])
    if histogram:
        out["fmt_min_exp"], out["fmt_max_exp"] = lo, hi
        h = np.asarray(stats["exp_hist"])
        nz = np.nonzero(h)[0]
        # only the occupied span, to keep reports short: {exponent: count}
        out["exp_hist"] = ({int(EXP_BINS[i]): int(h[i]) for i in range(nz[0], nz[-1] + 1)}
                           if nz.size else {})
    return out


def summarize(stats: dict) -> dict:
    """Size-weighted mean underflow/overflow per group (``weights``, ``act``, ``grad``, ``wgrad``)."""
    groups: dict = {}
    for name, s in stats.items():
        g = groups.setdefault(name.split(":")[0], {"size": 0, "underflow": 0.0, "overflow": 0.0})
        g["size"] += s["size"]
        g["underflow"] += s["underflow"] * s["size"]
        g["overflow"] += s["overflow"] * s["size"]
    return {k: {"underflow": v["underflow"] / max(v["size"], 1),
                "overflow": v["overflow"] / max(v["size"], 1)} for k, v in groups.items()}
