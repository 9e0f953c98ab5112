"""Two workloads, recipes or designs that share an internal ``name`` but differ in content are
two things: each point runs its own, the results tell them apart, and no record of one is kept
as the other's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from asicsim._src.emulate.policy import recipes_dir
from asicsim._src.hw.design_files import designs_dir
from asicsim._src.sweep import SweepError, expand, load_results, load_spec, sweep
from asicsim._src.workloads.deepbench import workloads_dir

#: digits_mlp (64-64-10) and the same file with hidden = [512]: MACs of one training step.
MACS = {"digits_mlp": 454_656, "big": 3_637_248}


def _copy(src: Path, dst: Path, name: str, *edits: tuple[str, str]) -> Path:
    text = re.sub(r'^name = ".*"$', f'name = "{name}"', src.read_text(), count=1, flags=re.M)
    for old, new in edits:
        assert old in text
        text = text.replace(old, new)
    dst.write_text(text)
    return dst


FP32_MODE = '''[[pe.modes]]  # test fixture: this copy also runs fp32 MACs (and fp16/bf16, which embed) at a stated rate
a = "fp32"
b = "fp32"
acc = "fp32"
rate = 0.25

'''


def _spec(tmp_path: Path, spaces: bool = True) -> Path:
    big = _copy(workloads_dir() / "digits_mlp.toml", tmp_path / "big_mlp.toml", "digits_mlp",
                ("hidden = [64]", "hidden = [512]"))
    r1 = _copy(recipes_dir() / "bf16.toml", tmp_path / "r1.toml", "mine")
    r2 = _copy(recipes_dir() / "fp32.toml", tmp_path / "r2.toml", "mine")
    # int8 designs that also run the recipes' fp32/bf16 MACs (asicsim._src.hw.native), at a stated rate
    d1 = _copy(designs_dir() / "tpu_v1.toml", tmp_path / "d1.toml", "npu",
               ("[buffers.unified]", FP32_MODE + "[buffers.unified]"))
    d2 = _copy(designs_dir() / "edge_int8_32x32.toml", tmp_path / "d2.toml", "npu",
               ("[buffers.activations]", FP32_MODE + "[buffers.activations]"))
    spec = tmp_path / "spec.toml"
    spec.write_text(f'''
recipes = ["{r1}", "{r2}"]
designs = ["{d1}", "{d2}"]
[[workloads]]
name = "digits_mlp"
run = ["cost"]
[[workloads]]
name = "{big}"
run = ["cost"]
''' + (f'''
[[design_space]]
base = "{d1}"
vary = {{ "clock_mhz" = [500] }}
[[design_space]]
base = "{d2}"
vary = {{ "clock_mhz" = [500] }}
''' if spaces else ""))
    return spec


def test_labels_tell_apart_what_shares_a_name(tmp_path):
    spec = load_spec(_spec(tmp_path))
    workloads = [w["label"] for w in spec.workloads]
    assert workloads == ["digits_mlp", str(tmp_path / "big_mlp.toml")]
    labels = [label for label, _ in spec.designs]
    assert len(set(labels)) == len(labels) == 4
    assert f"{tmp_path / 'd1.toml'}[clock_mhz=500]" in labels
    pts = expand(spec)
    assert len({p.id for p in pts}) == len(pts) == 2 * 2 * 4


def test_each_point_runs_its_own_workload_recipe_and_design(tmp_path):
    spec, out = _spec(tmp_path, spaces=False), tmp_path / "out"
    s = sweep(spec, out, workers=1, progress=None)
    assert s["failed"] == 0, s
    r = load_results(out)
    big = str(tmp_path / "big_mlp.toml")
    assert set(r.loc[r["workload"] == "digits_mlp", "macs"]) == {MACS["digits_mlp"]}
    assert set(r.loc[r["workload"] == big, "macs"]) == {MACS["big"]}
    # the two recipes (bf16 and fp32 content) and the two designs price differently
    w = r[r["workload"] == "digits_mlp"].set_index(["recipe", "design"])["energy_j"]
    r1, r2, d1, d2 = (str(tmp_path / f) for f in ("r1.toml", "r2.toml", "d1.toml", "d2.toml"))
    assert w[(r1, d1)] != w[(r2, d1)] and w[(r1, d1)] != w[(r1, d2)]
    # a per-op table row carries the point's labels, not the design's internal name
    ops = load_results(out, "ops")
    assert set(ops["design"]) <= set(r["design"]) and "npu" not in set(ops["design"])
    for pid, g in ops.groupby("id"):
        row = r[r["id"] == pid].iloc[0]
        assert set(g["design"]) == {row["design"]} and set(g["recipe"]) == {row["recipe"]}
        assert g["macs"].sum() == row["macs"]


def test_entries_of_the_same_content_are_one_point_labelled_with_every_name(tmp_path):
    """A recipe and its copy, a design by name and by path: one point each (one computation), whose
    label keeps every name the spec gave (none vanishes), and it runs."""
    from asicsim._src.report.tables import is_fp32
    from asicsim._src.sweep.points import run_job
    from asicsim._src.sweep.run import jobs_for

    copy = tmp_path / "my_bf16_copy.toml"
    copy.write_text((recipes_dir() / "bf16.toml").read_text())
    fp32 = tmp_path / "my_fp32.toml"
    fp32.write_text((recipes_dir() / "fp32.toml").read_text())
    by_path = designs_dir() / "gpu_v100.toml"
    spec = tmp_path / "spec.toml"
    spec.write_text(f'''
seeds = [0]
recipes = ["bf16", "{copy}", "{fp32}", "fp32"]
designs = ["gpu_v100", "{by_path}", "gpu_h100"]
[[workloads]]
name = "digits_mlp"
run = ["train", "cost"]
[[kernels]]
suite = "deepbench_gemm_inference_server"
precision = "int8"
''')
    s = load_spec(spec)
    pts = expand(s)
    train = sorted(p.labels["recipe"] for p in pts if p.kind == "train")
    assert train == sorted([f"bf16 = {copy}", f"{fp32} = fp32"])
    assert is_fp32(f"{fp32} = fp32") and not is_fp32(f"bf16 = {copy}")  # the report finds its reference
    designs = {p.labels["design"] for p in pts if p.kind in ("cost", "kernels")}
    assert designs == {f"gpu_v100 = {by_path}", "gpu_h100"}
    assert len(pts) == 2 + 2 * 2 + 2 and len({p.id for p in pts}) == len(pts)
    kernels = [p for p in pts if p.kind == "kernels"]
    records = [r for job in jobs_for(s, kernels) for r in run_job(job)]
    assert {r["labels"]["design"] for r in records if r["status"] == "done"} == designs


REPEATS = [
    ('recipes = ["bf16", "bf16"]', "recipes = ['bf16', 'bf16']: ['bf16'] listed twice"),
    ('infer_recipes = ["int8_ptq_tensor", "int8_ptq_tensor"]', "['int8_ptq_tensor'] listed twice"),
    ('designs = ["tpu_v1", "tpu_v1"]', "designs: ['tpu_v1'] named twice"),
    ('[[kernels]]\nsuite = "deepbench_gemm_inference_server"\n[[kernels]]\nsuite = "deepbench_gemm_inference_server"',
     "kernels[1] = {'suite': 'deepbench_gemm_inference_server'}: the same as kernels[0]"),
    ('[[workloads]]\nname = "digits_mlp"\n[[workloads]]\nname = "digits_mlp"',
     "workloads[1] = {'name': 'digits_mlp'}: the same workload and runs as workloads[0]"),
]


@pytest.mark.parametrize("text, message", REPEATS, ids=[r[1][:40] for r in REPEATS])
def test_an_entry_listed_twice_is_refused(tmp_path, text, message):
    spec = tmp_path / "spec.toml"
    head = 'designs = ["tpu_v1"]\n' if not text.startswith("designs") else ""
    spec.write_text(head + text + ("\n[[workloads]]\nname = \"digits_mlp\"\nrun = [\"infer\", \"cost\"]\n"
                                   if "workloads" not in text else ""))
    with pytest.raises(SweepError) as err:
        load_spec(spec)
    assert message in str(err.value) and str(spec) in str(err.value)
