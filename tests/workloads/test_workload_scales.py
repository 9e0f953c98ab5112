"""Workload scales: ``[scales.<name>]`` tables resolved by ``load_workload(name, scale)``, checked
like every other setting, and wired into ``asicsim train/infer --scale``, ``asicsim workloads``
and sweep specs (where the scale changes a point's identity)."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib

import pytest

from asicsim._src.sweep import SweepError, expand, load_spec
from asicsim._src.workloads import (
    Workload,
    WorkloadError,
    list_workloads,
    load_workload,
    workloads_dir,
)

BASE = """name = "tiny"
dataset = "digits"
[model]
kind = "mlp"
hidden = [8]
[train]
steps = 20
batch = 16
"""


def _file(tmp_path, extra: str):
    p = tmp_path / "tiny.toml"
    p.write_text(BASE + extra)
    return p


def test_scale_overrides_model_train_and_dataset(tmp_path):
    p = _file(tmp_path, '[scales.gpu]\ndataset = "mnist1d"\n[scales.gpu.model]\nhidden = [64, 64]\n'
                        '[scales.gpu.train]\nsteps = 500\n')
    small, gpu = load_workload(p), load_workload(p, "gpu")
    assert (small.scale, small.dataset, small.sizes, small.steps) == ("small", "digits", {"hidden": [8]}, 20)
    assert (gpu.scale, gpu.dataset, gpu.sizes, gpu.steps) == ("gpu", "mnist1d", {"hidden": [64, 64]}, 500)
    assert gpu.batch == 16 and gpu.model == "mlp"  # what the scale does not name stays the base's
    assert small.scales == gpu.scales == ("small", "gpu")
    assert load_workload(p, "small") == small


@pytest.mark.parametrize("extra, scale, message", [
    ("[scales.gpu.train]\nsteps = 5\n", "huge", "scale = 'huge': no such scale; this workload's scales are ['small', 'gpu']"),
    ("", "gpu", "scale = 'gpu': no such scale; this workload's scales are ['small']"),
    ("[scales.gpu]\nlayers = 3\n", "gpu", "scales.gpu.layers: no such field"),
    ("[scales.gpu.train]\nstep = 5\n", "gpu", "scales.gpu.train.step: no such field"),
    ("[scales.gpu.train]\nstep = 5\n", None, "scales.gpu.train.step: no such field"),  # checked at any scale
    ("[scales.gpu.train]\nsteps = 0\n", "gpu", "steps = 0: allowed: an integer in 1 .. 10000000"),
    ("[scales.gpu.train]\nsteps = 0\n", None, "[scales.gpu]: workload 'tiny': steps = 0"),  # any scale
    ("[scales.gpu]\ndataset = 3\n", "gpu", "scales.gpu.dataset = 3: allowed: a dataset name"),
    ("[scales.gpu]\nmodel = 3\n", "gpu", "scales.gpu.model = 3: allowed: a table"),
    ("[scales.small.train]\nsteps = 5\n", None, "scales.small: the base tables are scale 'small'"),
    ("scales = 3\n", None, "scales = 3: allowed: [scales.<name>] tables"),
])
def test_bad_scales_name_file_value_and_what_is_allowed(tmp_path, extra, scale, message):
    # a top-level key must come before the tables: put "scales = 3" first
    p = tmp_path / "tiny.toml"
    p.write_text(extra + BASE if extra.startswith("scales =") else BASE + extra)
    with pytest.raises(WorkloadError) as err:
        load_workload(p, scale)
    assert str(p) in str(err.value) and message in str(err.value), str(err.value)


def test_a_workload_built_in_code_checks_its_scale():
    w = Workload(name="w", dataset="digits", model="mlp", scales=("small", "gpu"), scale="gpu")
    assert w.scale == "gpu"
    with pytest.raises(WorkloadError, match=r"scale = 'gpu': allowed: small"):
        Workload(name="w", dataset="digits", model="mlp", scale="gpu")
    with pytest.raises(WorkloadError, match=r"scale = 'huge': allowed: small \| gpu"):
        Workload(name="w", dataset="digits", model="mlp", scales=("small", "gpu"), scale="huge")
    with pytest.raises(WorkloadError, match=r"scale = 'small': a scale's settings come from the workload's file"):
        w.replace(scale="small")  # would relabel the gpu settings, not resolve the small ones
    assert w.replace(steps=7, scale="gpu").steps == 7
    with pytest.raises(WorkloadError, match=r"scales = .*including 'small'"):
        Workload(name="w", dataset="digits", model="mlp", scales=("gpu",), scale="gpu")
    with pytest.raises(WorkloadError, match="already resolved at scale 'gpu'"):
        load_workload(w, "small")  # a resolved Workload cannot re-resolve: reload it by name
    assert load_workload(w) is w and load_workload(w, "gpu") is w


def test_every_shipped_workload_has_a_gpu_scale_that_is_bigger():
    names = list_workloads()
    assert "gpt2_small_lm" in names
    for n in names:
        small, gpu = load_workload(n), load_workload(n, "gpu")
        assert small.scales == ("small", "gpu"), n
        text = (workloads_dir() / f"{n}.toml").read_text()
        assert tomllib.loads(text)["scales"]["gpu"], n
        bigger = (gpu.steps * gpu.batch > small.steps * small.batch or gpu.sizes != small.sizes)
        assert bigger and gpu.steps >= small.steps, n


def test_gpt2_small_lm_gpu_is_gpt2_small_width():
    w = load_workload("gpt2_small_lm", "gpu")
    assert (w.model, w.dataset, w.context) == ("transformer", "gcide", 1024)
    assert {k: w.sizes[k] for k in ("d_model", "layers", "heads")} == {"d_model": 768, "layers": 12, "heads": 12}


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "asicsim", *args], capture_output=True, text=True, timeout=300)


@pytest.mark.slow  # ~10-20 s: the default run stays under 10 minutes on 2 cores
def test_cli_train_scale_and_workloads_listing(tmp_path):
    p = _file(tmp_path, '[scales.big.model]\nhidden = [16]\n[scales.big.train]\nsteps = 30\neval_every = 30\n')
    r = _cli("train", str(p), "--scale", "big", "--seeds", "1", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["settings"]["scale"] == "big" and out["settings"]["sizes"] == {"hidden": [16]}
    assert out["settings"]["steps"] == 30
    bad = _cli("train", str(p), "--scale", "gpu", "--steps", "5")
    assert bad.returncode == 2 and "scale = 'gpu': no such scale" in bad.stderr and str(p) in bad.stderr
    bad = _cli("infer", str(p), "--recipe", "int8_ptq_tensor", "--scale", "gpu")
    assert bad.returncode == 2 and "no such scale" in bad.stderr
    rows = json.loads(_cli("workloads", "--json").stdout)
    assert {r["name"]: r["scales"] for r in rows if r["kind"] == "training"}["gpt2_small_lm"] == "small,gpu"


SPEC = """name = "s"
seeds = [0]
recipes = ["fp32"]
[[workloads]]
name = "digits_mlp"
run = ["train"]
steps = 10
"""


def test_sweep_scale_changes_identity_and_label(tmp_path):
    def points(text):
        path = tmp_path / "spec.toml"
        path.write_text(text)
        return expand(load_spec(path))

    small = points(SPEC)
    assert points(SPEC + 'scale = "small"\n')[0].id == small[0].id  # the default, named
    gpu = points(SPEC + 'scale = "gpu"\n')
    assert gpu[0].id != small[0].id
    both = points(SPEC + SPEC[SPEC.index("[[workloads]]"):] .replace("steps = 10", 'steps = 10\nscale = "gpu"'))
    assert sorted(p.labels["workload"] for p in both) == ["digits_mlp[scale=gpu,steps=10]", "digits_mlp[steps=10]"]
    with pytest.raises(SweepError, match=r"workloads\[0\]\.scale: .*scale = 'huge': no such scale; this workload's "
                                         r"scales are \['small', 'gpu'\]"):
        points(SPEC + 'scale = "huge"\n')
