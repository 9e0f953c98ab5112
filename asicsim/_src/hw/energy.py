"""Default energies per operation and per access (pJ), each with the source it comes from.

Only constants: no traffic or cost model. Every function returns an :class:`Energy` (``pj`` and a
``source`` string naming the published number, the rule applied to it and any assumption).

Sources (``asicsim/_src/hw/data/energy_45nm.csv``, read once at first use):

* Arithmetic at 45 nm: Horowitz, "Computing's energy problem", ISSCC 2014 (int8/int32 add and
  multiply, fp16/fp32 add and multiply).
* Integer multiplier: ``E = 0.2 pJ * (w/8)**p`` with ``p = log(3.1/0.2)/log(4) = 1.98`` (~quadratic,
  the CSV's scaling rule), exact at both Horowitz anchors. Integer adder: linear in bits through
  int8 0.03 and int32 0.1 pJ.
* Float multiplier: the CSV's derived model ``E = 0.2*(m/8)**2 + 0.07*m + 0.004*e`` pJ (m significand
  bits incl. hidden, e exponent bits); it gives fp16 1.17 (published 1.1) and fp32 3.51 (3.7), i.e.
  within 7 %. Mixed operands use the geometric mean of the significands (the partial-product array is
  m_a x m_b bits, so its energy goes as m_a*m_b) and the wider exponent; an integer operand counts as
  a significand of its width and no exponent. Block (MX) formats use their element format.
* Float adder: linear in total bits through fp16 0.4 and fp32 0.9 pJ; below 16 bits proportional to
  the bits (0.025 pJ/bit, continuous at 16), since the straight line would reach 0 at 3.2 bits.
* SRAM: Horowitz 8 KB 10 pJ, 32 KB 20 pJ, 1 MB 100 pJ per 64-bit read, interpolated as a power law
  between the points (log energy vs log capacity); beyond them the nearest segment's exponent,
  clamped to [0, 0.5] (wire length ~ sqrt(area)). Writes are taken equal to reads (assumption).
  That is one array; a design's buffers are priced as banks plus the wire to them
  (:mod:`asicsim._src.hw.sram_banks`).
* DRAM per bit: the CSV's ``dram_energy`` rows; DDR3 from Horowitz's DRAM row; kinds without data
  are explicit, labelled assumptions. DRAM energy is per memory kind and never node-scaled.
* Node scaling: Stillmaker & Baas, Integration 58 (2017): their energy polynomials at each node's
  nominal supply (:mod:`asicsim._src.hw.node_scaling`), for logic and, as a marked assumption (their
  fits are of logic), for SRAM arrays too.
"""

from __future__ import annotations

import csv
import functools
import math
from dataclasses import dataclass
from pathlib import Path

from asicsim._files import read_text_file
from asicsim._src.hw.node_scaling import energy_factor
from asicsim._src.numerics.formats import BlockFormat, FloatFormat, IntFormat

BASE_NODE_NM = 45.0
NODE_KINDS = {"logic": "", "sram": "assumption: SRAM arrays scale like Stillmaker & Baas' logic fits; "}
_CSV = "energy_45nm.csv"


@dataclass(frozen=True)
class Energy:
    """An energy in picojoules and where it comes from."""

    pj: float
    source: str

    def __float__(self) -> float:
        return self.pj


@functools.cache
def reference_rows() -> tuple[dict[str, str], ...]:
    """The shipped reference table (``hw/data/energy_45nm.csv``), read on first use."""
    text = read_text_file(Path(__file__).parent / "data" / _CSV)  # names the file if not UTF-8
    return tuple(csv.DictReader(text.splitlines()))


def reference_value(category: str, item: str, bits: str = "") -> tuple[float, str]:
    """(value, source) of one CSV row; ranges 'a-b' give their midpoint, '~a-b' too."""
    for r in reference_rows():
        if r["category"] == category and r["item"] == item and (not bits or r["bits"] == bits):
            lo, _, hi = r["value"].lstrip("~").partition("-")
            value = (float(lo) + float(hi)) / 2 if hi else float(lo)
            return value, f"{r['source']} [{_CSV}: {item}, {r['bits']} b = {r['value']} {r['unit']}]"
    raise LookupError(f"{_CSV} has no row {category!r} / {item!r} / bits={bits!r}")


def node_scale(node_nm: float, kind: str = "logic") -> Energy:
    """Factor from 45 nm energy to ``node_nm`` energy (``kind`` 'logic' or 'sram')."""
    if kind not in NODE_KINDS:
        raise ValueError(f"node scaling kind {kind!r}; allowed: {sorted(NODE_KINDS)}")
    factor, src = energy_factor(node_nm, BASE_NODE_NM)
    return Energy(factor, f"{kind} node scaling, {NODE_KINDS[kind]}{src}")


def _at_node(e45_pj: float, source: str, node_nm: float, kind: str) -> Energy:
    s = node_scale(node_nm, kind)
    if node_nm == BASE_NODE_NM:
        return Energy(e45_pj, f"{source}; at 45 nm")
    return Energy(e45_pj * s.pj, f"{source}; x {s.pj:.3f} to {node_nm:g} nm ({s.source})")


def _element(fmt):
    if isinstance(fmt, str):  # a format name, alias or grammar name
        from asicsim._src.numerics import get_format

        fmt = get_format(fmt)
    fmt = fmt.element if isinstance(fmt, BlockFormat) else fmt
    if not isinstance(fmt, (FloatFormat, IntFormat)):
        raise ValueError(f"format {fmt!r}; allowed: a FloatFormat, IntFormat or BlockFormat")
    return fmt


def multiplier_energy_pj(a_fmt, b_fmt, node_nm: float = BASE_NODE_NM) -> Energy:
    """Energy of one a x b multiply (see the module docstring for the rules)."""
    a, b = _element(a_fmt), _element(b_fmt)
    if isinstance(a, IntFormat) and isinstance(b, IntFormat):
        e8, s8 = reference_value("arith_energy", "int mult", "8")
        e32, _ = reference_value("arith_energy", "int mult", "32")
        p = math.log(e32 / e8) / math.log(4.0)
        w = math.sqrt(a.bits * b.bits)
        src = (f"int mult {e8:g} pJ*(w/8)^{p:.3f} through Horowitz int8 {e8:g} / int32 {e32:g} pJ, "
               f"w = sqrt({a.bits}*{b.bits}) = {w:.3g} [{s8}]")
        return _at_node(e8 * (w / 8) ** p, src, node_nm, "logic")
    ma, mb = ((f.man_bits + 1, f.exp_bits) if isinstance(f, FloatFormat) else (f.bits, 0) for f in (a, b))
    m, e = math.sqrt(ma[0] * mb[0]), max(ma[1], mb[1])
    pj = 0.2 * (m / 8) ** 2 + 0.07 * m + 0.004 * e
    src = (f"fp mult model 0.2*(m/8)^2+0.07*m+0.004*e with m={m:.3g} (geometric mean of significands "
           f"{ma[0]},{mb[0]}), e={e}; {_CSV} derived rule fitted to Horowitz ISSCC 2014 fp16 1.1 / "
           "fp32 3.7 pJ (model 1.17 / 3.51)")
    return _at_node(pj, src, node_nm, "logic")


def adder_energy_pj(acc_fmt, node_nm: float = BASE_NODE_NM) -> Energy:
    """Energy of one accumulate add in ``acc_fmt``."""
    f = _element(acc_fmt)
    kind = "int" if isinstance(f, IntFormat) else "fp"
    lo_bits, hi_bits = (8, 32) if kind == "int" else (16, 32)
    lo, src = reference_value("arith_energy", f"{kind} add", str(lo_bits))
    hi, _ = reference_value("arith_energy", f"{kind} add", str(hi_bits))
    slope = (hi - lo) / (hi_bits - lo_bits)
    if kind == "fp" and f.bits < lo_bits:
        pj, rule = lo * f.bits / lo_bits, f"{lo:g} pJ*bits/{lo_bits} below {lo_bits} bits"
    else:
        pj, rule = lo + slope * (f.bits - lo_bits), f"linear in bits through {lo_bits}b and {hi_bits}b"
    src = (f"{kind} add {rule} (Horowitz {lo_bits}b {lo:g} / {hi_bits}b {hi:g} pJ), "
           f"{f.bits:g} bits [{src}]")
    return _at_node(pj, src, node_nm, "logic")


def mac_energy_pj(a_fmt, b_fmt, acc_fmt, node_nm: float = BASE_NODE_NM) -> Energy:
    """One multiply-accumulate: multiplier plus accumulator adder."""
    m, a = multiplier_energy_pj(a_fmt, b_fmt, node_nm), adder_energy_pj(acc_fmt, node_nm)
    return Energy(m.pj + a.pj, f"mult: {m.source} || add: {a.source}")


_SRAM_ITEMS = ((8.0, "SRAM/cache read 8KB"), (32.0, "SRAM/cache read 32KB"), (1024.0, "SRAM/cache read 1MB"))


def sram_energy_pj_per_bit(capacity_kib: float, node_nm: float = BASE_NODE_NM) -> Energy:
    """Read energy per bit of an SRAM array of ``capacity_kib`` (one bank)."""
    if not (isinstance(capacity_kib, (int, float)) and math.isfinite(capacity_kib) and capacity_kib > 0):
        raise ValueError(f"SRAM capacity {capacity_kib!r} KiB; allowed: a finite number > 0")
    pts = []
    for kib, item in _SRAM_ITEMS:
        v, s = reference_value("memory_energy", item, "64")
        pts.append((math.log(kib), math.log(v / 64), s))
    i = 0 if capacity_kib <= _SRAM_ITEMS[1][0] else 1
    (x0, y0, _), (x1, y1, _) = pts[i], pts[i + 1]
    k = (y1 - y0) / (x1 - x0)
    x = math.log(capacity_kib)
    outside = not x0 <= x <= x1
    if outside:
        k = min(max(k, 0.0), 0.5)
    pj = math.exp(y0 + k * (x - x0))
    how = "extrapolated, exponent clamped to [0, 0.5]" if outside else "interpolated"
    src = (f"SRAM read per bit, power law in capacity {how} (exponent {k:.3f}) between Horowitz ISSCC "
           "2014 8 KB 10 / 32 KB 20 / 1 MB 100 pJ per 64-bit read (KB taken as KiB)")
    return _at_node(pj, src, node_nm, "sram")


def sram_access_energy_pj(capacity_kib: float, word_bits: float, node_nm: float = BASE_NODE_NM) -> Energy:
    """Read energy of one ``word_bits``-wide word from an SRAM of ``capacity_kib``."""
    if not (isinstance(word_bits, (int, float)) and math.isfinite(word_bits) and word_bits > 0):
        raise ValueError(f"SRAM word width {word_bits!r} bits; allowed: a finite number > 0")
    e = sram_energy_pj_per_bit(capacity_kib, node_nm)
    return Energy(e.pj * word_bits, f"{word_bits:g} bits x ({e.source})")


_DRAM_FROM_CSV = {"HBM2": "HBM2", "HBM2E": "HBM2E", "HBM3": "HBM3", "GDDR5": "GDDR5", "GDDR6": "GDDR6",
                  "GDDR6X": "GDDR6X", "LPDDR4": "LPDDR4"}
# kind -> (kind it is derived from, factor, why): explicit assumptions, no primary source in the CSV
_DRAM_ASSUMED = {
    "DDR4": ("DDR3", (1.2 / 1.5) ** 2, "DDR3 x (VDD 1.2/1.5 V)^2 (JEDEC nominal supplies)"),
    "DDR5": ("DDR3", (1.1 / 1.5) ** 2, "DDR3 x (VDD 1.1/1.5 V)^2 (JEDEC nominal supplies)"),
    "LPDDR4X": ("LPDDR4", 1.0, "taken equal to LPDDR4 (upper bound: 4X lowers only the I/O voltage)"),
    "LPDDR5": ("LPDDR4", 1.0, "taken equal to LPDDR4 (upper bound)"),
    "HBM": ("HBM2", 1.0, "taken equal to HBM2 (same stacked architecture)"),
    "HBM3E": ("HBM3", 1.0, "taken equal to HBM3's placeholder"),
}
DRAM_KINDS = tuple(sorted({"DDR3", *_DRAM_FROM_CSV, *_DRAM_ASSUMED}))


def dram_energy_pj_per_bit(kind: str) -> Energy:
    """Off-chip energy per bit moved for a DRAM ``kind`` (not node-scaled)."""
    k = kind.upper() if isinstance(kind, str) else kind
    if k == "DDR3":
        v, s = reference_value("memory_energy", "DRAM access (DDR3-era)", "64")
        return Energy(v / 64, f"DDR3: midpoint of 1300-2600 pJ per 64-bit access = 20-40 pJ/bit, {s}")
    if k in _DRAM_FROM_CSV:
        v, s = reference_value("dram_energy", _DRAM_FROM_CSV[k])
        extra = {"HBM3": "placeholder assumption (midpoint of ~3-5 pJ/bit): ",
                 "LPDDR4": "midpoint of 13-14 pJ/bit: "}.get(k, "")
        return Energy(v, f"{k}: {extra}{s}")
    if k in _DRAM_ASSUMED:
        base, factor, why = _DRAM_ASSUMED[k]
        b = dram_energy_pj_per_bit(base)
        return Energy(b.pj * factor, f"{k}: assumption, {why}; from {b.source}")
    raise ValueError(f"DRAM kind {kind!r}; allowed: {list(DRAM_KINDS)}")
