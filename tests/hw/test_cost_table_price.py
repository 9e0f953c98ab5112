"""cost_table returns one typed, vectorised price over (designs, operations), and a GPU's price is
assembled in array operations (issue 31 item 7): its frame() is the records' rows, to the bit."""

import dataclasses

import numpy as np
import pandas as pd
import pytest

import asicsim as sim
from asicsim._src.hw import Conv, Elementwise, Gemm, Price, Rnn
from asicsim._src.hw import gpu_cost as gpu_cost_module
from asicsim._src.hw.cost import cost_many
from asicsim._src.hw.cost_tables import cost_table, stack_designs
from asicsim._src.hw.design_files import labelled_designs
from asicsim._src.hw.gpu_cost import gpu_cost_many, gpu_price
from asicsim._src.hw.result_table import Labels
from asicsim._src.hw.sweep import gemm_sweep

# an elementwise op first (its row has no MAC rate), grouped convs, RNNs, a sparse GEMM
OPS = [Elementwise(1 << 16, 3, inputs=2), Gemm(1000, 3000, 700), Gemm(8, 4096, 4096), Gemm(77, 129, 513),
       Conv(28, 28, 128, 128, 3, 3, padding=1, batch=8), Conv(14, 14, 64, 128, 3, 3, stride=2, groups=2),
       Rnn("gru", 512, 16, 25), Rnn("lstm", 256, 4, 10),
       Gemm(1024, 1024, 1024, weight_sparsity=0.9, sparse_format="csr")]
DESIGNS = ["edge_int8_32x32", "gpu_h100", "tpu_v1", "gpu_m40", "eyeriss_v1", "tpu_v4"]


def _rows(ops, designs, formats=None, objective="balanced") -> pd.DataFrame:
    """The table as it was defined before it was typed: one record row per (design, operation)."""
    return pd.DataFrame([r.row() | {"design": label} for label, d in labelled_designs(designs)
                         for r in cost_many(ops, d, formats, objective=objective)])


def test_cost_table_is_one_price_over_designs_and_operations():
    t = cost_table(OPS, DESIGNS)
    assert isinstance(t, Price) and t.shape == (len(DESIGNS), len(OPS))
    assert t.labels.designs == tuple(DESIGNS) and t.labels.operations == tuple(op.label for op in OPS)
    assert t.traffic.levels == ("sram", "l2", "dram")  # the designs' levels, outermost last
    for j, d in enumerate(DESIGNS):
        one = cost_many(OPS, d).price
        for k in ("cycles", "time_s", "macs", "dram_bytes", "bound", "utilization", "launch_fraction"):
            np.testing.assert_array_equal(getattr(t, k)[j], getattr(one, k), err_msg=f"{d}: {k}")
        for k in one.energy.components:  # each design's own components, the others zero
            np.testing.assert_array_equal(t.energy[k][j], one.energy[k])
        assert set(t.energy.components) - set(one.energy.components)
        assert all(t.energy[k][j].max() == 0 for k in set(t.energy.components) - set(one.energy.components))
        taken = t.take(j)
        assert taken.formats == one.formats and list(taken.notes) == list(one.notes)
        pd.testing.assert_frame_equal(taken.frame(), one.frame(), check_exact=True)


@pytest.mark.parametrize(("designs", "formats", "objective"), [
    (DESIGNS, None, "balanced"),
    (["tpu_v1", "gpu_v100", "dc_bf16_128x128"], None, "energy"),
    (["gpu_h100", "dc_bf16_128x128", "gpu_a100"], "act=bf16,weight=bf16,acc=fp32,out=bf16", "latency"),
    ("fp8_128x128", None, "dram"),
    (["gpu_t4"], None, "balanced"),
])
def test_frame_is_the_records_rows_to_the_bit(designs, formats, objective):
    got = cost_table(OPS, designs, formats, objective=objective).frame()
    pd.testing.assert_frame_equal(got, _rows(OPS, designs, formats, objective), check_exact=True)


def test_frame_columns_follow_the_rows_when_a_design_adds_some():
    ops = [Elementwise(4096, 2)]  # no MAC rate on the systolic row; the GPU's path column comes last
    pd.testing.assert_frame_equal(cost_table(ops, ["edge_int8_32x32", "gpu_p4"]).frame(),
                                  _rows(ops, ["edge_int8_32x32", "gpu_p4"]), check_exact=True)


def test_a_price_without_labels_says_what_has_them():
    with pytest.raises(ValueError, match="carries no labels; allowed: a price from cost_many or cost_table"):
        gemm_sweep([Gemm(64, 64, 64)], "tpu_v1").frame()


def _labels(**change) -> Labels:
    lab = cost_many([Gemm(8, 8, 8)], "tpu_v1").price.labels
    return dataclasses.replace(lab, **change)


@pytest.mark.parametrize(("change", "message"), [
    ({"objectives": ("balanced", "energy")}, "Labels.objectives: 2 entries; allowed: one per design (1)"),
    ({"clock_hz": ()}, "Labels.clock_hz: 0 entries; allowed: one per design (1)"),
    ({"kinds": ("gemm", "conv")}, "Labels: kinds 2, mapping (1, 1), execution (3, 1, 1); allowed: 1, (1, 1)"),
    ({"mapping": np.array([["a", "b"]], dtype=object)}, "mapping (1, 2)"),
])
def test_labels_check_themselves(change, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _labels(**change)


def test_stack_designs_takes_labelled_prices_over_the_same_operations():
    a, b = cost_many(OPS[:2], "tpu_v1").price, cost_many(OPS[:3], "gpu_h100").price
    with pytest.raises(ValueError, match="allowed: the same operations"):
        stack_designs([a, b], ["x", "y"])
    with pytest.raises(ValueError, match="prices over operations with labels"):
        stack_designs([gemm_sweep([Gemm(8, 8, 8)], "tpu_v1")], ["x"])


GPUS = sim.hw.list_designs("gpu")


def _grid(seed: int) -> list:
    rng = np.random.default_rng(seed)
    ops = [Gemm(*map(int, rng.integers(1, 5000, 3))) for _ in range(30)]
    for _ in range(15):
        c, k = int(rng.choice([3, 16, 64, 96])), int(rng.choice([1, 3, 5]))
        ops.append(Conv(int(rng.integers(4, 60)), int(rng.integers(4, 60)), c, int(rng.choice([16, 64, 256])),
                        k, k, stride=int(rng.choice([1, 2])), padding=k // 2, batch=int(rng.integers(1, 33))))
    return [*ops, Rnn("lstm", 512, 16, 25), Rnn("gru", 1024, 4, 50), Elementwise(1 << 20, 3, inputs=2),
            Elementwise(4096, 1, on_chip=True)]


@pytest.mark.parametrize("design", GPUS)
def test_gpu_records_are_views_of_the_vectorised_price(design):
    ops = _grid(len(design))
    pr = gpu_price(ops, sim.load_design(design))
    recs = gpu_cost_many(ops, sim.load_design(design))
    assert pr.shape == (len(ops),) and pr.labels.objectives == ("fastest",)
    for i, r in enumerate(recs):
        for k in ("cycles_compute", "cycles_fill_drain", "cycles_stall", "macs", "macs_performed", "time_s",
                  "dram_bytes", "sram_array_bytes", "launch_fraction", "sm_fraction", "dram_bound_bytes"):
            np.testing.assert_array_equal(getattr(r, k), getattr(pr, k)[i], err_msg=f"{design} op {i}: {k}")
        assert r.bound.code == pr.bound[i] and r.notes == pr.notes[i]
        np.testing.assert_array_equal(r.traffic.bytes, pr.traffic.bytes[..., i])
        np.testing.assert_array_equal(r.energy_pj.pj, pr.energy.pj[:, i])
    pd.testing.assert_frame_equal(pr.frame(), pd.DataFrame([r.row() for r in recs]), check_exact=True)


def test_gpu_price_lists_each_operations_kernels_once(monkeypatch):
    """The price is assembled from one kernel list (the operand shares too), not per operation."""
    calls = []
    real = gpu_cost_module.op_kernels
    monkeypatch.setattr(gpu_cost_module, "op_kernels", lambda op, *a, **k: calls.append(op) or real(op, *a, **k))
    ops = _grid(3)
    gpu_cost_many(ops, sim.load_design("gpu_a100"))
    assert len(calls) == len(ops)


def test_gpu_skip_input_is_per_operation():
    """An RNN whose lowering has no input projection is priced as DeepBench's (skip input) beside
    one that has: each op's price is the one it gets alone."""
    from asicsim._src.workloads.deepbench import RecurrentRnn

    skip = RecurrentRnn("gru", 512, 16, 25)  # DeepBench's: every GEMM shares the recurrent weights
    other = Rnn("lstm", 512, 16, 25, input_size=256)
    assert all(low.shared_weights for low in skip.lower()) and not all(low.shared_weights for low in other.lower())
    both = cost_many([skip, Gemm(64, 64, 64), other], "gpu_v100")
    for i, op in ((0, skip), (2, other)):
        alone = cost_many([op], "gpu_v100")[0]
        assert both[i].time_s == alone.time_s and both[i].energy_pj.total == alone.energy_pj.total
