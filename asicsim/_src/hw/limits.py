"""The physical range of every number a design, a SCALE-Sim file or an operation may hold.

One :class:`Limit` per kind of quantity, each saying why its bounds are what they are; designs
(:mod:`asicsim._src.hw.design_checks`), SCALE-Sim files (:mod:`asicsim._src.hw.scalesim_files`) and
operations (:mod:`asicsim._src.hw.operations`) check against these, and their errors quote
:meth:`Limit.allowed`. The bounds are generous (orders of magnitude beyond any shipped chip): they
exist to catch typos and unit slips (1e30 MHz, 2**63 rows, an infinite bandwidth), not to judge
designs. Every shipped design and SCALE-Sim input lies inside them (tests/hw).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Limit:
    """``lo <= x <= hi`` (``lo < x`` when ``lo_open``), finite, an int when ``integer``; bools
    are never numbers here (``true`` is not 1 rows)."""

    lo: float
    hi: float
    unit: str
    why: str
    integer: bool = False
    lo_open: bool = False

    def ok(self, x: Any) -> bool:
        if isinstance(x, bool) or not isinstance(x, int if self.integer else (int, float)):
            return False
        if isinstance(x, float) and not math.isfinite(x):
            return False
        return (x > self.lo if self.lo_open else x >= self.lo) and x <= self.hi

    def allowed(self) -> str:
        kind = "an integer" if self.integer else "a finite number"
        lo = f"({self.lo:.16g}" if self.lo_open else f"[{self.lo:.16g}"
        unit = f" {self.unit}" if self.unit else ""
        return f"{kind} in {lo}, {self.hi:.16g}]{unit} ({self.why})"

    def check_array(self, where: str, name: str, values) -> np.ndarray:
        """``values`` (a scalar or an array, as a vectorised front end takes a knob) as a float64
        array, after a ValueError naming ``where``, ``name``, the first bad element (and its
        index) and :meth:`allowed` unless every element is a number in the limit (no bools, no
        NaN; integral where the limit wants integers). Checked before any work is done."""
        arr = np.asarray(values)
        if arr.dtype.kind not in "iuf":
            bad = arr.ravel()[0].item() if arr.size else values
            at = " (element 0)" if arr.ndim else ""
            raise ValueError(f"{where}: {name} = {bad!r}{at}; allowed: {self.allowed()}")
        x = arr.astype(np.float64)
        with np.errstate(invalid="ignore"):
            ok = np.isfinite(x) & (x <= self.hi) & ((x > self.lo) if self.lo_open else (x >= self.lo))
            if self.integer:
                ok &= np.where(np.isfinite(x), np.floor(x) == x, False)
        if not ok.all():
            i = np.unravel_index(int(np.argmin(ok)), ok.shape)
            at = f" (element {', '.join(str(int(j)) for j in i)})" if arr.ndim else ""
            raise ValueError(f"{where}: {name} = {arr[i].item()!r}{at}; allowed: {self.allowed()}")
        return x


# --- designs --------------------------------------------------------------------------------
CLOCK_MHZ = Limit(1, 10_000, "MHz", "1 MHz..10 GHz: generous for any CMOS accelerator; shipped "
                  "chips run at 0.1-3 GHz")
NODE_NM = Limit(1, 1000, "nm", "1 um (1980s CMOS) down to 1 nm, beyond today's 2 nm-class nodes")
STATIC_POWER_W = Limit(0, 100_000, "W", "0 W up to 100 kW: a wafer-scale chip (Cerebras WSE-3) "
                       "draws about 23 kW")
TDP_W = Limit(1e-6, 100_000, "W", "1 uW (an always-on sensor accelerator draws ~100 uW) up to "
              "100 kW: a wafer-scale chip (Cerebras WSE-3) draws about 23 kW")
ARRAY_SIDE = Limit(1, 65536, "PEs", "1..65536 per side; TPU v1's 256 x 256 is the largest "
                   "shipped systolic array", integer=True)
VECTOR_LANES = Limit(1, 65536, "lanes", "1..65536 like an array side; TPU v1's activation unit "
                     "is 256 wide", integer=True)
SYNC_CYCLES = Limit(0, 1e9, "cycles per operation", "0 (none) up to 1e9 cycles, about a second at "
                    "1 GHz: a host round trip over PCIe takes microseconds, thousands of cycles")
MAC_ENERGY_PJ = Limit(1e-6, 10_000, "pJ", "an int8 MAC is about 0.23 pJ and an fp32 MAC 4.6 pJ at "
                      "45 nm (Horowitz, ISSCC 2014): 1e-6 pJ is 1e5 below, 10 nJ 2000x above")
SRAM_KIB = Limit(1 / 1024, 64 * 2**20, "KiB", "one byte up to 64 GiB; the largest on-chip SRAM "
                 "shipped is Cerebras WSE-3's 44 GB")
WORD_BITS = Limit(1, 8192, "bits", "1 bit up to a 1 KiB word; TPU v1's unified buffer moves "
                  "256 bytes (2048 bits) a cycle", integer=True)
BANKS = Limit(1, 65536, "banks", "1..65536; published accelerator buffers have at most a few "
              "thousand banks", integer=True)
WORD_ENERGY_PJ = Limit(1e-6, 1e6, "pJ per word", "a small SRAM costs ~0.01 pJ/bit at 45 nm; even "
                       "an 8192-bit word at DRAM's ~20 pJ/bit is 1.6e5 pJ")
DRAM_GBPS = Limit(1e-3, 1e6, "GB/s", "1 MB/s (below any DRAM interface) up to 1 PB/s, over 100x "
                  "a B200's HBM3E (8 TB/s): room for 'unlimited bandwidth' what-ifs")
DRAM_PJ_PER_BIT = Limit(1e-3, 1000, "pJ/bit", "DDR3-era DRAM costs 20-70 pJ/bit, HBM about 4: "
                        "1e-3 is far below any, 1 nJ/bit far above")
DRAM_GIB = Limit(2**-30, 65536, "GiB", "one byte up to 64 TiB; a whole server holds a few TiB, a "
                 "B200 192 GB")
# --- GPU designs ----------------------------------------------------------------------------
SM_COUNT = Limit(1, 65536, "SMs", "1..65536; a B200 has 148", integer=True)
TERA_OPS = Limit(1e-6, 1e6, "x 1e12 ops/s", "1 Mop/s up to 1 exa-op/s; a B200's dense FP8 peak "
                 "is about 4500")
L2_MIB = Limit(2**-20, 64 * 1024, "MiB", "one byte up to 64 GiB like any on-chip SRAM; an H100 "
               "has 50 MiB")
LAUNCH_YEAR = Limit(1990, 2100, "", "1990..2100; the first GPU shipped in 1999", integer=True)
EFFICIENCY = Limit(0, 1, "", "a fraction of the datasheet peak", lo_open=True)
BUFFER_SCALE = Limit(0, 2**36, "", "a factor on every buffer's capacity; each scaled capacity "
                     "must also lie in the SRAM range", lo_open=True)
# --- operations and SCALE-Sim topologies ------------------------------------------------------
OP_DIM = Limit(1, 2**31 - 1, "", "1..2**31 - 1: the 32-bit int dimensions BLAS and cuDNN take",
               integer=True)
OP_PADDING = Limit(0, 2**31 - 1, "", "0..2**31 - 1, like a dimension", integer=True)
OP_ELEMENTS = Limit(1, 2**53, "elements", "up to 2**53, the integers float64 (the cost model's "
                    "counts) holds exactly: 8 PiB of int8, beyond any memory", integer=True)
ELEMENT_BITS = Limit(1, 1024, "bits", "1..1024; the widest numeric formats are 64-bit",
                     integer=True)
# --- SCALE-Sim configs (its integer fields, in its units) -------------------------------------
SCALESIM_KIB = Limit(1, SRAM_KIB.hi, "KiB (SCALE-Sim's kB)", "1 KiB up to 64 GiB, the on-chip "
                     "SRAM range; SCALE-Sim multiplies by 1024", integer=True)
SCALESIM_WORDS = Limit(1, 1_000_000, "words/cycle", "1-byte words at the 1 GHz a converted "
                       "design assumes: the DRAM range, up to 1e6 GB/s", integer=True)
