"""Bad training-workload files, one row each (issue 29 item 17): every section and field of a
workload file is checked at load (file, field, value, what is allowed), every scale too, and a
Workload built in code is checked the same way."""

from __future__ import annotations

import dataclasses

import pytest

from asicsim._src.workloads import Workload, WorkloadError, load_workload
from asicsim._src.workloads.datasets import load_dataset

BASE = '''name = "w"
dataset = "digits"

[model]
kind = "mlp"
hidden = [64]

[train]
optimizer = "sgd"
lr = 0.1
batch = 32
steps = 100
eval_every = 50

[reference]
test_accuracy = 0.96

[scales.gpu.model]
hidden = [1024, 1024]

[scales.gpu.train]
batch = 128
'''
CNN = BASE.replace('kind = "mlp"\nhidden = [64]', 'kind = "cnn1d"\nchannels = [8, 8]\nkernels = [3, 3]\n'
                   'strides = [2, 2]\npads = [1, 1]').replace("hidden = [1024, 1024]", "channels = [16, 16]")

# (base, old, new, fragments of the message)
ROWS = [
    (BASE, "hidden = [64]", "hidden = [0]", ["model.hidden = [0]: allowed: a non-empty list of widths, "
                                             "each an integer in 1 .. 65536"]),
    (BASE, "hidden = [64]", "hidden = [-5]", ["model.hidden = [-5]"]),
    (BASE, "hidden = [64]", "hidden = [64.5]", ["model.hidden = [64.5]"]),
    (BASE, "hidden = [64]", "hidden = [100000000000]", ["model.hidden = [100000000000]"]),
    (BASE, "hidden = [64]", "hidden = []", ["model.hidden = []"]),
    (BASE, "hidden = [64]", "hidden = 64", ["model.hidden = 64"]),
    (BASE, "hidden = [64]", "hidden = [64]\nresidual = 1", ["model.residual = 1: allowed: true or false"]),
    (BASE, "hidden = [64]", "hidden = [64]\nwidth = 3", ["model.width: no such field of a mlp model; fields "
                                                         "are ['hidden', 'residual']"]),
    (BASE, 'kind = "mlp"', 'kind = "MLP"', ["model = 'MLP': allowed: logreg | mlp", "did you mean 'mlp'?"]),
    (BASE, 'dataset = "digits"', 'dataset = "DIGITS"', ["dataset = 'DIGITS': allowed: digits | mnist1d",
                                                        "did you mean 'digits'?"]),
    (BASE, 'dataset = "digits"\n', "", ["dataset = '<missing>'"]),
    (BASE, "test_accuracy = 0.96", "test_accuracy = 2.0", ["reference.test_accuracy = 2.0: allowed: a finite "
                                                           "number in [0, 1] (a fraction: 0.96, not 96)"]),
    (BASE, "test_accuracy = 0.96", "test_accuracy = nan", ["reference.test_accuracy = nan"]),
    (BASE, "test_accuracy = 0.96", "accuracy = 0.96", ["reference.accuracy: no such metric"]),
    (BASE, "test_accuracy = 0.96", 'test_accuracy = "high"', ["reference.test_accuracy = 'high'"]),
    (BASE, "batch = 32", "batch = 2000000", ["batch = 2000000: allowed: an integer in 1 .. 1048576"]),
    (BASE, "steps = 100", "steps = 99999999999999", ["steps = 99999999999999: allowed: an integer in 1 .. 10000000"]),
    (BASE, "steps = 100", "steps = 10000000\n", ["steps x batch = 10000000 x 32: allowed: at most 268435456"]),
    (BASE, "eval_every = 50", "eval_every = 0", ["eval_every = 0"]),
    # every scale is checked when the file loads, not when that scale runs
    (BASE, "batch = 128", "batch = 0", ["[scales.gpu]: workload 'w': batch = 0: allowed: an integer in 1 .."]),
    (BASE, "hidden = [1024, 1024]", "hidden = [0]", ["[scales.gpu]: workload 'w': model.hidden = [0]"]),
    (BASE, "hidden = [1024, 1024]", "depth = 3", ["[scales.gpu]:", "model.depth: no such field"]),
    (BASE, "[scales.gpu.train]\n", '[scales.tpu.train]\nbatch = 0\n[scales.gpu.train]\n',
     ["[scales.tpu]: workload 'w': batch = 0"]),
    (BASE, "[scales.gpu.model]", '[scales.tpu]\ncolour = 1\n[scales.gpu.model]', ["scales.tpu.colour: no such field"]),
    (BASE, "[scales.gpu.model]", '[scales.tpu]\ndataset = "DIGITS"\n[scales.gpu.model]',
     ["[scales.tpu]: workload 'w': dataset = 'DIGITS'"]),
    (CNN, "kernels = [3, 3]", "kernels = [3]", ["model.kernels = [3]: allowed: one kernel size per layer (2, as channels)"]),
    (CNN, "pads = [1, 1]", "pads = [1, -1]", ["model.pads = [1, -1]"]),
    (CNN, "channels = [8, 8]", "channels = [8, 0]", ["model.channels = [8, 0]"]),
    (BASE, 'kind = "mlp"\nhidden = [64]', 'kind = "gru"\nhidden = 6\nreadout = "first"',
     ["model.readout = 'first': allowed: 'all' | 'last'"]),
    (BASE, 'kind = "mlp"\nhidden = [64]', 'kind = "gru"\nhidden = 0', ["model.hidden = 0: allowed: an integer in 1"]),
]


@pytest.mark.parametrize(("base", "old", "new", "fragments"), ROWS, ids=[r[2][:30] for r in ROWS])
def test_bad_workload_file(tmp_path, base, old, new, fragments):
    assert old in base
    path = tmp_path / "w.toml"
    path.write_text(base.replace(old, new, 1))
    with pytest.raises(WorkloadError) as err:
        load_workload(path)
    assert str(err.value).startswith(f"{path}: ")
    for bit in fragments:
        assert bit in str(err.value), (bit, str(err.value))


def test_good_bases_load(tmp_path):
    for i, text in enumerate((BASE, CNN)):
        (tmp_path / f"{i}.toml").write_text(text)
        assert load_workload(tmp_path / f"{i}.toml", "gpu").batch == 128


def test_transformer_width_divides_into_heads():
    with pytest.raises(WorkloadError, match=r"model.d_model = 65: allowed: a multiple of heads \(4\)"):
        dataclasses.replace(load_workload("charlm_transformer"), sizes={"d_model": 65, "heads": 4})


@pytest.mark.parametrize(("change", "fragment"), [
    ({"sizes": {"hidden": [0]}}, "model.hidden = [0]"),
    ({"dataset": "DIGITS"}, "dataset = 'DIGITS'"),
    ({"model": "nope"}, "model = 'nope'"),
    ({"reference": {"test_accuracy": 96}}, "reference.test_accuracy = 96"),
    ({"batch": 10**12}, "batch = 1000000000000"),
])
def test_workloads_built_in_code_are_checked(change, fragment):
    w = load_workload("digits_mlp")
    with pytest.raises(WorkloadError, match=r"workload 'digits_mlp'") as err:
        dataclasses.replace(w, **change)
    assert fragment in str(err.value)
    with pytest.raises(WorkloadError):
        Workload(**{**{f.name: getattr(w, f.name) for f in dataclasses.fields(w)}, **change})


def test_a_batch_beyond_the_training_set_is_an_error():
    from asicsim._src.workloads.training import train

    n = len(load_dataset("digits").x_train)
    with pytest.raises(WorkloadError, match=rf"batch = 100000: allowed: at most the {n} training examples "
                                            r"of dataset 'digits'"):
        train("digits_mlp", "fp32", seeds=(0,), batch=100000, steps=1)


def test_a_priced_trace_takes_a_batch_beyond_the_dataset_but_not_a_huge_one():
    from asicsim._src.workloads.pricing import workload_trace

    tr = workload_trace("digits_mlp", "fp32", batch=4096, training=False)  # shapes only: larger than 1437
    assert (tr.loc[tr["kind"] != "elementwise", "M"] == 4096).all()
    with pytest.raises(WorkloadError, match=r"batch = 99999999999: allowed: an integer in 1 .. 1048576"):
        workload_trace("digits_mlp", "fp32", batch=99999999999)
