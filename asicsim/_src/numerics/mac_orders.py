"""How each MAC order adds the products, written once against an arithmetic object (``zeros``,
``product``, ``add``, ``to_acc``; float64 in :mod:`.exact64`, float32 in :mod:`.fast32`, the integer
ones here): ``sequential``, ``chunked`` (chunk:C and folded:R) and ``tree``. :mod:`.matmul` picks
the arithmetic and the order for a :class:`~asicsim._src.numerics.mac.MacSpec`."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .mac import MacSpec


class IntArith:
    """Exact integer MAC in int64: wrap (two's complement) or saturate after every addition."""

    dtype = jnp.int64

    def __init__(self, mac: MacSpec):
        self.acc, self.sat = mac.spec("acc"), mac.overflow == "saturate"

    def zeros(self, shape):
        return jnp.zeros(shape, self.dtype)

    def product(self, a, b):
        return a * b

    def add(self, x, y):
        return self.to_acc(x + y)

    def to_acc(self, s):
        lo, hi, bits = self.acc.kmin, self.acc.kmax, self.acc.bits
        if self.sat:
            return jnp.clip(s, lo, hi)
        if not self.acc.signed:
            return s & ((1 << bits) - 1)
        return ((s - lo) & ((1 << bits) - 1)) + lo


class Int32Arith(IntArith):
    """The same in int32 (twice the SIMD lanes) for signed accumulators of <= 32 bits: wrapping
    keeps the low bits exact; saturation is exact while |acc| + |product| < 2**31, or checked
    by the sign rule for a full 32-bit accumulator."""

    dtype = jnp.int32

    @staticmethod
    def fits(mac: MacSpec) -> bool:
        acc, a, b = mac.spec("acc"), mac.spec("a_fmt"), mac.spec("b_fmt")
        return acc.signed and acc.bits <= 32 and a.bits + b.bits <= 32

    def add(self, x, y):
        s = x + y  # wraps modulo 2**32
        bits = self.acc.bits
        if not self.sat:
            return s if bits == 32 else (s << (32 - bits)) >> (32 - bits)
        if bits == 32:
            over = ((x ^ s) & (y ^ s)) < 0
            return jnp.where(over, jnp.where(x < 0, np.int32(-(2**31)), np.int32(2**31 - 1)), s)
        return jnp.clip(s, self.acc.kmin, self.acc.kmax)

    def to_acc(self, s):
        return self.add(s, jnp.zeros_like(s))


def sequential(ar, at, bt, start, length: int, acc, unroll):
    """acc = add(acc, a[k] * b[k]) for k in [start, start + length): ``at`` (K, M), ``bt`` (K, N).

    ``acc=None`` starts from +0 (the first step is ``ar.start``, which keeps IEEE zero signs).

    Arithmetic whose ``add`` uses the accumulator once (``ar.chain`` > 1: float32 RNE into
    fp32) runs ``chain`` steps per loop iteration, which XLA fuses into one pass over ``acc``.
    """

    def body(k, acc):
        return ar.add(acc, ar.product(at[k][:, None], bt[k][None, :]))

    def steps(acc, begin, count: int):  # ``count`` steps in one fused pass
        a_blk = jax.lax.dynamic_slice_in_dim(at, begin, count)
        b_blk = jax.lax.dynamic_slice_in_dim(bt, begin, count)
        for j in range(count):
            p = ar.product(a_blk[j][:, None], b_blk[j][None, :])
            acc = ar.start(p) if acc is None else ar.add(acc, p)
        return acc

    if acc is None and not hasattr(ar, "start"):  # float64/integer adds get zeros right anyway
        acc = ar.zeros((at.shape[1], bt.shape[1]))
    u = getattr(ar, "chain", 1)
    if u > 1 and length >= u:
        if acc is None:
            acc, start, length = steps(None, start, u), start + u, length - u
        acc = jax.lax.fori_loop(0, length // u, lambda i, acc: steps(acc, start + i * u, u), acc)
        start, length = start + length // u * u, length % u
    if acc is None:
        acc, start, length = steps(None, start, 1), start + 1, length - 1
    if length <= 0:
        return acc
    return jax.lax.fori_loop(start, start + length, body, acc, unroll=max(1, min(unroll, length)))


def chunked(ar, at, bt, size, acc, unroll, pad_value):
    """Chunks of ``size`` summed from zero, each added into ``acc``. A short last chunk is
    padded with zero products that leave every sum bit-identical (-0, or +0 under rdn)."""
    m, n = at.shape[1], bt.shape[1]
    extra = -at.shape[0] % size
    if extra:
        at = jnp.concatenate([at, jnp.zeros((extra, m), at.dtype)], axis=0)
        bt = jnp.concatenate([bt, jnp.full((extra, n), pad_value, bt.dtype)], axis=0)

    def chunk(c, acc):
        part = sequential(ar, at, bt, c * size, size, None, unroll)
        if hasattr(ar, "start"):  # the first partial meets the +0 accumulator (see start)
            return jnp.where(c == 0, ar.start(part, on_grid=True), ar.add(acc, part))
        return ar.add(acc, part)

    return jax.lax.fori_loop(0, at.shape[0] // size, chunk, acc)


def tree(ar, at, bt):
    nodes = ar.product(at[:, :, None], bt[:, None, :])  # (K, M, N)
    if nodes.shape[0] == 1:  # a lone product is only rounded onto the accumulator
        return ar.to_acc(nodes[0])
    while nodes.shape[0] > 1:
        half = nodes.shape[0] // 2
        pairs = ar.add(nodes[0 : 2 * half : 2], nodes[1 : 2 * half : 2])
        if nodes.shape[0] % 2:  # the odd last element moves up unchanged
            pairs = jnp.concatenate([pairs, nodes[-1:]], axis=0)
        nodes = pairs
    return nodes[0]


TREE_BLOCK = 1 << 22  # products held at once by the tree order (float64 elements)


def tree_blocked(ar, at, bt):
    k, m, n = at.shape[0], at.shape[1], bt.shape[1]
    nb = max(1, min(n, TREE_BLOCK // max(1, k * m)))
    if nb >= n:
        return tree(ar, at, bt)
    blocks = -(-n // nb)
    bp = jnp.pad(bt, ((0, 0), (0, blocks * nb - n))).reshape(k, blocks, nb).transpose(1, 0, 2)
    out = jax.lax.map(lambda b: tree(ar, at, b), bp)  # (blocks, M, nb)
    return out.transpose(1, 0, 2).reshape(m, blocks * nb)[:, :n]
