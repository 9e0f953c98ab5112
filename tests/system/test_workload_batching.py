"""Batching a training workload's own model (``asicsim batching --model <workload>``): the
service table is the workload's inference trace priced per batch size, checked against the cost
model called by hand on the shapes the model's sizes give; bad combinations are clear errors."""

import argparse
import json

import numpy as np
import pytest

from asicsim._src.hw import Elementwise, Gemm, cost_many, load_design
from asicsim._src.system.batching_cli import add_cli, run_cli
from asicsim._src.system.batching_errors import BatchingError
from asicsim._src.system.p99_budget import max_throughput_under_p99
from asicsim._src.system.workload_batching import workload_service_table


def _cli(argv):
    p = argparse.ArgumentParser(prog="asicsim")
    add_cli(p.add_subparsers(dest="command", required=True))
    return p.parse_args(argv)


def test_logreg_service_is_its_gemm_and_bias_add_by_hand():
    # mnist1d_logreg: 40 inputs -> 10 classes. One request batch of b examples is the GEMM
    # (b x 40) @ (40 x 10) and the bias add (b*10 sums of 2 operands, b*10 + 10 distinct inputs),
    # in bf16 operands with fp32 accumulation on the design.
    design = load_design("dc_bf16_128x128")
    fmts = {"act": "bfloat16", "weight": "bfloat16", "acc": "float32", "out": "bfloat16"}
    table = workload_service_table("mnist1d_logreg", design, "bf16", 8)
    for b in (1, 3, 8):
        ops = [Gemm(b, 10, 40), Elementwise(b * 10, 1, inputs=2, work="elementwise", input_elements=b * 10 + 10)]
        res = cost_many(ops, design, fmts)
        assert table.service_s(b) == pytest.approx(sum(r.time_s for r in res), rel=1e-12)
        assert table.energy_j[b - 1] == pytest.approx(sum(r.energy_total_pj for r in res) * 1e-12, rel=1e-12)
    assert table.formats == fmts and table.model == "mnist1d_logreg (bf16)"


def test_batching_amortises_a_recurrent_workload():
    # The GRU's weights are read once per batch: energy per request falls as the batch grows, and
    # a batch of 16 takes less than 16 batches of 1.
    t = workload_service_table("mnist1d_gru", "dc_bf16_128x128", "bf16", 16)
    per_request = t.energy_j / np.arange(1, 17)
    assert np.all(np.diff(per_request) < 0)
    assert t.service_s(16) < 16 * t.service_s(1)
    res = max_throughput_under_p99(t, None, 10 * t.service_s(16), max_batches=(1, 16), requests=2000)
    assert res.max_batch == 16 and res.rate_rps > t.capacity(1)


def test_recipe_the_design_cannot_run_is_an_error():
    with pytest.raises(BatchingError, match=r"recipe = 'bf16' on design 'edge_int8_32x32'.*not priced.*"
                                            r"does not execute act=bfloat16"):
        workload_service_table("mnist1d_logreg", "edge_int8_32x32", "bf16", 2)


def test_cli_serves_a_workload(capsys):
    assert run_cli(_cli(["batching", "--model", "mnist1d_logreg", "--recipe", "int8_ptq_tensor", "--design",
                         "edge_int8_32x32", "--max-batch", "4", "--requests", "2000", "--json"])) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["model"] == "mnist1d_logreg (int8_ptq_tensor)"
    assert "logreg model it trains" in out["description"] and "(40,)" in out["description"]
    (d,) = out["designs"]
    # int8 x int8 summed exactly in fp32 by the emulator is priced as the int32 accumulator it stands for
    assert d["formats"]["act"] == "int8" and d["formats"]["acc"] == "int32"
    assert d["runs"] and d["residency"] == []


@pytest.mark.parametrize("argv, message", [
    (["--model", "mnist1d_logreg", "--formats", "act=int8"], "--formats with workload model 'mnist1d_logreg'"),
    (["--model", "mlp", "--recipe", "bf16"], "--recipe = 'bf16' with preset model 'mlp'"),
    (["--model", "no_such_model"], r"model = 'no_such_model'; allowed: a preset .*mnist1d_gru"),
])
def test_cli_bad_combinations(argv, message):
    with pytest.raises(BatchingError, match=message):
        run_cli(_cli(["batching", *argv, "--requests", "100"]))


def test_workload_scale_changes_the_served_model():
    small = workload_service_table("digits_mlp", "dc_bf16_128x128", "bf16", 2)
    gpu = workload_service_table("digits_mlp", "dc_bf16_128x128", "bf16", 2, scale="gpu")  # 1024-1024 MLP
    assert gpu.energy_j[0] > 10 * small.energy_j[0]
