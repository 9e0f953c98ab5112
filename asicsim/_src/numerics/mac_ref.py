"""Scalar reference of the MAC model: Python floats/Fractions, following each order literally.

Slow and plain on purpose: every exact order of :mod:`.matmul` and :mod:`.tensorcore` is tested
bit for bit against :func:`dot_ref`. Values are held as Python floats; each is a value of some
format (or an exact product of two, which float64 holds exactly), and every sum is formed as an
exact ``Fraction`` and rounded once with :func:`.scalar.round_float` / integer wrap or clamp.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from .mac import MacSpec, as_mac
from .scalar import round_float, round_int
from .tc_ref import block_ref, tensorcore_ref


def _neg(x: float) -> bool:
    return math.copysign(1.0, x) < 0


class _FloatRef:
    def __init__(self, mac: MacSpec):
        self.mac, self.acc, self.prod = mac, mac.spec("acc"), mac.spec("product")

    def quantize(self, x: float, fmt) -> float:
        if fmt.kind == "int":
            return round_int(x, fmt, "rne", saturate=self.mac.saturate)
        return round_float(x, fmt, "rne", saturate=self.mac.saturate)

    def product(self, a: float, b: float) -> float:
        p = a * b  # exact: two values of <= 24 significant bits, far from float64 under/overflow
        if self.prod is not None:
            p = round_float(p, self.prod, self.mac.product_rnd, saturate=self.mac.saturate)
        return p

    def round(self, x, fmt=None, rounding=None) -> float:
        fmt = fmt or self.acc
        return round_float(x, fmt, rounding or self.mac.acc_rounding, saturate=self.mac.saturate)

    def add(self, x: float, y: float) -> float:
        if not (math.isfinite(x) and math.isfinite(y)):
            return self.round(x + y)
        s = Fraction(x) + Fraction(y)
        if s == 0:  # IEEE 754 6.3: +0 unless both are -0, or the mode is toward -inf
            neg = (_neg(x) and _neg(y)) or (self.mac.acc_rounding == "rdn" and (_neg(x) or _neg(y)))
            return self.round(-0.0 if neg else 0.0)
        return self.round(s)

    def to_acc(self, p: float) -> float:
        return self.round(p)

    def zero(self) -> float:
        return 0.0

    def finish(self, acc: float) -> float:
        return self.round(acc, self.mac.spec("out"), self.mac.final_rounding)


class _IntRef(_FloatRef):
    def quantize(self, x: float, fmt) -> int:
        return int(round_int(x, fmt, "rne"))

    def product(self, a: int, b: int) -> int:
        return a * b

    def add(self, x: int, y: int) -> int:
        return self.to_acc(x + y)

    def to_acc(self, s: int) -> int:
        acc = self.acc
        if self.mac.overflow == "saturate":
            return min(max(s, acc.kmin), acc.kmax)
        s %= 1 << acc.bits
        return s - (1 << acc.bits) if acc.signed and s >= 1 << (acc.bits - 1) else s

    def zero(self) -> int:
        return 0

    def finish(self, acc: int) -> int:
        return acc


def tensorcore_block(c: float, products: list[float], acc_spec, guard_bits: int, rounding: str,
                     saturate=None) -> float:
    """One block ``c + sum(products)`` of the Fasi et al. model (alignment at each product's own
    exponent): :func:`.tc_ref.block_ref` with the products as ``a`` and ones as ``b`` (``a_fmt``
    only matters to the operands model, so the products need not be fp32 values)."""
    mac = MacSpec(a_fmt="fp32", acc=acc_spec, order=f"tensorcore:{max(1, len(products))}",
                  guard_bits=guard_bits, acc_rounding=rounding, saturate=saturate)
    return block_ref(c, list(products), [1.0] * len(products), mac)


def dot_ref(a, b, mac: MacSpec | str, c=None) -> np.ndarray:
    """The scalar model of ``matmul`` for 2-D ``a`` (M, K) and ``b`` (K, N); float64 result.

    ``c`` (M, N), if given, is the initial accumulator: rounded (rne) onto the ``out`` format
    (the format the hardware takes C in), then rounded onto ``acc`` where that differs, except
    for a tensor core, whose first block aligns c as it is."""
    mac = as_mac(mac)
    ref = _IntRef(mac) if mac.integer else _FloatRef(mac)
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    qa = [[ref.quantize(float(x), mac.spec("a_fmt")) for x in row] for row in a]
    qb = [[ref.quantize(float(x), mac.spec("b_fmt")) for x in row] for row in b]
    m, k, n = a.shape[0], a.shape[1], b.shape[1]
    out = np.zeros((m, n), np.float64)
    kind, size = mac.order_kind, mac.order_size
    for i in range(m):
        for j in range(n):
            c0 = None if c is None else initial_acc(float(np.asarray(c, np.float64)[i, j]), mac)
            if kind == "tensorcore":
                col = [qb[t][j] for t in range(k)]
                out[i, j] = ref.finish(tensorcore_ref(0.0 if c0 is None else c0, qa[i], col, mac))
                continue
            ps = [ref.product(qa[i][t], qb[t][j]) for t in range(k)]
            out[i, j] = ref.finish(_reduce(ref, kind, size, ps, mac, c0))
    return out


def initial_acc(c: float, mac: MacSpec) -> float:
    """An initial accumulator value as the MAC takes it: rne onto ``out``, then onto ``acc``
    (unless a tensor core, whose block aligns it as it is)."""
    c = round_float(c, mac.spec("out"), "rne", saturate=mac.saturate)
    if mac.order_kind != "tensorcore":
        c = round_float(c, mac.spec("acc"), "rne", saturate=mac.saturate)
    return c


def _reduce(ref, kind: str, size, ps: list, mac: MacSpec, init=None):
    """The accumulation of ``ps`` in ``kind`` order from ``init`` (+0 if None; a tree adds it
    to the root)."""
    if init is not None and kind == "tree":
        return ref.add(init, _reduce(ref, kind, size, ps, mac)) if ps else init
    if kind == "sequential":
        acc = ref.zero() if init is None else init
        for p in ps:
            acc = ref.add(acc, p)
        return acc
    if kind in ("folded", "chunk"):
        acc = ref.zero() if init is None else init
        for start in range(0, len(ps), size):
            part = ref.zero()
            for p in ps[start : start + size]:
                part = ref.add(part, p)
            acc = ref.add(acc, part)
        return acc
    if kind == "tree":
        if not ps:
            return ref.zero()
        nodes, raw = list(ps), [True] * len(ps)
        while len(nodes) > 1:
            nxt, nraw = [], []
            for t in range(0, len(nodes) - 1, 2):
                nxt.append(ref.add(nodes[t], nodes[t + 1]))
                nraw.append(False)
            if len(nodes) % 2:
                nxt.append(nodes[-1])
                nraw.append(raw[-1])
            nodes, raw = nxt, nraw
        return ref.to_acc(nodes[0]) if raw[0] else nodes[0]
    raise ValueError(f"dot_ref: order {mac.order!r} has no exact scalar model (fast is not bit-exact)")
