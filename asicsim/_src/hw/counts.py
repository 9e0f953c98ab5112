"""What one schedule of a GEMM costs on a systolic array: cycles, accesses and DRAM bytes, as arrays.

A *schedule* (chosen by :mod:`asicsim._src.hw.mapper`) tiles ``C[M,N] = A[M,K] B[K,N]`` for the on-chip
buffers: tiles ``Mt x Kt`` of A, ``Kt x Nt`` of B and ``Mt x Nt`` of C, a loop order named by the
operand that stays resident while the innermost tile loop runs (:data:`FAMILIES`), and whether
every tile is double-buffered (two halves: the next step's loads overlap this step's compute).
The array then works through each resident tile with its dataflow, as SCALE-Sim maps a whole GEMM
(os: outputs ``Sr = Mt, Sc = Nt`` stationary, ``Kt`` streamed; ws: weights ``Sr = Kt, Sc = Nt``,
``Mt`` streamed; is: inputs ``Sr = Kt, Sc = Mt``, ``Nt`` streamed; ``ceil(Sr/R) x ceil(Sc/C)`` folds).

DRAM bytes per repetition (an operand the DRAM does not hold is kept on chip: whole, moving
nothing, or streaming its overflow, when it moves the part of it its buffer does not keep beside
the schedule's share of tiles each time it would be fetched: :mod:`asicsim._src.hw.residency`):

=============== ======================= ===================== =============
family          A (ifmap, S_A)          B (filter, S_B)       C (ofmap)
=============== ======================= ===================== =============
``outputs``     ``S_A x T_n``           ``S_B x T_m``         ``S_C`` once
``weights``     ``S_A x T_n``           ``S_B`` once          ``S_C`` once
``activations`` ``S_A`` once            ``S_B x T_m``         ``S_C`` once
=============== ======================= ===================== =============

(``T_x = ceil(X / Xt)`` trips.) Where the design moves its stationary operand in whole array-sized
tiles (``array.whole_tiles``: ws weights, is inputs), each pass over it moves every fold's tile as
a whole ``R x C`` tile, padded: :mod:`asicsim._src.hw.whole_tiles` (and its block takes its padded
bytes in its buffer: :func:`asicsim._src.hw.tiles.padded`). The ``outputs`` family keeps the ``Mt x Nt`` block in the
partial-sum buffer across all of K (or in the buffer the design marks ``psum_spill``, at that
buffer's access energy). The other two keep their ``Mt x Na`` (weights) or ``Ma x Nt``
(activations) partial-sum tile on chip while K is whole; with ``Kt < K`` every K sliver but the
last writes the partial sums to DRAM and every one but the first reads them back
(``dram_psum_bytes``: ``2 (T_k - 1) M N`` accumulator-width bytes, through the partial-sum
buffer). The array works on ``Ma x Na`` of the block at a time (:class:`Schedule`; the whole
block by default): its folds, streamed trips and SRAM reads follow that tile. A
conv's A tile holds raw ifmap bytes (im2col happens between SRAM and the array), taken as the
im2col tile's share of the raw tensor (halo overlap between tiles is not counted).

Time: compute is the streamed cycles of every fold; fill/drain is ``2R + C - 2`` once per
repetition (``2r + c - 2`` over the used block, ``c = min(C, column tile)``, where the design's
``array.bypass_unused`` says operands and results bypass unused rows and columns) plus, for every later fold, the cycles by which reloading the stationary operand
outlasts the previous fold's stream (``max(0, r - stream)``). ``r = min(R, row tile)`` is the rows
the schedule's array tile spans (``Ma`` for os, ``Kt`` for ws and is): the tile sits in the rows
nearest the edge its stationary operand crosses (ws/is: weights or inputs shift in from the top,
so ``r`` rows take ``r`` shifts; os: outputs drain out at the bottom, ``r`` rows take ``r``
cycles), and the other operands pass the unused rows as pipeline stages, a latency paid once in
the ``2R + C - 2`` (skipped where they bypass them). A fold narrower than ``r`` still loads (drains) all ``r`` rows, as a 256-row
TPU weight tile is loaded whole. So a schedule uses part of a larger array at the smaller array's
per-fold cost. (SCALE-Sim's first-order model likewise charges an operand that fits the array by
its own spatial size ``S_R x S_C``, ``2 S_R + S_C + T - 2`` cycles: Samajdar et al., "A Systematic
Methodology for Characterizing Scalability of DNN Accelerators using SCALE-Sim", ISPASS 2020, eq. 1.)

Folds smaller than the array (:attr:`Schedule.fold_rows`, ``fold_cols``; 0: the array's sides): a
schedule may cut its array tile into folds of at most ``F_r`` rows and ``F_c`` columns, so a
larger array can run a smaller array's folds. ``F_r`` rows of the stationary operand sit in the
rows nearest the edge it crosses, as a partial fold's do, so they load (drain) in ``F_r`` shifts
with or without ``array.bypass_unused``; what a smaller fold saves there is the reloads
(``max(0, F_r - stream)`` a fold) and, where operands bypass unused rows and columns, the
fill/drain of the used block (``2 F_r + F_c - 2``); without bypass the other operands still cross
all ``R`` rows and ``C`` columns once (``2R + C - 2``), so a narrower fold there only adds folds
and the mapper leaves ``fold_cols`` at the array's. A design moving whole ``R x C`` tiles
(``array.whole_tiles``) moves one per fold, so its folds are the array's (the mapper keeps them).

DRAM transfers ``X`` overlap compute only when double-buffered: the first of ``s`` tile steps waits for its data and the later ones hide theirs behind the work,
``stall = X / s + max(0, X - busy) (s - 1) / s``; single-buffered, ``stall = X``. A double-buffered
schedule doubles the tiles of the operands the design lists in ``array.double_buffers`` (default:
all; :func:`asicsim._src.hw.residency.buffer_rows`), and only their transfers ``X_d`` overlap: the rest
``X_e`` (A: ifmap, B: filter, C: ofmap, spilled partial sums: psum) stalls,
``stall = X_e + X_d / s + max(0, X_d - busy) (s - 1) / s``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from asicsim._src.hw.count_inputs import (
    ACTIVATIONS,
    FAMILIES,
    IS,
    OS,
    OUTPUTS,
    WEIGHTS,
    WS,
    ZERO_CODES,
    ArrayHardware,
    BufferLayout,
    GemmProblem,
    Schedule,
    ceil_div,
)
from asicsim._src.hw.residency import resident_bytes
from asicsim._src.hw.whole_tiles import spatial_folds, whole_tile_scales

#: the inputs of a count (:mod:`asicsim._src.hw.count_inputs`) stay importable from here
__all__ = ['ACTIVATIONS', 'FAMILIES', 'IS', 'LEAN_SKIPS', 'OS', 'OUTPUTS', 'WEIGHTS', 'WS', 'ZERO_CODES', 'ArrayHardware', 'BufferLayout', 'GemmCounts', 'GemmProblem', 'Schedule', 'ceil_div', 'fold_sides', 'schedule_counts']


@dataclass(frozen=True)
class GemmCounts:
    """Counts of a scheduled GEMM (each an array). Accesses between SRAM and the array are in
    elements; DRAM in bytes. ``schedule`` and ``trips`` say which mapping produced them."""

    macs: np.ndarray
    macs_nonzero: np.ndarray
    psum_adds: np.ndarray
    folds: np.ndarray
    cycles_compute: np.ndarray
    cycles_fill_drain: np.ndarray
    cycles_stall: np.ndarray
    transfer_cycles: np.ndarray
    mapping_slots: np.ndarray
    mapped_pes: np.ndarray
    sram_ifmap_reads: np.ndarray
    sram_filter_reads: np.ndarray
    sram_psum_reads: np.ndarray
    sram_psum_writes: np.ndarray
    sram_psum_spilled: np.ndarray  # partial-sum reads (= writes) in the psum_spill buffer
    sram_ofmap_writes: np.ndarray
    dram_ifmap_bytes: np.ndarray
    dram_filter_bytes: np.ndarray
    dram_ofmap_bytes: np.ndarray
    dram_psum_bytes: np.ndarray  # partial sums written to DRAM and read back (half each way)
    footprint_ifmap_bytes: np.ndarray
    footprint_filter_bytes: np.ndarray
    footprint_ofmap_bytes: np.ndarray
    tiles_m: np.ndarray
    tiles_n: np.ndarray
    tiles_k: np.ndarray
    family: np.ndarray
    Mt: np.ndarray
    Nt: np.ndarray
    Kt: np.ndarray
    double_buffered: np.ndarray
    psum_spill: np.ndarray
    Ma: np.ndarray
    Na: np.ndarray
    streamed: np.ndarray
    tile_share: np.ndarray
    fold_rows: np.ndarray  # the rows (columns) of the array a fold takes (the array's sides by default)
    fold_cols: np.ndarray

    #: fields that describe the mapping rather than add up over GEMMs
    MAPPING = ("tiles_m", "tiles_n", "tiles_k", "family", "Mt", "Nt", "Kt", "double_buffered", "psum_spill",
               "Ma", "Na", "streamed", "tile_share", "fold_rows", "fold_cols")

    @property
    def dram_bytes(self) -> np.ndarray:
        return self.dram_ifmap_bytes + self.dram_filter_bytes + self.dram_ofmap_bytes + self.dram_psum_bytes

    @property
    def busy_cycles(self) -> np.ndarray:
        return self.cycles_compute + self.cycles_fill_drain

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))



#: fields :func:`schedule_counts` leaves None when ``lean`` (no measure of a schedule reads them;
#: a use raises)
LEAN_SKIPS = ("macs_nonzero", "folds", "mapping_slots", "mapped_pes", "footprint_ifmap_bytes",
              "footprint_filter_bytes", "footprint_ofmap_bytes", "Ma", "Na")


def fold_sides(hw: ArrayHardware, s: Schedule) -> tuple:
    """``(F_r, F_c)``: the rows and columns of the array one fold of ``s`` takes (its
    ``fold_rows`` and ``fold_cols``, at most the array's; 0: the array's)."""
    fr, fc = np.asarray(s.fold_rows, dtype=np.float64), np.asarray(s.fold_cols, dtype=np.float64)
    return np.where(fr > 0, np.minimum(hw.rows, fr), hw.rows), np.where(fc > 0, np.minimum(hw.cols, fc), hw.cols)


def schedule_counts(p: GemmProblem, hw: ArrayHardware, s: Schedule, lean: bool = False) -> GemmCounts:
    """Counts of ``p`` on ``hw`` under schedule ``s`` (module docstring for the model). ``lean``: only
    the fields the mapper's measures read (:data:`LEAN_SKIPS` are None, not computed; the others are
    the same values, from the same expressions)."""
    M, N, K, R, C, df = p.M, p.N, p.K, hw.rows, hw.cols, hw.dataflow
    Mt, Nt, Kt = s.Mt, s.Nt, s.Kt
    Tm, Tn, Tk = ceil_div(M, Mt), ceil_div(N, Nt), ceil_div(K, Kt)
    Ma = Mt if s.Ma is None else s.Ma  # the array's tile inside the resident block
    Na = Nt if s.Na is None else s.Na
    Tma, Tna = ceil_div(M, Ma), ceil_div(N, Na)
    fam = s.family
    reps = p.reps

    os_, ws_, is_ = df == OS, df == WS, df == IS
    # --- DRAM bytes per repetition -----------------------------------------------------------
    S_A, S_B, S_C = p.a_footprint, N * K * p.b_bytes, M * N * p.out_bytes
    mult_a = np.where(fam == ACTIVATIONS, 1.0, Tn)
    mult_b = np.where(fam == WEIGHTS, 1.0, Tm)
    kept = resident_bytes(p, hw, s, {"ifmap": mult_a, "filter": mult_b, "ofmap": 1.0})
    # the stationary operand moved in whole array-sized tiles, where the design says so
    pad_a, pad_b = whole_tile_scales(hw.whole_tiles, ws_, is_, R, C, M, N, K, Ma, Na, Kt)
    if hw.whole_tiles and np.any((np.asarray(s.fold_rows) > 0) | (np.asarray(s.fold_cols) > 0)):
        raise ValueError("a design with array.whole_tiles moves whole rows x cols tiles: its folds are the "
                         "array's (Schedule.fold_rows and fold_cols must be 0)")

    def moved(op, S, pad=1.0):  # bytes fetched per pass: all of it off chip, else what its buffer does not keep
        return S * pad if kept is None else np.where(p.off_chip[op], S * pad, S - kept[op])

    dram_a = reps * moved("ifmap", S_A, pad_a) * mult_a
    one_b = moved("filter", S_B, pad_b) * mult_b
    # shared weights (RNN steps): the last weight tile loaded is still there when the next
    # repetition starts (it runs the tile loops in reverse), the whole matrix if it is one tile
    # (in whole tiles: the block's)
    block_b = Kt * Nt * p.b_bytes * whole_tile_scales(hw.whole_tiles, ws_, is_, R, C, Mt, Nt, Kt, Ma, Na, Kt)[1]
    again_b = np.maximum(one_b - np.minimum(block_b, S_B * pad_b), 0.0)
    dram_b = np.where(p.shared_weights, one_b + (reps - 1) * again_b, reps * one_b)
    dram_c = reps * moved("ofmap", S_C)
    # weights/activations resident with K cut into Tk > 1 slivers: every sliver but the last
    # writes its Mt x Nt partial sums to DRAM and every one but the first reads them back
    spilled = np.where((fam != OUTPUTS) & (Tk > 1), (Tk - 1) * M * N, 0.0)
    dram_p = reps * 2 * spilled * p.acc_bytes

    # --- the array: folds per tile step, streamed cycles, reloads --------------------------------
    # folds along each spatial dimension, counted over its tiles (the last tile may be partial)
    row_dim, row_tile = np.where(os_, M, K), np.where(os_, Ma, Kt)
    col_dim, col_tile = np.where(is_, M, N), np.where(is_, Ma, Na)
    fr, fc = fold_sides(hw, s)  # a fold's rows and columns (module docstring)
    rows_f, cols_f = spatial_folds(row_dim, row_tile, fr), spatial_folds(col_dim, col_tile, fc)
    streamed_total = np.where(os_, K, np.where(ws_, M, N))
    stream_trips = np.where(os_, Tk, np.where(ws_, Tma, Tna))
    steps = Tm * Tn * Tk
    spatial = rows_f * cols_f  # folds per streamed trip
    folds = spatial * stream_trips
    compute = spatial * streamed_total / hw.mac_rate  # every fold streams its tile's share
    if hw.zero_weights == ZERO_CODES["skip"]:
        compute = np.ceil(compute * p.density)
    stream = streamed_total / stream_trips  # cycles one fold streams (tiles balanced)
    used_rows = np.minimum(fr, row_tile)  # the rows a fold of the array's tile spans (module docstring)
    reload = (folds - 1) * np.maximum(used_rows - stream, 0)  # all of them per fold, even a partial one
    # once per repetition across the whole array, or only the used block where operands bypass the rest
    used_cols = np.minimum(fc, col_tile)
    fill_drain = np.where(hw.bypass_unused, 2 * used_rows + used_cols - 2, 2 * R + C - 2) + reload

    # --- SRAM <-> array accesses (elements) -----------------------------------------------------
    a_reads = np.where(is_, M * K * Tna, M * K * cols_f)
    b_reads = np.where(os_, N * K * rows_f, np.where(ws_, N * K * Tma, N * K * cols_f))
    contributions = np.where(os_, Tk, rows_f)  # partial sums per output added outside the PEs
    psum_rw = np.where(contributions > 1, M * N * contributions, 0.0)
    pes_used = np.where(os_, M * N, np.where(ws_, K * N, K * M))

    # --- stalls --------------------------------------------------------------------------------
    dram = dram_a + dram_b + dram_c + dram_p
    transfer = dram / np.asarray(hw.dram_bytes_per_cycle, dtype=np.float64)
    busy = reps * (compute + fill_drain)
    db = s.double_buffered
    # double-buffered: the first step's share is exposed, the rest overlaps the later steps' work;
    # where the design doubles only some operands' tiles, the others' transfers stay exposed
    later = (reps * steps - 1) / (reps * steps)
    hidden, exposed = transfer, 0.0
    if not hw.doubles_all:
        two = {op: op in hw.double_buffers for op in ("ifmap", "filter", "ofmap", "psum")}
        parts = {"ifmap": dram_a, "filter": dram_b, "ofmap": dram_c, "psum": dram_p}
        bw = np.asarray(hw.dram_bytes_per_cycle, dtype=np.float64)
        hidden = sum((parts[k] for k in parts if two[k]), start=0.0) / bw
        exposed = sum((parts[k] for k in parts if not two[k]), start=0.0) / bw
    stall = np.where(db, exposed + hidden / (reps * steps) + np.maximum(hidden - busy, 0) * later, transfer)
    stall = np.where(dram > 0, stall, 0.0)

    macs = reps * M * N * K
    spill = np.asarray(s.psum_spill, dtype=bool)
    if lean:
        psum_sram = reps * (psum_rw * ~spill + spilled)
        return GemmCounts(**dict.fromkeys(LEAN_SKIPS), macs=macs,
            psum_adds=reps * M * N * np.maximum(contributions - 1, 0),
            cycles_compute=reps * compute, cycles_fill_drain=reps * fill_drain,
            cycles_stall=stall, transfer_cycles=transfer,
            sram_ifmap_reads=reps * a_reads, sram_filter_reads=reps * b_reads,
            sram_psum_reads=psum_sram, sram_psum_writes=psum_sram,
            sram_psum_spilled=reps * psum_rw * spill, sram_ofmap_writes=reps * M * N,
            dram_ifmap_bytes=dram_a, dram_filter_bytes=dram_b, dram_ofmap_bytes=dram_c, dram_psum_bytes=dram_p,
            tiles_m=Tm, tiles_n=Tn, tiles_k=Tk, family=fam, Mt=Mt, Nt=Nt, Kt=Kt, double_buffered=db,
            psum_spill=spill, streamed=s.streamed, tile_share=s.tile_share, fold_rows=fr, fold_cols=fc)
    return GemmCounts(
        macs=macs, macs_nonzero=macs * p.density, psum_adds=reps * M * N * np.maximum(contributions - 1, 0),
        folds=reps * folds, cycles_compute=reps * compute, cycles_fill_drain=reps * fill_drain,
        cycles_stall=stall, transfer_cycles=transfer,
        mapping_slots=reps * folds * R * C, mapped_pes=reps * pes_used * np.where(os_, Tk, np.where(ws_, Tma, Tna)),
        sram_ifmap_reads=reps * a_reads, sram_filter_reads=reps * b_reads,
        sram_psum_reads=reps * (psum_rw * ~spill + spilled), sram_psum_writes=reps * (psum_rw * ~spill + spilled),
        sram_psum_spilled=reps * psum_rw * spill, sram_ofmap_writes=reps * M * N,
        dram_ifmap_bytes=dram_a, dram_filter_bytes=dram_b, dram_ofmap_bytes=dram_c, dram_psum_bytes=dram_p,
        footprint_ifmap_bytes=reps * S_A, footprint_filter_bytes=np.where(p.shared_weights, S_B, reps * S_B),
        footprint_ofmap_bytes=reps * S_C, tiles_m=Tm, tiles_n=Tn, tiles_k=Tk,
        family=fam, Mt=Mt, Nt=Nt, Kt=Kt, double_buffered=db, psum_spill=spill,
        Ma=np.broadcast_to(Ma, np.shape(Mt)) * 1.0, Na=np.broadcast_to(Na, np.shape(Nt)) * 1.0,
        streamed=np.broadcast_to(s.streamed, np.shape(Mt)) * 1.0,
        tile_share=np.broadcast_to(s.tile_share, np.shape(Mt)) * 1.0,
        fold_rows=np.broadcast_to(fr, np.shape(Mt)) * 1.0, fold_cols=np.broadcast_to(fc, np.shape(Mt)) * 1.0)
