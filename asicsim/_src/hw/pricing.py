"""Prices counts: traffic per memory level and operand, energy per component, and the bound.

One implementation for every front end (:func:`asicsim.cost_many`, :func:`asicsim._src.hw.family.cost_family`,
:func:`asicsim.hw.gemm_sweep`) and for the mapper's energy objective: :func:`energy_rates` turns a
design (and swept array sizes and capacities) into pJ per event once, :func:`traffic` and
:func:`energy` apply them to counts (arrays keyed by :class:`asicsim._src.hw.counts.GemmCounts` field
names), :func:`classify_bound` names the regime. Every energy keeps its source
(:mod:`asicsim._src.hw.energy`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from asicsim._src.hw.counts import ZERO_CODES
from asicsim._src.hw.design import SystolicDesign
from asicsim._src.hw.energy import (
    Energy,
    adder_energy_pj,
    dram_energy_pj_per_bit,
    multiplier_energy_pj,
)
from asicsim._src.hw.native import mac_hardware
from asicsim._src.hw.power import PowerModel, add_overheads, power_model, static_energy
from asicsim._src.hw.result import BOUNDS as BOUNDS
from asicsim._src.hw.result import DIRECTIONS, OPERANDS, Bound, Traffic
from asicsim._src.hw.sram_banks import buffer_access_energy_pj


def traffic(t: dict, bpe: dict, shape=()) -> Traffic:
    """Reads and writes per level (``sram``, ``dram``) and operand, in elements and bytes.

    ``t``: counts keyed by :class:`~asicsim._src.hw.counts.GemmCounts` names (absent ones are zero);
    ``bpe``: bytes per element per operand as stored (sparse weights: per dense position); ``shape``:
    the result's. SRAM counts are the array-side accesses plus the fills from and drains to DRAM;
    ``array_bytes`` is what crosses the SRAM/array boundary.
    """
    z = 0.0
    g = lambda k: t.get(k, z)  # noqa: E731 - counts an operation never has are zero
    spilled = g("sram_psum_spilled")  # partial sums kept in the design's psum_spill buffer
    dram = {("ifmap", "reads"): g("dram_ifmap_bytes"), ("filter", "reads"): g("dram_filter_bytes"),
            ("ofmap", "writes"): g("dram_ofmap_bytes"), ("psum", "reads"): g("dram_psum_bytes") / 2,
            ("psum", "writes"): g("dram_psum_bytes") / 2}
    dram_el = {k: v / bpe[k[0]] for k, v in dram.items()}
    sram = {("ifmap", "reads"): g("sram_ifmap_reads"), ("filter", "reads"): g("sram_filter_reads"),
            ("ofmap", "writes"): g("sram_ofmap_writes"), ("psum", "reads"): g("sram_psum_reads") + spilled,
            ("psum", "writes"): g("sram_psum_writes") + spilled}
    array_bytes = sum(v * bpe[o] for (o, _), v in sram.items())
    sram |= {("ifmap", "writes"): dram_el[("ifmap", "reads")], ("filter", "writes"): dram_el[("filter", "reads")],
             ("ofmap", "reads"): dram_el[("ofmap", "writes")]}

    moved, count = np.zeros((2, len(OPERANDS), len(DIRECTIONS), *shape)), np.zeros((2, len(OPERANDS),
                                                                                    len(DIRECTIONS), *shape))
    for lvl, level in enumerate((sram, dram_el)):
        for (o, d), v in level.items():  # assignment broadcasts each count to the result's shape
            i, j = OPERANDS.index(o), DIRECTIONS.index(d)
            count[lvl, i, j] = v
            moved[lvl, i, j] = v * bpe[o]
    full = np.zeros(shape)
    return Traffic(("sram", "dram"), moved, count, full + array_bytes, full + g("transfer_cycles"))


@dataclass(frozen=True)
class EnergyRates:
    """pJ per event of one design (arrays where a sweep varies array size or capacities)."""

    mult: float  # per MAC that switches
    add: float  # per accumulate (MACs and partial-sum adds)
    registers: float  # per MAC that switches: the PE's register accesses
    vector: float  # per vector-unit op
    sram_read: dict  # operand -> pJ per byte read from its buffer
    sram_write: dict  # operand -> pJ per byte written
    buffer_of: dict  # operand -> buffer name
    dram: float  # per byte moved
    static: object  # per cycle: every static component at board scope (idle board power / clock)
    power: PowerModel  # static components (W) and the chip/board overheads (asicsim._src.hw.power)
    sources: dict


def energy_rates(design: SystolicDesign, fmts: dict, *, pes=None, buffer_kib=None) -> EnergyRates:
    """Per-event energies of ``design`` at its node (``pes``/``buffer_kib`` override the design's
    for sweeps over array shape and buffer size). Zero weights: 'gate' and 'skip' switch only the
    nonzero MACs (the caller counts them)."""
    node = design.technology_nm
    a, b, acc, runs = mac_hardware(design, fmts)  # the multiplier and adder that switch
    mult = multiplier_energy_pj(a, b, node)
    add = adder_energy_pj(acc, node)
    mult, add = Energy(mult.pj, f"{runs}: {mult.source}"), Energy(add.pj, f"{runs}: {add.source}")
    if design.pe.mac_energy_pj is not None:  # the design's own MAC energy, split like the default
        share = mult.pj / (mult.pj + add.pj)
        mult = Energy(design.pe.mac_energy_pj * share,
                      f"design pe.mac_energy_pj x multiplier share {share:.2f} of the default model")
        add = Energy(design.pe.mac_energy_pj * (1 - share), "design pe.mac_energy_pj x adder share")
    vec = adder_energy_pj(fmts["act"], node)
    reg = design.pe.register_energy_pj
    src = {"registers": (f"design {design.name!r} pe.register_energy_pj per MAC" if reg is not None else
                         "not priced: the design gives no pe.register_energy_pj (PE register accesses)"),
           "mult": mult.source, "add": add.source,
           "vector": f"one {fmts['act'].name} add per vector op (approximation): {vec.source}"}
    has_psum_buffer = any("psum" in b.holds for b in design.buffers)
    rd_b, wr_b, owner = {}, {}, {}
    for i, b in enumerate(design.buffers):
        word = design.word_bits(b.name)
        kib = b.capacity_kib if buffer_kib is None else buffer_kib[i]
        rd, rd_src = _per_word(design, b, "read", word, kib)
        wr, wr_src = _per_word(design, b, "write", word, kib)
        home = [o for o in OPERANDS if o in b.holds]
        if not has_psum_buffer and "ofmap" in b.holds:
            home.append("psum")  # partial sums accumulate in the ofmap buffer
        if b.psum_spill:
            home.append("psum_spill")
        for o in home:
            rd_b[o], wr_b[o], owner[o] = np.asarray(rd) * 8 / word, np.asarray(wr) * 8 / word, b.name
        src[f"buffer.{b.name}"] = f"per {word:g}-bit word: read {rd_src}; write {wr_src}"
    if design.dram.energy_pj_per_bit is not None:
        per_bit = Energy(design.dram.energy_pj_per_bit,
                         f"design {design.name!r} dram.energy_pj_per_bit ({design.dram.kind})")
    else:
        per_bit = dram_energy_pj_per_bit(design.dram.kind)
    src["dram"] = per_bit.source
    total_kib = None if buffer_kib is None else sum(np.asarray(k, dtype=np.float64) for k in buffer_kib)
    pm = power_model(design, mult.pj + add.pj, reg or 0.0, pes, total_kib)
    src |= {k: v for k, v in pm.sources.items()}
    return EnergyRates(mult.pj, add.pj, reg or 0.0, vec.pj, rd_b, wr_b, owner, per_bit.pj * 8,
                       np.asarray(pm.idle_w("board")) / design.clock_hz * 1e12, pm, src)


def energy(t: dict, tr: Traffic, rates: EnergyRates, zero: int, psum_bytes: float, time_s=None) -> dict:
    """Energy in pJ per component (scopes and kinds: :data:`asicsim._src.hw.power.COMPONENTS`): mult,
    add, registers, vector, buffer.<name>, dram, the static components over the busy time and the
    chip/board overheads (control, regulator losses). ``time_s``: the busy time when a power cap
    stretched it (default: the cycles at the design's clock)."""
    z = 0.0
    g = lambda k: t.get(k, z)  # noqa: E731
    switched = g("macs") if zero == ZERO_CODES["compute"] else g("macs_nonzero")
    e = {"mult": switched * rates.mult, "add": (switched + g("psum_adds")) * rates.add,
         "registers": switched * rates.registers,
         "vector": g("vector_ops") * rates.vector}
    spilled = g("sram_psum_spilled") * psum_bytes  # bytes each way, kept in the psum_spill buffer
    for o, name in rates.buffer_of.items():
        e.setdefault(f"buffer.{name}", z)
        if o == "psum_spill":
            e[f"buffer.{name}"] = e[f"buffer.{name}"] + spilled * (rates.sram_read[o] + rates.sram_write[o])
            continue
        rd, wr = tr.of("sram", o, "reads"), tr.of("sram", o, "writes")
        if o == "psum":
            rd, wr = rd - spilled, wr - spilled
        e[f"buffer.{name}"] = e[f"buffer.{name}"] + rd * rates.sram_read[o] + wr * rates.sram_write[o]
    e["dram"] = tr.dram_bytes * rates.dram
    cycles = g("cycles_compute") + g("cycles_fill_drain") + g("cycles_stall") + g("cycles_sync")
    e |= static_energy(rates.power, cycles / rates.power.clock_hz if time_s is None else time_s)
    return add_overheads(e, rates.power)


def schedule_energy(c, bpe: dict, rates: EnergyRates):
    """The energy a schedule changes (DRAM, SRAM, static, partial-sum adds), at board scope: the
    mapper's objective. The same terms as :func:`traffic` and :func:`energy` (on-chip dynamic terms
    with the control overhead, every static component per cycle, all through the regulators),
    without the per-key bookkeeping."""
    rd, wr = rates.sram_read, rates.sram_write
    pm = rates.power
    e = c.psum_adds * rates.add
    e = e + c.sram_ifmap_reads * (bpe["ifmap"] * rd["ifmap"]) + c.dram_ifmap_bytes * wr["ifmap"]
    e = e + c.sram_filter_reads * bpe["filter"] * rd["filter"] + c.dram_filter_bytes * wr["filter"]
    e = e + c.sram_psum_reads * (bpe["psum"] * (rd["psum"] + wr["psum"]))
    if "psum_spill" in rd:
        e = e + c.sram_psum_spilled * (bpe["psum"] * (rd["psum_spill"] + wr["psum_spill"]))
    e = e + c.sram_ofmap_writes * (bpe["ofmap"] * wr["ofmap"]) + c.dram_ofmap_bytes * rd["ofmap"]
    e = (e * (1 + pm.control_fraction) + c.dram_bytes * rates.dram) / pm.vr_efficiency
    return e + (c.cycles_compute + c.cycles_fill_drain + c.cycles_stall) * rates.static


def schedule_energy_key(bpe: dict, rates: EnergyRates) -> tuple:
    """The content of everything :func:`schedule_energy` reads (dtype, shape and bytes of each
    number): two calls with equal keys price every schedule alike (the mapper's kept choices,
    :func:`asicsim._src.hw.mapper_cache.chosen_key`)."""
    nums = [*_rate_numbers(rates), *(bpe[k] for k in sorted(bpe))]
    return (tuple(sorted(bpe)), tuple(sorted(rates.sram_read)), tuple(sorted(rates.sram_write)),
            tuple((a.dtype.str, a.shape, a.tobytes()) for a in map(np.asarray, nums)))


class ScheduleEnergy:
    """:func:`schedule_energy` with its byte widths and rates (the pricing pipeline's mapping
    objective): ``key`` is :func:`schedule_energy_key`; :meth:`at` the same over some of the GEMMs."""

    def __init__(self, bpe: dict, rates: EnergyRates):
        self.bpe, self.rates = bpe, rates
        self.key = schedule_energy_key(bpe, rates)

    def __call__(self, c):
        return schedule_energy(c, self.bpe, self.rates)

    def at(self, idx: np.ndarray, n: int):
        """This energy over GEMMs ``idx`` of ``n`` (the last axis of every count), or None where
        a rate varies along any axis (a design sweep: the rates are not cut here). A byte width
        that varies along the GEMMs (a per-GEMM filter width) is cut with them."""
        if any(a.size > 1 for a in map(np.asarray, _rate_numbers(self.rates))):
            return None
        bpe = {k: v[..., idx] if np.ndim(v) and np.shape(v)[-1] == n else v for k, v in self.bpe.items()}
        if any(np.size(v) > 1 and np.shape(v)[-1] != idx.size for v in bpe.values()):
            return None
        return ScheduleEnergy(bpe, self.rates)


def _rate_numbers(rates: EnergyRates) -> list:
    """Every number of ``rates`` that :func:`schedule_energy` reads, SRAM rates by sorted key."""
    pm = rates.power
    return [rates.add, rates.dram, rates.static, pm.control_fraction, pm.vr_efficiency,
            *(rates.sram_read[k] for k in sorted(rates.sram_read)),
            *(rates.sram_write[k] for k in sorted(rates.sram_write))]


def classify_bound(transfer, busy, performed, pes, macs):
    """DeepBench's three regimes, as :class:`~asicsim._src.hw.result.Bound` codes: ``bandwidth`` when moving the
    data over the DRAM link takes at least as long as the array's work, else ``occupancy`` when
    fill/drain, reloads and unmapped PEs cost more than the ideal compute time (utilization of
    the busy array < 50 %), else ``compute``."""
    transfer, busy = np.asarray(transfer, dtype=np.float64), np.asarray(busy, dtype=np.float64)
    ideal = np.asarray(performed, dtype=np.float64) / pes
    return np.where((transfer > 0) & (transfer >= busy), Bound.BANDWIDTH.code,
                    np.where((np.asarray(macs) > 0) & (ideal < 0.5 * busy), Bound.OCCUPANCY.code,
                             Bound.COMPUTE.code))


def _per_word(design: SystolicDesign, buffer, kind: str, word_bits: float, capacity_kib):
    """(pJ per word, source) of a buffer access; a size-derived default follows the (possibly
    swept) capacity, banked as :func:`asicsim.hw.design_energy_table` does."""
    given = buffer.read_energy_pj if kind == "read" else buffer.write_energy_pj
    if given is not None:
        return float(given), f"design {design.name!r} buffer {buffer.name!r} {kind}_energy_pj"
    note = "" if kind == "read" else "assumption: write = read; "
    caps = np.asarray(capacity_kib, dtype=np.float64)
    if caps.ndim == 0:
        pj, src = _sram_word(float(caps), buffer.banks, word_bits, design.technology_nm)
        return pj, f"{note}{src}"
    values, src = buffer_access_energy_pj(caps, buffer.banks, word_bits, design.technology_nm)
    return values, f"{note}{src}"


@functools.lru_cache(maxsize=4096)
def _sram_word(capacity_kib: float, banks, word_bits: float, node_nm: float) -> tuple[float, str]:
    return buffer_access_energy_pj(capacity_kib, banks, word_bits, node_nm)
