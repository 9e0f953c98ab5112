"""Closed form of SCALE-Sim 3.0.0's DRAM traffic and prefetch timing, where it has one.

SCALE-Sim's SRAMs are double buffered (active fraction 0.5, one-byte words). Which numbers have a
closed form depends on the interface-bandwidth mode [single_layer_sim.py, memory/*.py]:

- CALC (estimate) mode [read_buffer_estimate_bw.py]: ifmap and filter buffers collect the
  addresses that miss into sets of ``floor(bytes / 100)``; every set is fetched exactly once, so
  DRAM reads = misses. While fewer than 50 sets have filled (``distinct < 50 * set_size``)
  everything is fetched before the layer starts, at a hard-coded 10 words/cycle: DRAM reads =
  distinct addresses, start cycle ``-ceil(sets * set_size / 10)``, stop cycle -1. Otherwise the
  first 50 sets are fetched so as to end one cycle before the first valid request (demand line
  ``l``): start cycle ``l - ceil(50 * set_size / 10)``; the reads are still the distinct addresses
  when no address is asked for twice (each is one miss); the later refills (stop cycle, re-reads)
  need the replay. Reads never stall in this mode.
- USER mode [read_buffer.py]: the prefetch matrix (operand matrix padded to whole folds) is cut into
  lines of ``bank bandwidth`` words and the active half is fetched before the layer: DRAM reads
  ``lines * bandwidth`` with ``lines = min(ceil(active / bw), ceil(prefetch_words / bw))``, start
  ``-lines``, stop -1. No read ever misses (so no stall) while the valid addresses fit the
  active buffer's hash sets: ``floor(valid / ceil(bytes/100)) + 1 <= ceil(active / ceil(bytes/100))``.
- Ofmap [write_buffer.py]: drains at ``cols`` words/cycle (CALC) or the first USER bandwidth. While
  the layer's ofmap writes fit the drain half (``writes <= bytes - ceil(bytes/2)``) nothing drains
  during the layer; everything drains after the last ofmap line: start = "Total Cycles", stop
  ``+ ceil(writes / bw) - 1``, DRAM writes = valid ofmap writes. Otherwise the first drain starts
  at the demand line of the write that fills the drain half (closed form per fold + bisection);
  later drains, the stop cycle and the write count (SCALE-Sim counts a partly filled line as full
  when it is not the last of a drain) need the replay.

Outside these conditions SCALE-Sim's numbers come from a cycle-by-cycle replay of evictions and
refills (which addresses were evicted when, a refill bandwidth derived from the cycles between set
completions, partial lines drained mid-layer); they are returned as NaN here, not guessed, and
:mod:`asicsim._src.hw.scalesim_compat` replays USER-mode layers that stall
(:mod:`asicsim._src.hw.scalesim_replay`).
"""

from __future__ import annotations

import numpy as np

from asicsim._src.hw.scalesim_compute import ceil_div, valid_ifmap_entries

CALC_READ_BW_WORDS = 10  # SCALE-Sim's hard-coded ifmap/filter DRAM bandwidth in CALC mode
ACTIVE_SETS = 50  # int(0.5 * 100): sets in the active half of a CALC-mode read buffer


def _calc_read(distinct, requests, first_line, sram_kib) -> tuple[np.ndarray, ...]:
    """CALC mode: (fits, start cycle, reads known, reads)."""
    set_size = np.asarray(sram_kib, dtype=np.int64) * 1024 // 100
    fits = (set_size >= 1) & (distinct < ACTIVE_SETS * set_size)
    sets = ceil_div(distinct, np.maximum(set_size, 1))
    # fits: all sets fetched before cycle 0; else the first 50 sets end one cycle before the first
    # valid request (their line index) and take ceil(50 * set_size / 10) cycles
    start = np.where(fits, -ceil_div(sets * set_size, CALC_READ_BW_WORDS),
                     first_line - ceil_div(ACTIVE_SETS * set_size, CALC_READ_BW_WORDS))
    # every miss is fetched once; each address asked for once is exactly one miss
    reads_known = (set_size >= 1) & (fits | (requests == distinct))
    return fits, start, reads_known, distinct


def _user_read(prefetch_words, valid_words, sram_kib, bw_words) -> tuple[np.ndarray, ...]:
    total = np.asarray(sram_kib, dtype=np.int64) * 1024
    bw = np.asarray(bw_words, dtype=np.int64)
    active = ceil_div(total, 2)
    per_set = ceil_div(total, 100)
    fits = valid_words // per_set + 1 <= ceil_div(active, per_set)
    lines = np.minimum(ceil_div(active, bw), ceil_div(prefetch_words, bw))
    return fits, -lines, lines * bw


def _ofmap_first_drain_line(comp: dict, R, C, df, drain) -> np.ndarray:
    """Demand line of the ofmap write that first fills the drain half (the (drain+1)-th write).

    Within a fold each used lane c writes ``n`` consecutive lines from line ``a + c``: os
    ``a = T - 1 + R - rows_used``, ``n = rows_used``; ws/is ``a = 2R - 1``, ``n = T``. Folds run
    column-fold major. The fold is found by division; the line within it by bisection on the
    cumulative count ``sum_c clip(l - a - c + 1, 0, n)`` (22 vectorised steps, no loop over folds).
    """
    os_ = df == 0
    T, rf, cf = comp["T"], comp["row_folds"], comp["col_folds"]
    ur_last, uc_last = comp["rows_last_fold"], comp["cols_last_fold"]
    n_full = np.where(os_, np.minimum(R, comp["Sr"]), T)  # writes per lane, all but os' last fold
    per_col_block = np.where(os_, comp["Sr"], rf * T)  # writes per lane over one column fold
    target = drain + 1
    fc = np.minimum((target - 1) // (C * per_col_block), cf - 1)
    rem = target - fc * C * per_col_block
    lanes = np.where(fc < cf - 1, C, uc_last)
    fr = np.minimum((rem - 1) // (lanes * n_full), rf - 1)
    rem = rem - fr * lanes * n_full
    n = np.where(os_ & (fr == rf - 1), ur_last, n_full)
    a = np.where(os_, T - 1 + R - n, 2 * R - 1)

    def written(line):  # writes of this fold up to and including `line`, closed form in lanes
        # lanes c < lanes with k = line - a - c + 1 clipped to [0, n]: sum over an arithmetic run
        hi = line - a + 1  # k for lane 0
        full = np.minimum(np.maximum(hi - n + 1, 0), lanes)  # lanes with k >= n
        part_hi = np.maximum(hi - full, 0)  # k of the first partial lane
        part = np.maximum(np.minimum(lanes - full, part_hi), 0)  # lanes with 0 < k < n
        return full * n + part * (2 * part_hi - part + 1) // 2

    lo = np.zeros_like(rem)
    hi = np.broadcast_to(comp["lines_per_fold"], rem.shape).copy()
    for _ in range(int(np.ceil(np.log2(max(int(hi.max()), 2)))) + 1):  # bisection steps, not folds
        mid = (lo + hi) // 2
        enough = written(mid) >= rem
        hi = np.where(enough, mid, hi)
        lo = np.where(enough, lo, mid + 1)
    return (fc * rf + fr) * comp["lines_per_fold"] + hi


def memory_model(comp: dict, g: dict, *, user_bandwidth, ifmap_sram_kib, filter_sram_kib,
                 ofmap_sram_kib, bandwidth_words, ifmap_bank_bandwidth_words,
                 filter_bank_bandwidth_words, rows_, cols, df_) -> dict[str, np.ndarray]:
    """DRAM columns, stall cycles and the prefetch-inclusive total; NaN where not closed-form."""
    user = np.asarray(user_bandwidth, dtype=bool)
    distinct_ifmap = g["used_rows"] * g["used_cols"] * g["channels"]
    distinct_filter = g["K"] * g["N"]
    valid_ifmap = valid_ifmap_entries(g)
    # a mode no design point uses is not evaluated: placeholders that the np.where below never
    # select (each mode costs ~20 small array operations, which dominate on small networks)
    c_fit_i, c_start_i, c_known_i, c_reads_i = c_fit_f, c_start_f, c_known_f, c_reads_f = (
        False, 0, False, 0)
    if not user.all():
        c_fit_i, c_start_i, c_known_i, c_reads_i = _calc_read(
            distinct_ifmap, valid_ifmap * comp["ifmap_passes"], comp["SRAM IFMAP Start Cycle"] - 1,
            ifmap_sram_kib)
        c_fit_f, c_start_f, c_known_f, c_reads_f = _calc_read(
            distinct_filter, distinct_filter * comp["filter_passes"],
            comp["SRAM Filter Start Cycle"] - 1, filter_sram_kib)
    u_fit_i, u_start_i, u_reads_i = u_fit_f, u_start_f, u_reads_f = (False, 0, 0)
    if user.any():
        u_fit_i, u_start_i, u_reads_i = _user_read(comp["ifmap_prefetch_words"], valid_ifmap,
                                                   ifmap_sram_kib, ifmap_bank_bandwidth_words)
        u_fit_f, u_start_f, u_reads_f = _user_read(comp["filter_prefetch_words"], distinct_filter,
                                                   filter_sram_kib, filter_bank_bandwidth_words)
    fit_i = np.where(user, u_fit_i, c_fit_i)
    fit_f = np.where(user, u_fit_f, c_fit_f)
    # CALC: start cycles always closed-form; reads when they fit or nothing is asked for twice
    start_known_i = np.where(user, u_fit_i, np.asarray(ifmap_sram_kib) * 1024 >= 100)
    start_known_f = np.where(user, u_fit_f, np.asarray(filter_sram_kib) * 1024 >= 100)
    reads_known_i = np.where(user, u_fit_i, c_known_i)
    reads_known_f = np.where(user, u_fit_f, c_known_f)
    start_i = np.where(user, u_start_i, c_start_i)
    start_f = np.where(user, u_start_f, c_start_f)
    reads_i = np.where(user, u_reads_i, c_reads_i)
    reads_f = np.where(user, u_reads_f, c_reads_f)

    ofmap_total = np.asarray(ofmap_sram_kib, dtype=np.int64) * 1024
    writes = comp["ofmap_words"]
    fit_o = writes <= ofmap_total - ceil_div(ofmap_total, 2)
    out_bw = np.where(user, np.asarray(bandwidth_words, dtype=np.int64),
                      np.asarray(cols, dtype=np.int64))
    total = comp["Total Cycles"]
    drain = ofmap_total - ceil_div(ofmap_total, 2)
    # fits: everything drains after the last line; else the first drain starts at the write that
    # fills the drain half (no stall can precede it when the reads do not stall)
    o_start = total
    if not fit_o.all():  # (a data-dependent shortcut: the bisection is only needed on overflow)
        o_start = np.where(fit_o, total, _ofmap_first_drain_line(
            comp, np.asarray(rows_, dtype=np.int64), np.asarray(cols, dtype=np.int64), df_, drain))
    o_start_known = np.where(user, fit_i & fit_f, True)
    o_stop = total + ceil_div(writes, out_bw) - 1

    def nan_unless(ok, x):
        return np.where(ok, x, np.nan)

    # CALC mode never stalls (reads are not timed; the ofmap drains at `cols` words/cycle, as fast as
    # the array writes); USER mode stalls only after a read miss or on a full ofmap buffer.
    stall_free = np.where(user, fit_i & fit_f & fit_o, True)
    fit_all = fit_i & fit_f & fit_o
    return {
        "stall_free": stall_free, "memory_closed_form": fit_all,
        "Stall Cycles": nan_unless(stall_free, 0.0),
        "DRAM IFMAP Start Cycle": nan_unless(start_known_i, start_i),
        "DRAM IFMAP Stop Cycle": nan_unless(fit_i, -1.0),
        "DRAM IFMAP Reads": nan_unless(reads_known_i, reads_i),
        "DRAM Filter Start Cycle": nan_unless(start_known_f, start_f),
        "DRAM Filter Stop Cycle": nan_unless(fit_f, -1.0),
        "DRAM Filter Reads": nan_unless(reads_known_f, reads_f),
        "DRAM OFMAP Start Cycle": nan_unless(o_start_known, o_start),
        "DRAM OFMAP Stop Cycle": nan_unless(fit_o & stall_free, o_stop),
        "DRAM OFMAP Writes": nan_unless(fit_o, writes),
        "Total Cycles (incl. prefetch)": nan_unless(fit_all & stall_free,
                                                    o_stop - np.minimum(start_i, start_f)),
    }
