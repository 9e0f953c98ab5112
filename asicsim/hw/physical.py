"""The physical cost model of a GEMM on a systolic array, in closed form, vectorised.

Every input may be a numpy array; outputs broadcast (layers along one axis, design points along
others), so a sweep of 10^5 design points is a handful of array operations. Only counts are made
here (cycles, elements, bytes); :mod:`asicsim.hw.cost` prices them in energy and names them.

Mapping (as SCALE-Sim, so the two modes can be compared fold by fold). A GEMM ``M x K`` times
``K x N`` on an ``R x C`` array: os keeps outputs in the PEs (rows ``Sr = M``, cols ``Sc = N``,
``T = K`` streamed); ws keeps weights (``Sr = K``, ``Sc = N``, ``T = M``); is keeps inputs (``Sr = K``,
``Sc = M``, ``T = N``). ``rf = ceil(Sr/R)`` row folds, ``cf = ceil(Sc/C)`` column folds, column folds
outer. Where the physical mode differs from SCALE-Sim, and why:

1. Partial sums of ws/is row folds stay on chip, in the buffer holding ``psum`` (or the ofmap
   buffer), read-modify-written in the accumulator format: ``rf M N`` writes and reads. When that
   buffer cannot hold all ``T x C`` partial sums of a column fold, ``T`` is cut into chunks that fit
   and the stationary operand is reloaded per chunk (TPU v1: 2048 rows of 256 accumulators per
   half), or the partial sums spill to DRAM (written and read back once per extra row fold),
   whichever moves fewer DRAM bytes; they must spill when not even one row of ``C`` fits.
   SCALE-Sim writes every row fold's partial sums to the ofmap SRAM and DRAM.
2. Folds are pipelined: the array fills and drains once per GEMM (``2R + C - 2`` cycles: the
   first stationary load or, in os, the final shift-out of ``R`` rows of outputs, plus the input
   skew and drain) and every later fold only adds the cycles by which reloading the stationary
   operand (``R`` rows) outlasts the previous fold's stream (``max(0, R - T)``), as in TPU v1's
   double-buffered weight registers. SCALE-Sim pays ``2R + C - 2`` (os ``R + C - 2``: it does not
   count shifting the outputs out) per fold.
3. Buffers hold the raw operands: a conv's ifmap is stored once and im2col happens between SRAM and
   the array, so DRAM traffic starts from the tensor's footprint, not the ``M x K`` im2col matrix.
4. DRAM traffic per operand of footprint ``S`` read by the array in ``P`` passes, each pass over a
   working set ``W`` (the whole operand, or the column block the inner loop reuses), with ``c``
   bytes of buffer: ``S (1 + (P - 1) max(0, 1 - c / W))``: a compiler-managed scratchpad pins ``c``
   bytes and re-fetches the rest on every later pass. It lies between the footprint (``c >= W``)
   and the SRAM reads (``c = 0``) and never grows with ``c``. An operand the DRAM does not hold
   (activations on TPU v1) moves off chip only for what does not fit: ``max(0, S - c)`` first.
   Buffers shared by several operands are split by water-filling (each operand gets its footprint
   or an equal share of what is left, whichever is smaller); a double-buffered buffer keeps half.
5. Stalls: per-fold max of compute and transfer, with the transfer spread evenly over the folds
   (``x = X / F`` bytes-time per fold): with double buffering the first fold's data is exposed and
   later transfers overlap compute, ``stall = x + max(0, X - busy)``; without it nothing overlaps,
   ``stall = X``. ``X`` is all DRAM traffic over the DRAM bandwidth, ``busy`` the array's cycles.
6. Sparse weights: ``density`` of nonzeros; storage bits per dense weight position come from the
   caller (compressed format with its metadata); ``skip`` arrays stream only nonzeros (compute
   cycles times density, an upper bound on what load-balanced skipping achieves).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from asicsim.hw.scalesim_compute import ceil_div

OS, WS, IS = 0, 1, 2
ZERO_CODES = {"compute": 0, "gate": 1, "skip": 2}


@dataclass(frozen=True)
class BufferLayout:
    """A design's buffer topology (static across a sweep): which operands each buffer holds, whether
    it is double-buffered. Capacities are arrays passed beside it, so they can be swept."""

    names: tuple[str, ...]
    holds: tuple[tuple[str, ...], ...]
    double_buffered: tuple[bool, ...]

    def home(self, operand: str) -> int:
        """Index of the buffer holding ``operand`` (psum falls back to the ofmap buffer)."""
        for i, h in enumerate(self.holds):
            if operand in h:
                return i
        if operand == "psum":
            return self.home("ofmap")
        raise KeyError(f"no buffer holds {operand!r}; buffers hold {dict(zip(self.names, self.holds, strict=True))}")


def water_fill(demands: list[np.ndarray], capacity: np.ndarray) -> list[np.ndarray]:
    """Split ``capacity`` among ``demands``: each gets ``min(demand, level)``, with the level set so
    the shares add up to the capacity (or everything fits). Vectorised over broadcast shapes."""
    if len(demands) == 1:
        return [np.minimum(demands[0], capacity)]
    d = np.stack(np.broadcast_arrays(*demands, capacity)[:-1], axis=-1).astype(np.float64)
    cap = np.broadcast_to(capacity, d.shape[:-1]).astype(np.float64)
    s = np.sort(d, axis=-1)
    n = s.shape[-1]
    before = np.concatenate([np.zeros_like(s[..., :1]), np.cumsum(s, axis=-1)[..., :-1]], axis=-1)
    levels = (cap[..., None] - before) / (n - np.arange(n))
    ok = levels <= s  # the level settles below the k-th smallest demand
    first = np.where(ok.any(axis=-1), ok.argmax(axis=-1), n)
    level = np.where(first < n, np.take_along_axis(levels, np.minimum(first, n - 1)[..., None], -1)[..., 0],
                     np.inf)
    return [np.minimum(d[..., i], level) for i in range(len(demands))]


def _reuse_traffic(footprint, passes, working_set, cap, held_off_chip):
    """DRAM bytes of one operand (module docstring, item 4)."""
    miss_w = np.where(working_set > 0, np.clip(1 - cap / np.maximum(working_set, 1e-300), 0, 1), 0)
    miss_s = np.where(footprint > 0, np.clip(1 - cap / np.maximum(footprint, 1e-300), 0, 1), 0)
    first = np.where(held_off_chip, 1.0, miss_s)
    return footprint * (first + (passes - 1) * miss_w)


def gemm_counts(*, M, N, K, rows, cols, dataflow, a_bits, b_store_bits, acc_bits, out_bits,
                layout: BufferLayout, capacity_bytes: list, dram_holds: frozenset | dict,
                dram_bytes_per_cycle, ifmap_elems=None, reps=1, shared_weights=False,
                density=1.0, zero_weights=0, mac_rate=1.0) -> dict[str, np.ndarray]:
    """Cycles and traffic of ``reps`` sequential GEMMs (module docstring for the model).

    ``b_store_bits``: stored bits per dense weight position (sparse formats: nonzeros and metadata
    amortised). ``ifmap_elems``: raw ifmap elements per GEMM (conv; default ``M K``).
    ``shared_weights``: the repetitions use one weight matrix (RNN time steps: it stays resident if
    it fits); otherwise each has its own operands (groups of a depthwise conv).
    ``capacity_bytes``: one array per buffer of ``layout``. ``dram_holds``: the operands that live
    off chip, or a mapping operand -> boolean array. ``zero_weights``: 0 compute, 1 gate, 2 skip.
    ``mac_rate``: the fraction of the peak MAC rate the formats run at (asicsim.hw.native); it
    divides the streaming cycles (a 16-bit pass on TPU v1 streams 4x as long).
    """
    f = np.float64
    M, N, K, R, C = (np.asarray(x, dtype=f) for x in (M, N, K, rows, cols))
    df = np.asarray(dataflow)
    reps = np.asarray(reps, dtype=f)
    density = np.asarray(density, dtype=f)
    a_B, b_B, acc_B, out_B = (np.asarray(x, dtype=f) / 8 for x in (a_bits, b_store_bits, acc_bits, out_bits))
    a_raw = M * K if ifmap_elems is None else np.asarray(ifmap_elems, dtype=f)
    os_, ws_ = df == OS, df == WS
    Sr = np.where(os_, M, K)
    Sc = np.where(df == IS, M, N)
    T = np.where(os_, K, np.where(ws_, M, N))
    rf, cf = ceil_div(Sr, R), ceil_div(Sc, C)
    used_cols = np.minimum(C, Sc)
    accumulate = ~os_ & (rf > 1)  # ws/is row folds add partial sums outside the array

    # --- capacities: resident bytes per operand (water-filled per buffer) ------------------------
    S_A, S_B, S_O = a_raw * a_B, N * K * b_B, M * N * out_B
    psum_need = np.where(accumulate, T * used_cols * acc_B, 0.0)
    demand = {"ifmap": S_A, "filter": S_B, "ofmap": S_O, "psum": psum_need}
    homes: dict[int, list[str]] = {}
    for op in ("ifmap", "filter", "ofmap", "psum"):
        homes.setdefault(layout.home(op), []).append(op)
    cap: dict[str, np.ndarray] = {}
    for i, ops in homes.items():
        resident = np.asarray(capacity_bytes[i], dtype=f) / (2 if layout.double_buffered[i] else 1)
        cap.update(zip(ops, water_fill([demand[o] for o in ops], resident), strict=True))

    # --- DRAM traffic of a plan with `chunks` partial-sum chunks (item 4) -------------------------
    block_A = np.minimum(S_A, K * used_cols * a_B)  # is: the C pixels' windows preloaded per fold
    block_B = np.minimum(S_B, K * used_cols * b_B)  # os/ws: the C filters reused by the inner loop
    W_A = np.where(df == IS, block_A, S_A)
    W_B = np.where(df == IS, S_B, block_B)
    off = {op: np.asarray(dram_holds[op] if isinstance(dram_holds, dict) else op in dram_holds)
           for op in ("ifmap", "filter", "ofmap")}

    def operand_traffic(chunks):
        ifmap_passes = np.where(df == IS, chunks, cf)
        filter_passes = np.where(os_, rf, np.where(ws_, chunks, cf))
        dram_a = reps * _reuse_traffic(S_A, ifmap_passes, W_A, cap["ifmap"], off["ifmap"])
        one_b = _reuse_traffic(S_B, filter_passes, W_B, cap["filter"], off["filter"])
        # shared weights: later repetitions find what stayed resident (Baidu's persistent RNN)
        again_b = _reuse_traffic(S_B, filter_passes, W_B, cap["filter"], False)
        dram_b = np.where(shared_weights, one_b + (reps - 1) * again_b, reps * one_b)
        return ifmap_passes, filter_passes, dram_a, dram_b

    # --- partial sums (item 1): chunk T so they fit, or spill them, whichever moves fewer bytes --
    rows_fit = np.floor(cap["psum"] / np.maximum(used_cols * acc_B, 1e-300))
    fit = np.where(accumulate, np.clip(rows_fit, 1, T), T)
    chunked = ceil_div(T, fit)
    spill_bytes = reps * np.where(accumulate, (rf - 1) * M * N * acc_B, 0.0)  # written and read back
    *_, a_chunked, b_chunked = operand_traffic(chunked)
    *_, a_one, b_one = operand_traffic(1.0)
    spill = accumulate & ((rows_fit < 1) | (a_one + b_one + 2 * spill_bytes < a_chunked + b_chunked))
    chunks = np.where(spill, 1.0, chunked)
    chunk = ceil_div(T, chunks)  # balanced: the first chunks are the largest, none is tiny
    last = T - (chunks - 1) * chunk
    folds = rf * cf * chunks
    ifmap_passes, filter_passes, dram_a, dram_b = operand_traffic(chunks)
    dram_o = reps * np.where(off["ofmap"], S_O, np.maximum(S_O - cap["ofmap"], 0))
    dram_psum = np.where(spill, spill_bytes, 0.0)

    # --- cycles (item 2; skip: item 6) -----------------------------------------------------------
    stream = rf * cf * T
    stream = np.where(zero_weights == ZERO_CODES["skip"], np.ceil(stream * density), stream)
    # every fold but a repetition's first reloads R rows while the previous fold streams
    reload = (rf * cf * ((chunks - 1) * np.maximum(R - chunk, 0) + np.maximum(R - last, 0))
              - np.maximum(R - chunk, 0))
    compute = reps * stream / np.asarray(mac_rate, dtype=f)
    fill_drain = reps * (2 * R + C - 2 + reload)

    # --- accesses between SRAM and the array (elements) ------------------------------------------
    sram_ifmap_reads = reps * ifmap_passes * M * K
    sram_filter_reads = reps * filter_passes * N * K
    psum_rw = reps * np.where(accumulate, rf * M * N, 0.0)
    ofmap_writes = reps * M * N

    # --- stalls (item 5) -------------------------------------------------------------------------
    dram_bytes = dram_a + dram_b + dram_o + 2 * dram_psum
    transfer = dram_bytes / np.asarray(dram_bytes_per_cycle, dtype=f)
    busy = compute + fill_drain
    # transfers overlap compute only if every buffer that DRAM feeds or drains is double-buffered
    overlap = True
    for op in ("ifmap", "filter", "ofmap"):
        overlap = overlap & (~off[op] | layout.double_buffered[layout.home(op)])
    per_fold = transfer / (reps * folds)
    stall = np.where(overlap, per_fold + np.maximum(transfer - busy, 0), transfer)
    stall = np.where(dram_bytes > 0, stall, 0.0)

    return {
        "macs": reps * M * N * K,
        "macs_nonzero": reps * M * N * K * density,
        "folds": reps * folds, "row_folds": rf, "col_folds": cf, "psum_chunks": chunks,
        "psum_spill": spill,
        "cycles_compute": compute, "cycles_fill_drain": fill_drain, "cycles_stall": stall,
        "mapping_slots": reps * rf * cf * R * C, "mapped_pes": reps * Sr * Sc,
        "transfer_cycles": transfer,
        # per operand: SRAM<->array (elements), SRAM<->DRAM (bytes)
        "sram.ifmap.reads": sram_ifmap_reads, "sram.filter.reads": sram_filter_reads,
        "sram.psum.reads": psum_rw, "sram.psum.writes": psum_rw,
        "sram.ofmap.writes": ofmap_writes,
        "dram.ifmap.reads_bytes": dram_a, "dram.filter.reads_bytes": dram_b,
        "dram.ofmap.writes_bytes": dram_o,
        "dram.psum.writes_bytes": dram_psum, "dram.psum.reads_bytes": dram_psum,
        "bytes.ifmap": a_B, "bytes.filter": b_B, "bytes.ofmap": out_B, "bytes.psum": acc_B,
        "footprint.ifmap_bytes": reps * S_A,
        "footprint.filter_bytes": np.where(shared_weights, S_B, reps * S_B),
        "footprint.ofmap_bytes": reps * S_O,
        "psum_adds": reps * np.where(accumulate, (rf - 1) * M * N, 0.0),
    }
