"""GEMMs under the ``fast`` MAC order on narrow inputs where that is exact (issue 20 item 14).

An emulated GEMM's operands are already rounded onto their role's grid. Where every value of
both grids is also a bfloat16 (or float16) value, casting the operands to it loses nothing, so a
GPU's tensor cores can multiply them (products exact, accumulation in float32) instead of a
float32 GEMM at ``Precision.HIGHEST``: a few times the speed. Which grids fit (:func:`grid_dtypes`):

- a plain float format (unscaled) whose significand, largest value and smallest subnormal all
  fit the narrow type: bf16, fp8 E4M3/E5M2, fp6, fp4 fit bfloat16 (and float16, except bf16);
  fp16 fits float16;
- an OCP MX format (power-of-two block scales) whose element has at most 8 significant bits:
  every value is an element times 2**X, so it has those bits too and is a bfloat16 value unless
  it lies below bfloat16's normal range; that is checked on the data (a block of amax below
  about 2**-118), and such a GEMM runs in float32.

Anything else (fp32-scaled int8, fp32 roles) keeps the float32 GEMM. On the CPU the float32 GEMM
runs whatever the grid (XLA:CPU gains nothing from narrow inputs, and the tests' bits stay those
of the float32 path). This is the ``fast`` order only: its accumulation order is the hardware's
(tensor cores accumulate with their own alignment: Fasi et al. 2021); bit-exact MAC orders keep
their exact paths.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax

from asicsim._src.emulate.policy import RoleSpec
from asicsim._src.numerics import get_format
from asicsim._src.numerics.formats import values_fit

_NARROW = (("bfloat16", jnp.bfloat16), ("float16", jnp.float16))  # best first
_DTYPE = dict(_NARROW)


def grid_dtypes(spec: RoleSpec | None) -> tuple[tuple[str, bool], ...]:
    """The narrow dtypes (name, exact for every value without a check on the data) that hold
    every value rounding by ``spec`` gives, best first; () where none does."""
    if spec is None or spec.is_identity or spec.scaling != "none":
        return ()
    fmt = spec.spec
    if fmt.kind == "float":
        return tuple((name, True) for name, _ in _NARROW if values_fit(fmt, get_format(name)))
    if fmt.kind == "block" and getattr(fmt.element, "kind", None) == "float" and fmt.element.man_bits + 1 <= 8:
        return (("bfloat16", False),)
    return ()


def narrow_dtype(specs) -> tuple[str, bool] | None:
    """(dtype name, exact without a check) for a GEMM whose operands are rounded by ``specs``."""
    fits = [dict(grid_dtypes(s)) for s in specs]
    for name, _ in _NARROW:
        if all(name in f for f in fits):
            return name, all(f[name] for f in fits)
    return None


def _float32(a, b, dn):
    return lax.dot_general(a, b, dn, precision=lax.Precision.HIGHEST, preferred_element_type=jnp.float32)


def _in_range(x) -> jnp.ndarray:
    """Every value 0 or at least bfloat16's smallest normal (then 8 bits make it a bf16 value)."""
    mag = lax.bitcast_convert_type(x, jnp.uint32) & np.uint32(0x7FFFFFFF)  # bits: no flushing
    return jnp.all((mag == 0) | (mag >= np.uint32(0x00800000)))


def narrow_dot(a, b, dn, specs):
    """The GEMM on narrow inputs (tensor cores), or in float32 where the grids or the data do not
    allow it exactly: the non-CPU branch of :func:`fast_dot`."""
    picked = narrow_dtype(specs)
    if picked is None:
        return _float32(a, b, dn)
    name, exact = picked
    dt = _DTYPE[name]

    def narrow(a, b):
        return lax.dot_general(a.astype(dt), b.astype(dt), dn, preferred_element_type=jnp.float32)

    if exact:
        return narrow(a, b)
    return lax.cond(_in_range(a) & _in_range(b), narrow, lambda a, b: _float32(a, b, dn), a, b)


def fast_dot(a, b, dn, specs=(None, None)):
    """A ``fast``-order GEMM on rounded float32 operands: float32 on the CPU, :func:`narrow_dot`
    on any other platform."""
    a, b = a.astype(jnp.float32), b.astype(jnp.float32)
    if narrow_dtype(specs) is None:
        return _float32(a, b, dn)
    return lax.platform_dependent(a, b, cpu=lambda a, b: _float32(a, b, dn),
                                  default=lambda a, b: narrow_dot(a, b, dn, specs))
