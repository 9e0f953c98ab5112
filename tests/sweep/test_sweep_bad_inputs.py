"""Bad sweep specs are refused when they load, naming the file, the entry, the field, the value
and what is allowed: one row per case (an edit of a good spec, a fragment of the message)."""

from __future__ import annotations

import dataclasses

import pytest

from asicsim._src.sweep import SweepError, load_spec
from asicsim._src.workloads.deepbench import WorkloadError
from asicsim._src.workloads.workload import Workload, load_workload

GOOD = """
name = "t"
seeds = [0, 1]
recipes = ["fp32"]
designs = ["tpu_v1"]
[[workloads]]
name = "digits_mlp"
run = ["train", "cost"]
steps = 40
"""

SPEC_CASES = [
    ("steps = 40", "steps = -1", "workloads[0].steps = -1: allowed: an integer in 1 .. 10000000"),
    ("steps = 40", "steps = 40\nbatch = 0", "workloads[0].batch = 0: allowed: an integer in 1 .. 1048576"),
    ("steps = 40", "steps = 4.5", "workloads[0].steps = 4.5: allowed: an integer in 1 .. 10000000"),
    ("steps = 40", "steps = 40\neval_every = 0", "workloads[0].eval_every = 0: allowed: an integer in 1 .. 10000000"),
    ("steps = 40", "steps = 40\nlr = nan", "workloads[0].lr = nan: allowed: a finite number > 0"),
    ("steps = 40", "steps = 40\nlr = \"fast\"", "workloads[0].lr = 'fast': allowed: a finite number > 0"),
    ("steps = 40", "steps = 40\nlr = 0", "workloads[0].lr = 0: allowed: a finite number > 0"),
    ("steps = 40", "steps = 40\nmomentum = -5", "workloads[0].momentum = -5: allowed: a number in [0, 1)"),
    ("steps = 40", "steps = 40\noptimizer = \"rmsprop\"",
     "workloads[0].optimizer = 'rmsprop': allowed: sgd | adam"),
    ("steps = 40", "steps = true", "workloads[0].steps = True: allowed: an integer in 1 .. 10000000"),
    ("seeds = [0, 1]", "seeds = []", "seeds = []: allowed: a non-empty list of distinct integers"),
    ("seeds = [0, 1]", "seeds = [-1]", "seeds = [-1]: allowed: a non-empty list of distinct integers"),
    ("seeds = [0, 1]", "seeds = [1, 1]", "seeds = [1, 1]: allowed: a non-empty list of distinct integers"),
    ('recipes = ["fp32"]', "recipes = []", "recipes = []: allowed: a non-empty list of recipes"),
]


@pytest.mark.parametrize("old, new, message", SPEC_CASES, ids=[c[1] for c in SPEC_CASES])
def test_bad_spec(tmp_path, old, new, message):
    path = tmp_path / "spec.toml"
    assert old in GOOD
    path.write_text(GOOD.replace(old, new))
    with pytest.raises(SweepError) as err:
        load_spec(path)
    assert message in str(err.value)
    assert str(path) in str(err.value)  # which file


WORKLOAD_CASES = [
    ({"steps": -1}, "steps = -1: allowed: an integer in 1 .. 10000000"),
    ({"batch": 0}, "batch = 0: allowed: an integer in 1 .. 1048576"),
    ({"lr": float("nan")}, "lr = nan: allowed: a finite number > 0"),
    ({"lr": "fast"}, "lr = 'fast': allowed: a finite number > 0"),
    ({"momentum": -5}, "momentum = -5: allowed: a number in [0, 1)"),
    ({"optimizer": "rmsprop"}, "optimizer = 'rmsprop': allowed: sgd | adam"),
    ({"eval_every": 0}, "eval_every = 0: allowed: an integer in 1 .. 10000000"),
    ({"explode_factor": 0.5}, "explode_factor = 0.5: allowed: a number > 1"),
]


@pytest.mark.parametrize("change, message", WORKLOAD_CASES, ids=[str(c[0]) for c in WORKLOAD_CASES])
def test_workload_built_in_code_is_checked(change, message):
    w = load_workload("digits_mlp")
    with pytest.raises(WorkloadError, match="digits_mlp") as err:
        w.replace(**change)
    assert message in str(err.value)
    with pytest.raises(WorkloadError):
        dataclasses.replace(w, **change)
    with pytest.raises(WorkloadError):
        Workload(**{**{f.name: getattr(w, f.name) for f in dataclasses.fields(w)}, **change})


def test_workload_file_with_a_bad_setting_names_the_file(tmp_path):
    from asicsim._src.workloads.deepbench import workloads_dir

    path = tmp_path / "w.toml"
    path.write_text((workloads_dir() / "digits_mlp.toml").read_text().replace("batch = 32", "batch = -3"))
    with pytest.raises(WorkloadError) as err:
        load_workload(path)
    assert str(path) in str(err.value) and "batch = -3: allowed: an integer in 1 .. 1048576" in str(err.value)


@pytest.mark.parametrize("content, message", [
    ("dataset = 'digits'\n[model]\nkind = 'mlp' # caf\xe9\n".encode("latin-1"),
     "not UTF-8 text (byte 0xe9 at offset 45)"),
    (b"dataset = 'digits'\n[model\n", "not valid TOML"),
], ids=["latin-1", "bad TOML"])
def test_unreadable_workload_file_is_named(tmp_path, content, message):
    path = tmp_path / "w.toml"
    path.write_bytes(content)
    with pytest.raises(WorkloadError) as err:
        load_workload(path)
    assert str(path) in str(err.value) and message in str(err.value)


KERNELS = '[[kernels]]\nsuite = "deepbench_gemm_inference_server"\nprecision = "int8"\n'

def _values(n: int) -> str:
    return ", ".join(str(v) for v in range(1, n + 1))


SIZE_CASES = [  # (spec text, message): refused before a single design is built
    (f'[[design_space]]\nbase = "edge_int8_32x32"\nvary = {{ "array.rows" = [{_values(3000)}], '
     f'"array.cols" = [{_values(3000)}] }}\n',
     "design_space: 9,000,000 designs in all (design_space[0]: 9,000,000 (3000 x 3000)); allowed: at most 100,000"),
    (f'designs = ["tpu_v1"]\n[[design_space]]\nbase = "tpu_v1"\nvary = {{ "clock_mhz" = [{_values(60000)}] }}\n'
     f'[[design_space]]\nbase = "edge_int8_32x32"\nvary = {{ "clock_mhz" = [{_values(50000)}] }}\n',
     "design_space: 110,001 designs in all (design_space[0]: 60,000 (60000), design_space[1]: 50,000 (50000))"),
]


@pytest.mark.parametrize("text, message", SIZE_CASES, ids=["3000x3000", "two spaces"])
def test_a_huge_design_space_is_refused_at_once_with_its_size(tmp_path, text, message):
    import time

    path = tmp_path / "huge.toml"
    path.write_text(text + KERNELS)
    t0 = time.monotonic()
    with pytest.raises(SweepError) as err:
        load_spec(path)
    assert message in str(err.value) and str(path) in str(err.value)
    assert time.monotonic() - t0 < 30  # was: minutes building 9 M designs, no word


def test_a_large_design_space_is_said_and_too_many_points_refused(tmp_path, monkeypatch):
    from asicsim._src.sweep import designs, spec
    from asicsim._src.sweep.spec import SweepWarning

    path = tmp_path / "big.toml"
    path.write_text('recipes = ["fp32", "bf16"]\n[[design_space]]\nbase = "gpu_v100"\n'
                    'vary = { "boost_clock_mhz" = [1000, 1100, 1200] }\n'
                    '[[workloads]]\nname = "digits_mlp"\nrun = ["cost"]\n' + KERNELS)
    monkeypatch.setattr(designs, "WARN_DESIGNS", 2)
    with pytest.warns(SweepWarning, match="design_space: 3 designs to build and price"):
        load_spec(path)
    monkeypatch.setattr(designs, "WARN_DESIGNS", 10)
    monkeypatch.setattr(spec, "MAX_POINTS", 8)
    with pytest.raises(SweepError, match=r"9 points \(3 designs\); allowed: at most 8 per sweep"):
        load_spec(path)


RAY_CASES = [
    ("bogus.invalid:1234", "no such host 'bogus.invalid'"),
    ("127.0.0.1:1", "nothing listens at 127.0.0.1:1"),
    ("ray://bogus.invalid", "no such host 'bogus.invalid'"),
    ("headnode", "not HOST:PORT"),
    ("127.0.0.1:99999", "not an address"),
]


@pytest.mark.parametrize("address, message", RAY_CASES, ids=[c[0] for c in RAY_CASES])
def test_a_bad_ray_address_is_a_clear_error_at_once(tmp_path, address, message):
    import time

    from asicsim._src.sweep import sweep

    path = tmp_path / "k.toml"
    path.write_text('designs = ["tpu_v1"]\n' + KERNELS)
    t0 = time.monotonic()
    with pytest.raises(SweepError) as err:
        sweep(path, tmp_path / "out", ray=address, progress=None)
    assert f"--ray {address!r}: {message}" in str(err.value) and "ray start --head" in str(err.value)
    assert time.monotonic() - t0 < 30 and not (tmp_path / "out").exists()  # was: retried forever
