"""A results directory with files that are not records (stray, truncated, another shape, not
UTF-8), records of an older id scheme, and a killed run's temporaries: every reader names the
file, skips it and goes on; the report says what it skipped; a sweep cleans up and reruns."""

from __future__ import annotations

import json

import pytest

from asicsim._src.report.load import load
from asicsim._src.sweep import load_results, sweep
from asicsim._src.sweep.point_identity import ID_SCHEME
from asicsim._src.sweep.store import Store, StoreWarning

GOOD = {"id": "a" * 20, "kind": "kernels", "status": "done", "reason": "", "ids": ID_SCHEME,
        "labels": {"suite": "s", "precision": None, "formats": None, "design": "d"},
        "result": {"time_s": 1.0}, "tables": {}, "seconds": 0.1, "finished": "now", "asicsim": "x"}

BAD = [
    ("empty_object", b"{}", "a record without id"),
    ("list", b"[]", "a record is list"),
    ("not_utf8", b"\xff\xfe{}", "not UTF-8"),
    ("truncated", json.dumps(GOOD).encode()[:40], "not valid JSON"),
    ("records_not_list", b'{"records": 3}', "'records' is not a non-empty list"),
    ("bad_status", json.dumps({**GOOD, "id": "b" * 20, "status": "maybe"}).encode(), "status = 'maybe'"),
    ("labels_not_table", json.dumps({**GOOD, "id": "b" * 20, "labels": []}).encode(), "without labels"),
    # a field of the wrong type (the same id as GOOD: the records are compared by when they were written)
    ("written_text", json.dumps({**GOOD, "written": "yesterday"}).encode(),
     "written = 'yesterday'; allowed: an integer"),
    ("written_bool", json.dumps({**GOOD, "id": "b" * 20, "written": True}).encode(), "written = True"),
    ("seconds_text", json.dumps({**GOOD, "id": "b" * 20, "seconds": "fast"}).encode(),
     "seconds = 'fast'; allowed: an integer or a number or null"),
    ("ids_text", json.dumps({**GOOD, "id": "b" * 20, "ids": "2"}).encode(), "ids = '2'; allowed: an integer"),
    ("versions_list", json.dumps({**GOOD, "id": "b" * 20, "versions": []}).encode(), "versions = []"),
    ("finished_number", json.dumps({**GOOD, "id": "b" * 20, "finished": 5}).encode(), "finished = 5"),
    ("label_list", json.dumps({**GOOD, "id": "b" * 20, "labels": {"design": ["d"]}}).encode(),
     "labels.design = ['d']; allowed: a string, number, boolean or null"),
    ("result_table", json.dumps({**GOOD, "id": "b" * 20, "result": {"time_s": {"v": 1}}}).encode(),
     "result.time_s = {'v': 1}"),
    ("table_not_rows", json.dumps({**GOOD, "id": "b" * 20, "tables": {"ops": 3}}).encode(), "tables.ops = 3"),
    ("table_unknown", json.dumps({**GOOD, "id": "b" * 20, "tables": {"bogus": []}}).encode(), "tables.bogus = []"),
    ("old_id_scheme", json.dumps({k: v for k, v in GOOD.items() if k != "ids"} | {"id": "c" * 20}).encode(),
     "ids of scheme 1"),
]


@pytest.mark.parametrize("name, data, message", BAD, ids=[b[0] for b in BAD])
def test_bad_file_is_named_skipped_and_reported(tmp_path, name, data, message):
    store = Store(tmp_path)
    store.points.mkdir(parents=True)
    store.write([GOOD])
    bad = store.points / f"{name}.json"
    bad.write_bytes(data)
    with pytest.warns(StoreWarning, match=name) as caught:
        table = load_results(tmp_path)
    assert message in str(caught[0].message)
    assert table["id"].tolist() == [GOOD["id"]]
    res = load(tmp_path)
    assert len(res.skipped) == 1 and str(bad) in res.skipped[0] and message in res.skipped[0]
    from asicsim._src.report import _title

    assert "1 file(s) in points/ were skipped" in _title(res)[1]


SPEC = """
designs = ["tpu_v1"]
[[kernels]]
suite = "deepbench_gemm_inference_server"
precision = "int8"
"""


def test_sweep_goes_on_past_bad_files_and_cleans_temporaries(tmp_path):
    spec, out = tmp_path / "spec.toml", tmp_path / "out"
    spec.write_text(SPEC)
    (out / "points").mkdir(parents=True)
    (out / "points" / "stray.json").write_text("{}")
    dead = 99_999_999  # above any pid_max: no such process
    leftovers = [out / f".spec.json.{dead}.tmp", out / f".results.parquet.{dead}.tmp"]
    for p in leftovers:
        p.write_text("half")
    with pytest.warns(StoreWarning, match="stray.json"):
        s = sweep(spec, out, workers=1, progress=None)
    assert s["done"] == 1 and s["failed"] == 0
    assert not any(p.exists() for p in leftovers)


SPEC_JSON = [
    (b"[]", "a JSON list, not an object"),
    (b"{", "not valid JSON"),
    (b"\xff", "not UTF-8"),
    (b'{"name": 3}', "name = 3: allowed: a string or null"),
    (b'{"report": []}', "report = []: allowed: an object or null"),
    (b'{"recipe_objects": "x"}', 'recipe_objects = "x": allowed: an object or null'),
]


@pytest.mark.parametrize("data, message", SPEC_JSON, ids=[c[1] for c in SPEC_JSON])
def test_bad_spec_json_is_a_clear_error_naming_the_file(tmp_path, capsys, data, message):
    from asicsim._src.sweep import SweepError
    from asicsim.cli import main

    Store(tmp_path).points.mkdir(parents=True)
    (tmp_path / "spec.json").write_bytes(data)
    with pytest.raises(SweepError) as err:
        load(tmp_path)
    assert message in str(err.value) and str(tmp_path / "spec.json") in str(err.value)
    assert main(["report", str(tmp_path), "-o", str(tmp_path / "r.html")]) == 2  # no traceback
    assert message in capsys.readouterr().err


EMPTY_OUT = [
    (["sweep", "{spec}", "--out", ""], "results directory '': empty"),
    (["demo", "--out", ""], "results directory '': empty"),
    (["report", ""], "results directory '': empty"),
    (["sweep", "{spec}", "--out", "{file}"], "not a directory"),
    (["report", "{file}"], "not a directory"),
]


@pytest.mark.parametrize("argv, message", EMPTY_OUT, ids=[" ".join(c[0]) for c in EMPTY_OUT])
def test_no_store_in_the_current_folder_or_a_file(tmp_path, monkeypatch, capsys, argv, message):
    from asicsim._src.sweep import load_spec
    from asicsim.cli import main

    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    (tmp_path / "file").write_text("x")
    (tmp_path / "spec.toml").write_text(SPEC)
    small = load_spec(tmp_path / "spec.toml")
    monkeypatch.setattr("asicsim._src.sweep.run.load_spec", lambda spec: small)  # the demo's points: not run here
    argv = [a.replace("{file}", str(tmp_path / "file")).replace("{spec}", str(tmp_path / "spec.toml")) for a in argv]
    assert main(argv) == 2
    assert message in capsys.readouterr().err
    assert not list(here.iterdir()) and (tmp_path / "file").read_text() == "x"  # nothing written
