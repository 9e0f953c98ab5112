"""A sweep's inputs travel resolved in its jobs: a recipe file edited between the points' ids
and their run does not change what they compute (the worker runs the content the id was computed
from), a format file a recipe names is part of the recipe's content (its id), and a point whose
input changed anyway (a format file edited while the sweep runs) fails saying so."""

from __future__ import annotations

import math

from asicsim._src.emulate.policy import recipes_dir
from asicsim._src.numerics.catalog import catalog_dir
from asicsim._src.sweep import expand, load_spec
from asicsim._src.sweep.points import run_job
from asicsim._src.sweep.run import jobs_for

SPEC = """
recipes = ["{recipe}"]
designs = ["gpu_h100"]
[[workloads]]
name = "digits_mlp"
run = ["cost"]
"""

FP8_ROLES = '[roles]\nweight = "fp8_e5m2"\nact = "fp8_e5m2"\nout = "fp32"\nacc = "fp32"\n'


def _run(spec) -> list[dict]:
    points = expand(spec)
    return [r for job in jobs_for(spec, points) for r in run_job(job)]


def _energy(records) -> float:
    (r,) = records
    assert r["status"] == "done", r["reason"]
    return r["result"]["energy_j"]


def test_a_recipe_file_edited_after_the_ids_changes_nothing_they_compute(tmp_path):
    mutable = tmp_path / "mutable.toml"
    mutable.write_text((recipes_dir() / "fp32.toml").read_text().replace('name = "fp32"', 'name = "mutable"'))
    (tmp_path / "spec.toml").write_text(SPEC.format(recipe=mutable))
    spec = load_spec(tmp_path / "spec.toml")
    points = expand(spec)
    jobs = jobs_for(spec, points)
    mutable.write_text('name = "mutable"\n' + FP8_ROLES)  # edited once the ids are computed
    records = [r for job in jobs for r in run_job(job)]
    assert [r["id"] for r in records] == [p.id for p in points]
    fp32 = _energy(_run(load_spec({"recipes": ["fp32"], "designs": ["gpu_h100"],
                                   "workloads": [{"name": "digits_mlp", "run": ["cost"]}]})))
    fp8 = _energy(_run(load_spec(tmp_path / "spec.toml")))  # the edited file: new content, a new point
    assert not math.isclose(fp8, fp32)  # the edit matters ...
    assert _energy(records) == fp32  # ... but not to the points computed before it
    assert expand(load_spec(tmp_path / "spec.toml"))[0].id != points[0].id


def test_a_format_file_a_recipe_names_is_part_of_its_identity_and_checked_in_the_worker(tmp_path):
    fmt = tmp_path / "myfmt.toml"
    fmt.write_text((catalog_dir() / "bfloat16.toml").read_text())
    recipe = tmp_path / "mine.toml"
    recipe.write_text(f'name = "mine"\n[roles]\nweight = "{fmt}"\nact = "{fmt}"\nout = "fp32"\nacc = "fp32"\n')
    (tmp_path / "spec.toml").write_text(SPEC.format(recipe=recipe))
    spec = load_spec(tmp_path / "spec.toml")
    points = expand(spec)
    jobs = jobs_for(spec, points)
    fmt.write_text((catalog_dir() / "float8_e5m2.toml").read_text())  # edited while the sweep runs
    (r,) = [r for job in jobs for r in run_job(job)]
    assert r["status"] == "failed"
    assert f"input changed: recipe {str(recipe)!r} differs from the content this point's id was computed" \
        in r["reason"]
    # the file's content is the recipe's: the edited format makes a new point, which runs
    again = load_spec(tmp_path / "spec.toml")
    assert expand(again)[0].id != points[0].id
    assert _run(again)[0]["status"] == "done"
