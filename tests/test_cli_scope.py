"""``asicsim cost`` and ``asicsim trace`` with several designs print the scope they compare at
(``--scope core|chip|board``, board by default), each design against the first GPU, with the
dynamic-only ratio at the same scope; every ratio is recomputed here from the priced table."""

from __future__ import annotations

import math

import pytest

from asicsim._src.report import compared, scope
from asicsim._src.report.units import compare, times
from asicsim._src.system.busy import trace_totals
from asicsim.cli import main

NAN = math.nan


def _totals(core, chip, board, dcore, dchip, dboard, time_s, launch=NAN, sm=NAN) -> dict:
    return {"time_s": time_s, "energy_core_j": core, "energy_chip_j": chip, "energy_board_j": board,
            "energy_dynamic_core_j": dcore, "energy_dynamic_chip_j": dchip, "energy_dynamic_board_j": dboard,
            "energy_j": board, "energy_dynamic_j": dboard, "launch_fraction": launch, "sm_fraction": sm}


ACC = _totals(0.5, 0.9, 1.0, 0.45, 0.8, 0.8, 2.0)
GPU = _totals(NAN, 5.04, 7.2, NAN, 4.0, 4.48, 4.0, launch=0.2, sm=0.9)


@pytest.mark.parametrize(("asked", "line"), [
    # 7.2 / 1.0, 5.04 / 0.9 = 5.6, 4.48 / 0.8 = 5.6; 4.0 / 2.0 s = 2.0x faster
    ("board", "acc uses 7.2x less energy than gpu, board to board (5.6x less chip to chip; 5.6x less counting "
              "dynamic energy only) and is 2.0x faster."),
    ("chip", "acc uses 5.6x less energy than gpu, chip to chip (7.2x less board to board; 5.0x less counting "
             "dynamic energy only) and is 2.0x faster."),
])
def test_design_lines_compare_against_the_gpu_at_the_scope(asked, line):
    # the GPU listed second is still the reference
    lines = compared.design_lines({"acc": ACC, "gpu": GPU}, {"gpu"}, asked, "run")
    assert lines[0].startswith(f"Compared {asked} to {asked} (--scope") and lines[0].endswith("against gpu:")
    assert lines[1] == "  " + line


def test_design_lines_say_a_bound_gpu():
    gpu = {**GPU, "launch_fraction": 0.9}
    lines = compared.design_lines({"gpu": gpu, "acc": ACC}, {"gpu"}, "board", "run")
    assert lines[1].endswith("and is 2.0x faster. gpu is launch-bound: gpu's run is 90 % launch floor.")
    assert compared.design_lines({"acc": ACC}, set()) == []  # one design: nothing to compare


def test_a_design_that_cannot_price_every_op_is_not_compared():
    """A GPU without the recipe's formats has no time or energy: it is named as not compared (it
    printed "gpu_v100 uses – than gpu_b200, scope unknown and is –"), and a GPU that prices every
    op is the reference even when listed later."""
    unpriced = _totals(NAN, NAN, NAN, NAN, NAN, NAN, NAN)
    lines = compared.design_lines({"old": unpriced, "acc": ACC, "gpu": GPU}, {"old", "gpu"}, "board", "run")
    assert lines[0].endswith("against gpu:")
    assert lines[1] == "  old is not compared: it does not price every op (the notes above say why)."
    assert lines[2].startswith("  acc uses 7.2x less energy than gpu")
    assert compared.design_lines({"a": unpriced, "b": unpriced}, set()) == [
        "No design prices every op, so none is compared (the notes above say why)."]


def test_cost_prints_its_scope(capsys):
    argv = ["cost", "--design", "dc_bf16_128x128", "--design", "gpu_h100", "--gemm", "256,256,256", "--formats",
            "act=bf16,weight=bf16,acc=fp32"]
    assert main([*argv, "--json"]) == 0
    import json

    import pandas as pd

    rows = pd.DataFrame(json.loads(capsys.readouterr().out)).astype({"energy_j": float, "time_s": float})
    t = {d: trace_totals(g) for d, g in rows.groupby("design")}
    acc, gpu = t["dc_bf16_128x128"], t["gpu_h100"]
    known = scope.has_scopes(acc) and scope.has_scopes(gpu)  # the power model's scopes, where recorded
    total = (gpu["energy_board_j"] / acc["energy_board_j"] if known else gpu["energy_j"] / acc["energy_j"])
    for asked in ("board", "chip"):
        assert main([*argv, "--scope", asked]) == 0
        out = capsys.readouterr().out
        assert f"Compared {asked} to {asked} (--scope" in out
        if asked == "board":
            assert (f"dc_bf16_128x128 uses {compare(total, 'less energy', 'more energy')} than gpu_h100, "
                    f"{'board to board' if known else 'scope unknown'}") in out
            assert f"and is {compare(gpu['time_s'] / acc['time_s'], 'faster', 'slower')}." in out
    with pytest.raises(SystemExit):
        main([*argv, "--scope", "die"])


def test_trace_prints_its_scope_and_json(capsys):
    argv = ["trace", "digits_mlp", "--recipe", "bf16", "--design", "dc_bf16_128x128", "--design", "gpu_h100"]
    assert main([*argv, "--json"]) == 0
    import json

    out = json.loads(capsys.readouterr().out)
    assert out["scope"] == "board"
    cost = [r for r in out["cost"] if r["role"] == "total"]
    e = {r["design"]: r["energy_j"] for r in cost}
    ratio = e["gpu_h100"] / e["dc_bf16_128x128"]
    assert times(ratio) in out["comparison"][1]
    assert ratio >= scope.EXPLAIN and f"Why {times(ratio)}" in out["comparison"][1]  # never without its reason
