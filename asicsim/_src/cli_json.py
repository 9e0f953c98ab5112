"""The one JSON writer of the ``asicsim`` commands' ``--json`` output: strict JSON that any reader
accepts. numpy (and JAX) scalars and arrays become plain numbers and lists, paths strings, and a NaN or
infinity is written ``null`` (``NaN`` and ``Infinity`` are not JSON: strict readers reject them).
Anything else that JSON cannot hold is an error naming its type. No numpy import: ``--help``
stays light."""

from __future__ import annotations

import json
import math
import os


def plain(v):
    """``v`` with every container and number made a JSON value (see the module)."""
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, (str, int, bool)) or v is None:
        return v
    if isinstance(v, os.PathLike):
        return os.fspath(v)
    tolist = getattr(v, "tolist", None)  # a numpy/JAX scalar (a number) or array (a list)
    if hasattr(v, "dtype") and callable(tolist):
        return plain(tolist())
    raise TypeError(f"not JSON serialisable: {type(v).__name__}")


def json_text(obj, indent: int = 2) -> str:
    """``obj`` as strict JSON text (see the module)."""
    return json.dumps(plain(obj), indent=indent, allow_nan=False)
