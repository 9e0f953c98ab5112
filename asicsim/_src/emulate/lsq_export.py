"""A model trained with learned step sizes (LSQ, :mod:`.lsq_sites`) exported as integer codes and
its learned weight steps as fp32 scales (issue 34 item 6 for LSQ recipes): a weight's codes are
``round(clip(w / step, -Qn, Qp))`` (:func:`asicsim._src.emulate.lsq.lsq_quantize`'s, round half to
even) and ``code x step``, one float32 product, is bit for bit the weight the emulated GEMM uses.

The steps are training state (``TrainState.lsq[0]``, one per LSQ operand in GEMM order), not in
the recipe: :func:`lsq_weight_steps` names each weight operand's step by its weight path, and
``export_codes(params, recipe, lsq_steps=that)`` exports every LSQ weight with it::

    steps = lsq_weight_steps(loss_fn, "int8_lsq", state.lsq[0], state.params, batch)
    codes = export_codes(state.params, "int8_lsq", lsq_steps=steps)

A step per tensor is a (1, 1) scale grid, a step per output channel (``lsq_channel``) an (N, 1)
grid over the canonical (N, K) matrix. A step per stacked layer (a weight read inside a scan over
stacked layers) is refused, as is a weight that two GEMMs read with different steps.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from asicsim._src.emulate.codes_layout import canonical, element_name, from_canonical, to_codes
from asicsim._src.emulate.lsq import lsq_quantize
from asicsim._src.emulate.policy import RoleSpec
from asicsim._src.emulate.transform import observe_lsq
from asicsim._src.numerics import get_format
from asicsim._src.numerics.exact_div import divide
from asicsim._src.numerics.quantize import quantize


@functools.partial(jax.jit, static_argnums=2)
def _codes(c, s, fmt):
    """lsq_quantize's integer codes: round half to even of clip(c / s, -Qn, Qp)."""
    return quantize(jnp.clip(divide(c, s), fmt.kmin, fmt.kmax), fmt)


@functools.partial(jax.jit, static_argnums=2)
def _lsq(x, step, fmt: str):
    return lsq_quantize(x, step, fmt)


def lsq_weight_steps(fn, policy, steps, *args, weights: int | None = 0, **kwargs) -> dict:
    """``{weight path: step}`` of ``fn``'s LSQ weight operands (``steps``: ``TrainState.lsq[0]``;
    ``args``: a call of ``fn``, e.g. ``(params, batch)``, whose GEMMs number the steps)."""
    seen: dict = {}

    def names(steps, args, kwargs):  # jitted: an eager emulated call runs op by op
        seen["labels"], sums = observe_lsq(fn, policy, steps, *args, weights=weights, **kwargs)
        return sums

    jax.jit(names)(list(steps), args, kwargs)
    labels = seen["labels"]
    out: dict = {}
    for (role, path), step in zip(labels, steps, strict=True):
        if role != "weight":
            continue
        step = np.asarray(step, np.float32)
        if path in out and not np.array_equal(out[path], step):
            raise ValueError(f"lsq_weight_steps: weight {path!r} is read by two GEMMs with different learned steps; "
                             "it has no one set of codes")
        out[path] = step
    return out


def lsq_parts(x, spec: RoleSpec, axes, step, what: str = "tensor") -> tuple:
    """``x`` as LSQ's integer codes with its learned ``step``: ``(codes, scale grid, tile,
    element name, the LSQ-rounded weight)``; :func:`asicsim._src.emulate.export.export_codes`
    makes them a ``WeightCodes`` and checks that it dequantizes to that weight bit for bit."""
    x = jnp.asarray(x)
    step = np.asarray(step, np.float32)
    per_channel = step.ndim > 0 and step.size > 1
    want_shape = tuple(1 if i in axes else n for i, n in enumerate(x.shape))
    if step.ndim > x.ndim or (per_channel and step.shape != want_shape):
        raise ValueError(f"export: {what}: learned step of shape {step.shape} for a weight of shape {tuple(x.shape)} "
                         f"contracted along {tuple(axes)}; allowed: one step, or one per output channel {want_shape} "
                         "(a step per stacked layer: export each layer's weight slice with its step)")
    fmt = get_format(spec.format)
    c = canonical(x.astype(jnp.float32), axes)
    s = jnp.asarray(canonical(jnp.broadcast_to(step.reshape(want_shape if per_channel else ()), x.shape), axes))
    k = _codes(c, s, fmt)
    n = int(c.shape[0])
    grid = step.reshape(n, 1) if per_channel else step.reshape(1, 1)
    tile = (1, int(c.shape[1])) if per_channel else (max(n, 1), int(c.shape[1]))
    codes = np.asarray(from_canonical(jnp.asarray(to_codes(np.asarray(k), fmt)), x.shape, axes))
    return codes, grid, tile, element_name(fmt), _lsq(x, jnp.asarray(step), spec.format).astype(x.dtype)
