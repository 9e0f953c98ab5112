"""Folds of the array over a dimension, and what moving the stationary operand in whole
array-sized tiles does to its DRAM bytes (``array.whole_tiles``).

Definition: where the design stores and fetches the operand its dataflow keeps stationary (ws: the
weights ``B[K, N]``, is: the inputs ``A`` as the ``K x M`` matrix the array holds) in whole ``R x
C`` tiles, every fold's stationary tile moves as one whole tile, padded where the matrix does not
fill it. A pass over the operand moves ``rows_f x cols_f`` tiles of ``R C`` elements (the folds of
one streamed trip, :func:`spatial_folds` over the schedule's array tile: ``Kt`` rows, ``Na``
(ws) or ``Ma`` (is) columns) in place of ``K N`` (``K M``) elements: its bytes scale by
``rows_f R cols_f C / (K N)``. A conv's inputs (raw ifmap bytes, :mod:`asicsim._src.hw.counts`) scale
by the same share of its im2col matrix. Aligned tiles (multiples of the array's sides) reach the
least, ``ceil(K / R) ceil(N / C)`` tiles: TPU v1's 600 x 600 LSTM1 matrix moves 9 tiles of
64 KiB (Jouppi et al. 2017, Sec. 7: 9 steps on 256 x 256).
"""

from __future__ import annotations

import numpy as np


def spatial_folds(dim, tile, side):
    """Folds of a ``side``-wide array over ``dim`` cut into tiles of ``tile`` (the last partial)."""
    full = np.floor(dim / tile)
    return full * np.ceil(tile / side) + np.ceil((dim - full * tile) / side)


def whole_tile_scales(whole: bool, ws, is_, R, C, M, N, K, Ma, Na, Kt) -> tuple:
    """``(ifmap, filter)``: what whole-tile moves multiply the per-pass DRAM bytes of ``A`` and
    ``B`` by (module docstring); 1 where the design moves only the matrix's bytes (``whole``
    False) or the operand is not the stationary one."""
    if not whole:
        return 1.0, 1.0
    rows = spatial_folds(K, Kt, R) * R
    b = np.where(ws, rows * spatial_folds(N, Na, C) * C / (K * N), 1.0)
    a = np.where(is_, rows * spatial_folds(M, Ma, C) * C / (K * M), 1.0)
    return a, b
