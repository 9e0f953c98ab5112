"""A sweep point and its identity: :class:`Point`, and the content hash a point's id is computed
from (:func:`identity`, :func:`canon`, :func:`content_key`).

A point's identity is a hash of its fully resolved inputs — the workload after overrides, the
recipe and the design as loaded (not their names), the seed, and the asicsim version — so editing a
recipe or design file makes new points, while renaming nothing reruns nothing.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from asicsim import __version__
from asicsim._src.emulate.policy import Policy
from asicsim._src.numerics.catalog import get_format


@dataclass(frozen=True)
class Point:
    """One unit of work: ``kind``, what it is (``labels``: names a reader knows), what it runs
    (``inputs``: JSON-able, enough to run it in another process) and its identity ``id``."""

    id: str
    kind: str
    labels: dict
    inputs: dict
    group: str = ""  # points with the same group share work (one op trace priced on many designs)


#: Bumped when points with the same resolved inputs may have recorded wrong results, so a rerun
#: on an old results directory makes new points instead of keeping those records. 2: workloads
#: sharing a name (and overrides) ran each other's model (before, each job looked its workload up
#: by name). 3: recipes edited while a sweep ran were recorded under the old content's id, GPUs
#: priced formats they have no path for (fp8 on a V100), a timeout was recorded as a divergence.
ID_SCHEME = 3


def identity(payload: dict) -> str:
    """A point's stable id: sha256 of its resolved inputs (canonical JSON), the asicsim version
    and :data:`ID_SCHEME`."""
    text = json.dumps({**payload, "asicsim": __version__, "ids": ID_SCHEME}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def canon(obj) -> str:
    """A resolved object (workload, recipe, design) as text that changes when any field does. A
    recipe's roles may name format files (``act = "my_fp6.toml"``), read where they are used:
    their content is part of the recipe's (a format file edited makes new points)."""
    text = repr(obj)
    if isinstance(obj, Policy):
        files = sorted({str(spec.format) for _, spec in obj.all_roles if str(spec.format).endswith(".toml")})
        if files:
            text += " where " + "; ".join(f"{f} = {get_format(f)!r}" for f in files)
    return text


def content_key(what: str, obj) -> str:
    """The hash of one resolved input (``what``: workload | recipe | design) that a point's id is
    computed from; a worker recomputes it from what it runs, and a point whose input changed
    on the way (a format file edited while the sweep ran) fails saying so."""
    return identity({what: canon(obj)})
