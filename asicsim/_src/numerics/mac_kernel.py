"""The bit-exact ``sequential`` / ``folded:R`` / ``chunk:C`` orders as one Pallas (Triton) kernel.

On the XLA path (``matmul.py``) every step of the k loop reads and writes the whole (M, N)
accumulator in memory. Here each program owns a tile of the accumulator in registers and walks k
itself: per step it loads one row of ``a.T`` and one row of ``b`` and does the same rounded
addition, so the loop costs arithmetic, not memory traffic.

Two arithmetics run inside the kernel:

* **portable**: :class:`~asicsim._src.numerics.fast32.F32Arith`, the very object the XLA float32
  path uses (TwoSum plus a rounding on the bits), so the kernel cannot drift from it. It holds
  under the same run-time check (``fast32.safe``); ``matmul.py`` keeps the float64 path for
  the rest.
* **native**: where the accumulator is IEEE binary16 or bfloat16 with round-to-nearest-even,
  the operands fit it exactly and the product is fused, the model's step
  ``acc = rne(acc + a * b)`` *is* the GPU's ``fma.rn.{f16,bf16}x2`` (PTX ISA: "computes
  a*b+c in infinite precision and then rounds"), one instruction for two MACs.

Neither has run on a GPU in this project's tests, so :func:`.kernel_probe.proven_path` runs each
on the device, once per MAC, on inputs built to hit ties, cancellation and signed zeros, against
the CPU's bits; a kernel that differs is skipped with a warning (native, then portable, then the
XLA loops).

``interpret=True`` runs the kernel through Pallas' interpreter (any backend: how the tests check
it on a CPU). There the packed kernel runs with each half's FMA done by the portable arithmetic,
which checks the packing and the kernel's structure (the +0 start, chunk partials, the short
last chunk) but not the hardware.
"""

from __future__ import annotations

import functools
import os

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plt

from ..._jax_compat import enable_x64
from . import fast32
from .catalog import get_format
from .formats import values_fit
from .mac import MacSpec

# A tile is TILE_ROWS x TILE_WORDS accumulator words (a word: one float32, or two packed 16-bit
# values). Triton's default layout spreads a warp's 32 threads along the words and the warps along
# the rows, so each thread owns 8 rows x 4 words: per k step it loads 8 values of a and 4 of b
# for 32 words of MACs (cuobjdump of the sm_90 build: see benchmarks/RESULTS.md).
TILE_ROWS, TILE_WORDS = 32, 128
MIN_TILE = 16  # small products are padded up to it
NUM_WARPS = 4
UNROLL = 4  # k steps per loop pass: their loads issue together

_NATIVE = {  # accumulator format -> (its dtype, the PTX instruction on two packed values)
    "bfloat16": (ml_dtypes.bfloat16, "fma.rn.bf16x2"),
    "float16": (np.float16, "fma.rn.f16x2"),
}


def enabled() -> bool:
    """False when the environment sets ``ASICSIM_MAC_KERNEL=0``: the XLA loops then run on a GPU
    too (the same bits, slower), a way around a GPU stack whose Triton refuses the kernel."""
    return os.environ.get("ASICSIM_MAC_KERNEL", "1") != "0"


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
    fits = all(values_fit(mac.spec(k), acc) for k in ("a_fmt", "b_fmt"))
    return acc.name if fits else None


# --- the kernel ---------------------------------------------------------------------------------


class _Portable:
    """The float32 arithmetic of ``fast32.F32Arith`` on float32 tiles."""

    dtype = jnp.float32
    pack = 1  # accumulator elements per tile element

    def __init__(self, mac: MacSpec):
        self.ar = fast32.F32Arith(mac)

    def operands(self, at, bt):
        return at, bt

    def result(self, out):
        return out

    def fma(self, acc, a, b):
        p = self.ar.product(a, b)
        if acc is None:  # the first step from +0 (see F32Arith.start)
            return self.ar.start(p)
        return self.ar.add(acc, p)

    def add(self, acc, part):  # a chunk's partial is on the grid already: no product rounding
        return self.ar.add(acc, part)

    def first(self, part):
        return self.ar.start(part, on_grid=True)


class _Native:
    """``acc = rne(acc + a*b)`` as the GPU's packed FMA: every 32-bit word of a tile holds two
    accumulators (columns 2j and 2j + 1, low half first), b's row comes as the matching pairs
    and a's column as each value twice, so one instruction does two MACs with no repacking.
    The words are int32: Triton's inline assembly takes signless integers only."""

    dtype = jnp.int32
    pack = 2

    def __init__(self, name: str):
        self.half, self.op = _NATIVE[name]
        self.one = np.int32(int(np.array(1.0, self.half).view(np.uint16)) * 0x10001)

    def _bits(self, x):  # float32 values of the half format -> their 16-bit codes, as int32
        return jax.lax.bitcast_convert_type(x.astype(self.half), jnp.uint16).astype(jnp.int32)

    def operands(self, at, bt):  # exact: the operands fit the format (``values_fit``)
        a = self._bits(at)
        b = self._bits(bt)
        return a | (a << 16), b[..., 0::2] | (b[..., 1::2] << 16)

    def _value(self, code):  # 16-bit codes (in an int32) -> their float32 values
        return jax.lax.bitcast_convert_type(code.astype(jnp.uint16), self.half).astype(jnp.float32)

    def result(self, out):
        values = jnp.stack([self._value(out & 0xFFFF), self._value((out >> 16) & 0xFFFF)], axis=-1)
        return values.reshape(*out.shape[:-1], 2 * out.shape[-1])

    def fma(self, acc, a, b):
        a, b = jnp.broadcast_to(a, acc.shape), jnp.broadcast_to(b, acc.shape)
        (out,) = plt.elementwise_inline_asm(
            f"{self.op} $0, $1, $2, $3;", args=[a, b, acc], constraints="=r,r,r,r", pack=1,
            result_shape_dtypes=[jax.ShapeDtypeStruct(acc.shape, jnp.int32)])
        return out

    def add(self, acc, part):  # part * 1 is exact: one rounding of the sum
        return self.fma(acc, part, jnp.full(part.shape, self.one))

    def first(self, part):  # +0 + part (a partial that underflowed to -0 becomes +0)
        return self.add(jnp.zeros_like(part), part)


class _NativeInterpreted(_Native):
    """The packed kernel with the FMA done by the portable arithmetic on each half: what the
    interpreter runs in place of the PTX (it checks the packing and the kernel's structure)."""

    def __init__(self, name: str):
        super().__init__(name)
        self.ar = fast32.F32Arith(MacSpec(a_fmt=name, acc=name))

    def fma(self, acc, a, b):
        a, b = jnp.broadcast_to(a, acc.shape), jnp.broadcast_to(b, acc.shape)
        halves = []
        for shift in (0, 16):
            x, y, z = (self._value((v >> shift) & 0xFFFF) for v in (acc, a, b))
            p = self.ar.product(y, z)
            # IEEE: +-0 + +-0 is -0 only if both are; XLA would fold a known +0 + p to p
            zero = jnp.where(jnp.signbit(x) & jnp.signbit(p), np.float32(-0.0), np.float32(0.0))
            r = jnp.where((x == 0) & (p == 0), zero, self.ar.add(x, p))
            halves.append(self._bits(r) << shift)
        return halves[0] | halves[1]


def _kernel(at_ref, bt_ref, o_ref, *, ar, k: int, size: int | None):
    """One output tile: ``at_ref`` (K, rows), ``bt_ref`` (K, words)."""
    shape = o_ref.shape

    def steps(acc, begin, count: int):  # ``count`` consecutive k's, loads first
        rows = [(at_ref[begin + j, :][:, None], bt_ref[begin + j, :][None, :]) for j in range(count)]
        for a, b in rows:
            acc = ar.fma(acc, a, b)
        return acc

    def run(acc, begin, length: int):
        """Sequential over k in [begin, begin + length); ``acc=None`` starts from +0."""
        if acc is None:
            if ar.pack == 2:
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
    o_ref[...] = acc


def accumulate(a: jax.Array, b: jax.Array, mac: MacSpec, *, native: bool = False,
               interpret: bool = False) -> jax.Array:
    """(B, M, K) x (B, K, N) float32 operands on their grids -> (B, M, N) float32 accumulator.

    The caller has checked ``kernel_orders(mac)`` and ``fast32.safe(a, b, mac)``; ``native``
    needs ``native_format(mac)``. K >= 1.
    """
    batch, m, k = a.shape
    n = b.shape[2]
    if not native:
        ar = _Portable(mac)
    else:  # the interpreter cannot run PTX
        ar = (_NativeInterpreted if interpret else _Native)(native_format(mac))
    bm = min(TILE_ROWS, max(MIN_TILE, _pow2(m)))
    tn = min(TILE_WORDS, max(MIN_TILE, _pow2(-(-n // ar.pack))))  # tile words
    bn = tn * ar.pack
    mp, np_ = -(-m // bm) * bm, -(-n // bn) * bn
    at = jnp.pad(jnp.swapaxes(a, 1, 2), ((0, 0), (0, 0), (0, mp - m)))
    bt = jnp.pad(b, ((0, 0), (0, 0), (0, np_ - n)))
    size = mac.order_size if mac.order_kind in ("folded", "chunk") else None
    at, bt = ar.operands(at, bt)
    with enable_x64(False):  # 32-bit indices and loop counters inside the kernel
        out = pl.pallas_call(
            functools.partial(_kernel, ar=ar, k=k, size=size),
            out_shape=jax.ShapeDtypeStruct((batch, mp, np_ // ar.pack), ar.dtype),
            grid=(batch, mp // bm, np_ // bn),
            in_specs=[pl.BlockSpec((None, k, bm), lambda z, i, j: (z, 0, i)),
                      pl.BlockSpec((None, k, tn), lambda z, i, j: (z, 0, j))],
            out_specs=pl.BlockSpec((None, bm, tn), lambda z, i, j: (z, i, j)),
            compiler_params=plt.CompilerParams(num_warps=NUM_WARPS, num_stages=1),
            interpret=interpret,
        )(at, bt)
    return ar.result(out)[:, :m, :n]


def _pow2(x: int) -> int:
    return 1 << max(0, (x - 1).bit_length())
