"""The results store's exported tables: Parquet where pyarrow is installed, CSV where not."""

from __future__ import annotations

import pandas as pd
import pytest

from asicsim._src.sweep import store as store_mod
from asicsim._src.sweep.point_identity import ID_SCHEME
from asicsim._src.sweep.store import Store, load_results, save_table


def _record(i: int, status: str = "done") -> dict:
    return {"id": f"p{i}", "kind": "cost", "status": status, "reason": "", "labels": {"design": f"d{i}"},
            "result": {"time_s": 0.5 * i, "note": None if i % 2 else "x"},
            "tables": {"ops": [{"M": i, "N": 2}]}, "seconds": 0.1, "finished": "t", "asicsim": "0",
            "ids": ID_SCHEME}


def test_tables_written_as_parquet_and_read_back(tmp_path):
    pytest.importorskip("pyarrow")
    s = Store(tmp_path)
    s.points.mkdir(parents=True)
    s.write([_record(1), _record(2)])
    frames = s.consolidate()
    back = pd.read_parquet(tmp_path / "results.parquet")
    assert list(back["id"]) == ["p1", "p2"] and list(back["time_s"]) == [0.5, 1.0]
    assert pd.read_parquet(tmp_path / "ops.parquet")["M"].tolist() == [1, 2]
    assert frames["results"]["id"].tolist() == load_results(tmp_path)["id"].tolist()


def test_tables_fall_back_to_csv_without_pyarrow(tmp_path, monkeypatch):
    monkeypatch.setattr(store_mod, "_has_pyarrow", lambda: False)
    path = save_table(pd.DataFrame({"a": [1, 2]}), tmp_path / "results")
    assert path.name == "results.csv" and pd.read_csv(path)["a"].tolist() == [1, 2]


def test_a_rerun_record_replaces_the_older_one(tmp_path):
    s = Store(tmp_path)
    s.points.mkdir(parents=True)
    s.write([_record(1, "failed"), _record(2, "failed")])  # one batch file
    s.write([_record(2, "done")])  # --retry-failed reran p2 alone
    res = load_results(tmp_path)
    assert res.set_index("id")["status"].to_dict() == {"p1": "failed", "p2": "done"}


def test_load_results_names_bad_tables_and_directories(tmp_path):
    from asicsim._src.sweep import SweepError

    with pytest.raises(SweepError, match="not a sweep results directory"):
        load_results(tmp_path)
    with pytest.raises(SweepError, match=r"table = .curvez.; allowed: results \| curves"):
        load_results(tmp_path, "curvez")
