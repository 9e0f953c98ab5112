"""Learned step sizes for integer quantization-aware training (LSQ).

Esser, McKinstry, Bablani, Appuswamy and Modha, "Learned Step Size Quantization", ICLR 2020
(arXiv:1902.08153). :func:`lsq_quantize` rounds one tensor with a step size that is itself a
trainable parameter, and :func:`lsq_init` gives the paper's initial step. A recipe role asks
for the same quantizer with ``scaling = "lsq"`` (``"lsq_channel"``: a step per output channel
of a weight), and :func:`asicsim.make_train_step` then keeps and trains a step per GEMM
operand (:mod:`asicsim._src.emulate.lsq_sites`, which calls these two functions). A model may also
call them itself, where it wants a quantizer, and keep the steps in its own parameters::

    s_w = lsq_init(w, "int4")                     # the paper's 2<|w|>/sqrt(Qp), Section 2.1
    y = x @ lsq_quantize(w, s_w, "int4")          # forward: on the int4 grid times s_w
    # jax.grad gives d/dw (straight through, Eq. 5) and d/ds_w (Eq. 3, scaled by g, Section 2.2)

The quantizer (Section 2, Eqs. 1-2): ``v_bar = round(clip(v / s, -Qn, Qp))``, ``v_hat = v_bar * s``
with, for a signed b-bit integer, ``Qn = 2**(b-1)`` and ``Qp = 2**(b-1) - 1``, for an unsigned
one ``Qn = 0`` and ``Qp = 2**b - 1`` (read from asicsim's integer format: ``Qn = -kmin``,
``Qp = kmax``; a symmetric integer format has ``Qn = Qp``). Here ``v / s`` is the
correctly rounded float32 quotient (:func:`asicsim._src.numerics.exact_div.divide`: XLA on GPU does
not round float32 division correctly), rounded half to even onto the integer grid by
:func:`asicsim.numerics.quantize`, and ``v_bar * s`` is one float32 product (correctly rounded
on every backend). Where the exact quotient lies within half a float32 ulp of a half-integer,
rounding its float32 value may pick the other neighbour than rounding the exact quotient would,
as float32 QAT code that divides and then rounds does too. A zero result is +0
(an integer code has no sign).

Gradients (Section 2.1, Eq. 3, and Section 2.3, Eq. 5), with ``r = v / s`` as above:

- ``d v_hat / d v = 1`` where ``-Qn < r < Qp``, else ``0`` (the straight-through estimator);
- ``d v_hat / d s = -r + round(r)`` where ``-Qn < r < Qp``, ``-Qn`` where ``r <= -Qn``, ``Qp``
  where ``r >= Qp`` (exactly on a clip bound the clip branch applies, as the paper's strict
  inequalities say: ``r = Qp`` gives ``d/dv = 0`` and ``d/ds = Qp``), summed over the elements
  that share a step and multiplied by the gradient scale ``g``.

The gradient scale (Section 2.2): ``g = 1/sqrt(N_W Qp)`` for a layer's weights, ``N_W`` the
number of weights in the layer, and ``g = 1/sqrt(N_F Qp)`` for its input activations, ``N_F`` the
number of features of the input -- of one example, not of the batch. The default is
``g = 1/sqrt(n Qp)`` with ``n`` the number of elements of ``x`` that share a step *within one
example*, and ``x``'s examples are named, never guessed, by ``batch_axes``:

- weights: ``batch_axes=()`` (the default): every element counts, ``n = N_W`` for one step per
  tensor, the number of weights of a channel for per-channel steps;
- activations: ``batch_axes=0`` for ``x`` of shape ``(batch, features...)`` (or ``(0, 1)`` for
  ``(batch, time, features)`` when each time step is an example): those axes are left out of the
  count, ``n = N_F`` for one step per tensor. A step may not vary along a batch axis.

Called on a batch of activations without ``batch_axes`` the default counts the batch as well
(``g`` too small by ``sqrt(batch)``): name the batch, or give ``grad_scale=`` to choose ``g``
yourself (giving both is an error).

A non-integer format (float, block, fixed point with fraction bits) or a step that is not
positive and finite is an error naming the value; under ``jax.jit`` or ``jax.grad`` the step's
value is not known when the function is traced, so an invalid step gives NaN outputs there.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from asicsim._src.numerics import get_format, quantize
from asicsim._src.numerics.exact_div import divide
from asicsim._src.numerics.float_order import order_key
from asicsim._src.numerics.formats import IntFormat

__all__ = ["lsq_init", "lsq_quantize"]


def _bounds(fmt, where: str) -> tuple[IntFormat, int, int]:
    """(format, Qn, Qp) of an integer format, or a clear error."""
    spec = get_format(fmt)
    if not isinstance(spec, IntFormat) or spec.frac_bits != 0:
        kind = "fixed-point" if isinstance(spec, IntFormat) else spec.kind
        raise ValueError(f"{where}: fmt={spec.name!r} is a {kind} format; LSQ needs an integer format "
                         "without fraction bits (int8, int4, uint8, uint4, ...)")
    if not spec.float32_exact:
        raise ValueError(f"{where}: fmt={spec.name!r} has {spec.bits} bits; LSQ's float32 carrier holds "
                         "integers of at most 24 magnitude bits")
    return spec, -spec.kmin, spec.kmax


def _check_step(step: jax.Array, x_shape: tuple[int, ...], where: str) -> None:
    """The step's shape broadcasts against x without growing it; a concrete step is positive."""
    try:
        ok = step.ndim <= len(x_shape) and jnp.broadcast_shapes(step.shape, x_shape) == tuple(x_shape)
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"{where}: step shape {step.shape} does not broadcast against x shape {tuple(x_shape)} "
                         "(allowed: a scalar, or one step per channel, e.g. (1, C) for x of shape (N, C))")
    if not isinstance(step, jax.core.Tracer):
        values = np.asarray(step, np.float64)
        bad = ~(np.isfinite(values) & (values > 0))
        if bad.any():
            raise ValueError(f"{where}: step={float(values[bad].flat[0])!r} (at {int(np.argmax(bad.ravel()))} of "
                             f"{values.size}); a step must be positive and finite")


def _batch_axes(batch_axes, x_shape: tuple[int, ...], step_shape: tuple[int, ...], where: str) -> tuple[int, ...]:
    """``batch_axes`` as nonnegative axes of ``x``, checked (integers in range, no repeats, the
    step does not vary along them), or a clear error."""
    axes = (batch_axes,) if isinstance(batch_axes, int) and not isinstance(batch_axes, bool) else batch_axes
    nd = len(x_shape)
    if not isinstance(axes, (tuple, list)) or not all(isinstance(a, int) and not isinstance(a, bool)
                                                      and -nd <= a < nd for a in axes):
        raise ValueError(f"{where}: batch_axes={batch_axes!r}; allowed: () for weights, or the integer axes of "
                         f"x (shape {tuple(x_shape)}, axes {-nd}..{nd - 1}) that index examples, e.g. 0")
    norm = tuple(a % nd for a in axes)
    if len(set(norm)) != len(norm):
        raise ValueError(f"{where}: batch_axes={batch_axes!r} names an axis twice")
    padded = (1,) * (nd - len(step_shape)) + tuple(step_shape)
    varying = [a for a in norm if padded[a] != 1]
    if varying:
        raise ValueError(f"{where}: step shape {tuple(step_shape)} varies along batch axis {varying[0]} of x shape "
                         f"{tuple(x_shape)}; allowed: a step shared by all examples (size 1 on batch axes)")
    return norm


def _per_step(x_shape: tuple[int, ...], step_shape: tuple[int, ...], batch: tuple[int, ...]) -> int:
    """Elements of one example that share one step: Section 2.2's ``N_W`` or ``N_F`` (at least 1)."""
    padded = (1,) * (len(x_shape) - len(step_shape)) + tuple(step_shape)
    return max(math.prod(n for i, n in enumerate(x_shape) if i not in batch and padded[i] == 1), 1)


def lsq_quantize(x, step, fmt="int8", *, batch_axes=(), grad_scale: float | None = None) -> jax.Array:
    """LSQ's quantizer ``round(clip(x / step, -Qn, Qp)) * step`` with its trainable step (see the module).

    Args:
      x: the tensor to quantize (taken as float32).
      step: the step size ``s``: a scalar, or an array that broadcasts against ``x`` without
        growing it (per-channel: shape ``(1, C)`` or ``(C,)`` for ``x`` of shape ``(N, C)``).
        Positive and finite.
      fmt: an integer format (``int8``, ``int4``, ``uint8``, ``uint4``, ``int2``...): its
        codes give ``-Qn`` and ``Qp`` (Section 2: signed ``Qn = 2**(b-1)``, unsigned ``Qn = 0``).
      batch_axes: the axes of ``x`` that index examples: ``()`` (default) for weights, e.g.
        ``0`` for activations of shape ``(batch, features)``; left out of the default ``g``'s count.
      grad_scale: ``g`` of Section 2.2, multiplying the step's gradient; default
        ``1/sqrt(n Qp)``, ``n`` the elements of one example of ``x`` per step (module docstring:
        ``N_W`` for weights, ``N_F`` for activations with their ``batch_axes``).

    Returns:
      float32 array of ``x``'s shape, every value an integer in ``[-Qn, Qp]`` times its step.
      Its derivative is Eq. 5's straight-through estimator for ``x`` and Eq. 3 times ``g`` for
      ``step``.

    >>> import jax.numpy as jnp
    >>> lsq_quantize(jnp.array([0.26, -1.0, 9.0]), 0.5, "int4").tolist()
    [0.5, -1.0, 3.5]
    >>> import jax
    >>> a = jnp.full((32, 10), 0.3)  # 32 examples of 10 features; r = 1.2: each d/ds = 1 - 1.2
    >>> ds = jax.grad(lambda s: lsq_quantize(a, s, "uint4", batch_axes=0).sum())(0.25)
    >>> round(float(ds), 4)  # 320 x (-0.2) x g, g = 1/sqrt(N_F Qp) = 1/sqrt(10 x 15)
    -5.2256
    """
    where = "lsq_quantize"
    spec, _, qp = _bounds(fmt, where)
    x = jnp.asarray(x, jnp.float32)
    step = jnp.asarray(step, jnp.float32)
    _check_step(step, x.shape, where)
    batch = _batch_axes(batch_axes, x.shape, step.shape, where)
    if grad_scale is None:
        grad_scale = 1.0 / math.sqrt(_per_step(x.shape, step.shape, batch) * qp)
    elif batch:
        raise ValueError(f"{where}: batch_axes={batch_axes!r} and grad_scale={grad_scale!r}: batch_axes only sets "
                         "the default grad_scale; give one of them")
    elif isinstance(grad_scale, bool) or not isinstance(grad_scale, (int, float)) \
            or not (math.isfinite(grad_scale) and grad_scale > 0):
        raise ValueError(f"{where}: grad_scale={grad_scale!r}; allowed: a positive finite number or None")
    return _lsq(x, step, spec, float(grad_scale))


@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3))
def _lsq(x, step, spec, grad_scale):
    return _forward(x, step, spec)[0]


def _forward(x, step, spec):
    qn, qp = -spec.kmin, spec.kmax
    step = jnp.broadcast_to(step, x.shape)  # checked by _check_step; explicit for rank promotion
    r = divide(x, step)
    k = quantize(jnp.clip(r, -qn, qp), spec)  # round half to even onto the integer codes
    q = k * step
    valid = jnp.isfinite(step) & (step > 0)  # a traced step cannot be checked in Python
    return jnp.where(valid & ~jnp.isnan(r), q, np.float32(np.nan)), (r, k)


def _fwd(x, step, spec, grad_scale):
    q, (r, k) = _forward(x, step, spec)
    return q, (r, k, step)


def _bwd(spec, grad_scale, res, g):
    r, k, step = res
    qn, qp = -spec.kmin, spec.kmax
    # compared on the bits: XLA:CPU reads a subnormal r as 0, which would put it on Qn = 0's bound
    key, lo, hi = order_key(r), order_key(np.float32(-qn)), order_key(np.float32(qp))
    below = (key <= lo) & ~jnp.isnan(r)
    inside = (key > lo) & (key < hi) & ~jnp.isnan(r)
    dx = jnp.where(inside, g, np.float32(0))
    # Eq. 3: k - r is exact (Sterbenz: k and r are within half of each other, or k = 0)
    dq_ds = jnp.where(inside, k - r, jnp.where(below, np.float32(-qn), np.float32(qp)))
    ds = _sum_to(g * dq_ds, step.shape) * np.float32(grad_scale)
    return dx, ds


_lsq.defvjp(_fwd, _bwd)


def _sum_to(a: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    """Sum ``a`` over the axes that broadcasting ``shape`` against it added or stretched."""
    lead = a.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape) if n == 1 and a.shape[lead + i] != 1)
    return jnp.sum(a, axis=axes, keepdims=True).reshape(shape) if axes else a.reshape(shape)




def lsq_init(x, fmt="int8", *, axis: int | tuple[int, ...] | None = None) -> jax.Array:
    """The paper's initial step ``2 * mean(|x|) / sqrt(Qp)`` (Section 2.1, end).

    Per tensor (``axis=None``: a float32 scalar) or per channel along ``axis`` (the mean over
    every other axis, kept as size-1 axes so the result broadcasts against ``x``; a tuple of
    axes: a channel per index of all of them, e.g. the heads and features of an attention
    projection's weight). Compute it on
    the initial weights, or on the first batch of activations, as the paper does. The mean is a
    float32 reduction: its last bit may differ between backends. A tensor (or channel) of zeros
    has no usable step: an error.

    >>> round(float(lsq_init([1.0, -3.0], "int4")), 4)  # 2 * 2 / sqrt(7)
    1.5119
    """
    where = "lsq_init"
    _, _, qp = _bounds(fmt, where)
    x = jnp.asarray(x, jnp.float32)
    if axis is None:
        mean = jnp.mean(jnp.abs(x))
    else:
        axes = axis if isinstance(axis, tuple) else (axis,)
        if not axes or not all(isinstance(a, int) and not isinstance(a, bool) and -x.ndim <= a < x.ndim
                               for a in axes) or len({a % x.ndim for a in axes}) != len(axes):
            raise ValueError(f"{where}: axis={axis!r}; allowed: None, an integer in {-x.ndim}..{x.ndim - 1} or "
                             "a tuple of distinct such integers")
        kept = {a % x.ndim for a in axes}
        others = tuple(i for i in range(x.ndim) if i not in kept)
        mean = jnp.mean(jnp.abs(x), axis=others, keepdims=True)
    step = mean * np.float32(2.0 / math.sqrt(qp))
    if not isinstance(step, jax.core.Tracer):
        bad = ~(np.isfinite(np.asarray(step)) & (np.asarray(step) > 0))
        if bad.any():
            raise ValueError(f"{where}: mean(|x|) gives step={float(np.asarray(step)[bad].flat[0])!r} (channel "
                             f"{int(np.argmax(bad.ravel()))}); x must have a nonzero finite value in every channel")
    return step
