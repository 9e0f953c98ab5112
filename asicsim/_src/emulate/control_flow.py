"""Control flow inside an emulated function: a time scan (one module applied at every step: one
row per body GEMM, its amax the largest over the iterations), a ``while_loop`` and a ``cond``,
each run through the interpreter (:mod:`.interpreter`); a scan over stacked layers is
:mod:`.layer_scan`'s."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from asicsim._jax_compat import scan_operand_counts
from asicsim._src.emulate.lsq_sites import Body, close_bodies, dry_run
from asicsim._src.emulate.provenance import input_data, loop_data
from asicsim._src.emulate.site_rows import count_rows
from asicsim._src.numerics.random import derive


def time_scan(interp, p, invals, flags, paths, data=None):
    """A time scan (no weight among its xs: an RNN cell, one module): one row per body GEMM
    for all iterations, its observed amax the largest over them."""
    (nc, ncarry), closed = scan_operand_counts(p), p["jaxpr"]
    consts, init, xs = invals[:nc], invals[nc:nc + ncarry], invals[nc + ncarry:]
    cflags, xflags = flags[:nc], flags[nc + ncarry:]
    bpaths = [*paths[:nc], *([None] * ncarry), *paths[nc + ncarry:]]
    bdata = loop_data(closed.jaxpr, input_data(flags, data), nc, ncarry)

    length, site0 = p["length"], interp.site
    outer_words, outer_amax = interp.words, interp.amax
    extra = {}
    if outer_words is not None:  # words per iteration: stochastic rounding never reuses bits
        extra["words"] = derive(derive(outer_words, 1_000_003 + site0), jnp.arange(length))
    if outer_amax is not None:  # the body's observed amax: the largest over iterations
        extra["amax"] = _broadcast_max(outer_amax, length)

    steps = Body(interp.lsq)  # one learned step per body operand, for every iteration

    def body(carry, x):
        x, ex = x
        interp.site = site0  # a retraced body numbers its sites the same way
        interp.words, interp.amax = ex.get("words"), ex.get("amax")
        steps.enter()
        outs = interp.run(closed.jaxpr, closed.consts, [*consts, *carry, *x],
                          [*cflags, *([False] * ncarry), *xflags], bpaths, bdata)
        return outs[:ncarry], [*outs[ncarry:], *steps.leave()]

    outer, interp.multiplier = interp.multiplier, interp.multiplier * length
    try:
        carry, ys = lax.scan(body, init, (xs, extra), length=length, reverse=p["reverse"],
                             unroll=p["unroll"])
    finally:
        interp.multiplier = outer
        interp.words, interp.amax = outer_words, outer_amax
    ny = len(closed.jaxpr.outvars) - ncarry
    steps.close([_iteration_mean(a) for a in ys[ny:]])  # initial steps: over all iterations (.lsq_sites)
    interp.site = site0 + count_rows(closed.jaxpr, [*cflags, *([False] * ncarry), *xflags], bdata)
    return [*carry, *ys[:ny]]


def _iteration_mean(a):
    """The mean over axis 0 of ``a`` (one initial step per iteration), taken as ``a[0] + mean(a -
    a[0])``: exactly ``a[0]`` where every iteration's is the same (a weight's)."""
    return a[0] + jnp.mean(a - a[:1], axis=0)


def while_loop(interp, p, invals, flags, paths, data=None):
    cn, bn = p["cond_nconsts"], p["body_nconsts"]
    cc, bc, init = invals[:cn], invals[cn:cn + bn], invals[cn + bn:]
    cj, bj = p["cond_jaxpr"], p["body_jaxpr"]
    n = len(init)

    cflags, bflags = [*flags[:cn], *([False] * n)], [*flags[cn:cn + bn], *([False] * n)]
    cpaths, bpaths = [*paths[:cn], *([None] * n)], [*paths[cn:cn + bn], *([None] * n)]
    data = input_data(flags, data)
    bdata = loop_data(bj.jaxpr, data[cn:], bn, n)
    cdata = [*data[:cn], *bdata[bn:]]
    site0, ncond = interp.site, count_rows(cj.jaxpr, cflags, cdata)

    # One row per body GEMM for every iteration: the trip count is not static.
    steps: dict = {}  # learned steps (.lsq_sites): the cond's, then the body's (jax traces them so)
    made: list = []

    def traced(part, jaxpr, consts, args, fl, ps, dt):
        if part not in steps:
            steps[part] = Body(interp.lsq)
        steps[part].enter()
        out = interp.run(jaxpr, consts, args, fl, ps, dt)
        made.extend(steps[part].leave())
        return out

    def cond(c):
        interp.site = site0
        return traced("cond", cj.jaxpr, cj.consts, [*cc, *c], cflags, cpaths, cdata)[0]

    def body(c):  # note: stochastic-rounding streams repeat across while iterations
        interp.site = site0 + ncond
        # a tuple, as the carry went in: while_loop checks the two have one pytree structure
        return tuple(traced("body", bj.jaxpr, bj.consts, [*bc, *c], bflags, bpaths, bdata))

    out = list(lax.while_loop(cond, body, tuple(init)))
    if made:  # initial steps: on the first iteration's operands, from a run outside the loop
        del made[:]
        dry_run(lambda: (cond(tuple(init)), body(tuple(init))))
    close_bodies(interp.lsq, steps.values(), made)
    interp.site = site0 + ncond + count_rows(bj.jaxpr, bflags, bdata)
    return out

def cond(interp, p, invals, flags, paths, data=None):
    index, ops = invals[0], invals[1:]
    data = input_data(flags, data)[1:]
    starts = np.cumsum([interp.site] + [count_rows(br.jaxpr, flags[1:], data) for br in p["branches"]])

    steps: dict = {}  # branch -> its learned steps (.lsq_sites), branch 0's first (jax traces them so)
    made: list = []

    def branch(i, br, *a):
        interp.site = int(starts[i])  # each branch numbers its own rows
        if i not in steps:
            steps[i] = Body(interp.lsq)
        steps[i].enter()
        out = interp.run(br.jaxpr, br.consts, list(a), flags[1:], paths[1:], data)
        made.extend(steps[i].leave())
        return out

    branches = [functools.partial(branch, i, br) for i, br in enumerate(p["branches"])]
    out = list(lax.switch(index, branches, *ops))
    if made:  # initial steps: every branch run on the operands (not only the one taken)
        del made[:]
        dry_run(lambda: [f(*ops) for f in branches])
    close_bodies(interp.lsq, steps.values(), made)
    interp.site = int(starts[-1])
    return out


@functools.partial(jax.custom_vjp, nondiff_argnums=(1,))
def _broadcast_max(x, n: int):
    """``x`` repeated ``n`` times along a new axis 0; its gradient is the *largest* cotangent over
    that axis (not the sum), so an amax observed in every scan iteration comes back as the max."""
    return jnp.broadcast_to(x, (n, *x.shape))


_broadcast_max.defvjp(lambda x, n: (_broadcast_max(x, n), None), lambda n, _, g: (jnp.max(g, axis=0),))
