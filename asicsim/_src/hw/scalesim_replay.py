"""SCALE-Sim 3.0.0's cycle-by-cycle memory replay in USER (interface-bandwidth) mode: "Total
Cycles" and "Stall Cycles" of layers whose reads miss or whose ofmap buffer fills.

The closed form (:mod:`asicsim._src.hw.scalesim_memory`) covers layers that never stall; a layer that
does gets its two numbers here, by the same steps SCALE-Sim takes (read from its source; files in
brackets, package ``scalesim`` 3.0.0):

- Operand matrices [compute/operand_matrix.py]: ifmap addresses per (ofmap pixel, window element),
  -1 where a window overhangs the ifmap; filter addresses per (window element, filter); ofmap per
  (pixel, filter).
- Per-cycle demand matrices and the prefetch order [compute/systolic_compute_{os,ws,is}.py]: per
  fold (column folds outer), the operand block padded to the array, gap lines of -1, flipped or
  skewed one cycle per lane; prefetch matrices are the operand blocks stacked per fold, some read
  out along anti-diagonals.
- Read buffers [memory/read_buffer.py]: the prefetch matrix is cut into lines of the bank bandwidth
  and its valid addresses into sets of ``ceil(bytes / 100)``; half the buffer is active. Before the
  first demand line the active half is fetched (done one cycle before it); a request whose address
  is in no active set rotates the window by the prefetch half's sets and fetches
  ``ceil(prefetch / bw)`` lines after the previous fetch (plus the read port's 1-cycle latency), until
  it hits. The line's extra latency grows by ``last fetch - (cycle + offset)``, twice when
  positive: 3.0.0 adds it once unconditionally and again when positive (the double count that
  SCALE-Sim's commit 22f88b1, after 3.0.0, removed), so a fetch that finished early also shortens it.
- Ofmap write buffer [memory/write_buffer.py]: writes fill lines of the interface bandwidth; once
  fewer than half the buffer is free a drain of ``ceil(drain half / bw)`` lines starts at the
  current cycle and frees what it drains; a write that finds the buffer full while a drain runs
  waits for the drain's end.
- The loop [memory/double_buffered_scratchpad_mem.py ``service_memory_requests``]: demand line
  ``i`` is issued at ``i + stalls so far``; each line adds ``max`` of the three buffers' extra
  latencies (reads less their 1-cycle hit latency) to the stalls; "Total Cycles" is the latest
  ofmap line's cycle, "Stall Cycles" the sum.

The replay walks every demand address in Python, as SCALE-Sim does (about as fast: seconds for a
small layer, minutes for a large one), so it runs only for the rows the closed form cannot give.
The operand and demand matrices are built in :mod:`asicsim._src.hw.scalesim_demand`.
"""

from __future__ import annotations

import math

import numpy as np

from asicsim._src.hw.scalesim_demand import demand_and_prefetch as demand_and_prefetch
from asicsim._src.hw.scalesim_demand import operand_matrices as operand_matrices

HIT_LATENCY = 1  # read_buffer.hit_latency
READ_PORT_LATENCY = 1  # read_port.latency without Ramulator traces
WRITE_PORT_LATENCY = 0  # write_port.latency
ACTIVE_FRACTION = 0.5  # single_layer_sim: active_buf_frac for every buffer


class _ReadBuffer:
    """read_buffer.py in USER mode (no custom layout, no Ramulator)."""

    def __init__(self, prefetch: np.ndarray, total_bytes: int, bw: int):
        self.bw = bw
        total = total_bytes
        self.active_size = math.ceil(total * ACTIVE_FRACTION)
        self.prefetch_size = total - self.active_size
        flat = prefetch.ravel()  # set_fetch_matrix: row-major into bw-wide lines (padding is -1)
        per_set = math.ceil(total / 100)
        valid = flat[flat != -1]
        self.sets_of: dict[int, list[int]] = {}
        for n, addr in enumerate(valid.tolist()):  # prepare_hashed_buffer
            self.sets_of.setdefault(addr, []).append(n // per_set)
        self.num_lines = len(valid) // per_set + 1  # the last (possibly empty) set is a line too
        active = min(math.ceil(self.active_size / per_set), self.num_lines)
        self.num_active = active
        self.num_prefetch = min(self.num_lines - active, math.ceil(self.prefetch_size / per_set))
        self.window = (0, active)
        self.fetch_lines = math.ceil(self.prefetch_size / bw)
        # prefetch_active_buffer: the active half, at most the whole fetch matrix (padding included)
        self.first_lines = min(math.ceil(self.active_size / bw), math.ceil(flat.size / bw))
        self.last_fetch = None
        self.refills = 0

    def _hit(self, addr: int) -> bool:
        start, end = self.window
        ids = self.sets_of.get(addr, ())
        if start < end:
            return any(start <= s < end for s in ids)
        return any(s >= start or s < end for s in ids)

    def _new_prefetch(self) -> None:
        start = (self.window[0] + self.num_prefetch) % self.num_lines
        self.window = (start, (start + self.num_active) % self.num_lines)
        self.refills += 1
        # lines requested at last + 1 .. last + n, each answered after the port latency
        self.last_fetch += self.fetch_lines + READ_PORT_LATENCY

    def dram(self) -> tuple[float, float, int]:
        """(start cycle, stop cycle, reads) of the DRAM side (get_external_access_start_stop_cycles:
        the first fetch's lines answer at -lines .. -1 when the first demand line is cycle 0)."""
        reads = (self.first_lines + self.refills * self.fetch_lines) * self.bw
        return self.first_cycle - self.first_lines, self.last_fetch, reads

    def service_line(self, line, cycle: float) -> float:
        """Extra latency of one demand line issued at ``cycle`` (service_reads, one line)."""
        if self.last_fetch is None:  # prefetch_active_buffer: done one cycle before the first line
            self.first_cycle = cycle
            self.last_fetch = cycle - 1
        offset = HIT_LATENCY
        for addr in line:
            if addr == -1:
                continue
            while not self._hit(addr):
                self._new_prefetch()
                potential = self.last_fetch - (cycle + offset)
                offset += potential
                if potential > 0:
                    offset += potential
        return offset - HIT_LATENCY


class _WriteBuffer:
    """write_buffer.py: the ofmap buffer and its drains (write port latency 0)."""

    def __init__(self, total_bytes: int, bw: int):
        self.total = total_bytes
        self.active_size = math.ceil(total_bytes * ACTIVE_FRACTION)
        self.drain_size = total_bytes - self.active_size
        self.bw = bw
        self.free = total_bytes
        self.line_fill = 0  # elements in the line being filled
        self.lines: list[int] = []  # valid elements of each line handed to the drain queue
        self.pending: list[int] = []  # full lines not yet handed over (the trace cache)
        self.drain_start = 0
        self.drain_end_cycle = 0
        self.drained = 0  # elements written to DRAM
        self.first_drain = math.inf
        self.last_drain = -math.inf

    def _store(self) -> None:
        self.line_fill += 1
        self.free -= 1
        if self.line_fill == self.bw:
            self.pending.append(self.bw)
            self.line_fill = 0

    def _flush(self) -> None:  # append_to_trace_mat(force=True)
        if self.line_fill:
            self.pending.append(self.line_fill)
            self.line_fill = 0
        self.lines.extend(self.pending)
        self.pending = []

    def _drain(self, start_cycle: float) -> float:  # empty_drain_buf
        n = math.ceil(self.drain_size / self.bw)
        end = min(self.drain_start + n, len(self.lines))
        count = end - self.drain_start
        if count <= 0:
            raise RuntimeError("SCALE-Sim replay: a drain found no line to drain (SCALE-Sim fails here too)")
        data = (count - 1) * self.bw + self.lines[end - 1]  # only the last line's padding is left out
        self.free += data
        self.drained += data
        self.drain_start = end
        self.first_drain = min(self.first_drain, start_cycle + WRITE_PORT_LATENCY)
        self.last_drain = max(self.last_drain, start_cycle + count - 1 + WRITE_PORT_LATENCY)
        return start_cycle + (count - 1) + WRITE_PORT_LATENCY

    def drain_all(self, cycle: float) -> None:
        """empty_all_buffers after the last demand line (issued at its ``cycle``)."""
        self._flush()
        while self.drain_start < len(self.lines):
            self.drain_end_cycle = self._drain(cycle)
            cycle = self.drain_end_cycle + 1

    def service_line(self, line, cycle: float) -> float:
        offset = 0
        current = cycle
        for addr in line:
            if addr == -1:
                continue
            self._store()
            if current < self.drain_end_cycle:
                if not self.free > 0:
                    offset += max(self.drain_end_cycle - current, 0)
                    current = self.drain_end_cycle
            elif self.free < self.total - self.drain_size:
                self._flush()
                self.drain_end_cycle = self._drain(current)
        return current


def replay_layer(layer: tuple, R: int, C: int, dataflow: str, ifmap_kib: int, filter_kib: int,
                 ofmap_kib: int, bandwidth_words: int, ifmap_bank_bw: int,
                 filter_bank_bw: int) -> dict[str, float]:
    """SCALE-Sim's report numbers that depend on the replay, for one conv-form layer
    ``(H, W, Fh, Fw, C, N, stride)`` on its USER-mode memory system: "Total Cycles", "Stall
    Cycles", "Total Cycles (incl. prefetch)" and the SRAM and DRAM start/stop cycles, reads and
    writes (COMPUTE_REPORT / DETAILED_ACCESS_REPORT column names)."""
    ifmap, filt, ofmap = operand_matrices(*layer)
    dem_i, dem_f, dem_o, pre_i, pre_f = demand_and_prefetch(ifmap, filt, ofmap, R, C, dataflow)
    rd_i = _ReadBuffer(pre_i, ifmap_kib * 1024, ifmap_bank_bw)
    rd_f = _ReadBuffer(pre_f, filter_kib * 1024, filter_bank_bw)
    wr = _WriteBuffer(ofmap_kib * 1024, bandwidth_words)
    stalls = 0
    served = np.empty((len(dem_i), 3))  # serviced cycle of each demand line: ifmap, filter, ofmap
    for i, (li, lf, lo) in enumerate(zip(dem_i.tolist(), dem_f.tolist(), dem_o.tolist(), strict=True)):
        cycle = i + stalls
        s_i = rd_i.service_line(li, cycle)
        s_f = rd_f.service_line(lf, cycle)
        out = wr.service_line(lo, cycle)
        served[i] = cycle + s_i + HIT_LATENCY, cycle + s_f + HIT_LATENCY, out
        stalls += int(max(s_i, s_f, out - cycle))
    wr.drain_all(served[-1, 2])
    out = {"Total Cycles": float(int(served[:, 2].max())), "Stall Cycles": float(stalls)}
    for k, (name, dem) in enumerate((("IFMAP", dem_i), ("Filter", dem_f), ("OFMAP", dem_o))):
        lines = np.flatnonzero((dem != -1).any(axis=1))  # lines with a valid address
        out[f"SRAM {name} Start Cycle"] = served[lines[0], k]
        out[f"SRAM {name} Stop Cycle"] = served[lines[-1], k]
    for name, buf in (("IFMAP", rd_i), ("Filter", rd_f)):
        start, stop, reads = buf.dram()
        out |= {f"DRAM {name} Start Cycle": start, f"DRAM {name} Stop Cycle": stop,
                f"DRAM {name} Reads": reads}
    out |= {"DRAM OFMAP Start Cycle": wr.first_drain, "DRAM OFMAP Stop Cycle": wr.last_drain,
            "DRAM OFMAP Writes": wr.drained}
    first_read = min(out["DRAM IFMAP Start Cycle"], out["DRAM Filter Start Cycle"])
    out["Total Cycles (incl. prefetch)"] = float(int(out["DRAM OFMAP Stop Cycle"] - first_read))
    return {k: float(v) for k, v in out.items()}
