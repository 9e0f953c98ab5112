"""Technology-node scaling of energy and area from Stillmaker & Baas (Integration 58, 2017).

One curve for every cost model (the systolic model's per-op energies and the GPU model's energy per
op), so that two designs at different nodes compare through the same published fit. The table is
``hw/data/node_scaling_stillmaker2017.csv`` (its header names the source and the transcription).

* Energy: the paper's per-node polynomial ``e2 V^2 + e1 V + e0`` evaluated at each node's nominal
  supply (the CSV's ``vdd_nominal_v``), HP (high-performance) models at 45 nm and below: an
  accelerator or GPU datapath is built from HP logic. The factor from node x to node y is
  ``E_y(V_y) / E_x(V_x)``, exactly the paper's rule.
* Area: the paper's area factor from 45 nm (``area_vs_45nm``).
* Between table nodes (28, 12 nm): a power law in the node through the two neighbours
  (log-log interpolation). Outside the table (below 7 nm: 5 and 4 nm-class; above 180 nm): the
  nearest segment's power law extended, an extrapolation the ``source`` strings say.
"""

from __future__ import annotations

import csv
import functools
import math
from pathlib import Path

from asicsim._files import read_text_file

CSV_NAME = "node_scaling_stillmaker2017.csv"
REFERENCE = "Stillmaker & Baas, Integration 58 (2017) 74-81"
MODEL = "HP"  # the paper's high-performance models below 65 nm (bulk above)


@functools.cache
def table() -> tuple[tuple[float, float, float], ...]:
    """(node nm, energy factor at nominal VDD, area vs 45 nm) per node, largest node first."""
    text = read_text_file(Path(__file__).parent / "data" / CSV_NAME)
    rows = csv.DictReader(line for line in text.splitlines() if not line.startswith("#"))
    out = []
    for r in rows:
        if r["model"] not in ("bulk", MODEL):
            continue
        v = float(r["vdd_nominal_v"])
        e = float(r["e2"]) * v * v + float(r["e1"]) * v + float(r["e0"])
        out.append((float(r["node_nm"]), e, float(r["area_vs_45nm"])))
    return tuple(sorted(out, reverse=True))


def _check(node_nm) -> float:
    if isinstance(node_nm, bool) or not isinstance(node_nm, (int, float)) or not math.isfinite(node_nm) \
            or node_nm <= 0:
        raise ValueError(f"technology node {node_nm!r} nm; allowed: a finite number > 0 (e.g. 45, 28, 7); "
                         f"{REFERENCE} tabulates 180-7 nm, beyond that the scaling is extrapolated")
    return float(node_nm)


def _interp(node_nm: float, col: int) -> tuple[float, str]:
    """Column ``col`` of :func:`table` at ``node_nm`` and how it was obtained."""
    rows = table()
    for n, *vals in rows:
        if n == node_nm:
            return vals[col - 1], f"{REFERENCE} at {n:g} nm"
    nodes = [r[0] for r in rows]
    if node_nm > nodes[0]:
        a, b, how = rows[0], rows[1], "extrapolated above"
    elif node_nm < nodes[-1]:
        a, b, how = rows[-2], rows[-1], "extrapolated below"
    else:
        i = next(i for i in range(len(rows) - 1) if nodes[i] > node_nm > nodes[i + 1])
        a, b, how = rows[i], rows[i + 1], "interpolated (power law in the node) between"
    k = math.log(b[col] / a[col]) / math.log(b[0] / a[0])
    value = a[col] * (node_nm / a[0]) ** k
    return value, f"{REFERENCE}, {how} {a[0]:g} and {b[0]:g} nm (exponent {k:.3f})"


def energy_factor(node_nm: float, ref_nm: float = 45.0) -> tuple[float, str]:
    """(energy at ``node_nm`` / energy at ``ref_nm``, source), each node at its nominal VDD."""
    e, s = _interp(_check(node_nm), 1)
    e0, s0 = _interp(_check(ref_nm), 1)
    return e / e0, (f"energy x {e / e0:.4g} from {ref_nm:g} to {node_nm:g} nm: {s} / {s0}, "
                    f"{MODEL} energy polynomials at nominal VDD")


def area_factor(node_nm: float, ref_nm: float = 45.0) -> tuple[float, str]:
    """(area at ``node_nm`` / area at ``ref_nm``, source)."""
    a, s = _interp(_check(node_nm), 2)
    a0, s0 = _interp(_check(ref_nm), 2)
    return a / a0, f"area x {a / a0:.4g} from {ref_nm:g} to {node_nm:g} nm: {s} / {s0}"
