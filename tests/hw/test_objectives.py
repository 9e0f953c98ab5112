"""The default mapping objective (``balanced``: the least energy within 5 % of the fastest
schedule's time) on the shipped designs, objective names checked, the ``objective`` key of every
result, and ``asicsim cost --objective all``."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import numpy as np
import pytest

import asicsim as sim
from asicsim._src.hw import Conv, CostResult, Gemm, Rnn, read_scalesim_topology, topology_operations
from asicsim._src.hw.cost import cost_many, scheduled_for
from asicsim._src.hw.cost_tables import cost_table
from asicsim._src.hw.family import cost_family
from asicsim._src.hw.objectives import BALANCED_SLACK, DEFAULT_OBJECTIVE, FASTEST
from asicsim._src.hw.sweep import gemm_sweep
from asicsim.cli import main

INPUTS = Path(__file__).parent / "golden" / "inputs"
RESNET18 = topology_operations(read_scalesim_topology(INPUTS / "Resnet18.csv"))
ALEXNET = topology_operations(read_scalesim_topology(INPUTS / "alexnet.csv"))
OTHERS = [Gemm(b, 2048, 2048) for b in (16, 256, 1400, 2048)] + [
    Gemm(128, 1024, 1024), Gemm(1024, 1024, 128), Gemm(1000, 3000, 700), Gemm(8, 4096, 4096),
    Conv(28, 28, 128, 128, 3, 3, padding=1, batch=8), Conv(56, 56, 64, 64, 3, 3, padding=1, groups=4),
    Rnn("gru", 512, 4, 20)]
SYSTOLIC = ["edge_int8_32x32", "tpu_v1", "dc_bf16_128x128", "fp8_128x128", "scalesim_google", "scalesim_default"]


@pytest.mark.parametrize("design", SYSTOLIC)
def test_default_is_within_the_slack_of_the_fastest_and_never_more_energy(design):
    ops = RESNET18 + ALEXNET + OTHERS
    by = {o: cost_many(ops, design, objective=o) for o in ("balanced", "latency", "energy")}
    assert DEFAULT_OBJECTIVE == "balanced" and BALANCED_SLACK == 0.05
    for b, la, e in zip(by["balanced"], by["latency"], by["energy"], strict=True):
        assert b.cycles <= (1 + BALANCED_SLACK) * la.cycles * (1 + 1e-12), (design, b.operation)
        assert b.energy_total_pj <= la.energy_total_pj * (1 + 1e-9), (design, b.operation)
        # latency's pool holds energy's choices: never slower than them
        assert la.cycles <= e.cycles * (1 + 1e-12), (design, b.operation)
    assert [r.objective for r in cost_many(ops[:3], design)] == ["balanced"] * 3


def test_default_on_resnet18_edge_is_not_the_energy_schedule():
    """The issue: ResNet-18 on edge_int8_32x32 ran 1.57x (this topology; 1.73x on ZigZag's layers)
    slower under the old default (energy) than at its fastest, for 20 % less energy. The default
    now runs within 0.7 % of the fastest for 5 % less board energy (2,347 us and 2,919 uJ against
    2,331 us and 3,080 uJ; before issue 31's search: 2,361 us and 2,957 uJ against 2,357 us and
    3,316 uJ); with the board's idle power priced (issue 30) ``energy`` itself is still 1.10x
    slower (2,571 us, 2,806 uJ). Issue 31's second pass (every sliver length, a fold reloads only
    the rows it spans): ``latency`` 2,319 us, ``balanced`` 2,363 us (1.9 % slower, 4.5 % less
    energy than it took before: cost_many's energy_total_pj 2,857 against 2,993 uJ), ``energy``
    2,461 us (1.06x)."""
    t = {o: sum(r.time_s for r in cost_many(RESNET18, "edge_int8_32x32", objective=o)) * 1e6
         for o in ("balanced", "latency", "energy")}
    e = {o: sum(r.energy_total_pj for r in cost_many(RESNET18, "edge_int8_32x32", objective=o)) * 1e-6
         for o in ("balanced", "latency")}
    d = sum(r.time_s for r in cost_many(RESNET18, "edge_int8_32x32")) * 1e6
    assert d == t["balanced"] <= 1.02 * t["latency"] and t["energy"] > 1.05 * t["latency"]
    assert e["balanced"] < 0.96 * e["latency"]


def test_latency_finds_the_fastest_twin():
    """TPU v1, a 1400x2048x2048 GEMM: the fastest schedule is the aligned twin of a candidate that is
    not the fastest candidate; the latency objective took 1.9x the energy objective's time."""
    la, en = (sim.cost(Gemm(1400, 2048, 2048), "tpu_v1", objective=o) for o in ("latency", "energy"))
    assert la.cycles <= en.cycles and sim.cost(Gemm(1400, 2048, 2048), "tpu_v1").bound == "compute"


BAD = [("speed", "objective 'speed': allowed: balanced | energy | dram | latency (default balanced)"),
       ("Energy", "objective 'Energy': allowed:"), ("fastest", "objective 'fastest': allowed:"),
       (None, "objective None: allowed:"), ("", "objective '': allowed:")]
FRONT_ENDS = {
    "cost": lambda o: sim.cost(Gemm(4, 4, 4), "tpu_v1", objective=o),
    "cost on a GPU": lambda o: sim.cost(Gemm(4, 4, 4), "gpu_h100", objective=o),
    "cost_table": lambda o: cost_table([Gemm(4, 4, 4)], ["tpu_v1"], objective=o),
    "gemm_sweep": lambda o: gemm_sweep([Gemm(4, 4, 4)], "tpu_v1", objective=o),
    "cost_family": lambda o: cost_family([Gemm(4, 4, 4)], [sim.load_design("tpu_v1")], objective=o),
    "elementwise only": lambda o: cost_many([sim.Elementwise(64, 1)], "edge_int8_32x32", objective=o),
}


@pytest.mark.parametrize(("bad", "message"), BAD)
@pytest.mark.parametrize("front", FRONT_ENDS)
def test_bad_objective_names_what_is_allowed(front, bad, message):
    with pytest.raises(ValueError) as err:
        FRONT_ENDS[front](bad)
    assert message in str(err.value)


def test_cost_result_checks_its_objective():
    r = sim.cost(Gemm(8, 8, 8), "tpu_v1")
    with pytest.raises(ValueError, match=r"CostResult\.objective = 'fast': allowed: balanced"):
        CostResult(**{**r.__dict__, "objective": "fast"})


def test_rows_say_their_objective_and_a_gpu_its_fastest_kernel():
    df = cost_table([Gemm(64, 64, 64)], ["edge_int8_32x32", "gpu_h100"], objective="energy").frame()
    assert list(df["objective"]) == ["energy", FASTEST]
    assert sim.cost(Gemm(64, 64, 64), "gpu_h100", objective="latency").row()["objective"] == FASTEST
    assert scheduled_for("gpu_h100", "energy") == FASTEST
    assert scheduled_for("tpu_v1") == "balanced"


def _cli(*argv) -> str:
    with contextlib.redirect_stdout(io.StringIO()) as out:
        assert main(list(argv)) == 0
    return out.getvalue()


def test_cli_trade_table():
    args = ["cost", "--design", "edge_int8_32x32", "--design", "gpu_h100", "--gemm", "128,1024,1024",
            "--objective", "all"]
    rows = json.loads(_cli(*args, "--json"))
    assert [(r["design"], r["objective"]) for r in rows] == [
        ("edge_int8_32x32", o) for o in ("balanced", "energy", "dram", "latency")] + [("gpu_h100", "fastest")]
    by = {r["objective"]: r for r in rows}
    # edge, 128x1024x1024: the energy schedule takes 1.41x the time for 0.70x the energy (board)
    assert by["balanced"]["time_s"] <= 1.05 * by["latency"]["time_s"]
    assert by["energy"]["time_s"] > 1.3 * by["latency"]["time_s"]
    assert by["energy"]["energy_j"] < 0.75 * by["latency"]["energy_j"]
    text = _cli(*args)
    head, *lines = text.splitlines()
    assert head.split()[:6] == ["design", "operation", "objective", "time_us", "time_x", "energy_uj"]
    energy = next(line for line in lines if " energy " in line and line.startswith("edge"))
    time_x, energy_x = float(energy.split()[5]), float(energy.split()[7])
    assert time_x == pytest.approx(by["energy"]["time_s"] / by["latency"]["time_s"], rel=1e-3)
    assert energy_x == pytest.approx(by["energy"]["energy_j"] / by["latency"]["energy_j"], rel=1e-3)
    assert any(line.split()[3] == "fastest" for line in lines if line.split()[:1] == ["gpu_h100"])
    assert "a GPU runs its fastest kernel" in text


def test_cli_cost_says_the_objective():
    text = _cli("cost", "--design", "tpu_v1", "--gemm", "64,64,64", "--objective", "latency")
    assert "objective" in text.splitlines()[0] and " latency " in text.splitlines()[1]
    assert np.isfinite(json.loads(_cli("cost", "--design", "tpu_v1", "--gemm", "64,64,64", "--json"))[0]["time_s"])
    assert json.loads(_cli("cost", "--design", "tpu_v1", "--gemm", "64,64,64", "--json"))[0]["objective"] == "balanced"
