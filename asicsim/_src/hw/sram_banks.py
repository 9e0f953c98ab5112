"""Energy of one access to a banked on-chip SRAM buffer: the bank's array plus the wire to it.

An access reads one bank and carries the word between the buffer's port and that bank; the rest
of the buffer only leaks. So (per bit; CACTI's organisation of an array into banks reached through
an H-tree, with the published per-array figures below instead of CACTI's circuit models)::

    E_bit = E_array(bank capacity) x node factor + e_wire x L
    L     = (sqrt(A_buffer) - sqrt(A_bank)) / 2     (mm)

* ``E_array``: Horowitz ISSCC 2014, 8 KB 10 / 32 KB 20 / 1 MB 100 pJ per 64-bit read at 45 nm,
  a power law between the points (the curve of :func:`asicsim._src.hw.energy.sram_energy_pj_per_bit`);
  node factor: Stillmaker & Baas' energy curve (:mod:`asicsim._src.hw.node_scaling`; they fit logic,
  so applying it to the array is an assumption, marked in the source).
* ``L``: the path of an H-tree from the centre of a square buffer to the centre of one of its
  square banks (S/4 + S/4 + S/8 + S/8 + ... = (S - S_bank)/2 for a buffer of side S); 0 for one
  bank, whose internal wires the per-array figure already includes.
* ``e_wire = 0.11 pJ/bit/mm``: the top of the 18-110 fJ/bit/mm range for on-chip wires in the
  DARPA Exascale Computing Study (Kogge et al., 2008), as quoted by Keckler (NVIDIA); the top end
  because a buffer's bus is a full-swing repeated wire. Taken node-independent (a wire's
  capacitance per mm changes little across nodes): an estimate.
* Area: 4.0 mm^2 per MiB at 28 nm from TPU v1's floor plan (Jouppi et al., ISCA 2017: the 24 MiB
  Unified Buffer is 29 % of a die under 331 mm^2, Fig. 2 and Table 2; the 4 MiB of accumulators,
  6 %, give 5.0), scaled to the node by Stillmaker & Baas' area factor.
* Default banks (a design that does not give ``banks``): banks of at most ``MAX_BANK_KIB`` = 1 MiB,
  the largest array with a published per-access energy (Horowitz's 1 MB): an estimate and an
  upper bound (SRAM compilers' macros are far smaller). Every bank is taken full-size (the last
  one partly used), so a larger buffer never costs less per access. A design's explicit
  ``banks`` wins (bank = capacity / banks, extrapolating the array curve past 1 MiB if so).
"""

from __future__ import annotations

import math

import numpy as np

from asicsim._src.hw.energy import node_scale, reference_value
from asicsim._src.hw.node_scaling import area_factor

MAX_BANK_KIB = 1024.0
WIRE_PJ_PER_BIT_MM = 0.11
MM2_PER_MIB_28NM = 0.29 * 331 / 24  # = 4.0: TPU v1 Unified Buffer share of the die / its MiB
_POINTS = ((8.0, "SRAM/cache read 8KB"), (32.0, "SRAM/cache read 32KB"), (1024.0, "SRAM/cache read 1MB"))
_SOURCES = {
    "array": "bank array: Horowitz ISSCC 2014 8 KB 10 / 32 KB 20 / 1 MB 100 pJ per 64-bit read (45 nm), "
             "power law between the points",
    "wire": (f"wire to the bank: H-tree (sqrt(A) - sqrt(A_bank))/2 mm x {WIRE_PJ_PER_BIT_MM} pJ/bit/mm "
             "(estimate: top of DARPA Exascale Study 2008's 18-110 fJ/bit/mm, node-independent); area "
             f"{MM2_PER_MIB_28NM:.2f} mm^2/MiB at 28 nm (TPU v1 floor plan, Jouppi ISCA 2017 Fig. 2: "
             "UB 29 % of <331 mm^2 for 24 MiB) x Stillmaker & Baas area factor"),
    "banks": f"estimate: banks of at most {MAX_BANK_KIB:g} KiB (Horowitz's largest published array)",
}


def array_pj_per_bit_45nm(capacity_kib):
    """Horowitz's per-bit read energy of one array at 45 nm (vectorised); beyond the points the
    nearest segment's exponent, clamped to [0, 0.5] (wire length ~ sqrt(area))."""
    c = np.asarray(capacity_kib, dtype=np.float64)
    pts = [(math.log(k), math.log(reference_value("memory_energy", item, "64")[0] / 64)) for k, item in _POINTS]
    (x0, y0), (x1, y1), (x2, y2) = pts
    k01, k12 = (y1 - y0) / (x1 - x0), (y2 - y1) / (x2 - x1)
    x = np.log(c)
    lo = y0 + min(max(k01, 0.0), 0.5) * (x - x0)
    y = np.where(x < x0, lo, np.where(x <= x1, y0 + k01 * (x - x0),
                                      np.where(x <= x2, y1 + k12 * (x - x1),
                                               y2 + min(max(k12, 0.0), 0.5) * (x - x2))))
    return np.exp(y)


def default_banks(capacity_kib):
    """The bank count a design that gives none gets: ceil(capacity / 1 MiB), at least 1 (estimate)."""
    return np.maximum(np.ceil(np.asarray(capacity_kib, dtype=np.float64) / MAX_BANK_KIB), 1.0).astype(int)


def _check(name, value, ok, allowed):
    arr = np.asarray(value, dtype=np.float64) if not isinstance(value, bool) else np.asarray(np.nan)
    if not (np.all(np.isfinite(arr)) and ok(arr)):
        raise ValueError(f"SRAM {name} {value!r}; allowed: {allowed}")
    return arr


def buffer_access_energy_pj(capacity_kib, banks: int | None, word_bits: float, node_nm: float):
    """(pJ per ``word_bits``-wide access, source) of a buffer of ``capacity_kib`` (a float or a
    numpy array: sweeps vary it) split into ``banks`` (None: the derived default)."""
    cap = _check("capacity", capacity_kib, lambda a: np.all(a > 0), "finite KiB > 0")
    _check("word width", word_bits, lambda a: a.ndim == 0 and a > 0, "a finite number of bits > 0")
    if banks is None:
        bank_kib = np.minimum(cap, MAX_BANK_KIB)
        how = _SOURCES["banks"]
    else:
        if isinstance(banks, bool) or not isinstance(banks, (int, np.integer)) or banks < 1:
            raise ValueError(f"SRAM banks {banks!r}; allowed: an integer >= 1, or None (derived)")
        bank_kib = cap / banks
        how = f"{banks} bank(s) (design)"
    node = node_scale(node_nm, "sram")
    density = MM2_PER_MIB_28NM * area_factor(node_nm, 28.0)[0] / 1024  # mm^2 per KiB
    length_mm = (np.sqrt(density * cap) - np.sqrt(density * bank_kib)) / 2
    per_bit = array_pj_per_bit_45nm(bank_kib) * node.pj + WIRE_PJ_PER_BIT_MM * length_mm
    values = per_bit * float(word_bits)
    if values.ndim == 0:
        values = float(values)
        nb = banks if banks is not None else int(default_banks(cap))
        how = (f"{float(cap):g} KiB in {nb} bank(s) of {float(bank_kib):g} KiB "
               f"({how}), wire {float(length_mm):.3g} mm")
    src = (f"{word_bits:g} bits x (banked SRAM: {how}; {_SOURCES['array']} x {node.pj:.3f} "
           f"({node.source}); {_SOURCES['wire']})")
    return values, src
