"""Energy of the hardware that runs: a narrow format on a wider MAC mode costs that mode's
multiplier, unless the mode gates the unused operand bits off (``operand_gating``)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import asicsim as sim
from asicsim._src.hw.design_files import load_design
from asicsim._src.hw.efficiency import energy_per_mac_pj
from asicsim._src.hw.energy import adder_energy_pj, multiplier_energy_pj
from asicsim._src.hw.native import MacMode
from asicsim._src.hw.operations import OperationError

GATE_SRC = "test: the design gates the unused operand bits"


def _gated(name: str) -> sim.SystolicDesign:
    """``name`` with its own full-rate mode listed again, gating the unused operand bits."""
    d = load_design(name)
    modes = tuple(dataclasses.replace(m, operand_gating=True, operand_gating_source=GATE_SRC)
                  for m in d.pe.modes)
    return dataclasses.replace(d, pe=dataclasses.replace(d.pe, modes=modes))


# (design, requested formats, the mode's multiplier operands; the pJ figures at the node)
CASES = [("dc_bf16_128x128", ("fp8_e4m3", "fp8_e4m3"), ("bf16", "bf16"), 0.0192, 0.0440),
         ("edge_int8_32x32", ("int4", "int4"), ("int8", "int8"), 0.0082, 0.0322)]


@pytest.mark.parametrize("name, req, mode, narrow_pj, mode_pj", CASES)
def test_a_narrow_format_costs_the_multiplier_it_runs_on(name, req, mode, narrow_pj, mode_pj):
    d = load_design(name)
    node = d.technology_nm
    formats = {"act": req[0], "weight": req[1]}
    assert multiplier_energy_pj(*req, node).pj == pytest.approx(narrow_pj, abs=1e-4)
    assert multiplier_energy_pj(*mode, node).pj == pytest.approx(mode_pj, abs=1e-4)
    per_mac = energy_per_mac_pj(d, formats)
    assert per_mac["mult"] == pytest.approx(multiplier_energy_pj(*mode, node).pj, rel=1e-12)
    assert per_mac["add"] == pytest.approx(adder_energy_pj(d.pe.acc_format, node).pj, rel=1e-12)
    # an operation's energy too, and its source says which mode ran
    r = sim.cost(sim.Gemm(64, 64, 64), d, formats)
    assert r.energy_pj["mult"] == pytest.approx(r.macs * multiplier_energy_pj(*mode, node).pj, rel=1e-9)
    assert "runs on mode" in r.sources["mult"]


@pytest.mark.parametrize("name, req, mode, narrow_pj, mode_pj", CASES)
def test_a_gated_mode_keeps_the_narrow_multiplier_energy(name, req, mode, narrow_pj, mode_pj):
    d = _gated(name)
    formats = {"act": req[0], "weight": req[1]}
    assert energy_per_mac_pj(d, formats)["mult"] == pytest.approx(narrow_pj, abs=1e-4)
    r = sim.cost(sim.Gemm(64, 64, 64), d, formats)
    assert r.energy_pj["mult"] == pytest.approx(r.macs * narrow_pj, rel=1e-2)
    assert GATE_SRC in r.sources["mult"]
    # the design's own formats cost the same gated or not
    assert energy_per_mac_pj(d)["mult"] == energy_per_mac_pj(name)["mult"] == pytest.approx(mode_pj, abs=1e-4)


def test_operand_gating_loads_from_a_design_file(tmp_path: Path):
    src = (Path(sim.__file__).parents[1] / "designs" / "edge_int8_32x32.toml").read_text()
    f = tmp_path / "gated.toml"
    f.write_text(src.replace('name = "edge_int8_32x32"', 'name = "gated"') + '''
[[pe.modes]]
a = "int8"
b = "int8"
acc = "int32"
rate = 1.0
operand_gating = true
operand_gating_source = "test: a gated multiplier"
''')
    d = load_design(str(f))
    assert energy_per_mac_pj(d, {"act": "int4", "weight": "int4"})["mult"] == pytest.approx(0.0082, abs=1e-4)


@pytest.mark.parametrize("fields, fragment", [
    ({"operand_gating": "yes"}, "operand_gating = 'yes'; allowed: true or false"),
    ({"operand_gating": 1}, "operand_gating = 1; allowed: true or false"),
    ({"operand_gating": True}, "operand_gating_source = ''; allowed: a non-empty string"),
    ({"operand_gating": True, "operand_gating_source": "  "}, "operand_gating_source = '  '; allowed: a non-empty"),
    ({"operand_gating_source": 3}, "operand_gating_source = 3; allowed: a string"),
])
def test_bad_operand_gating_fields(fields, fragment):
    with pytest.raises(OperationError, match=fragment.replace("(", r"\(")):
        MacMode(a="int8", b="int8", acc="int32", rate=1.0, **fields)
