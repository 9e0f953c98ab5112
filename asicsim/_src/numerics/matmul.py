"""``dot`` / ``matmul`` under a :class:`~asicsim._src.numerics.mac.MacSpec`: the fast JAX kernels.

Each order is written once against an arithmetic object (:mod:`.mac_orders`): float64
(:mod:`.exact64`, always exact), float32 (:mod:`.fast32`, taken at run time only where provably
exact), int64 or int32 for integer MACs. Everything runs under
``jax.enable_x64(True)`` inside the jitted function; callers keep their own x64 setting.
Results are float32 (int32 for integer MACs, uint32 for unsigned accumulators).

On an NVIDIA GPU the float32 path of the sequential and chunked orders runs as one Pallas kernel
instead (:mod:`.mac_kernel`: the same arithmetic, each kernel proven on the device against the
CPU's bits before use), and so does the tensor-core order (:mod:`.tc_kernel`); the XLA loops of
:mod:`.mac_orders` serve every other backend, and the GPU for every other order.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from ..._jax_compat import enable_x64
from . import fast32, kernel_probe, mac_kernel, tc_kernel
from .exact64 import Float64Arith, round64
from .mac import MacSpec, as_mac
from .mac_orders import Int32Arith as _Int32  # the name benchmarks import
from .mac_orders import IntArith, chunked, sequential, tree_blocked
from .quantize import quantize
from .rounding import f32_to_f64, f64_to_f32
from .tensorcore import tensorcore_accumulate


@functools.partial(jax.jit, static_argnames=("mac", "unroll", "kernel"))
def _matmul3d(a: jax.Array, b: jax.Array, mac: MacSpec, unroll: int = 1,
              kernel: bool = True, c: jax.Array | None = None) -> jax.Array:
    """(B, M, K) x (B, K, N) float32 operand values (already on their formats) -> (B, M, N),
    from the initial accumulator ``c`` (B, M, N) float32 (see :func:`_initial`) or +0.

    ``kernel=False`` keeps the XLA loops on a GPU too (benchmarks/gpu_emulate.py compares).
    A NaN result is the positive quiet NaN: the sign of the NaN an ``inf - inf`` makes is the
    host's (x86: negative; an NVIDIA GPU: positive), and the model leaves it unspecified."""
    out = _matmul3d_any_nan(a, b, mac, unroll, kernel, c)
    if mac.integer:
        return out
    return jnp.where(jnp.isnan(out), np.float32(np.nan), out)


def _matmul3d_any_nan(a, b, mac: MacSpec, unroll: int, kernel: bool, c=None) -> jax.Array:
    if mac.order_kind == "fast":
        if mac.integer:
            return jnp.matmul(a.astype(jnp.int32), b.astype(jnp.int32), preferred_element_type=jnp.int32)
        s = jnp.matmul(a, b, precision=jax.lax.Precision.HIGHEST, preferred_element_type=jnp.float32)
        s = s if c is None else s + c
        return fast32.round32(s, mac.spec("out"), mac.final_rounding, mac.saturate)

    def batched(ar, convert):
        if c is None:
            run = lambda x, y: _accumulate(ar, convert(x.T), convert(y), mac, unroll)  # noqa: E731
            return jax.vmap(run)(a, b)
        run = lambda x, y, z: _accumulate(ar, convert(x.T), convert(y), mac, unroll, z)  # noqa: E731
        return jax.vmap(run)(a, b, f32_to_f64(c))

    with enable_x64(True):
        if mac.integer:
            ar = _Int32(mac) if _Int32.fits(mac) else IntArith(mac)
            out_dtype = jnp.int32 if ar.acc.signed else jnp.uint32  # every value fits
            return batched(ar, lambda x: x.astype(ar.dtype)).astype(out_dtype)

        def run64():
            def xla(*_):
                return batched(Float64Arith(mac), f32_to_f64)

            if kernel and tc_kernel.applies(mac) and a.shape[2]:
                run = functools.partial(_tc_kernel_accumulate, mac=mac, c=c, xla=xla)
                acc = jax.lax.platform_dependent(a, b, cuda=run, default=xla)
            else:
                acc = xla()
            if mac.spec("out") != mac.spec("acc"):  # rounding onto the acc grid is a no-op
                acc = round64(acc, mac.spec("out"), mac.final_rounding, mac.saturate)
            return f64_to_f32(acc)

        def run32():
            def xla(a, b):
                return batched(fast32.F32Arith(mac), lambda x: x)

            if kernel and mac_kernel.kernel_orders(mac) and a.shape[2]:
                run = functools.partial(_kernel_accumulate, mac=mac, xla=xla)
                acc = jax.lax.platform_dependent(a, b, cuda=run, default=xla)
            else:
                acc = xla(a, b)
            if mac.spec("out") != mac.spec("acc"):
                acc = fast32.round32(acc, mac.spec("out"), mac.final_rounding, mac.saturate)
            return acc

        if fast32.eligible(mac) and c is None:  # same bits, faster, where provably exact (fast32.py)
            return jax.lax.cond(fast32.safe(a, b, mac), run32, run64)  # one check for the batch
        return run64()


def _kernel_accumulate(a, b, mac: MacSpec, xla):
    path = kernel_probe.proven_path(mac, jax.default_backend())
    if path == "xla":
        return xla(a, b)
    return mac_kernel.accumulate(a, b, mac, native=path == "native")


def _kernels_on(mac: MacSpec) -> bool:
    """Whether the environment lets ``mac`` run as a Pallas kernel on a GPU (read outside the
    jitted function: a static argument, so a change takes effect at the next call)."""
    return mac_kernel.enabled() and (mac.order_kind != "tensorcore" or tc_kernel.enabled())


def _tc_kernel_accumulate(a, b, mac: MacSpec, c, xla):
    if not tc_kernel.proven(mac, jax.default_backend()):
        return xla()
    return tc_kernel.accumulate(a, b, mac, c)


def _accumulate(ar, at, bt, mac: MacSpec, unroll: int, c=None):
    """The accumulation in ``mac``'s order, from ``c`` (float64 (M, N)) where given."""
    kind, m, n = mac.order_kind, at.shape[1], bt.shape[1]
    acc = ar.zeros((m, n)) if c is None else c
    if at.shape[0] == 0:  # an empty sum is +0 (or c)
        return acc
    if kind == "sequential":
        return sequential(ar, at, bt, 0, at.shape[0], c, unroll)
    if kind in ("folded", "chunk"):
        pad = 0 if mac.integer or mac.acc_rounding == "rdn" else -0.0
        return chunked(ar, at, bt, mac.order_size, acc, unroll, pad)
    if kind == "tree":
        root = tree_blocked(ar, at, bt)
        return root if c is None else ar.add(c, root)
    return tensorcore_accumulate(at, bt, mac, c)


def _operands(a, b, mac: MacSpec):
    """The operands rounded (rne) onto their formats, overflowing as ``mac.saturate`` says."""
    return (quantize(a, mac.spec("a_fmt"), "rne", saturate=mac.saturate),
            quantize(b, mac.spec("b_fmt"), "rne", saturate=mac.saturate))


def _initial(c, shape, mac: MacSpec):
    """The initial accumulator ``c`` broadcast to ``shape`` and taken as the MAC takes it: rounded
    (rne, saturating as ``mac.saturate`` says) onto ``out``, the format the hardware reads C in,
    then onto ``acc`` where that is narrower -- except by a tensor core, whose first block aligns
    c as it is (Hopper fp8 reads an fp32 C into its 13-bit-fraction accumulator)."""
    if c is None:
        return None
    if mac.integer:
        raise ValueError(f"c= needs a float accumulator; MacSpec acc={mac.acc!r} is an integer format")
    c = c if isinstance(c, jax.Array) else np.asarray(c)  # float64 stays float64 (one rounding)
    try:
        c = (jnp if isinstance(c, jax.Array) else np).broadcast_to(c, shape)
    except ValueError:
        raise ValueError(f"c= has shape {c.shape}; the result's shape is {shape}") from None
    c = quantize(c, mac.spec("out"), "rne", saturate=mac.saturate)
    if mac.order_kind != "tensorcore":
        c = quantize(c, mac.spec("acc"), "rne", saturate=mac.saturate)
    return c


def dot(a, b, mac: MacSpec | str = "a=fp32,acc=fp32", c=None) -> jax.Array:
    """``jnp.dot`` for 1-D and 2-D operands, computed as ``mac`` computes it; ``c + a . b`` where
    ``c`` (broadcastable to the result) is given: the WMMA/MMA operation ``D = A B + C``.

    Inputs are rounded (rne) onto the operand formats first (saturating where ``mac.saturate``
    says). Returns float32 (int32 for an
    integer MAC, uint32 for an unsigned accumulator): a scalar for vector . vector, (M,) for
    matrix . vector, and so on. ``order="fast"`` on integers is an int32 ``jnp.dot`` (wraps
    modulo 2**32 whatever the accumulator).
    """
    mac = as_mac(mac)
    qa, qb = _operands(a, b, mac)
    if qa.ndim not in (1, 2) or qb.ndim not in (1, 2):
        raise ValueError(f"dot takes 1-D or 2-D operands, got shapes {qa.shape} and {qb.shape}")
    a2 = qa[None, :] if qa.ndim == 1 else qa
    b2 = qb[:, None] if qb.ndim == 1 else qb
    if a2.shape[1] != b2.shape[0]:
        raise ValueError(f"dot: contracting dimensions differ: {qa.shape} and {qb.shape}")
    shape = (a2.shape[0], b2.shape[1])
    c2 = _initial(c, qa.shape[:-1] + qb.shape[1:], mac)
    if c2 is not None:
        c2 = c2.reshape(shape)[None]
    out = _matmul3d(a2[None], b2[None], mac, kernel=_kernels_on(mac), c=c2)[0]
    if qa.ndim == 1:
        out = out[0]
    if qb.ndim == 1:
        out = out[..., 0]
    return out


def matmul(a, b, mac: MacSpec | str = "a=fp32,acc=fp32", c=None) -> jax.Array:
    """``a @ b`` (``c + a @ b`` where ``c`` is given, broadcast to the result) for (..., M, K) x
    (..., K, N) with broadcast batch dims, computed by ``mac``."""
    mac = as_mac(mac)
    qa, qb = _operands(a, b, mac)
    if qa.ndim < 2 or qb.ndim < 2:
        return dot(a, b, mac, c)
    if qa.shape[-1] != qb.shape[-2]:
        raise ValueError(f"matmul: contracting dimensions differ: {qa.shape} and {qb.shape}")
    batch = jnp.broadcast_shapes(qa.shape[:-2], qb.shape[:-2])
    count = math.prod(batch)  # not reshape(-1, ...): an empty K, M or N leaves -1 undetermined
    qa = jnp.broadcast_to(qa, batch + qa.shape[-2:]).reshape((count, *qa.shape[-2:]))
    qb = jnp.broadcast_to(qb, batch + qb.shape[-2:]).reshape((count, *qb.shape[-2:]))
    shape = (*batch, qa.shape[-2], qb.shape[-1])
    c3 = _initial(c, shape, mac)
    if c3 is not None:
        c3 = c3.reshape((count, *shape[-2:]))
    out = _matmul3d(qa, qb, mac, kernel=_kernels_on(mac), c=c3)
    return out.reshape(batch + out.shape[-2:])
