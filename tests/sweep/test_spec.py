"""Sweep specs: expansion, stable identities, and clear errors for bad input."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from asicsim._src.sweep import SweepError, expand, load_spec
from asicsim._src.sweep.spec import sweeps_dir

SPEC = """
name = "t"
seeds = [0, 1]
recipes = ["fp32", "bf16"]
infer_recipes = ["int8_ptq_tensor"]
designs = ["tpu_v1", "gpu_v100"]
[[workloads]]
name = "digits_mlp"
run = ["train", "infer", "cost"]
steps = 40
[[kernels]]
suite = "deepbench_gemm_inference_server"
precision = "int8"
[[design_space]]
base = "edge_int8_32x32"
vary = { "array.rows" = [16, 32], "array.dataflow" = ["os", "ws", "is"] }
"""


def _write(tmp_path: Path, text: str, name: str = "spec.toml") -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def test_expansion_counts_and_labels(tmp_path):
    spec = load_spec(_write(tmp_path, SPEC))
    pts = expand(spec)
    kinds = [p.kind for p in pts]
    designs = 2 + 2 * 3
    assert kinds.count("train") == 2 * 2  # recipes x seeds
    assert kinds.count("infer") == 1 * 2
    assert kinds.count("cost") == (2 + 1) * designs  # (train recipes + infer recipes) x designs
    assert kinds.count("kernels") == designs
    assert len({p.id for p in pts}) == len(pts)
    labels = {p.labels["design"] for p in pts if p.kind == "kernels"}
    assert "edge_int8_32x32[array.rows=16,array.dataflow=is]" in labels
    d = dict(spec.designs)["edge_int8_32x32[array.rows=16,array.dataflow=is]"]
    assert (d.array.rows, d.array.cols, d.array.dataflow) == (16, 32, "is")


def test_identity_is_stable_across_processes(tmp_path):
    path = _write(tmp_path, SPEC)
    here = [p.id for p in expand(load_spec(path))]
    code = f"from asicsim._src.sweep import expand, load_spec; print(' '.join(p.id for p in expand(load_spec({str(path)!r}))))"
    there = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert here == there


def test_identity_follows_resolved_inputs_not_names(tmp_path):
    base = {p.labels.get("recipe"): p.id for p in expand(load_spec(_write(tmp_path, SPEC))) if p.kind == "train"
            and p.labels["seed"] == 0}
    # a different override is a different point
    steps = {p.labels["recipe"]: p.id for p in expand(load_spec(_write(tmp_path, SPEC.replace("steps = 40", "steps = 41"))))
             if p.kind == "train" and p.labels["seed"] == 0}
    assert set(base.values()).isdisjoint(steps.values())
    # the same recipe content under another file name is the same point; an edited one is not
    fp32 = (Path(load_spec(_write(tmp_path, SPEC)).source).parent / "copy.toml")
    from asicsim._src.emulate.policy import recipes_dir

    text = (recipes_dir() / "fp32.toml").read_text()
    fp32.write_text(text)
    same = expand(load_spec(_write(tmp_path, SPEC.replace('recipes = ["fp32", "bf16"]', f'recipes = ["{fp32}"]'))))
    assert [p.id for p in same if p.kind == "train" and p.labels["seed"] == 0] == [base["fp32"]]
    fp32.write_text(text.replace('description = "', 'description = "edited: '))
    edited = expand(load_spec(_write(tmp_path, SPEC.replace('recipes = ["fp32", "bf16"]', f'recipes = ["{fp32}"]'))))
    assert [p.id for p in edited if p.kind == "train" and p.labels["seed"] == 0] != [base["fp32"]]
    # a design field changes the cost points of that design only
    a = {p.labels["design"]: p.id for p in expand(load_spec(_write(tmp_path, SPEC))) if p.kind == "kernels"}
    b = {p.labels["design"]: p.id for p in expand(load_spec(_write(tmp_path, SPEC.replace(
        '"array.dataflow" = ["os", "ws", "is"]', '"array.dataflow" = ["os", "ws", "is"], "clock_mhz" = [700]'))))
         if p.kind == "kernels"}
    assert a["tpu_v1"] == b["tpu_v1"]
    assert a["edge_int8_32x32[array.rows=16,array.dataflow=os]"] not in b.values()


@pytest.mark.parametrize("edit, message", [
    (("name = \"t\"", "name = \"t\"\nworkers = 3"), "workers: no such field"),
    (("run = [\"train\", \"infer\", \"cost\"]", "run = [\"train\", \"fly\"]"), "workloads[0].run = ['train', 'fly']: allowed"),
    (("name = \"digits_mlp\"", "name = \"digits_mpl\""), "did you mean 'digits_mlp'"),
    (("recipes = [\"fp32\", \"bf16\"]", "recipes = [\"fp32\", \"bf61\"]"), "recipes:"),
    (("\"array.rows\"", "\"array.nope.rows\""), "design_space[0]: 'array.nope.rows': the base design has no table 'nope'"),
    (("\"array.rows\" = [16, 32]", "\"array.rows\" = [0]"), "array.rows"),
    (("designs = [\"tpu_v1\", \"gpu_v100\"]", "designs = [\"tpu_v9\"]"), "tpu_v9"),
    (("infer_recipes = [\"int8_ptq_tensor\"]", ""), "infer_recipes: none given, but a workload runs 'infer'"),
    (("precision = \"int8\"", "precision = \"int3\""), "kernels[0].precision = 'int3': allowed"),
    (("seeds = [0, 1]", "seeds = [0, \"1\"]"), "seeds = [0, '1']: allowed: a list of int"),
    (("steps = 40", "steps = 40\nwarmup = 3"), "workloads[0]: unknown field(s) ['warmup']"),
])
def test_bad_specs_name_field_value_and_what_is_allowed(tmp_path, edit, message):
    with pytest.raises(SweepError) as err:
        load_spec(_write(tmp_path, SPEC.replace(*edit)))
    assert message in str(err.value)
    assert str(tmp_path / "spec.toml") in str(err.value)  # which file


def test_all_problems_reported_at_once(tmp_path):
    text = SPEC.replace("name = \"t\"", "name = \"t\"\nwarp = 1").replace("\"bf16\"]", "\"bf61\"]")
    with pytest.raises(SweepError) as err:
        load_spec(_write(tmp_path, text))
    assert "warp: no such field" in str(err.value) and "bf61" in str(err.value)


def test_missing_spec_and_shipped_names(tmp_path):
    with pytest.raises(SweepError, match="no such file"):
        load_spec(tmp_path / "nope.toml")
    assert (sweeps_dir() / "demo.toml").is_file()
    spec = load_spec("demo")
    assert spec.name == "demo" and {"tpu_v1", "gpu_v100", "gpu_h100"} <= {label for label, _ in spec.designs}


def test_design_space_over_memory_kind_and_a_bad_value(tmp_path):
    text = SPEC.replace('vary = { "array.rows" = [16, 32], "array.dataflow" = ["os", "ws", "is"] }',
                        'vary = { "dram.kind" = ["LPDDR4", "HBM2"], "dram.bandwidth_gbps" = [12.8, 256] }')
    spec = load_spec(_write(tmp_path, text))
    kinds = {d.dram.kind for label, d in spec.designs if label.startswith("edge_int8_32x32[")}
    assert kinds == {"LPDDR4", "HBM2"} and len(spec.designs) == 2 + 4
    with pytest.raises(SweepError) as err:
        load_spec(_write(tmp_path, text.replace('"HBM2"', '"DDR9"')))
    msg = str(err.value)
    assert "edge_int8_32x32[dram.kind=DDR9,dram.bandwidth_gbps=12.8]" in msg and "allowed: DDR3 | DDR4" in msg
    assert "none given" not in msg  # no follow-on complaint about the designs it could not build


def test_paths_in_a_spec_are_relative_to_its_folder(tmp_path, monkeypatch):
    """Recipes, designs, design-space bases and workloads named by relative path resolve against
    the spec file's folder, not the current one (issue 29, item 21: the old code looked in the
    current folder and said 'no such file')."""
    from asicsim._src.emulate.policy import recipes_dir
    from asicsim._src.hw.design_files import designs_dir
    from asicsim._src.workloads.deepbench import workloads_dir

    folder = tmp_path / "specs"
    folder.mkdir()
    (folder / "my_bf16.toml").write_text((recipes_dir() / "bf16.toml").read_text())
    (folder / "my_edge.toml").write_text((designs_dir() / "edge_int8_32x32.toml").read_text())
    (folder / "my_digits.toml").write_text((workloads_dir() / "digits_mlp.toml").read_text())
    _write(folder, """
        recipes = ["my_bf16.toml"]
        designs = ["my_edge.toml"]
        [[workloads]]
        name = "my_digits.toml"
        run = ["train", "cost"]
        [[design_space]]
        base = "my_edge.toml"
        vary = { "array.rows" = [16] }
        """)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    spec = load_spec(Path("..") / "specs" / "spec.toml")
    assert spec.recipes == ("my_bf16.toml",)  # labels stay as written
    assert spec.designs[0][0] == "my_edge.toml"
    assert spec.recipe("my_bf16.toml").name == "bf16" and len(expand(spec)) > 0
    assert spec.designs[0][1].array.rows == 32 and spec.designs[1][1].array.rows == 16
