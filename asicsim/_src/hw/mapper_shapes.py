"""The element shapes of the mapper's candidates on large grids (:mod:`asicsim._src.hw.mapper_passes`
evaluates them): a grid over dataflows searched one dataflow at a time, a candidate's fields cut
to the axes they vary along, and each element's distinct candidates. Each keeps every value
(the same search on the same numbers), so ``tests/hw/test_mapper_fast.py`` holds the result to
one list over the whole grid bit for bit. Also the candidates' variants (buffering, partial-sum
home) generated along a leading element axis and split back (:func:`variant_rows`,
:func:`variant_of`)."""

from __future__ import annotations

import dataclasses

import numpy as np

from asicsim._src.hw.counts import ArrayHardware, GemmCounts, GemmProblem, Schedule
from asicsim._src.hw.tiles import element_shape

#: a schedule's fields, in order (every one is stacked, narrowed, compared and chosen)
FIELDS = tuple(f.name for f in dataclasses.fields(Schedule))


def _narrow(v, lead: bool):
    """``v`` cut to one row along every element axis it is constant along (the same values
    wherever it broadcasts; NaN never counts as constant). ``lead``: axis 0 holds candidates."""
    v = np.asarray(v)
    for ax in range(int(lead), v.ndim):
        if v.shape[ax] > 1:
            one = v.take([0], axis=ax)
            if (v == one).all():  # np.array_equal(v, broadcast one), without its checks
                v = one
    return v


def narrowed(b: Schedule, nd: int) -> Schedule:
    """Block ``b`` with each field cut to the element axes it varies along (:func:`_narrow`: a
    selection such as ``np.where(dataflow == IS, cols, rows)`` spans both array axes though one
    dataflow reads one)."""
    return Schedule(*(_narrow(getattr(b, f), np.ndim(getattr(b, f)) > nd) for f in FIELDS))


def signature(b: Schedule, nd: int) -> tuple:
    """The element axes a block's fields vary along (its stacked fields' union shape)."""
    vals = [np.asarray(getattr(b, f)) for f in FIELDS]
    own = np.broadcast_shapes(*{v.shape[1:] if v.ndim > nd else v.shape for v in vals})
    return tuple(int(x > 1) for x in (1,) * (nd - len(own)) + own)


def distinct(s, order: np.ndarray) -> tuple:
    """``(s, order, firsts)``: ``s`` (stacked, fields of few elements; or a list of such parts,
    taken as one stack in their order without concatenating them) with, per element, only the
    first of candidates equal in every field, in order; elements with fewer keep copies of one of
    theirs (equal fields, later in order: never chosen before it) after their ``firsts`` distinct
    ones (per element). ``order``: the candidates' search order.
    Equal values of different bits (0.0 and -0.0, outside whole numbers) may both be kept: a
    copy, never chosen. Laid out (candidate, element), as stacked: no transposed copies; a field
    equal everywhere (the same value for every candidate and element) tells none apart and is
    not compared; each part's fields are read at their own shape (a field that does not vary
    along the elements is neither broadcast nor copied before the kept ones are gathered)."""
    parts = [s] if isinstance(s, Schedule) else list(s)
    cols = [[np.asarray(getattr(q, f)) for q in parts] for f in FIELDS]  # per field, per part
    own = np.broadcast_shapes(*{v.shape[1:] for c in cols for v in c})
    nd, size = len(own), int(np.prod(own))
    # each part's field at (candidate, *own) as it broadcasts: broadcast on use, never copied
    cols = [[v.reshape((1,) * (nd + 1 - v.ndim) + v.shape) for v in c] for c in cols]
    ns = [max(c[i].shape[0] for c in cols) for i in range(len(parts))]
    n = sum(ns)
    # NaN is never equal to itself: a field holding one is compared
    ranges = [(np.min([np.min(v) for v in c]), np.max([np.max(v) for v in c])) for c in cols]
    which = [i for i, (lo, hi) in enumerate(ranges) if lo != hi] if n > 1 else []
    varying = [cols[i] for i in which]
    # per element, the candidates sorted stably (equal ones in order), each one equal in every
    # field to the one before it a copy: O(n log n), not n^2
    dup = np.zeros((n, size), dtype=bool)
    if varying:
        keys = _packed(varying, [ranges[i] for i in which], ns, own)
        if keys is not None:  # whole numbers packed exactly into two keys: equal keys, equal fields;
            # sorted stably by their sum (equal keys adjacent and in order; unequal keys of one sum
            # between equal ones only keep a copy, never chosen; the sum keeps the first key's runs,
            # which a stable sort uses)
            if len(keys) == 2:  # the sum in place of the second key: (sum, first) equal iff both keys are
                keys[1] += keys[0]  # (the second is the sum less the first, modulo 2^64)
            by = np.argsort(keys[-1], axis=0, kind="stable")
            cmp = keys
        else:  # by a hash of the fields' bits, then the fields compared (NaN equals nothing);
            # unequal fields of one hash between equal ones only keep a copy (never chosen)
            cmp = [_whole(c, ns, own).reshape(n, size) for c in varying]
            h = np.zeros((n, size), dtype=np.uint64)
            for v in cmp:
                h = h * np.uint64(0x9E3779B97F4A7C15) + np.asarray(v, dtype=np.float64).view(np.uint64)
            by = np.argsort(h, axis=0, kind="stable")
        by *= size
        by += np.arange(size)
        flat = by.reshape(-1)  # the sorted order as flat positions in (candidate, element)
        same = np.ones((n - 1) * size, dtype=bool)
        w = np.empty(flat.size, dtype=np.uint64) if cmp is keys else None  # (one buffer for the keys)
        for v in cmp:
            w = np.take(v.reshape(-1), flat, out=w)
            same &= w[size:] == w[:-size]
            w = w if cmp is keys else None
        dup.reshape(-1)[flat[size:]] = same
    elif n > 1:  # every field equal everywhere: the first of each element
        dup[1:] = True
    firsts = np.maximum((~dup).sum(axis=0), 1)
    k = int(firsts.max())
    keep = np.argsort(dup, axis=0, kind="stable")[:k]  # the firsts, in order, then copies
    at = keep * size
    at += np.arange(size)  # flat positions in (candidate, element)
    fields = [_gather(c, ns, keep, at, own) for c in cols]
    return Schedule(*fields), np.asarray(order)[keep].reshape(k, *own), firsts.reshape(own)


def _whole(c: list, ns: list, own: tuple) -> np.ndarray:
    """A field's parts stacked at (candidates, *own)."""
    out = np.empty((sum(ns), *own), dtype=np.result_type(*c))
    at = 0
    for v, m in zip(c, ns, strict=True):
        out[at:at + m] = v
        at += m
    return out


def _gather(c: list, ns: list, keep: np.ndarray, at: np.ndarray, own: tuple) -> np.ndarray:
    """A field's parts (one stack) at the candidates ``keep`` (k, size) of each element."""
    k = keep.shape[0]
    eshape = np.broadcast_shapes(*{v.shape[1:] for v in c})
    cat = (np.concatenate([np.broadcast_to(v, (m, *eshape)) for v, m in zip(c, ns, strict=True)])
           if len(c) > 1 or c[0].shape[0] != ns[0] else c[0])
    if int(np.prod(eshape)) == 1:  # the same along the elements: by candidate alone
        return cat.reshape(-1)[keep].reshape(k, *own)
    if eshape != own:
        cat = np.broadcast_to(cat, (cat.shape[0], *own))
    return np.ascontiguousarray(cat).reshape(-1)[at].reshape(k, *own)


def _packed(varying: list, ranges: list, ns: list, own: tuple):
    """The fields (each a list of parts) as two unsigned 64-bit keys at (candidates, elements)
    holding each value exactly (whole numbers from -1, at most 64 bits a key), or None where they
    do not fit (then compared as they are). ``ranges``: each field's least and largest value."""
    widths, ints, done = [], [], {}
    for c, (lo, hi) in zip(varying, ranges, strict=True):
        lo, hi = float(lo), float(hi)  # NaN: not whole, returns None here
        if not (lo >= -1 and hi < 2.0 ** 52):
            return None
        parts = []
        for v in c:
            if id(v) not in done:  # (a part's field that is another's, converted once)
                iv = v.astype(np.int64)  # in range: exact where whole, truncated where not
                if v.dtype.kind == "f" and not (iv == v).all():
                    return None
                iv += 1
                done[id(v)] = iv.view(np.uint64)  # non-negative: the same bits
            parts.append(done[id(v)])
        widths.append(int(hi + 1).bit_length())
        ints.append(parts)
    if max(widths) > 64:
        return None
    groups, at = [[]], 0
    for w, parts in zip(widths, ints, strict=True):
        if groups[-1] and at + w > 64:
            groups.append([])
            at = 0
        groups[-1].append((parts, at))
        at += w
    if len(groups) > 2:
        return None
    n, size = sum(ns), int(np.prod(own))
    keys = []
    for g in groups:
        key = np.empty((n, *own), dtype=np.uint64)
        start = 0
        for i, m in enumerate(ns):  # each part's rows: its fields shifted into place, at their own shape
            out = key[start:start + m]
            for j, (parts, shift) in enumerate(g):
                x = parts[i] if shift == 0 else parts[i] << np.uint64(shift)
                if j == 0:
                    out[...] = x
                else:
                    np.bitwise_or(out, x, out=out)
            start += m
        keys.append(key.reshape(n, size))
    return keys


def variant_rows(per_variant: list, lead: tuple) -> list:
    """:func:`asicsim._src.hw.tiles.buffer_rows` of each variant stacked along a leading element axis
    (a coefficient the same in every variant kept as it is)."""
    out = []
    for parts in zip(*per_variant, strict=True):
        row = []
        for vals in zip(*parts, strict=True):
            if all(v is vals[0] for v in vals) or all(isinstance(v, float) and v == vals[0] for v in vals):
                row.append(vals[0])
                continue
            shape = np.broadcast_shapes(*(np.shape(v) for v in vals))
            row.append(np.stack([np.broadcast_to(np.asarray(v, dtype=np.float64), shape) for v in vals])
                       .reshape(lead[:1] + (1,) * (len(lead) - 1 - len(shape)) + shape))
        out.append(tuple(row))
    return out


def variant_of(b: Schedule, v: int, ndim: int) -> Schedule:
    """Variant ``v`` of block ``b`` (fields with a leading variant axis before ``ndim`` element
    axes, after the candidates' axis where they have one)."""
    out = []
    for f in FIELDS:
        x = np.asarray(getattr(b, f))
        if x.ndim == ndim + 2:
            x = x[:, min(v, x.shape[1] - 1)]
        elif x.ndim == ndim + 1:
            x = x[min(v, x.shape[0] - 1)]
        out.append(x)
    return Schedule(*out)


def by_dataflow(p: GemmProblem, hw: ArrayHardware):
    """``[(code, hw with that one dataflow)]`` where ``hw`` sweeps several dataflows over a grid
    of more than :data:`SPLIT_ELEMENTS` elements, else None. Searched one dataflow at a time, a
    schedule's array-aligned twin follows one array side per tile dimension (rows or columns,
    never both), so its fields and the counts that follow from them keep the shape of the axes
    they depend on instead of the whole grid's. Every element is the same search on the same
    values either way (:func:`merge_by_dataflow` takes each element from its own dataflow's)."""
    df = np.asarray(hw.dataflow)
    if df.size < 2 or max(1, int(np.prod(element_shape(p, hw)))) <= SPLIT_ELEMENTS:
        return None
    codes = np.unique(df)
    if codes.size < 2:
        return None
    return [(c, dataclasses.replace(hw, dataflow=np.full((1,) * df.ndim, c, dtype=df.dtype))) for c in codes]


#: grids of at most this many elements are searched over all their dataflows at once
SPLIT_ELEMENTS = 1 << 12


def merge_by_dataflow(hw: ArrayHardware, parts: list) -> GemmCounts:
    """The counts of every element from those searched under its own dataflow (:func:`by_dataflow`)."""
    df = np.asarray(hw.dataflow)
    out = {}
    for f in dataclasses.fields(GemmCounts):
        vals = [np.asarray(getattr(c, f.name)) for _, c in parts]
        merged = vals[0]
        for (code, _), v in zip(parts[1:], vals[1:], strict=True):
            merged = np.where(df == code, v, merged)
        out[f.name] = merged
    return GemmCounts(**out)
