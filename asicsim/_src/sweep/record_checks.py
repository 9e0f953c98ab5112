"""What a record file in a results directory's ``points/`` must hold, and reading one: each
record's fields and their types, checked field by field (the first bad one named with its value
and what is allowed), an old record's ``failed`` divergence read as ``diverged``, and one warning
per damaged file version (:class:`StoreWarning`). :mod:`asicsim._src.sweep.store` reads through these.
"""

from __future__ import annotations

import json
from pathlib import Path

from asicsim._files import read_text_file

#: The per-point tables a record may carry (besides its one ``results`` row).
TABLES = ("curves", "numerics", "ops", "kernels")


class StoreWarning(UserWarning):
    """A file in a results directory that was skipped (its path and why are in the message)."""


#: A record's fields and the types each may have (every field a reader reads); the optional ones
#: (records written by an older asicsim lack some) may also be absent.
_NUMBER = (int, float)
_RECORD = {"id": str, "kind": str, "status": str, "reason": str, "labels": dict, "result": dict, "tables": dict}
_OPTIONAL = {"seconds": (*_NUMBER, type(None)), "finished": (str, type(None)), "asicsim": (str, type(None)),
             "versions": dict, "host": (str, type(None)), "pid": (int, type(None)), "ids": int, "written": int}
#: A label's or result's value: a scalar (a nested list or table would be no column of the results).
_SCALAR = (str, int, float, bool, type(None))
#: What a record's ``status`` may be: ``diverged`` is a numerical result, ``failed`` none.
STATUSES = ("done", "diverged", "failed")


def _type_name(kinds) -> str:
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    names = {str: "a string", int: "an integer", float: "a number", dict: "a table", type(None): "null",
             bool: "a boolean", list: "a list"}
    return " or ".join(dict.fromkeys(names.get(k, k.__name__) for k in kinds))


def _record_problem(r) -> str | None:
    """Why ``r`` is not a record (its first bad field: name, value, what is allowed), or None."""
    if not isinstance(r, dict):
        return f"a record is {type(r).__name__}, not an object"
    missing = [k for k, kind in _RECORD.items() if not isinstance(r.get(k), kind)]
    if missing:
        return f"a record without {', '.join(missing)}"
    for k, kinds in {**_RECORD, **_OPTIONAL}.items():
        v = r.get(k)
        if k in r and (not isinstance(v, kinds) or (isinstance(v, bool) and bool not in _flat(kinds))):
            return f"record {r['id']!r}: {k} = {_short(v)}; allowed: {_type_name(kinds)}"
    if r["status"] not in STATUSES:
        return f"status = {r['status']!r}; allowed: {' | '.join(STATUSES)}"
    for part in ("labels", "result"):
        for k, v in r[part].items():
            if not isinstance(v, _SCALAR):
                return f"record {r['id']!r}: {part}.{k} = {_short(v)}; allowed: a string, number, boolean or null"
    for k, rows in r["tables"].items():
        if k not in TABLES or not isinstance(rows, list) or not all(isinstance(x, dict) for x in rows):
            return (f"record {r['id']!r}: tables.{k} = {_short(rows)}; allowed: tables "
                    f"{' | '.join(TABLES)}, each a list of rows (objects)")
    return None


def _flat(kinds) -> tuple:
    return kinds if isinstance(kinds, tuple) else (kinds,)


def _short(v) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _settled(r: dict) -> dict:
    """A record as this asicsim reads it. Before ``diverged`` was a status of its own, a run that
    diverged was written ``failed`` with its divergence in the result (a training run's step, an
    inference run's non-finite metric): such a record is a divergence, any other failed one a failure."""
    res = r["result"]
    if r["status"] == "failed" and (res.get("diverged") is True or res.get("diverged_step") is not None):
        return {**r, "status": "diverged"}
    return r


def read_records(path: Path) -> list[dict]:
    """The records of one file in ``points/``; ValueError saying why it is not a record file."""
    try:
        data = json.loads(read_text_file(path))
    except OSError as err:
        raise ValueError(f"unreadable: {err.strerror or err}") from None
    except json.JSONDecodeError as err:
        raise ValueError(f"not valid JSON: {err}") from None
    recs = data.get("records") if isinstance(data, dict) and "records" in data else [data]
    if not isinstance(recs, list) or not recs:
        raise ValueError("'records' is not a non-empty list")
    for r in recs:
        why = _record_problem(r)
        if why:
            raise ValueError(why)
    return [_settled(r) for r in recs]


_WARNED: set = set()


def first_time(path: Path) -> bool:
    """Whether this version of ``path`` is news to this process (one warning each, not one per read)."""
    try:
        st = path.stat()
        key = (str(path), st.st_mtime_ns, st.st_size)
    except OSError:
        key = (str(path),)
    if key in _WARNED:
        return False
    _WARNED.add(key)
    return True
