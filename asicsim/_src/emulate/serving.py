"""Serving a model on exported weights (:mod:`.export`): every GEMM whose weight operand is an
exported leaf runs on its codes, the rest of the model as written:

    served = serve(apply_fn, codes, "mxint8_e8m0")    # codes = export_codes(params, policy)
    y = served(x)                                     # apply_fn(params, x), GEMMs on the codes
    served.gemms                    # per GEMM: leaf path, mode ("int", "table", "float") and row

**int** (``integer=True``, the default): an integer weight under an integer activation role
(int8, int4, MXINT8, group codes without zero points; dynamic scales, or static ones by the
calibrated amax) runs as ``lax.dot_general`` on the integer codes with
``preferred_element_type=int32``, one per scale block along K, and the scales are applied after:
``y = sum_j (acc_j * 2**-frac) * s_a * s_w`` (exact power-of-two shifts for ``pow2`` and
``none`` scales, float32 products for ``fp32`` ones), blocks summed in order in float32.
This is bit-identical to the emulated GEMM where the emulated arithmetic is exact: power-of-two
(or no) scales on both operands, one scale block along K, and every partial sum of the float32
accumulation exact (``K * max|k_a| * max|k_w| <= 2**24``, e.g. int8 x int8 with K <= 1040).
With fp32 scales (TensorRT-style int8) the emulated GEMM multiplies the rounded products
``fl(q_a s_a) * fl(q_w s_w)`` where serving scales the exact integer sum: per GEMM the two
differ by float32 rounding (a calibrated int8 MLP: 29 of 40 outputs differ, by at most
5.6e-8 of the largest; in a deeper model such a difference can flip an activation code's
rounding). ``integer=False`` serves such GEMMs by the table instead: bit-identical.

**table**: any other weight (fp8, MX fp8/fp6/fp4, NVFP4, bf16, group codes under float
activations) is decoded through a lookup table of its format's values (one entry per code),
scaled as the export says (exactly), and multiplied in float32 after the activation is rounded by
its role (:func:`asicsim.round_role`): bit-identical to the emulated GEMM.

The output is rounded by the recipe's ``acc`` and ``out`` roles, as the emulated GEMM's; a
delayed or static activation role scales by its calibrated amax (``calibrate``'s per-row static
scales, GEMM rows numbered as :func:`asicsim.emulate` numbers them), else by its current amax.
A GEMM with no exported weight (attention's ``q k^T``) runs as written, in float, unrounded
(``served.gemms`` lists it with mode ``float``). Not served (an error says so): bit-exact MAC
orders, recipes that round non-GEMM ops (``vector`` roles), ``[first_last]``, calibrated scales
in a model with a loop or branch (rows not numbered here), a weight that reaches anything but a
``dot_general`` (a convolution, a scan, a gather).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend import core as jcore

from asicsim._jax_compat import bind_args
from asicsim._src.emulate.codes_layout import canonical, element_name, spread
from asicsim._src.emulate.export import WeightCodes, dequantize_tensor, role_layout, role_parts
from asicsim._src.emulate.layer_rules import gemm_policy, key_name, match_rule
from asicsim._src.emulate.recipes import load_recipe
from asicsim._src.emulate.role_rounding import round_role, tensor_codes
from asicsim._src.emulate.tensor_cores import fast_dot
from asicsim._src.numerics import get_format
from asicsim._src.numerics.codec import decode
from asicsim._src.numerics.grid_rounding import mul_pow2

_CALLS = {"pjit": "jaxpr", "jit": "jaxpr", "closed_call": "call_jaxpr", "custom_jvp_call": "call_jaxpr",
          "custom_vjp_call": "call_jaxpr", "custom_vjp_call_jaxpr": "fun_jaxpr", "remat": "jaxpr",
          "checkpoint": "jaxpr"}


class Served:
    """``apply_fn(params, *args)`` with params from the export and GEMMs on its codes."""

    def __init__(self, apply_fn: Callable, codes, policy, integer: bool = True):
        self.fn, self.policy, self.integer = apply_fn, load_recipe(policy), bool(integer)
        pol = self.policy
        why = ("a bit-exact MAC order" if pol.mac_spec() is not None else
               "rounding of non-GEMM ops (vector roles)" if any(pol.role(r) for r in ("vector", "transcendental",
                                                                                         "reduction")) else
               "[first_last] roles (they follow the GEMM order)" if pol.first_last else None)
        if why:
            raise ValueError(f"serve: recipe {pol.name!r} has {why}; serving runs each weight's GEMM on its codes "
                             "by the recipe's roles alone, with float32/int32 accumulation")
        flat, self.treedef = jax.tree_util.tree_flatten_with_path(codes, is_leaf=lambda x: isinstance(x, WeightCodes))
        self.paths = ["/".join(key_name(k) for k in keys) for keys, _ in flat]
        self.leaves = [leaf for _, leaf in flat]
        self.gemms: list[dict] = []
        # calibrated amax per GEMM row (asicsim._src.emulate.ptq): rows counted as emulate counts them
        self.static = {row: v for row, v in pol.static_scales}
        self.channel = {(row, side): np.asarray(v, np.float32) for row, side, v in pol.channel_scales}
        self.row = 0

    def __call__(self, *args):
        params = [dequantize_tensor(x) if isinstance(x, WeightCodes) else x for x in self.leaves]
        n = len(params)

        def whole(flat_params, args):
            return self.fn(jax.tree_util.tree_unflatten(self.treedef, flat_params), *args)

        closed, shape = jax.make_jaxpr(whole, return_shape=True)(params, args)
        flat_args = jax.tree_util.tree_leaves(args)
        tags = list(range(n)) + [None] * len(flat_args)
        self.gemms, self.row = [], 0
        outs = self._run(closed.jaxpr, closed.consts, [*params, *flat_args], tags)
        return jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(shape), outs)

    def _run(self, jaxpr, consts, vals, tags):
        env, tag = {}, {}
        for v, c in zip(jaxpr.constvars, consts, strict=True):
            env[v] = c
        for v, x, t in zip(jaxpr.invars, vals, tags, strict=True):
            env[v] = x
            if t is not None and isinstance(self.leaves[t], WeightCodes):
                tag[v] = t

        def read(v):
            return v.val if isinstance(v, jcore.Literal) else env[v]

        for eqn in jaxpr.eqns:
            invals = [read(v) for v in eqn.invars]
            itags = [None if isinstance(v, jcore.Literal) else tag.get(v) for v in eqn.invars]
            name = eqn.primitive.name
            row = self._count(eqn, invals)
            if name == "dot_general" and any(t is not None for t in itags):
                outs = [self._gemm(eqn, invals, itags, row)]
            elif name in _CALLS:
                sub = eqn.params[_CALLS[name]]
                inner, sconsts = (sub.jaxpr, sub.consts) if hasattr(sub, "consts") else (sub, ())
                outs = self._run(inner, sconsts, invals[len(invals) - len(inner.invars):],
                                 itags[len(itags) - len(inner.invars):])
            else:
                used = [self.paths[t] for t in itags if t is not None]
                if used:
                    raise ValueError(f"serve: the exported weight {used[0]!r} reaches `{name}`, not a dot_general: "
                                     "export it out (export_codes(..., where=...)) or serve a model whose "
                                     "weights feed dot_generals directly")
                subfuns, params = bind_args(eqn.primitive, eqn.params)
                out = eqn.primitive.bind(*subfuns, *invals, **params)
                outs = out if eqn.primitive.multiple_results else [out]
                if row is not None:  # a GEMM without an exported weight: as written, unrounded
                    self.gemms.append({"path": None, "mode": "float", "row": row})
            for v, o in zip(eqn.outvars, outs, strict=True):
                env[v] = o
        return [read(v) for v in jaxpr.outvars]

    def _count(self, eqn, invals) -> int | None:
        """The GEMM row of ``eqn`` (a float dot_general or convolution), in emulate's order, or
        None; a loop or branch is refused under calibrated scales (its rows are not counted here)."""
        name = eqn.primitive.name
        if name in ("scan", "while", "cond") and (self.static or self.channel):
            raise ValueError(f"serve: recipe {self.policy.name!r} has calibrated static scales per GEMM row and "
                             f"the model has a `{name}`: serve numbers the rows of straight-line models only")
        if name not in ("dot_general", "conv_general_dilated") or not all(
                jnp.issubdtype(jnp.result_type(v), jnp.floating) for v in invals[:2]):
            return None
        self.row += 1
        return self.row - 1

    def _estimate(self, act, row: int, side: int):
        """The amax the emulated GEMM passes operand ``side`` of row ``row``: the calibrated one
        (a vector per contraction index where calibrated per channel), else 0 for delayed and
        static roles (their current amax), None for the others."""
        if act is None or act.scaling not in ("delayed", "static"):
            return None
        if (row, side) in self.channel:
            return jnp.asarray(self.channel[(row, side)])
        return jnp.float32(self.static[row][side]) if row in self.static else jnp.float32(0)

    def _gemm(self, eqn, invals, itags, row):
        (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
        side = 0 if itags[0] is not None else 1
        wc: WeightCodes = self.leaves[itags[side]]
        path = self.paths[itags[side]]
        w_axes, x_axes = (tuple(lc), tuple(rc)) if side == 0 else (tuple(rc), tuple(lc))
        if lb or rb or itags[1 - side] is not None or tuple(wc.axes) != w_axes:
            raise ValueError(f"serve: {path}: a dot_general contracting the weight along {w_axes} (batch "
                             f"{tuple(lb)}), exported along {tuple(wc.axes)}; export with axis={w_axes}")
        x = invals[1 - side]
        pol = gemm_policy(self.policy, match_rule(self.policy.layers, path) if self.policy.layers else None, False)
        act = pol.role("act")
        est = self._estimate(act, row, 1 - side)
        mode = "int" if self.integer and _integer(wc, act, est) else "table"
        if mode == "int":
            xc = canonical(x.astype(jnp.float32), x_axes)  # (M, K)
            y = _int_gemm(_activation_codes(xc, act, est), _canon(wc))
            x_free = [x.shape[i] for i in range(x.ndim) if i not in x_axes]
            w_free = [wc.codes.shape[i] for i in range(wc.codes.ndim) if i not in w_axes]
            y = y.reshape(*x_free, *w_free)
            if side == 0:  # the weight is the lhs: its free axes first
                y = jnp.transpose(y, [*range(len(x_free), y.ndim), *range(len(x_free))])
        else:  # as the emulated GEMM: the same operands in the same layout, the same dot
            qa = round_role(x, act, axis=x_axes, amax=est)  # in x's dtype, as the emulated GEMM
            ops = (table_dequantize(wc), qa) if side == 0 else (qa, table_dequantize(wc))
            specs = (pol.role("weight"), act) if side == 0 else (act, pol.role("weight"))
            y = fast_dot(*ops, eqn.params["dimension_numbers"], specs)
        y = round_role(round_role(y, pol.role("acc")), pol.role("out"))
        self.gemms.append({"path": path, "mode": mode, "row": row})
        return y.astype(eqn.outvars[0].aval.dtype)


def serve(apply_fn: Callable, codes, policy, *, integer: bool = True) -> Served:
    """A function of ``apply_fn``'s remaining arguments running ``apply_fn(params, ...)`` on the
    exported ``codes`` (a tree from :func:`~asicsim._src.emulate.export.export_codes`) under the recipe
    it was exported with (see the module doc). ``integer=False``: every GEMM by the table, the
    emulated arithmetic (bit-identical also where fp32 scales make the integer GEMM differ)."""
    return Served(apply_fn, codes, policy, integer)


def _integer(wc: WeightCodes, act, est) -> bool:
    """Integer weight codes (no zero point) under an integer activation role with one scale per
    row (not per contraction index: a per-channel calibration's vector)."""
    if (act is None or act.scaling == "delayed" or act.stochastic or act.rotation is not None
            or act.zero_point or (est is not None and jnp.ndim(est) > 0)):
        return False
    fmt = act.spec
    elem = fmt.element if fmt.kind == "block" else fmt
    w = get_format(wc.element)
    return (elem.kind == "int" and w.kind == "int" and wc.zeros is None and not getattr(fmt, "two_level", False)
            and wc.scale_kind in ("none", "pow2", "fp32", "group"))


def _activation_codes(xc, act, est) -> WeightCodes:
    """The (M, K) activation as integer codes and scales under role ``act`` (traceable: the
    same :func:`~asicsim._src.emulate.export.role_parts` an export runs, whose dequantized values are
    checked there against the emulated rounding; a static role by its estimate ``est``)."""
    if act.scaling == "static":  # the quantiser's own codes (integers: an int role) and its scale
        q, s = tensor_codes(xc, act, amax=jnp.float32(0) if est is None else est)
        return WeightCodes(q.astype(jnp.int32), act.format, "fp32", s.reshape(1, 1), tuple(xc.shape), (1,))
    kind, tile, element, fmt = role_layout(act, tuple(xc.shape))
    q, scales, _, _ = role_parts(xc, act)
    codes = mul_pow2(q, element.frac_bits).astype(jnp.int32)
    rows = -(-max(xc.shape[0], 1) // tile[0])
    return WeightCodes(codes, element_name(element), kind, None if scales is None else scales.reshape(rows, -1),
                       tile, (1,), scale_format=fmt)


def _canon(wc: WeightCodes) -> WeightCodes:
    c = wc.codes  # numpy: constants of the traced function, not staged ops
    keep = [i for i in range(c.ndim) if i not in wc.axes]
    moved = np.transpose(c, [*keep, *wc.axes])
    return wc._replace(codes=moved.reshape(int(np.prod([c.shape[i] for i in keep], dtype=np.int64)), -1), axes=(1,))


def table_dequantize(wc: WeightCodes) -> jax.Array:
    """``wc``'s weight with its codes decoded through a lookup table of the format's values
    (float bit patterns: one float32 entry per code) and its scales applied as the export says."""
    fmt = get_format(wc.element)
    if fmt.kind != "float":
        return dequantize_tensor(wc)

    table = decode(np.arange(2**fmt.bits, dtype=np.uint32), fmt)
    values = jnp.take(table, jnp.asarray(wc.codes).astype(jnp.int32))
    return dequantize_tensor(wc, values)


def _scaled(acc, a: WeightCodes, w: WeightCodes, cols: slice):
    """float32 ``acc * 2**-(frac_a + frac_w) * s_a * s_w`` for K-block ``cols`` (exact shifts)."""
    y = mul_pow2(acc.astype(jnp.float32), -(get_format(a.element).frac_bits + get_format(w.element).frac_bits))
    for wc, rows in ((a, acc.shape[0]), (w, acc.shape[1])):
        if wc.scale_kind == "none":
            continue
        s = spread(wc.scales, wc.tile, (rows, wc.codes.shape[1]))[:, cols][:, :1]
        s = s if wc is a else s.T
        y = mul_pow2(y, s) if wc.scale_kind == "pow2" else y * s.astype(jnp.float32)
    return y


def _int8_codes(element: str) -> bool:
    """Every code k of integer format ``element`` (value k * 2**-frac) fits int8."""
    f = get_format(element)
    return -128 <= f.min * 2**f.frac_bits and f.max * 2**f.frac_bits <= 127


def _int_gemm(a: WeightCodes, w: WeightCodes) -> jax.Array:
    """(M, N) float32 of canonical integer codes (M, K) x (N, K): an int32 ``dot_general`` per
    common scale block along K, scaled and summed in order."""
    k = a.codes.shape[1]
    step = math.gcd(*(c.tile[1] for c in (a, w) if c.scale_kind != "none")) or k  # blocks of both
    y = None
    for j in range(0, k, step):
        cols = slice(j, min(j + step, k))
        ka, kw = jnp.asarray(a.codes[:, cols]), jnp.asarray(w.codes[:, cols])
        narrow = jnp.int8 if w.codes.dtype == np.int8 and _int8_codes(a.element) else jnp.int32
        acc = lax.dot_general(ka.astype(narrow), kw.astype(narrow), (((1,), (1,)), ((), ())),
                              preferred_element_type=jnp.int32)
        part = _scaled(acc, a, w, cols)
        y = part if y is None else y + part
    return y
