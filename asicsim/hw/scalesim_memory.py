"""Closed form of SCALE-Sim 3.0.0's DRAM traffic and prefetch timing, where it has one.

SCALE-Sim's SRAMs are double buffered (active fraction 0.5, one-byte words). Which numbers have a
closed form depends on the interface-bandwidth mode [single_layer_sim.py, memory/*.py]:

- CALC (estimate) mode [read_buffer_estimate_bw.py]: ifmap and filter buffers collect the distinct
  addresses a layer asks for into sets of ``floor(bytes / 100)``; while fewer than 50 sets have
  filled (``distinct < 50 * set_size``) everything is fetched once before the layer starts, at a
  hard-coded 10 words/cycle: DRAM reads = distinct addresses, start cycle
  ``-ceil(sets * set_size / 10)``, stop cycle -1. Reads never stall in this mode.
- USER mode [read_buffer.py]: the prefetch matrix (operand matrix padded to whole folds) is cut into
  lines of ``bank bandwidth`` words and the active half is fetched before the layer: DRAM reads
  ``lines * bandwidth`` with ``lines = min(ceil(active / bw), ceil(prefetch_words / bw))``, start
  ``-lines``, stop -1. No read ever misses (so no stall) while the valid addresses fit the
  active buffer's hash sets: ``floor(valid / ceil(bytes/100)) + 1 <= ceil(active / ceil(bytes/100))``.
- Ofmap [write_buffer.py]: drains at ``cols`` words/cycle (CALC) or the first USER bandwidth. While
  the layer's ofmap writes fit the drain half (``writes <= bytes - ceil(bytes/2)``) nothing drains
  during the layer; everything drains after the last ofmap line: start = "Total Cycles", stop
  ``+ ceil(writes / bw) - 1``, DRAM writes = valid ofmap writes.

Outside these conditions SCALE-Sim's numbers come from a cycle-by-cycle replay of evictions and
refills (which addresses were evicted when, a refill bandwidth derived from the cycles between set
completions, partial lines drained mid-layer); they are returned as NaN here, not guessed.
"""

from __future__ import annotations

import numpy as np

from asicsim.hw.scalesim_compute import ceil_div, valid_ifmap_entries

CALC_READ_BW_WORDS = 10  # SCALE-Sim's hard-coded ifmap/filter DRAM bandwidth in CALC mode
ACTIVE_SETS = 50  # int(0.5 * 100): sets in the active half of a CALC-mode read buffer


def _calc_read(distinct: np.ndarray, sram_kib) -> tuple[np.ndarray, ...]:
    set_size = np.asarray(sram_kib, dtype=np.int64) * 1024 // 100
    fits = (set_size >= 1) & (distinct < ACTIVE_SETS * set_size)
    sets = ceil_div(distinct, np.maximum(set_size, 1))
    start = -ceil_div(sets * set_size, CALC_READ_BW_WORDS)
    return fits, start, distinct


def _user_read(prefetch_words, valid_words, sram_kib, bw_words) -> tuple[np.ndarray, ...]:
    total = np.asarray(sram_kib, dtype=np.int64) * 1024
    bw = np.asarray(bw_words, dtype=np.int64)
    active = ceil_div(total, 2)
    per_set = ceil_div(total, 100)
    fits = valid_words // per_set + 1 <= ceil_div(active, per_set)
    lines = np.minimum(ceil_div(active, bw), ceil_div(prefetch_words, bw))
    return fits, -lines, lines * bw


def memory_model(comp: dict, g: dict, *, user_bandwidth, ifmap_sram_kib, filter_sram_kib,
                 ofmap_sram_kib, bandwidth_words, ifmap_bank_bandwidth_words,
                 filter_bank_bandwidth_words, cols) -> dict[str, np.ndarray]:
    """DRAM columns, stall cycles and the prefetch-inclusive total; NaN where not closed-form."""
    user = np.asarray(user_bandwidth, dtype=bool)
    distinct_ifmap = g["used_rows"] * g["used_cols"] * g["channels"]
    distinct_filter = g["K"] * g["N"]
    c_fit_i, c_start_i, c_reads_i = _calc_read(distinct_ifmap, ifmap_sram_kib)
    c_fit_f, c_start_f, c_reads_f = _calc_read(distinct_filter, filter_sram_kib)
    u_fit_i, u_start_i, u_reads_i = _user_read(comp["ifmap_prefetch_words"], valid_ifmap_entries(g),
                                               ifmap_sram_kib, ifmap_bank_bandwidth_words)
    u_fit_f, u_start_f, u_reads_f = _user_read(comp["filter_prefetch_words"], distinct_filter,
                                               filter_sram_kib, filter_bank_bandwidth_words)
    fit_i = np.where(user, u_fit_i, c_fit_i)
    fit_f = np.where(user, u_fit_f, c_fit_f)
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
    o_start = total
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
        "DRAM IFMAP Start Cycle": nan_unless(fit_i, start_i),
        "DRAM IFMAP Stop Cycle": nan_unless(fit_i, -1.0),
        "DRAM IFMAP Reads": nan_unless(fit_i, reads_i),
        "DRAM Filter Start Cycle": nan_unless(fit_f, start_f),
        "DRAM Filter Stop Cycle": nan_unless(fit_f, -1.0),
        "DRAM Filter Reads": nan_unless(fit_f, reads_f),
        "DRAM OFMAP Start Cycle": nan_unless(fit_o & stall_free, o_start),
        "DRAM OFMAP Stop Cycle": nan_unless(fit_o & stall_free, o_stop),
        "DRAM OFMAP Writes": nan_unless(fit_o, writes),
        "Total Cycles (incl. prefetch)": nan_unless(fit_all & stall_free,
                                                    o_stop - np.minimum(start_i, start_f)),
    }
