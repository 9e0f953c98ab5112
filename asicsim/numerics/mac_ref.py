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
    """One block ``c + sum(products)`` as the tensor-core model defines it (see tensorcore.py)."""
    terms = [c, *products]
    if not all(math.isfinite(t) for t in terms):
        return round_float(sum(terms), acc_spec, rounding, saturate=saturate)
    nonzero = [Fraction(t) for t in terms if t != 0]
    total = Fraction(0)
    if nonzero:
        emax = max(math.frexp(t)[1] - 1 for t in terms if t != 0)  # |t| in [2**emax, 2**(emax+1))
        quantum = Fraction(2) ** (emax - acc_spec.man_bits - guard_bits)
        for t in nonzero:  # truncate each addend toward zero onto the quantum
            mag = abs(t) // quantum * quantum
            total += mag if t > 0 else -mag
    if total == 0:
        return round_float(-0.0 if all(_neg(t) for t in terms) else 0.0, acc_spec, rounding,
                           saturate=saturate)
    return round_float(total, acc_spec, rounding, saturate=saturate)


def dot_ref(a, b, mac: MacSpec | str) -> np.ndarray:
    """The scalar model of ``matmul`` for 2-D ``a`` (M, K) and ``b`` (K, N); float64 result."""
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
            ps = [ref.product(qa[i][t], qb[t][j]) for t in range(k)]
            out[i, j] = ref.finish(_reduce(ref, kind, size, ps, mac))
    return out


def _reduce(ref, kind: str, size, ps: list, mac: MacSpec):
    if kind == "sequential":
        acc = ref.zero()
        for p in ps:
            acc = ref.add(acc, p)
        return acc
    if kind in ("folded", "chunk"):
        acc = ref.zero()
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
    if kind == "tensorcore":
        acc = 0.0
        for start in range(0, len(ps), size):
            acc = tensorcore_block(acc, ps[start : start + size], mac.spec("acc"), mac.guard_bits,
                                   mac.acc_rounding, mac.saturate)
        return acc
    raise ValueError(f"dot_ref: order {mac.order!r} has no exact scalar model (fast is not bit-exact)")
