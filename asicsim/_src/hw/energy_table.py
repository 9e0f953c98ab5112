"""A systolic design's per-event energies, each with its source: :func:`design_energy_table`.

Beside :mod:`asicsim._src.hw.energy` (the per-event models) and :mod:`asicsim._src.hw.sram_banks` (a
buffer's banked access energy, which builds on those models), so neither imports the other's user.
"""

from __future__ import annotations

from asicsim._src.hw.energy import (
    Energy,
    adder_energy_pj,
    dram_energy_pj_per_bit,
    multiplier_energy_pj,
)
from asicsim._src.hw.sram_banks import buffer_access_energy_pj


def design_energy_table(design) -> dict[str, Energy]:
    """Per-event energies of a :class:`~asicsim.hw.SystolicDesign` at its node, each with its source.

    Keys: ``mac_mult_pj``, ``mac_add_pj``, ``mac_pj`` (per MAC), ``<buffer>.read_pj_per_word`` and
    ``<buffer>.write_pj_per_word`` (a buffer's default: one bank plus the wire to it,
    :func:`asicsim._src.hw.sram_banks.buffer_access_energy_pj`) and ``dram_pj_per_bit``. The design's own numbers win when given.
    """
    node, name = design.technology_nm, design.name
    pe = design.pe
    mult = multiplier_energy_pj(pe.a_format, pe.b_format, node)
    add = adder_energy_pj(pe.acc_format, node)
    out = {"mac_mult_pj": mult, "mac_add_pj": add}
    out["register_pj_per_mac"] = (
        Energy(pe.register_energy_pj, f"design {name!r} pe.register_energy_pj")
        if pe.register_energy_pj is not None else
        Energy(0.0, "not priced: the design gives no pe.register_energy_pj (PE register accesses)"))
    if pe.mac_energy_pj is not None:
        out["mac_pj"] = Energy(pe.mac_energy_pj, f"design {name!r} pe.mac_energy_pj")
    else:
        out["mac_pj"] = Energy(mult.pj + add.pj, "mac_mult_pj + mac_add_pj")
    for b in design.buffers:
        pj, src = buffer_access_energy_pj(b.capacity_kib, b.banks, design.word_bits(b.name), node)
        default = Energy(pj, src)
        for op, given in (("read", b.read_energy_pj), ("write", b.write_energy_pj)):
            if given is not None:
                e = Energy(float(given), f"design {name!r} buffer {b.name!r} {op}_energy_pj")
            elif op == "write":
                e = Energy(default.pj, f"assumption: write = read; {default.source}")
            else:
                e = default
            out[f"{b.name}.{op}_pj_per_word"] = e
    if design.dram.energy_pj_per_bit is not None:
        out["dram_pj_per_bit"] = Energy(design.dram.energy_pj_per_bit,
                                        f"design {name!r} dram.energy_pj_per_bit ({design.dram.kind})")
    else:
        out["dram_pj_per_bit"] = dram_energy_pj_per_bit(design.dram.kind)
    return out
