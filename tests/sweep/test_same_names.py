"""Two workloads, recipes or designs that share an internal ``name`` but differ in content are
two things: each point runs its own, the results tell them apart, and no record of one is kept
as the other's."""

from __future__ import annotations

import re
from pathlib import Path

from asicsim.emulate.policy import recipes_dir
from asicsim.hw.design_files import designs_dir
from asicsim.sweep import expand, load_results, load_spec, sweep
from asicsim.workloads.deepbench import workloads_dir

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
    # int8 designs that also run the recipes' fp32/bf16 MACs (asicsim.hw.native), at a stated rate
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
