"""Weight provenance: which values of a traced function are *the weight* a GEMM reads, one rule
shared by the interpreter (:mod:`.interpreter`) and the row count (:mod:`.site_rows`).

A value is the weight when it is a leaf of the ``weights`` argument, a float array the function
closes over, or the result of a *structural* op (:data:`STRUCTURAL`: reshape, transpose, cast,
broadcast, slice, gather, concatenate, pad, select...) that moves a weight and reads nothing that
depends on the *data*, the function's other inputs (:func:`moves_weight`). Its elements are then
the weight's, picked without looking at the data: a slice of stacked weights at a loop counter
(``w[i]`` in a ``fori_loop`` over layers) or at constant indices, a transposed or concatenated
weight. A structural op that reads data makes data: an embedding lookup ``emb[tokens]`` (a gather
by token ids, or a dynamic_slice at one token) yields activations, not a weight, and so do a
concatenate or a select of a weight with activations (or by a data-dependent predicate). A GEMM
of a weight (a one-hot matmul) makes activations whatever its operands.

Data (:func:`out_data`, :func:`loop_data`): a non-weight input of the function and anything an
op computes from one. A loop's carry is data when its initial value is, or when the loop body
computes its next value from data (a fixpoint over the body): a counter ``0, 1, ...`` is not
data, a token a generation loop feeds back is.
"""

from __future__ import annotations

from collections.abc import Sequence

from jax.extend import core as jcore

# ops that only move, select or cast values; their results may still be the weight (``stack``,
# ``split``, ``unstack`` and ``tile``: jnp.stack, jnp.split, jnp.tile as newer jax traces them)
STRUCTURAL = frozenset({"reshape", "transpose", "convert_element_type", "broadcast_in_dim", "squeeze",
                        "expand_dims", "slice", "dynamic_slice", "dynamic_update_slice", "copy", "copy_p",
                        "rev", "gather", "reduce_precision", "concatenate", "pad", "select_n", "stack",
                        "split", "unstack", "tile"})


def moves_weight(name: str, flags: Sequence, data: Sequence[bool]) -> bool:
    """Whether the results of an op ``name`` whose operands have weight ``flags`` and depend on
    data as ``data`` says are the weight (module docstring)."""
    return name in STRUCTURAL and any(flags) and not any(data)


def input_data(flags: Sequence, data: Sequence[bool] | None) -> list[bool]:
    """Per input of a jaxpr: whether it depends on data; ``data`` None: the function's own inputs,
    where every input that is not a weight is data."""
    return [not f for f in flags] if data is None else [bool(d) for d in data]


def operand_data(eqn, dep: set) -> list[bool]:
    """Per operand of ``eqn``: whether it depends on data (``dep``: the variables that do)."""
    return [not isinstance(v, jcore.Literal) and v in dep for v in eqn.invars]


def out_data(jaxpr, data: Sequence[bool]) -> list[bool]:
    """Per output of ``jaxpr``: whether it depends on data when its inputs do as ``data`` says.
    Every result of an op with an operand that depends on data does (a nested loop's or call's
    results all do: an over-estimate there, never an under-estimate)."""
    dep = {v for v, d in zip(jaxpr.invars, data, strict=True) if d}
    for eqn in jaxpr.eqns:
        if any(operand_data(eqn, dep)):
            dep.update(eqn.outvars)
    return [not isinstance(v, jcore.Literal) and v in dep for v in jaxpr.outvars]


def loop_data(jaxpr, data: Sequence[bool], start: int, n: int) -> list[bool]:
    """``data`` of a loop body's inputs with its ``n`` carries (inputs ``start .. start+n-1``,
    outputs ``0 .. n-1``: a scan's and a while loop's layout) settled: a carry depends on data
    when its initial value does (``data``) or when the body's next value of it does."""
    data = [bool(d) for d in data]
    while True:
        nxt = out_data(jaxpr, data)[:n]
        carry = [a or b for a, b in zip(data[start:start + n], nxt, strict=True)]
        if carry == data[start:start + n]:
            return data
        data[start:start + n] = carry
