"""SCALE-Sim 3.0.0's operand and per-cycle demand matrices, which its memory replay
(:mod:`asicsim._src.hw.scalesim_replay`) walks: operand addresses [compute/operand_matrix.py] and the
demand and prefetch matrices per dataflow [compute/systolic_compute_{os,ws,is}.py]; the steps
are those the replay's module doc lists."""

from __future__ import annotations

import math

import numpy as np


def operand_matrices(H, W, Fh, Fw, C, N, s) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ifmap, filter, ofmap) address matrices of one layer (offsets left out: each buffer sees
    only its own operand)."""
    Eh, Ew = math.ceil((H - Fh + s) / s), math.ceil((W - Fw + s) / s)
    i, j = np.meshgrid(np.arange(Eh * Ew), np.arange(Fh * Fw * C), indexing="ij")
    o_r, o_c = np.divmod(i, Ew)
    i_r, i_c = o_r * s, o_c * s
    c_r, k = np.divmod(j, Fw * C)
    c_c, ch = np.divmod(k, C)
    ok = (c_r + i_r < H) & (c_c + i_c < W)
    ifmap = np.where(ok, (c_r * W + c_c) * C + ch + (i_r * W + i_c) * C, -1)
    window = np.arange(Fh * Fw * C)[:, None]
    filt = np.arange(N)[None, :] * (Fh * Fw * C) + window
    ofmap = N * np.arange(Eh * Ew)[:, None] + np.arange(N)[None, :]
    return ifmap.astype(np.int64), filt.astype(np.int64), ofmap.astype(np.int64)


def _pad(m: np.ndarray, rows: int | None = None, cols: int | None = None) -> np.ndarray:
    r, c = m.shape
    out = np.full((r if rows is None else rows, c if cols is None else cols), -1, dtype=np.int64)
    out[:r, :c] = m
    return out


def _gap(rows: int, cols: int) -> np.ndarray:
    return np.full((rows, cols), -1, dtype=np.int64)


def _skew(m: np.ndarray) -> np.ndarray:
    """Lane ``c`` delayed by ``c`` cycles (skew_matrix)."""
    rows, cols = m.shape
    out = np.full((rows + cols - 1, cols), -1, dtype=np.int64)
    for c in range(cols):
        out[c:c + rows, c] = m[:, c]
    return out


def _diagonals(m: np.ndarray) -> np.ndarray:
    """Elements along anti-diagonals, each from its bottom row up (the prefetch read-out)."""
    r, c = np.indices(m.shape)
    order = np.lexsort((-r.ravel(), (r + c).ravel()))
    return m.ravel()[order][None, :]


def _blocks(n: int, size: int):
    for f in range(math.ceil(n / size)):
        yield f * size, min(f * size + size, n)


def demand_and_prefetch(ifmap, filt, ofmap, R: int, C: int, dataflow: str):
    """(ifmap, filter, ofmap demand matrices; ifmap, filter prefetch matrices) as SCALE-Sim's
    systolic_compute_<dataflow> builds them (non-sparse path)."""
    dem_i, dem_f, dem_o = [], [], []
    if dataflow == "os":
        Sr, Sc, T = ifmap.shape[0], filt.shape[1], ifmap.shape[1]
        it = ifmap.T
        pre_i = _diagonals(np.concatenate([_pad(it[:, a:b], cols=R) for a, b in _blocks(Sr, R)]))
        pre_f = _diagonals(np.concatenate([_pad(filt[:, a:b], cols=C) for a, b in _blocks(Sc, C)]))
        for ca, cb in _blocks(Sc, C):
            for ra, rb in _blocks(Sr, R):
                dem_i.append(_skew(np.concatenate([_pad(it[:, ra:rb], cols=R), _gap(C - 1, R)])))
                dem_f.append(_skew(np.concatenate([_pad(filt[:, ca:cb], cols=C), _gap(R - 1, C)])))
                blk = np.flip(_pad(ofmap[ra:rb, ca:cb], rows=R, cols=C), 0)
                dem_o.append(_skew(np.concatenate([_gap(T - 1, C), blk])))
    elif dataflow == "ws":
        Sr, Sc, T = ifmap.shape[1], filt.shape[1], ifmap.shape[0]
        pre_i = _diagonals(np.concatenate([_pad(ifmap[:, a:b], cols=R) for a, b in _blocks(Sr, R)]))
        pre_f = np.concatenate([_pad(filt[:, a:b], cols=C) for a, b in _blocks(Sc, C)])
        for ca, cb in _blocks(Sc, C):
            for ra, rb in _blocks(filt.shape[0], R):
                blk = _pad(ifmap[:, ra:rb], cols=R)
                dem_i.append(_skew(np.concatenate([_gap(R, R), blk, _gap(C - 1, R)])))
                fblk = np.flip(_pad(filt[ra:rb, ca:cb], rows=R, cols=C), 0)
                dem_f.append(np.concatenate([fblk, _gap(R + C + T - 2, C)]))
                dem_o.append(_skew(np.concatenate([_gap(2 * R - 1, C), _pad(ofmap[:, ca:cb], cols=C)])))
    elif dataflow == "is":
        Sr, Sc, T = ifmap.shape[1], ifmap.shape[0], filt.shape[1]
        it = ifmap.T
        pre_i = np.concatenate([_pad(it[:, a:b], cols=C) for a, b in _blocks(Sc, C)])
        pre_f = _diagonals(np.concatenate([_pad(filt[a:b, :].T, cols=R) for a, b in _blocks(Sr, R)]))
        for ca, cb in _blocks(Sc, C):
            for ra, rb in _blocks(Sr, R):
                iblk = np.flip(_pad(it[ra:rb, ca:cb], rows=R, cols=C), 0)
                dem_i.append(np.concatenate([iblk, _gap(R + C + T - 2, C)]))
                fblk = _pad(filt[ra:rb, :].T, cols=R)
                dem_f.append(_skew(np.concatenate([_gap(R, R), fblk, _gap(C - 1, R)])))
                dem_o.append(_skew(np.concatenate([_gap(2 * R - 1, C), _pad(ofmap[ca:cb, :].T, cols=C)])))
    else:
        raise ValueError(f"dataflow {dataflow!r}; allowed: 'os', 'ws', 'is'")
    return (np.concatenate(dem_i), np.concatenate(dem_f), np.concatenate(dem_o), pre_i, pre_f)
