"""Traffic per memory level and operand, and energy per component, from the physical counts.

Array-friendly: every count may be a numpy array (a sweep over design variants), so
:func:`asicsim.cost` (one operation, scalars) and :func:`asicsim.hw.gemm_sweep` share this code.
Every energy comes back with its source (:mod:`asicsim.hw.energy`).
"""

from __future__ import annotations

import functools

import numpy as np

from asicsim.hw.design import SystolicDesign
from asicsim.hw.energy import (
    Energy,
    adder_energy_pj,
    dram_energy_pj_per_bit,
    multiplier_energy_pj,
    sram_access_energy_pj,
)
from asicsim.hw.physical import ZERO_CODES

OPERANDS = ("ifmap", "filter", "ofmap", "psum")
#: Static power when a design gives none: an explicit assumption, not a published figure.
STATIC_FRACTION_OF_PEAK_MAC_POWER = 0.1


def traffic(t: dict, bits: dict) -> dict:
    """Reads and writes per level (``sram``, ``dram``) and operand, in elements and bytes.

    SRAM counts are the array-side accesses plus the fills from and drains to DRAM; DRAM counts
    come in bytes from the model and are converted to elements of the operand's format (sparse
    weights: dense positions). ``array_bytes`` is what crosses the SRAM/array boundary.
    """
    g = t.get
    bpe = {"ifmap": bits["act"] / 8, "filter": g("bytes.filter", bits["weight"] / 8),
           "ofmap": bits["out"] / 8, "psum": bits["acc"] / 8}
    dram = {("ifmap", "reads"): g("dram.ifmap.reads_bytes", 0.0),
            ("filter", "reads"): g("dram.filter.reads_bytes", 0.0),
            ("ofmap", "writes"): g("dram.ofmap.writes_bytes", 0.0),
            ("psum", "writes"): g("dram.psum.writes_bytes", 0.0),
            ("psum", "reads"): g("dram.psum.reads_bytes", 0.0)}
    sram = {("ifmap", "reads"): g("sram.ifmap.reads", 0.0), ("filter", "reads"): g("sram.filter.reads", 0.0),
            ("ofmap", "writes"): g("sram.ofmap.writes", 0.0), ("psum", "reads"): g("sram.psum.reads", 0.0),
            ("psum", "writes"): g("sram.psum.writes", 0.0)}
    tr = {"array_bytes": sum(v * bpe[o] for (o, _), v in sram.items()),
          "dram_transfer_cycles": g("transfer_cycles", 0.0)}
    for opnd in OPERANDS:
        for kind in ("reads", "writes"):
            b = dram.get((opnd, kind), 0.0)
            tr[f"dram.{opnd}.{kind}"] = b / bpe[opnd]
            tr[f"dram.{opnd}.{kind}_bytes"] = b
    sram[("ifmap", "writes")] = tr["dram.ifmap.reads"]
    sram[("filter", "writes")] = tr["dram.filter.reads"]
    sram[("ofmap", "reads")] = tr["dram.ofmap.writes"]
    for opnd in OPERANDS:
        for kind in ("reads", "writes"):
            n = sram.get((opnd, kind), 0.0)
            tr[f"sram.{opnd}.{kind}"] = n
            tr[f"sram.{opnd}.{kind}_bytes"] = n * bpe[opnd]
    tr["dram_bytes"] = sum(tr[f"dram.{o}.{k}_bytes"] for o in OPERANDS for k in ("reads", "writes"))
    return tr


def _per_word(design: SystolicDesign, buffer, kind: str, word_bits: float, capacity_kib):
    """(pJ per word, source) of a buffer access; a size-derived default follows the (possibly
    swept) capacity, one bank's worth, as :func:`asicsim.hw.design_energy_table` does."""
    given = buffer.read_energy_pj if kind == "read" else buffer.write_energy_pj
    if given is not None:
        return float(given), f"design {design.name!r} buffer {buffer.name!r} {kind}_energy_pj"
    note = "" if kind == "read" else "assumption: write = read; "
    caps = np.asarray(capacity_kib, dtype=np.float64) / buffer.banks
    if caps.ndim == 0:
        e = _sram_word(float(caps), word_bits, design.technology_nm)
        return e.pj, f"{note}{buffer.banks} bank(s); {e.source}"
    uniq, inverse = np.unique(caps, return_inverse=True)
    per = [_sram_word(float(c), word_bits, design.technology_nm) for c in uniq]
    values = np.array([e.pj for e in per])[inverse].reshape(caps.shape)
    return values, f"{note}{buffer.banks} bank(s); {per[0].source}"


@functools.lru_cache(maxsize=4096)
def _sram_word(capacity_kib: float, word_bits: float, node_nm: float) -> Energy:
    return sram_access_energy_pj(capacity_kib, word_bits, node_nm)


def static_power_w(design: SystolicDesign, mac_pj: float, pes=None) -> Energy:
    if design.static_power_w is not None:
        return Energy(design.static_power_w, f"design {design.name!r} static_power_w")
    pes = design.pes if pes is None else pes
    w = STATIC_FRACTION_OF_PEAK_MAC_POWER * pes * design.clock_hz * mac_pj * 1e-12
    return Energy(w, f"assumption: {STATIC_FRACTION_OF_PEAK_MAC_POWER:g} x peak MAC power (PEs x "
                     f"{design.clock_mhz:g} MHz x {mac_pj:.3g} pJ); no published figure")


def energy(t: dict, tr: dict, design: SystolicDesign, fmts: dict, zero: int, *, pes=None,
           buffer_kib=None) -> tuple[dict, dict[str, str]]:
    """Energy in pJ per component (mult, add, vector, buffer.<name>, dram, static) and sources.

    Zero weights: 'gate' and 'skip' switch only the nonzero MACs. Buffers: bits accessed over the
    buffer's word width times the energy per word. ``pes``/``buffer_kib`` override the design's
    (sweeps over array shape and buffer size).
    """
    g = t.get
    node = design.technology_nm
    mult = multiplier_energy_pj(fmts["act"], fmts["weight"], node)
    add = adder_energy_pj(fmts["acc"], node)
    if design.pe.mac_energy_pj is not None:  # the design's own MAC energy, split like the default
        share = mult.pj / (mult.pj + add.pj)
        mult = Energy(design.pe.mac_energy_pj * share,
                      f"design pe.mac_energy_pj x multiplier share {share:.2f} of the default model")
        add = Energy(design.pe.mac_energy_pj * (1 - share), "design pe.mac_energy_pj x adder share")
    macs = g("macs", 0.0)
    switched = macs if zero == ZERO_CODES["compute"] else g("macs_nonzero", 0.0)
    vec = adder_energy_pj(fmts["act"], node)
    e = {"mult": switched * mult.pj, "add": (switched + g("psum_adds", 0.0)) * add.pj,
         "vector": g("vector_ops", 0.0) * vec.pj}
    src = {"mult": mult.source, "add": add.source,
           "vector": f"one {fmts['act'].name} add per vector op (approximation): {vec.source}"}
    has_psum_buffer = any("psum" in b.holds for b in design.buffers)
    for i, b in enumerate(design.buffers):
        word = design.word_bits(b.name)
        kib = b.capacity_kib if buffer_kib is None else buffer_kib[i]
        rd, rd_src = _per_word(design, b, "read", word, kib)
        wr, wr_src = _per_word(design, b, "write", word, kib)
        home = [o for o in OPERANDS if o in b.holds]
        if not has_psum_buffer and "ofmap" in b.holds:
            home.append("psum")  # partial sums accumulate in the ofmap buffer
        rbits = sum(tr[f"sram.{o}.reads_bytes"] for o in home) * 8
        wbits = sum(tr[f"sram.{o}.writes_bytes"] for o in home) * 8
        e[f"buffer.{b.name}"] = rbits / word * rd + wbits / word * wr
        src[f"buffer.{b.name}"] = f"per {word:g}-bit word: read {rd_src}; write {wr_src}"
    if design.dram.energy_pj_per_bit is not None:
        per_bit = Energy(design.dram.energy_pj_per_bit,
                         f"design {design.name!r} dram.energy_pj_per_bit ({design.dram.kind})")
    else:
        per_bit = dram_energy_pj_per_bit(design.dram.kind)
    e["dram"] = tr["dram_bytes"] * 8 * per_bit.pj
    src["dram"] = per_bit.source
    cycles = (g("cycles_compute", 0.0) + g("cycles_fill_drain", 0.0) + g("cycles_stall", 0.0)
              + g("cycles_sync", 0.0))
    static = static_power_w(design, mult.pj + add.pj, pes)
    e["static"] = static.pj * cycles / design.clock_hz * 1e12
    src["static"] = static.source
    return e, src
