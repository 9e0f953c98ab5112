"""A results directory with files that are not records (stray, truncated, another shape, not
UTF-8), records of an older id scheme, and a killed run's temporaries: every reader names the
file, skips it and goes on; the report says what it skipped; a sweep cleans up and reruns."""

from __future__ import annotations

import json

import pytest

from asicsim.report.load import load
from asicsim.sweep import load_results, sweep
from asicsim.sweep.spec import ID_SCHEME
from asicsim.sweep.store import Store, StoreWarning

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
    from asicsim.report import _title

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
