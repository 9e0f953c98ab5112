"""The one typed price every front end returns: :class:`Price` (and its parts).

A price is vectorised: each figure is an array of the result's ``shape`` (``design_shape +
(operations,)`` from :func:`asicsim._src.hw.pipeline.price`; ``()`` for one operation on one design).
Its parts are typed, not string-keyed:

* :class:`Traffic`: bytes and elements per memory level x operand x direction (as ZigZag types its
  data movement: ``LEVELS`` x :data:`OPERANDS` x :data:`DIRECTIONS`), and the bytes that cross the
  array boundary;
* :class:`EnergySplit`: picojoules per component (:data:`asicsim._src.hw.power.COMPONENTS`,
  ``buffer.<name>``), with the static/dynamic split and the scopes;
* :class:`Bound`: the regime, one encoding (members are their names; arrays hold their ``code``);
* :class:`Schedule`: the mapping the mapper chose (NaN where an operation runs no GEMM).

Both parts are also read-only mappings under the record keys the cost rows and ``asicsim cost
--json`` print (``traffic["dram.filter.reads_bytes"]``, ``energy["dram"]``), so a row is built from
the typed arrays and never the other way round. A price from :func:`asicsim.cost_many` or
:func:`asicsim.cost_table` carries ``labels`` (:class:`~asicsim._src.hw.result_table.Labels`: the
designs and operations it is over) and lays itself out as a pandas table with ``frame()``. This
module is low: it imports nothing of the model but the scopes of :mod:`asicsim._src.hw.power` (the
parts: :mod:`asicsim._src.hw.result_parts`, :mod:`asicsim._src.hw.result_table`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import numpy as np

from asicsim._src.hw.bounds import DramBounds
from asicsim._src.hw.result_parts import BOUNDS as BOUNDS
from asicsim._src.hw.result_parts import DIRECTIONS as DIRECTIONS
from asicsim._src.hw.result_parts import OPERANDS as OPERANDS
from asicsim._src.hw.result_parts import Bound as Bound
from asicsim._src.hw.result_parts import EnergySplit, Traffic, _scalar
from asicsim._src.hw.result_table import Labels, frame


@dataclass(frozen=True)
class Schedule:
    """The mapping the mapper chose per operation (its largest GEMM's): the resident operand's
    family (an index into :data:`asicsim._src.hw.counts.FAMILIES`), tile sizes, trip counts, double
    buffering, partial-sum spill, the kept tensors that stream their overflow and the rows and
    columns of the array a fold takes. NaN where an
    operation runs no GEMM."""

    family: np.ndarray
    Mt: np.ndarray
    Nt: np.ndarray
    Kt: np.ndarray
    tiles_m: np.ndarray
    tiles_n: np.ndarray
    tiles_k: np.ndarray
    double_buffered: np.ndarray
    psum_spill: np.ndarray
    streamed: np.ndarray  # kept tensors streaming their overflow (asicsim._src.hw.residency.STREAM_BITS)
    tile_share: np.ndarray  # the share of their buffer the tiles take beside them (1: none kept)
    fold_rows: np.ndarray  # the rows (columns) of the array one fold takes (the array's, or fewer:
    fold_cols: np.ndarray  # asicsim._src.hw.counts, "Folds smaller than the array")

    def take(self, index) -> Schedule:
        return Schedule(**{f.name: np.asarray(getattr(self, f.name))[index] for f in fields(self)})


@dataclass(frozen=True)
class Price:
    """What operations cost on designs: arrays of one ``shape`` (module docstring)."""

    cycles_compute: np.ndarray
    cycles_fill_drain: np.ndarray
    cycles_stall: np.ndarray
    cycles_sync: np.ndarray
    macs: np.ndarray
    macs_performed: np.ndarray  # nonzero MACs when the design skips zero weights
    mapped_pes: np.ndarray  # mapping efficiency = mapped_pes / mapping_slots
    mapping_slots: np.ndarray
    vector_ops: np.ndarray
    time_s: np.ndarray  # the cycles at the design's clock, or longer where its TDP caps the clock
    pes: np.ndarray  # broadcasts against the shape
    traffic: Traffic
    energy: EnergySplit
    bound: np.ndarray  # Bound codes
    schedule: Schedule
    sources: dict  # component -> where its energy per event comes from
    notes: tuple  # per operation (the last axis): what the price leaves out and why
    idle_w: dict  # scope -> the design's idle power (asicsim._src.hw.power.PowerModel.idle_w)
    # lower bounds on the DRAM bytes of the priced problem (asicsim._src.hw.bounds.problem_bounds)
    dram_compulsory_bytes: np.ndarray
    dram_pebble_bytes: np.ndarray
    # a GPU's: share of the time in the launch floor, time-weighted share of SMs busy (NaN elsewhere)
    launch_fraction: np.ndarray | float = np.nan
    sm_fraction: np.ndarray | float = np.nan
    formats: dict = field(default_factory=dict)  # role -> the format name priced (a GPU adds its "path")
    # the designs' and operations' names, for frame() (cost_many, cost_table; None on a sweep)
    labels: Labels | None = field(default=None, repr=False)

    @property
    def shape(self) -> tuple[int, ...]:
        return np.shape(self.time_s)

    @property
    def cycles(self) -> np.ndarray:
        return self.cycles_compute + self.cycles_fill_drain + self.cycles_stall + self.cycles_sync

    @property
    def utilization(self) -> np.ndarray:
        """Useful MACs over what the whole array could do in the total time (0 with no cycles)."""
        cycles = np.broadcast_to(self.cycles, self.shape)
        work = np.broadcast_to(cycles * self.pes, self.shape)
        return _scalar(np.divide(np.broadcast_to(self.macs_performed, self.shape), work,
                                 out=np.zeros(self.shape), where=work > 0))

    @property
    def mapping_efficiency(self) -> np.ndarray:
        slots = np.broadcast_to(self.mapping_slots, self.shape)
        return _scalar(np.divide(np.broadcast_to(self.mapped_pes, self.shape), slots,
                                 out=np.full(self.shape, np.nan), where=slots > 0))

    @property
    def dram_bytes(self) -> np.ndarray:
        return self.traffic.dram_bytes

    @property
    def sram_array_bytes(self) -> np.ndarray:
        return self.traffic.array_bytes

    @property
    def energy_pj(self) -> np.ndarray:
        """The total energy (pJ): every component summed."""
        return self.energy.total

    def idle_power_w(self, scope: str) -> float:
        """The design's idle power at ``scope`` (``core``, ``chip``, ``board``; NaN where not
        modelled), for a price of one design (its value is the same along the operations)."""
        w = np.ravel(np.asarray(self.idle_w.get(scope, np.nan), dtype=np.float64))
        if w.size and np.any(w != w[0]):
            raise ValueError(f"idle_power_w({scope!r}): the price spans designs of different idle power; "
                             "allowed: one design's price (take one)")
        return float(w[0]) if w.size else float("nan")

    @property
    def dram_bounds(self) -> DramBounds:
        return DramBounds(compulsory=self.dram_compulsory_bytes, pebble=self.dram_pebble_bytes)

    @property
    def dram_bound_bytes(self) -> np.ndarray:
        """No schedule moves fewer DRAM bytes (the larger of the two bounds)."""
        return self.dram_bounds.bound

    @property
    def dram_bound(self) -> np.ndarray:
        """Which bound binds: ``pebble`` where it is the larger, else ``compulsory``."""
        return self.dram_bounds.binding

    @property
    def bound_names(self) -> np.ndarray:
        return Bound.names(self.bound)

    def arrays(self) -> dict[str, np.ndarray]:
        """Every figure as one flat mapping of arrays of ``shape`` (to compare or store prices):
        the counts and times, ``traffic.<level>.<operand>.<direction>[_bytes]``, ``energy.<component>``,
        ``bound`` (codes), ``schedule.<field>`` and the DRAM bounds."""
        full = self.shape
        out = {f.name: np.broadcast_to(np.asarray(getattr(self, f.name)), full) for f in fields(self)
               if f.name not in ("traffic", "energy", "schedule", "sources", "notes", "idle_w", "formats", "labels")}
        for k in self.traffic:
            if k.count(".") == 2:
                out[f"traffic.{k}"] = np.broadcast_to(self.traffic[k], full)
        out |= {f"energy.{k}": np.broadcast_to(v, full) for k, v in self.energy.items()}
        out |= {f"schedule.{f.name}": getattr(self.schedule, f.name) for f in fields(self.schedule)}
        return out

    def frame(self):
        """The price as a pandas DataFrame, one row per (design, operation), the columns of
        :meth:`asicsim._src.hw.cost_record.CostResult.row` (:func:`asicsim._src.hw.result_table.frame`)."""
        return frame(self)

    def _notes_at(self, index):
        """The notes at ``index``: they run along the last axis (one per operation), or are an
        array of the price's shape (a table over designs: each design's own)."""
        if isinstance(self.notes, np.ndarray):
            return self.notes[index]
        idx = index if isinstance(index, tuple) else (index,)
        if idx and idx[0] is Ellipsis:
            idx = (slice(None),) * (len(self.shape) - len(idx) + 1) + idx[1:]
        if len(idx) < len(self.shape):
            return self.notes  # the operations axis is kept whole
        last = idx[len(self.shape) - 1]
        if isinstance(last, (int, np.integer)):
            return self.notes[last]
        return tuple(self.notes[j] for j in np.atleast_1d(np.arange(len(self.notes))[last]))

    def take(self, index) -> Price:
        """The price at ``index`` of ``shape`` (e.g. ``(..., i)`` for one operation on every design)."""
        parts = (Traffic, EnergySplit, Schedule)
        out = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, parts):
                out[f.name] = v.take(index)
            elif f.name == "idle_w":  # per design: broadcast along the operations, then selected
                out[f.name] = {k: w if np.ndim(w) == 0 else np.broadcast_to(w, self.shape)[index] for k, w in v.items()}
            elif f.name == "formats" and self.labels is not None and self._labels_at(index) is not None:
                out[f.name] = self._labels_at(index).formats[0]  # a table's design: its own formats
            elif f.name in ("sources", "formats"):
                out[f.name] = v
            elif f.name == "labels":
                out[f.name] = self._labels_at(index)
            elif f.name == "notes":
                out[f.name] = self._notes_at(index)
            else:
                out[f.name] = np.broadcast_to(np.asarray(v), self.shape)[index]
        return Price(**out)

    def _labels_at(self, index) -> Labels | None:
        """Labels survive taking one design of a table (an integer on its leading axis)."""
        if self.labels is None or len(self.shape) != 2 or not isinstance(index, (int, np.integer)):
            return None
        return self.labels.design(int(index))
