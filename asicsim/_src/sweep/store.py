"""The results store: one directory per sweep, surviving a killed run.

Layout::

    DIR/sweep.lock          held (flock) by the sweep writing here: a second one refuses
    DIR/spec.toml           the spec of the last run (and spec.json: its resolved inputs)
    DIR/points/<id>.json    the record of a finished point (done, diverged or failed), written atomically;
    DIR/points/batch-*.json the records of a job's points, written together (a design space's
                            cost points priced in one pass)
    DIR/results.parquet     the consolidated table (results.csv without pyarrow), and beside it
    DIR/curves.*, numerics.*, ops.*, kernels.*   the per-point tables, keyed by ``id``

A file is written to a temporary name in ``points/``, flushed and fsynced, then renamed over its
final name: a reader (or a rerun after SIGKILL) sees either all of its records or none, never a
partial one. A point is written once, unless ``--retry-failed`` reruns it: then its newer record
(a later file) replaces the older when records are read, so no point is ever counted twice. The
consolidated tables are derived: ``load_results`` rebuilds them from the records.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from asicsim._files import atomic_path, remove_stale_temporaries, write_text_atomic
from asicsim._src.sweep.errors import SweepError
from asicsim._src.sweep.point_identity import ID_SCHEME
from asicsim._src.sweep.record_checks import TABLES, StoreWarning, first_time, read_records


def _has_pyarrow() -> bool:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


def results_root(root: str | Path) -> Path:
    """A results directory as given; an empty name (``--out ''``: not the current folder) or a file
    that is not a directory is a :class:`SweepError`."""
    if not str(root).strip():
        raise SweepError(f"results directory {str(root)!r}: empty; give a directory name (e.g. --out my-sweep)")
    path = Path(root)
    if path.exists() and not path.is_dir():
        raise SweepError(f"{path}: not a directory; give a results directory (a new one or a sweep's)")
    return path


class Store:
    """A sweep's results directory. ``with Store(dir).locked():`` holds the sweep lock."""

    def __init__(self, root: str | Path):
        self.root = results_root(root)
        self.points = self.root / "points"
        self._lock_file = None
        self.skipped: list[str] = []  # "path: why" of each file records() skipped

    # --- the lock ---------------------------------------------------------------------------
    def lock(self) -> None:
        """Take the directory's lock, or raise SweepError naming the sweep that holds it. The OS
        releases an flock when its process dies, so a killed sweep never leaves a stale lock."""
        self.points.mkdir(parents=True, exist_ok=True)
        f = open(self.root / "sweep.lock", "a+")  # held open (and locked) for the sweep's lifetime
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip() or "another process"
            f.close()
            raise SweepError(f"{self.root}: another sweep is running on this directory ({holder}); "
                             "wait for it to finish or use another --out directory") from None
        f.seek(0)
        f.truncate()
        f.write(f"pid {os.getpid()}, started {time.strftime('%Y-%m-%d %H:%M:%S')}")
        f.flush()
        self._lock_file = f

    def unlock(self) -> None:
        if self._lock_file is not None:
            fcntl.flock(self._lock_file, fcntl.LOCK_UN)
            self._lock_file.close()
            self._lock_file = None

    def __enter__(self) -> Store:
        self.lock()
        return self

    def __exit__(self, *exc) -> None:
        self.unlock()

    # --- records ----------------------------------------------------------------------------
    def write_spec(self, text: str, resolved: dict) -> None:
        self._atomic(self.root / "spec.toml", text)
        self._atomic(self.root / "spec.json", json.dumps(resolved, indent=1, default=str))

    def write(self, records: list[dict]) -> None:
        """Write one job's records atomically (the commit point of those points): one record as
        ``<id>.json``, several together as ``batch-<hash of their ids>.json``."""
        stamp = time.time_ns()  # orders a point's records when a rerun wrote a newer one
        records = [{**r, "written": stamp} for r in records]
        if len(records) == 1:
            self._atomic(self.points / f"{records[0]['id']}.json", json.dumps(records[0], default=_json_default))
        elif records:
            name = hashlib.sha256(" ".join(r["id"] for r in records).encode()).hexdigest()[:20]
            self._atomic(self.points / f"batch-{name}.json",
                         json.dumps({"records": records}, default=_json_default))

    @staticmethod
    def _atomic(path: Path, text: str) -> None:
        write_text_atomic(path, text, fsync=True)

    def clean_temporaries(self) -> int:
        """Remove half-written temporaries a killed sweep left (never a finished record): in
        ``points/`` and those of the files it writes in its root (spec, tables)."""
        n = 0
        for tmp in self.points.glob(".*.tmp"):
            tmp.unlink(missing_ok=True)
            n += 1
        names = ["spec.toml", "spec.json"] + [f"{t}.{x}" for t in ("results", *TABLES) for x in ("parquet", "csv")]
        return n + remove_stale_temporaries(self.root, names)

    def records(self) -> list[dict]:
        """Every finished point's latest record (a rerun's record, written later, replaces the
        one before it), ordered by id. A file in ``points/`` that is not a record file (not
        UTF-8 JSON, truncated, another shape) is skipped with a :class:`StoreWarning` naming it,
        and listed in :attr:`skipped`; a rerun repeats the points it held."""
        latest: dict[str, dict] = {}
        self.skipped = []
        for path in sorted(self.points.glob("*.json")):
            try:
                recs = read_records(path)
            except ValueError as err:
                self.skipped.append(f"{path}: {err}")
                if first_time(path):
                    warnings.warn(f"{path}: skipped, not a record file ({err}); delete it or move it away "
                                  "(a sweep rerun repeats the points it held)", StoreWarning, stacklevel=2)
                continue
            stale = [r for r in recs if r.get("ids", 1) != ID_SCHEME]
            if stale:  # ids of an older scheme: their results may be wrong (see ID_SCHEME)
                why = (f"{len(stale)} record(s) with ids of scheme {stale[0].get('ids', 1)}, not {ID_SCHEME}, "
                       "whose results may be wrong; the sweep reruns their points under new ids")
                self.skipped.append(f"{path}: {why}")
                if first_time(path):
                    warnings.warn(f"{path}: skipped: {why}", StoreWarning, stacklevel=2)
                recs = [r for r in recs if r not in stale]
            for rec in recs:
                old = latest.get(rec["id"])
                if old is None or rec.get("written", 0) >= old.get("written", 0):
                    latest[rec["id"]] = rec
        return [latest[k] for k in sorted(latest)]

    def status(self) -> dict[str, str]:
        """id -> status of every finished point (read from file names and the status field)."""
        return {r["id"]: r["status"] for r in self.records()}

    # --- tables -----------------------------------------------------------------------------
    def consolidate(self) -> dict[str, pd.DataFrame]:
        """Rebuild the results table and the per-point tables from the records, and save them
        (Parquet, or CSV without pyarrow)."""
        frames = frames_from_records(self.records())
        for name, df in frames.items():
            save_table(df, self.root / name)
        return frames


def _json_default(v):
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    return str(v)


def frames_from_records(records: list[dict]) -> dict[str, pd.DataFrame]:
    """``results``: one row per point (id, kind, status, reason, labels, result scalars, seconds);
    and for each per-point table, its rows with the point's id and labels in front."""
    rows, tables = [], {t: [] for t in TABLES}
    for r in records:
        head = {"id": r["id"], "kind": r["kind"], **r["labels"]}
        rows.append({**head, "status": r["status"], "reason": r["reason"], **r["result"],
                     "seconds": r.get("seconds"), "finished": r.get("finished"), "asicsim": r.get("asicsim"),
                     "versions": json.dumps(r.get("versions", {}), sort_keys=True)})
        for t in TABLES:  # the point's labels win: a row's "design" is the design's own name, not its label
            tables[t].extend({**head, **{k: v for k, v in row.items() if k not in head}}
                             for row in r["tables"].get(t, []))
    out = {"results": pd.DataFrame(rows)}
    out.update({t: pd.DataFrame(v) for t, v in tables.items()})
    return out


def save_table(df: pd.DataFrame, stem: Path) -> Path:
    """``stem.parquet`` (or ``stem.csv`` where pyarrow is missing), written atomically."""
    path = stem.with_suffix(".parquet" if _has_pyarrow() else ".csv")
    with atomic_path(path) as tmp:
        if path.suffix == ".parquet":
            _for_parquet(df).to_parquet(tmp, index=False)
        else:
            df.to_csv(tmp, index=False)
    return path


def _for_parquet(df: pd.DataFrame) -> pd.DataFrame:
    """Object columns that mix types (e.g. None and str, dicts) become strings Parquet can store."""
    df = df.copy()
    for c in df.columns:
        if df[c].dtype == object:
            kinds = {type(v) for v in df[c] if v is not None and v == v}
            if len(kinds) > 1 or kinds - {str, bool}:
                df[c] = df[c].map(lambda v: v if v is None or isinstance(v, str) else json.dumps(v, default=str))
    return df


def load_results(root: str | Path, table: str = "results") -> pd.DataFrame:
    """A sweep's results as one pandas DataFrame, read from its records (always current, even
    while or after a sweep was killed). ``table``: ``results`` (one row per point) or one of
    ``curves``, ``numerics``, ``ops``, ``kernels`` (rows keyed by the point's ``id``)."""
    if table not in ("results", *TABLES):
        raise SweepError(f"load_results: table = {table!r}; allowed: results | {' | '.join(TABLES)}")
    store = Store(root)
    if not store.points.is_dir():
        raise SweepError(f"{root}: not a sweep results directory (no points/ folder)")
    return frames_from_records(store.records())[table]
