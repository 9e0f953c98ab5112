"""What a price's axes name (:class:`Labels`) and the price as a table (:func:`frame`).

A :class:`asicsim._src.hw.result.Price` from :func:`asicsim.cost_many` (shape ``(operations,)``) or
:func:`asicsim.cost_table` (``(designs, operations)``) carries :class:`Labels`: the designs as
given, the operations, and per design what its rows print beside the figures (formats, objective,
its own memory levels and energy components). :func:`frame` lays the typed arrays out as the
documented DataFrame: one row per (design, operation), the columns of
:meth:`asicsim._src.hw.cost_record.CostResult.row` (a test checks equality with the records' rows).
Low in the hw package: it imports the scopes of :mod:`asicsim._src.hw.power` and the typed parts only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from asicsim._src.hw.power import is_static, scoped_power
from asicsim._src.hw.result_parts import OPERANDS, Bound

#: The traffic columns of a row: ``level.operand.reads|writes`` in elements and ``..._bytes``.
TRAFFIC_KEYS = tuple(f"{lvl}.{o}.{k}{u}" for lvl in ("sram", "dram") for o in OPERANDS
                     for k in ("reads", "writes") for u in ("", "_bytes"))
#: A row's execution columns (a systolic design's GEMMs: :class:`asicsim._src.hw.native.ExecutionMode`).
EXECUTION_KEYS = ("mac_rate", "emulated", "slowdown")


@dataclass(frozen=True)
class Labels:
    """The names along a price's axes: ``designs`` (the leading axis of a table; one name for a
    price over operations only) and ``operations`` (the last axis), and per design what its rows
    say. ``mapping``: ``(designs, operations)`` strings; ``execution``: ``(3, designs,
    operations)``, :data:`EXECUTION_KEYS` (``emulated`` as 1/0), NaN where an operation runs no
    GEMM on a systolic design or the design is a GPU."""

    designs: tuple[str, ...]  # as given: a catalog name or a path
    operations: tuple[str, ...]
    kinds: tuple[str, ...]  # per operation
    objectives: tuple[str, ...]  # per design: what its schedules were chosen for (a GPU: fastest)
    formats: tuple[dict, ...]  # per design: role -> format name (a GPU adds its "path")
    gpu: tuple[bool, ...]  # per design: a GPU (no separable core scope)
    clock_hz: tuple[float, ...]  # per design: its clock (a capped operation runs slower)
    levels: tuple[tuple[str, ...], ...]  # per design: its own memory levels
    components: tuple[tuple[str, ...], ...]  # per design: its own energy components, in order
    mapping: np.ndarray
    execution: np.ndarray

    def __post_init__(self):
        d, n = len(self.designs), len(self.operations)
        for name in ("objectives", "formats", "gpu", "clock_hz", "levels", "components"):
            if len(getattr(self, name)) != d:
                raise ValueError(f"Labels.{name}: {len(getattr(self, name))} entries; allowed: one per design ({d})")
        if len(self.kinds) != n or np.shape(self.mapping) != (d, n) or np.shape(self.execution) != (3, d, n):
            raise ValueError(f"Labels: kinds {len(self.kinds)}, mapping {np.shape(self.mapping)}, execution "
                             f"{np.shape(self.execution)}; allowed: {n}, {(d, n)}, {(3, d, n)}")

    def design(self, j: int) -> Labels:
        """Design ``j``'s labels alone."""
        per = {k: (getattr(self, k)[j],) for k in ("designs", "objectives", "formats", "gpu", "clock_hz",
                                                   "levels", "components")}
        return Labels(**per, operations=self.operations, kinds=self.kinds, mapping=self.mapping[j:j + 1],
                      execution=self.execution[:, j:j + 1])


def frame(price):
    """``price`` (with :class:`Labels`) as a pandas DataFrame: one row per (design, operation),
    designs outer, the columns in the order rows name them (:meth:`CostResult.row`)."""
    import pandas as pd  # here: pricing needs none

    lab = price.labels
    if lab is None:
        raise ValueError("Price.frame(): this price carries no labels; allowed: a price from cost_many or "
                         "cost_table (a sweep's arrays: Price.arrays())")
    d, n = len(lab.designs), len(lab.operations)
    blocks = [_block(price, lab, j, d, n) for j in range(d)]
    order: dict = {}
    for _, patterns in blocks:
        for keys in patterns:
            order.update(dict.fromkeys(keys))
    out = {}
    for key in order:
        parts = [cols.get(key) for cols, _ in blocks]
        if all(isinstance(p, np.ndarray) and p.dtype == np.float64 for p in parts):
            out[key] = np.concatenate(parts)
        else:  # strings, flags, or a column some designs lack: one Python object per row
            out[key] = [v for p in parts for v in (p.tolist() if isinstance(p, np.ndarray) else
                                                   p if p is not None else [np.nan] * n)]
    return pd.DataFrame(out)


def _block(price, lab: Labels, j: int, d: int, n: int) -> tuple[dict, list[list[str]]]:
    """Design ``j``'s columns (arrays of the operations) and the key orders its rows have."""

    def at(v) -> np.ndarray:
        a = np.broadcast_to(np.asarray(v, dtype=np.float64), price.shape)
        return np.array(a.reshape(d, n)[j])

    cc, fd, st, sy = (at(getattr(price, k)) for k in ("cycles_compute", "cycles_fill_drain", "cycles_stall",
                                                       "cycles_sync"))
    cycles, t = cc + fd + st + sy, at(price.time_s)
    with np.errstate(divide="ignore", invalid="ignore"):  # the clock each ran at, as a record's
        nominal = lab.clock_hz[j]
        clock = np.where((t > 0) & (cycles > 0) & (t > cycles / nominal), cycles / t, nominal)
        time = cycles / clock
        macs, performed, pes = at(price.macs), at(price.macs_performed), at(price.pes)
        tops = np.where(time != 0, 2 * macs / time / 1e12, 0.0)
        util = np.where(cycles != 0, performed / (cycles * pes), 0.0)
    pj = np.asarray(price.energy.pj, dtype=np.float64).reshape(len(price.energy.components), d, n)[:, j]
    own = {k: pj[price.energy.components.index(k)] for k in lab.components[j]}
    total = sum(own.values(), 0.0)
    static = sum((v for k, v in own.items() if is_static(k)), 0.0)
    bounds = price.dram_bounds
    notes = _notes(price, d, n, j)
    fmts = lab.formats[j]
    cols = {"operation": list(lab.operations), "kind": list(lab.kinds), "design": [lab.designs[j]] * n,
            **{f"format_{k}": [v] * n for k, v in fmts.items()},
            "cycles": cycles, "cycles_compute": cc, "cycles_fill_drain": fd, "cycles_stall": st,
            "cycles_sync": sy, "time_s": time, "time_us": time * 1e6, "tops": tops, "macs": macs,
            "macs_performed": performed, "utilization": util, "mapping_efficiency": at(price.mapping_efficiency),
            "bound": Bound.names(np.broadcast_to(price.bound, price.shape).reshape(d, n)[j]).tolist(),
            "objective": [lab.objectives[j]] * n, "energy_pj": total, "energy_j": total * 1e-12,
            "energy_dynamic_j": (total - static) * 1e-12, "energy_static_j": static * 1e-12,
            "dram_bytes": at(price.traffic.dram_bytes), "dram_bound_bytes": at(bounds.bound),
            "dram_bound": np.where(at(bounds.pebble) > at(bounds.compulsory), "pebble", "compulsory").tolist(),
            "mapping": lab.mapping[j].tolist(), "note": ["; ".join(x) for x in notes],
            "sram_array_bytes": at(price.traffic.array_bytes)}
    ex = lab.execution[:, j]
    runs = ~np.isnan(ex[0])
    if runs.any():
        cols |= {"mac_rate": _where(runs, ex[0]), "emulated": _where(runs, ex[1].astype(bool) if runs.all()
                                                                     else [bool(e) for e in ex[1]]),
                 "slowdown": _where(runs, ex[2])}
    scoped = scoped_power(own, time, macs, has_core=not lab.gpu[j])
    idle = {s: price.idle_power_w(s) if d == 1 else _idle(price, s, d, n, j) for s in ("chip", "board")}
    cols |= {k: np.array(np.broadcast_to(np.asarray(v, dtype=np.float64), (n,))) for k, v in scoped.items()}
    cols |= {f"idle_power_{s}_w": np.full(n, idle[s]) for s in ("chip", "board")}
    cols |= {"launch_fraction": at(price.launch_fraction), "sm_fraction": at(price.sm_fraction)}
    cols |= {f"energy.{k}_pj": v for k, v in own.items()}
    tr = price.traffic
    for key in TRAFFIC_KEYS:
        lvl, o, direction = key.split(".")
        if lvl in lab.levels[j]:
            unit = "bytes" if direction.endswith("_bytes") else "elements"
            cols[key] = at(tr.of(lvl, o, direction.removesuffix("_bytes"), unit=unit))
    keys = list(cols)
    with_ex = keys
    without = [k for k in keys if k not in EXECUTION_KEYS]
    patterns = [with_ex if r else without for r in dict.fromkeys(runs.tolist())]
    return cols, patterns


def _where(runs: np.ndarray, values):
    """A column present on some rows only: the value where the operation runs GEMMs, else NaN."""
    if runs.all():
        return np.asarray(values)
    return [v if r else np.nan for r, v in zip(runs.tolist(), list(values), strict=True)]


def _notes(price, d: int, n: int, j: int) -> list:
    notes = price.notes
    if isinstance(notes, np.ndarray):
        return list(notes.reshape(d, n)[j])
    return list(notes)


def _idle(price, scope: str, d: int, n: int, j: int) -> float:
    w = np.asarray(price.idle_w.get(scope, np.nan), dtype=np.float64)
    return float(np.broadcast_to(w, price.shape).reshape(d, n)[j][0]) if n else float("nan")
