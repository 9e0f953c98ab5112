"""The bit-exact ``sequential`` / ``folded:R`` / ``chunk:C`` orders as one Pallas (Triton) kernel.

On the XLA path (``matmul.py``) every step of the k loop reads and writes the whole (M, N)
accumulator in memory. Here each program owns a (BLOCK_M, BLOCK_N) tile of the accumulator in
registers and walks k itself: per step it loads one row of ``a.T`` and one row of ``b`` and
does the same rounded addition, so the loop costs arithmetic, not memory traffic.

Two arithmetics run inside the kernel:

* **portable**: :class:`~asicsim.numerics.fast32.F32Arith`, the very object the XLA float32
  path uses (TwoSum plus a rounding on the bits), so the kernel cannot drift from it. It holds
  under the same run-time check (``fast32.safe``); ``matmul.py`` keeps the float64 path for
  the rest.
* **native**: where the accumulator is IEEE binary16 or bfloat16 with round-to-nearest-even,
  the operands fit it exactly and the product is fused, the model's step
  ``acc = rne(acc + a * b)`` *is* the GPU's ``fma.rn.{f16,bf16}x2`` (PTX ISA: "computes
  a*b+c in infinite precision and then rounds"), one instruction for two MACs. It is used only
  after :func:`native_proven` has run it on the device against the portable kernel on inputs
  built to hit ties, cancellation and signed zeros; any difference falls back to the portable
  kernel with a warning.

``interpret=True`` runs the kernel through Pallas' interpreter (any backend: how the tests check
it on a CPU). There the native FMA is replaced by the portable arithmetic, which tests the
kernel's structure (start from +0, chunk partials, the short last chunk) but not the hardware.
"""

from __future__ import annotations

import concurrent.futures
import functools
import warnings

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plt

from .._jax_compat import enable_x64
from . import fast32
from .catalog import get_format
from .mac import MacSpec

BLOCK_M = BLOCK_N = 64
MIN_BLOCK = 16  # small products are padded: every thread then holds whole packed pairs
NUM_WARPS = 4
UNROLL = 4  # k steps per loop pass: their loads issue together

_NATIVE = {  # accumulator format -> (jnp dtype, PTX instruction on two packed values)
    "bfloat16": (jnp.bfloat16, "fma.rn.bf16x2"),
    "float16": (jnp.float16, "fma.rn.f16x2"),
}


def kernel_orders(mac: MacSpec) -> bool:
    """Whether the kernel computes ``mac`` (under ``fast32.safe`` on the operands)."""
    return mac.order_kind in ("sequential", "folded", "chunk") and fast32.eligible(mac)


def native_format(mac: MacSpec) -> str | None:
    """The accumulator's name when the GPU's packed FMA is exactly the model's step, else None."""
    acc = mac.spec("acc")
    if acc.name not in _NATIVE or not mac.fused or mac.acc_rounding != "rne":
        return None
    if mac.saturate or (mac.saturate is None and acc.saturate):
        return None
    if get_format(acc.name) != acc:  # a user format that only borrows the name
        return None
    fits = all(_fits(mac.spec(k), acc) for k in ("a_fmt", "b_fmt"))
    return acc.name if fits else None


def _fits(fmt, acc) -> bool:
    """Every finite value of ``fmt`` is a value of ``acc`` (both binary floats)."""
    return (fmt.kind == "float" and fmt.man_bits <= acc.man_bits and fmt.max <= acc.max
            and fmt.smallest_subnormal >= acc.smallest_subnormal and acc.subnormals)


# --- the kernel ---------------------------------------------------------------------------------


class _Native:
    """``acc = rne(acc + a*b)`` as the GPU's packed FMA on 16-bit values."""

    def __init__(self, name: str):
        self.dtype, self.op = _NATIVE[name]

    def fma(self, acc, a, b):
        a, b = jnp.broadcast_to(a, acc.shape), jnp.broadcast_to(b, acc.shape)
        (out,) = plt.elementwise_inline_asm(
            f"{self.op} $0, $1, $2, $3;", args=[a, b, acc], constraints="=r,r,r,r", pack=2,
            result_shape_dtypes=[jax.ShapeDtypeStruct(acc.shape, self.dtype)])
        return out

    def add(self, acc, part):  # part * 1 is exact: one rounding of the sum
        return self.fma(acc, part, jnp.ones_like(part))

    def first(self, part):  # +0 + part (a partial that underflowed to -0 becomes +0)
        return self.add(jnp.zeros_like(part), part)


class _Portable:
    """The float32 arithmetic of ``fast32.F32Arith`` behind the same ``fma`` interface."""

    dtype = jnp.float32

    def __init__(self, mac: MacSpec):
        self.ar = fast32.F32Arith(mac)

    def fma(self, acc, a, b):
        p = self.ar.product(a.astype(jnp.float32), b.astype(jnp.float32))
        if acc is None:  # the first step from +0 (see F32Arith.start)
            return self.ar.start(p)
        return self.ar.add(acc, p)

    def add(self, acc, part):  # a chunk's partial is on the grid already: no product rounding
        return self.ar.add(acc, part)

    def first(self, part):
        return self.ar.start(part, on_grid=True)


def _kernel(at_ref, bt_ref, o_ref, *, ar, k: int, size: int | None, native: bool):
    """One (BLOCK_M, BLOCK_N) tile: ``at_ref`` (K, BLOCK_M), ``bt_ref`` (K, BLOCK_N)."""
    shape = o_ref.shape

    def steps(acc, begin, count: int):  # ``count`` consecutive k's, loads first
        rows = [(at_ref[begin + j, :][:, None], bt_ref[begin + j, :][None, :]) for j in range(count)]
        for a, b in rows:
            acc = ar.fma(acc, a, b)
        return acc

    def run(acc, begin, length: int):
        """Sequential over k in [begin, begin + length); ``acc=None`` starts from +0."""
        if acc is None:
            if native:
                acc = jnp.zeros(shape, ar.dtype)  # the packed FMA gets +0 + a*b right itself
            else:
                acc, begin, length = steps(None, begin, 1), begin + 1, length - 1
        u = min(UNROLL, length)
        if u > 0 and length // u:
            acc = jax.lax.fori_loop(0, length // u, lambda i, acc: steps(acc, begin + i * u, u), acc)
        tail = length % u if u > 0 else 0
        return steps(acc, begin + length - tail, tail) if tail else acc

    if size is None:
        acc = run(None, 0, k)
    else:  # each chunk summed from +0, then added into the accumulator (which starts at +0)
        full, tail = divmod(k, size)
        acc = ar.first(run(None, 0, size if full else tail))
        acc = jax.lax.fori_loop(1, full, lambda c, acc: ar.add(acc, run(None, c * size, size)), acc)
        if full and tail:  # a short last chunk: matmul.py pads it with zero products, a no-op
            acc = ar.add(acc, run(None, k - tail, tail))
    o_ref[...] = acc.astype(jnp.float32)


def accumulate(a: jax.Array, b: jax.Array, mac: MacSpec, *, native: bool = False,
               interpret: bool = False) -> jax.Array:
    """(B, M, K) x (B, K, N) float32 operands on their grids -> (B, M, N) float32 accumulator.

    The caller has checked ``kernel_orders(mac)`` and ``fast32.safe(a, b, mac)``; ``native``
    needs ``native_format(mac)``. K >= 1.
    """
    batch, m, k = a.shape
    n = b.shape[2]
    bm, bn = (min(block, max(MIN_BLOCK, _pow2(x))) for block, x in ((BLOCK_M, m), (BLOCK_N, n)))
    mp, np_ = -(-m // bm) * bm, -(-n // bn) * bn
    at = jnp.pad(jnp.swapaxes(a, 1, 2), ((0, 0), (0, 0), (0, mp - m)))
    bt = jnp.pad(b, ((0, 0), (0, 0), (0, np_ - n)))
    size = mac.order_size if mac.order_kind in ("folded", "chunk") else None
    if native:
        ar = _Native(native_format(mac))
        at, bt = at.astype(ar.dtype), bt.astype(ar.dtype)  # exact: the operands fit (``_fits``)
        if interpret:  # the interpreter cannot run PTX: the portable arithmetic stands in
            ar = _Portable(mac)
            at, bt = at.astype(jnp.float32), bt.astype(jnp.float32)
            native = False
    else:
        ar = _Portable(mac)
    body = functools.partial(_kernel, ar=ar, k=k, size=size, native=native)
    with enable_x64(False):  # 32-bit indices and loop counters inside the kernel
        out = pl.pallas_call(
            body,
            out_shape=jax.ShapeDtypeStruct((batch, mp, np_), jnp.float32),
            grid=(batch, mp // bm, np_ // bn),
            in_specs=[pl.BlockSpec((None, k, bm), lambda z, i, j: (z, 0, i)),
                      pl.BlockSpec((None, k, bn), lambda z, i, j: (z, 0, j))],
            out_specs=pl.BlockSpec((None, bm, bn), lambda z, i, j: (z, i, j)),
            compiler_params=plt.CompilerParams(num_warps=NUM_WARPS, num_stages=1),
            interpret=interpret,
        )(at, bt)
    return out[:, :m, :n]


def _pow2(x: int) -> int:
    return 1 << max(0, (x - 1).bit_length())


# --- the native FMA, proven on the device before use ------------------------------------------


@functools.cache
def native_proven(name: str, platform: str) -> bool:
    """Whether the packed FMA for accumulator ``name`` matches the portable kernel bit for bit
    on this process's ``platform`` device; run once per (format, platform), eagerly."""
    if platform != "gpu":
        return False
    mac = MacSpec(a_fmt=name, acc=name, order="chunk:3")

    def run():
        a, b = probe_operands(name)
        got, want = accumulate(a, b, mac, native=True), accumulate(a, b, mac)
        return bool(jnp.all(jax.lax.bitcast_convert_type(got, jnp.uint32)
                            == jax.lax.bitcast_convert_type(want, jnp.uint32)))

    # Asked while a caller is being traced: JAX's trace state is per thread, so a fresh thread
    # runs the probe eagerly on the device.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        same = pool.submit(run).result()
    if not same:
        warnings.warn(f"the GPU's packed {name} FMA does not match the model on the probe "
                      "inputs; the portable kernel is used instead", RuntimeWarning, stacklevel=2)
    return same


def probe_operands(name: str, m: int = 64, k: int = 67, n: int = 64):
    """(1, m, k) x (1, k, n) values of format ``name`` whose sums round at ties, cancel to
    signed zeros and cross binades; inside ``fast32.safe``."""
    rng = np.random.default_rng(20)
    fmt = get_format(name)
    a = rng.standard_normal((m, k)) * 2.0 ** rng.integers(-4, 4, (m, k))
    b = rng.standard_normal((k, n)) * 2.0 ** rng.integers(-4, 4, (k, n))
    a[:, 1] = a[:, 0]
    b[1] = -b[0]  # cancellation to exact zeros
    a[0] = -0.0  # a row of signed-zero products
    a[1, :] = 1.0
    b[:, 1] = 2.0 ** -(fmt.man_bits + 1)  # acc + half an ulp: ties at every step
    grid = getattr(ml_dtypes, name) if name == "bfloat16" else np.float16
    a, b = (x.astype(np.float32).astype(grid).astype(np.float32) for x in (a, b))  # onto the grid
    return a[None], b[None]
