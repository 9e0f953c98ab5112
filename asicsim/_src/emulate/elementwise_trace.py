"""The op trace's elementwise work: what one equation of the user's program asks of a vector unit.

Counted per equation, from shapes only (nothing runs):

- an elementwise primitive (``add``, ``max``, ``exp``, ``rsqrt``...): ``elements_out`` = the
  output's size, one operation each (a transcendental too: the vector unit is assumed to
  evaluate it in one lane operation, as TPU v1's activation unit does in hardware; an
  ``integer_pow`` by ``y`` is ``|y| - 1`` multiplies); ``inputs`` = its array operands (a scalar
  literal is an immediate, not a read); ``elements_in`` = their distinct elements (a broadcast
  operand of size 1 along some axes is read once from memory, re-read from registers);
- a reduction (``reduce_sum``, ``reduce_max``, ``argmax``...) of ``n`` elements into ``m``:
  ``inputs`` = ``n / m`` reads per output, ``n / m - 1`` operations each (a tree or a chain of
  binary operations; at least one), ``elements_in`` = ``n``;
- pooling (``reduce_window_*``): each output reads its window (``inputs`` = the window's size,
  ``window - 1`` operations), and ``elements_in`` = the operand's size (overlapping windows
  re-read the buffer, not DRAM; never more than outputs x window);
- a cumulative scan (``cumsum``...): one operation per element.

``work`` says what the work is for, by primitive (reporting only; the price is the same):
``pooling``, ``reduction`` (norm statistics, softmax and loss sums), ``normalisation``
(``rsqrt``, ``sqrt``), ``activation`` (transcendentals, and everything inside a ``custom_jvp``
function such as ``jax.nn.relu``), else ``elementwise`` (bias adds, residual adds, scaling).
Data movement (reshape, broadcast, transpose, slice, gather, casts) and random-bit generation
are not vector arithmetic and are not counted. Scan bodies count ``length`` times; a ``while``
body and every ``cond`` branch once, as the GEMM trace counts them.
"""

from __future__ import annotations

import math

from jax.extend import core as jex_core

ELEMENTWISE_COLUMNS = ("work", "primitive", "elements_out", "inputs", "elements_in", "ops")

_ACTIVATION = frozenset({"exp", "exp2", "log", "log1p", "expm1", "tanh", "logistic", "erf", "erfc",
                         "erf_inv", "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh",
                         "cosh", "asinh", "acosh", "atanh", "lgamma", "digamma"})
_NORMALISATION = frozenset({"rsqrt", "sqrt", "cbrt"})
_ARITHMETIC = frozenset({"add", "add_any", "sub", "mul", "div", "rem", "pow", "integer_pow", "neg",
                         "abs", "sign", "square", "max", "min", "clamp", "select_n", "gt", "ge",
                         "lt", "le", "eq", "ne", "and", "or", "not", "xor", "floor", "ceil", "round",
                         "is_finite", "nextafter"})
_REDUCTIONS = frozenset({"reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_and",
                         "reduce_or", "reduce_xor", "argmax", "argmin"})
_CUMULATIVE = frozenset({"cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp"})
_POOLING = frozenset({"reduce_window_sum", "reduce_window_max", "reduce_window_min", "reduce_window"})
_INNER = ("jaxpr", "call_jaxpr", "fun_jaxpr")  # where call-like primitives keep their body


def _size(v) -> int:
    return math.prod(v.aval.shape) if hasattr(v.aval, "shape") else 1


def _is_literal(v) -> bool:
    return isinstance(v, jex_core.Literal)


def _entry(work: str, name: str, out: int, inputs: int, elements_in: int, ops: int, count: int) -> dict:
    return {"kind": "elementwise", "work": work, "primitive": name, "elements_out": out, "inputs": inputs,
            "elements_in": elements_in, "ops": ops, "M": out, "K": ops, "count": count}


def _one(eqn, count: int, activation: bool) -> dict | None:
    name = eqn.primitive.name
    if not eqn.outvars:
        return None
    out = _size(eqn.outvars[0])
    if out == 0:
        return None
    if name in _POOLING:
        window = math.prod(eqn.params["window_dimensions"])
        n_in = _size(eqn.invars[0])
        return _entry("pooling", name, out, window, min(n_in, out * window), max(window - 1, 1), count)
    if name in _REDUCTIONS:
        n_in = _size(eqn.invars[0])
        per = max(n_in // out, 1)
        return _entry("reduction", name, out, per, out * per, max(per - 1, 1), count)
    if name in _CUMULATIVE:
        return _entry("reduction", name, out, 1, out, 1, count)
    if name in _ACTIVATION or name in _NORMALISATION or name in _ARITHMETIC:
        arrays = [v for v in eqn.invars if not _is_literal(v)]
        distinct = list(dict.fromkeys(arrays))  # x * x reads x's elements once from memory
        ops = max(abs(int(eqn.params.get("y", 2))) - 1, 1) if name == "integer_pow" else 1
        work = ("activation" if name in _ACTIVATION or activation
                else "normalisation" if name in _NORMALISATION else "elementwise")
        return _entry(work, name, out, max(len(arrays), 1), max(sum(_size(v) for v in distinct), 1), ops, count)
    return None


def elementwise_entries(eqn, count: int, activation: bool = False) -> list[dict]:
    """The elementwise work of ``eqn`` (run ``count`` times per call) and of the bodies of the
    call-like primitives the emulation does not enter (``custom_jvp_call``: its body's work is
    an activation's), as trace entries."""
    name = eqn.primitive.name
    if name == "scan":
        count *= eqn.params["length"]
    if name.startswith("custom_jvp"):
        activation = True
    inner = next((eqn.params[k] for k in _INNER if k in eqn.params), None)
    if name in ("scan", "while", "cond") or inner is not None:
        bodies = ([b.jaxpr for b in eqn.params["branches"]] if name == "cond"
                  else [eqn.params["body_jaxpr"].jaxpr] if name == "while"
                  else [getattr(inner, "jaxpr", inner)])
        return [e for body in bodies for q in body.eqns for e in elementwise_entries(q, count, activation)]
    e = _one(eqn, count, activation)
    return [e] if e is not None else []
