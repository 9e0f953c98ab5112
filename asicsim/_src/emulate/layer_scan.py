"""A layer scan under emulation: a ``lax.scan`` with weights among its scanned inputs (stacked
layers: Flax's ``nn.scan``, a scan over stacked weights), whose iterations are different layers.

Each iteration gets rows of its own (:mod:`.site_rows`): the body of ``k`` rows in a scan of
length ``n`` takes rows ``t*k .. t*k+k-1`` for iteration ``t`` (execution order), its slice of the
amax estimates, their taps (so delayed scaling's observed amax comes back per layer, as
Transformer Engine keeps one amax history per module) and stochastic-rounding words, passed as
scanned inputs. Where the scan holds the function's first or last row and the recipe has
``[first_last]``, that iteration is peeled out of the loop and run on its own with the edge roles,
the others as a scan of the remaining iterations (the first and last *layer*, as Wang et al.
2018 keep them in 16 bits, not every layer of the stack). Learned step sizes are per layer too
(:mod:`.lsq_sites`): each iteration indexes its layer's steps by ``ex["layer"]``, the index of
its weights in the stack, and the initial steps come out stacked as extra scanned outputs.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from asicsim._src.emulate.lsq_sites import Body
from asicsim._src.emulate.provenance import input_data, loop_data
from asicsim._src.emulate.site_rows import count_rows, scan_parts
from asicsim._src.numerics.random import derive


def layer_scan(interp, p, invals, flags, paths, data=None):
    """Run scan equation params ``p`` on ``invals`` under ``interp`` (an ``_Interpreter``;
    ``data``: whether each operand depends on data, :mod:`.provenance`)."""
    (nc, ncarry), closed = scan_parts(p), p["jaxpr"]
    consts, init, xs = invals[:nc], invals[nc:nc + ncarry], invals[nc + ncarry:]
    bflags = [*flags[:nc], *([False] * ncarry), *flags[nc + ncarry:]]
    bpaths = [*paths[:nc], *([None] * ncarry), *paths[nc + ncarry:]]
    n, reverse = p["length"], p["reverse"]
    bdata = loop_data(closed.jaxpr, input_data(flags, data), nc, ncarry)
    k = count_rows(closed.jaxpr, bflags, bdata)
    site0, base0 = interp.site, interp.row_base
    row0 = None if base0 is None else base0 + site0
    saved = (interp.words, interp.amax, interp.est, interp.site, interp.row_base)

    # per-iteration extras, stacked in execution order t
    ex = {}
    lsq = interp.lsq
    if not lsq.initialising:  # the layer of iteration t: its steps' index (in the weights' order)
        ex["layer"] = jnp.arange(n)[::-1] if reverse else jnp.arange(n)
    if interp.words is not None:  # words per iteration: stochastic rounding never reuses bits
        ex["words"] = derive(derive(interp.words, 1_000_003 + site0), jnp.arange(n))
    for name in ("amax", "est"):
        arr = getattr(interp, name)
        if arr is not None:
            ex[name] = arr[site0:site0 + n * k].reshape(n, k, *arr.shape[1:])

    steps = Body(lsq)

    def iteration(carry, x, e, base):
        interp.site, interp.row_base = 0, base
        interp.words, interp.amax, interp.est = e.get("words"), e.get("amax"), e.get("est")
        steps.enter()
        if "layer" in e:
            lsq.layers.append((e["layer"], n))
        try:
            outs = interp.run(closed.jaxpr, closed.consts, [*consts, *carry, *x], bflags, bpaths, bdata)
        finally:
            if "layer" in e:
                lsq.layers.pop()
        return outs[:ncarry], [*outs[ncarry:], *steps.leave()]

    head = tail = False
    if interp.policy.first_last and row0 is not None and k:
        head = row0 == 0
        tail = row0 + n * k == interp.n_rows
    outer = interp.multiplier
    try:
        if not (head or tail):
            def body(carry, xe):
                return iteration(carry, xe[0], xe[1], None)

            ex_x = jax.tree_util.tree_map(lambda a: a[::-1], ex) if reverse else ex
            interp.multiplier = outer * n
            carry, ys = lax.scan(body, init, (xs, ex_x), length=n, reverse=reverse, unroll=p["unroll"])
        else:
            carry, ys = _peeled(iteration, init, xs, ex, n, k, row0, head, tail, reverse, p["unroll"], interp)
    finally:
        interp.multiplier = outer
        interp.words, interp.amax, interp.est, interp.site, interp.row_base = saved
    ny = len(closed.jaxpr.outvars) - ncarry
    steps.close(ys[ny:])  # initial steps per layer, stacked in the weights' order
    interp.site = site0 + n * k
    return [*carry, *ys[:ny]]


def _peeled(iteration, init, xs, ex, n, k, row0, head, tail, reverse, unroll, interp):
    """The scan with iteration 0 (``head``) and/or ``n - 1`` (``tail``) run outside the loop, each
    at its static row (so the edge roles apply), the middle ones as a scan."""
    order = (lambda a: a[::-1]) if reverse else (lambda a: a)  # xs in execution order
    xs_t = [order(x) for x in xs]
    lo, hi = int(head), n - int(tail and (n > 1 or not head))
    outer = interp.multiplier

    def one(t, carry):
        interp.multiplier = outer
        e = jax.tree_util.tree_map(lambda a: a[t], ex)
        return iteration(carry, [x[t] for x in xs_t], e, row0 + t * k)

    carry, parts = init, []
    if head:
        carry, y = one(0, carry)
        parts.append([a[None] for a in y])
    if hi > lo:
        def body(c, xe):
            return iteration(c, xe[0], xe[1], None)

        mid = ([x[lo:hi] for x in xs_t], jax.tree_util.tree_map(lambda a: a[lo:hi], ex))
        interp.multiplier = outer * (hi - lo)
        carry, y = lax.scan(body, carry, mid, length=hi - lo, unroll=unroll)
        parts.append(list(y))
    if hi < n:
        carry, y = one(n - 1, carry)
        parts.append([a[None] for a in y])
    ys = [order(jnp.concatenate(cols)) for cols in zip(*parts, strict=True)] if parts and parts[0] else []
    return carry, ys
