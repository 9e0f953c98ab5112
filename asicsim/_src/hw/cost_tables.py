"""``asicsim.cost_table``: operations on several designs of any kind, as one typed price.

>>> import asicsim as sim
>>> t = sim.cost_table([sim.Gemm(256, 256, 256), sim.Gemm(64, 64, 64)], ["tpu_v1", "gpu_h100"])
>>> t.shape, t.labels.designs
((2, 2), ('tpu_v1', 'gpu_h100'))
>>> t.frame()[["design", "operation", "bound"]].shape
(4, 3)

Each design is priced by :func:`asicsim._src.hw.cost.cost_many` (one vectorised pass over the
operations; a GPU by its vectorised model, :mod:`asicsim._src.hw.gpu_cost`) and the prices are stacked
along a leading designs axis (:func:`stack_designs`): the memory levels and energy components
become their union (zero where a design has none; :class:`~asicsim._src.hw.result_table.Labels` keeps
each design's own, so :meth:`~asicsim._src.hw.result.Price.frame` prints only those), the notes one per
(design, operation).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import fields

import numpy as np

from asicsim._src.hw.cost import cost_many
from asicsim._src.hw.design import SystolicDesign
from asicsim._src.hw.design_files import labelled_designs
from asicsim._src.hw.objectives import DEFAULT_OBJECTIVE, check_objective
from asicsim._src.hw.operations import Operation
from asicsim._src.hw.result import OPERANDS, EnergySplit, Price, Schedule, Traffic
from asicsim._src.hw.result_table import Labels


def cost_table(ops: Iterable[Operation], designs: Iterable[str | SystolicDesign] | str | SystolicDesign,
               formats: str | Mapping | None = None, *, objective: str = DEFAULT_OBJECTIVE) -> Price:
    """Every operation on every design: a :class:`~asicsim._src.hw.result.Price` of shape ``(designs,
    operations)`` whose ``labels.designs`` are the names or paths as given
    (:func:`~asicsim._src.hw.design_files.labelled_designs`); ``objective``: what the systolic designs'
    schedules were chosen for (a GPU's: ``fastest``). ``.frame()`` is the table as a pandas
    DataFrame, one row per (design, operation) with the columns of :meth:`CostResult.row`."""
    ops = list(ops)
    check_objective(objective)
    labelled = list(labelled_designs(designs))
    return stack_designs([cost_many(ops, d, formats, objective=objective).price for _, d in labelled],
                         [label for label, _ in labelled])


def stack_designs(prices: Sequence[Price], names: Sequence[str]) -> Price:
    """Prices of the same operations on one design each (shape ``(operations,)``, with labels) as
    one price of shape ``(designs, operations)``; ``names`` label the designs."""
    if not prices or any(p.labels is None or len(p.shape) != 1 for p in prices):
        raise ValueError("stack_designs: prices over operations with labels (cost_many's), at least one")
    n = prices[0].shape[0]
    if any(p.shape != (n,) for p in prices):
        raise ValueError(f"stack_designs: shapes {[p.shape for p in prices]}; allowed: the same operations")
    shape = (len(prices), n)

    def col(get) -> np.ndarray:
        return np.stack([np.broadcast_to(np.asarray(get(p), dtype=np.float64), (n,)) for p in prices])

    levels = (*dict.fromkeys(lv for p in prices for lv in p.traffic.levels[:-1]),
              *dict.fromkeys(p.traffic.levels[-1] for p in prices))
    moved = {u: np.zeros((len(levels), len(OPERANDS), 2, *shape)) for u in ("bytes", "elements")}
    names_e = tuple(dict.fromkeys(k for p in prices for k in p.energy.components))
    pj = np.zeros((len(names_e), *shape))
    notes = np.empty(shape, dtype=object)
    for j, p in enumerate(prices):
        for a, lvl in enumerate(p.traffic.levels):
            for u in moved:
                moved[u][levels.index(lvl), ..., j, :] = getattr(p.traffic, u)[a]
        for a, k in enumerate(p.energy.components):
            pj[names_e.index(k), j] = p.energy.pj[a]
        for i in range(n):
            notes[j, i] = p.notes[i]
    plain = {f.name: col(lambda p, k=f.name: getattr(p, k)) for f in fields(Price) if f.name in (
        "cycles_compute", "cycles_fill_drain", "cycles_stall", "cycles_sync", "macs", "macs_performed",
        "mapped_pes", "mapping_slots", "vector_ops", "time_s", "pes", "dram_compulsory_bytes",
        "dram_pebble_bytes", "launch_fraction", "sm_fraction")}
    lab = [p.labels for p in prices]
    sources: dict = {}
    for p, name in zip(prices, names, strict=True):
        for k, v in p.sources.items():
            sources.setdefault(k, {})[name] = v
    formats = [p.formats for p in prices]
    return Price(
        **plain, traffic=Traffic(levels, moved["bytes"], moved["elements"], col(lambda p: p.traffic.array_bytes),
                                 col(lambda p: p.traffic.transfer_cycles)),
        energy=EnergySplit(names_e, pj), bound=np.stack([np.broadcast_to(p.bound, (n,)) for p in prices]),
        schedule=Schedule(**{f.name: col(lambda p, k=f.name: getattr(p.schedule, k)) for f in fields(Schedule)}),
        # one source per component where the designs agree, else each design's
        sources={k: next(iter(v.values())) if len(set(v.values())) == 1 else
                 "; ".join(f"{name}: {s}" for name, s in v.items()) for k, v in sources.items()},
        notes=notes, idle_w={s: col(lambda p, s=s: p.idle_w.get(s, np.nan))[:, :1] for s in ("core", "chip", "board")},
        formats=formats[0] if all(f == formats[0] for f in formats) else {},
        labels=Labels(
            designs=tuple(names), operations=lab[0].operations, kinds=lab[0].kinds,
            **{k: tuple(x for lb in lab for x in getattr(lb, k)) for k in ("objectives", "formats", "gpu", "clock_hz",
                                                                          "levels", "components")},
            mapping=np.concatenate([lb.mapping for lb in lab]), execution=np.concatenate([lb.execution for lb in lab], axis=1)))
