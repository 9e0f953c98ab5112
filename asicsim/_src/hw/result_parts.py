"""The typed parts of a price (:mod:`asicsim._src.hw.result`): the :class:`Bound` regime, data movement
(:class:`Traffic`, per memory level x operand x direction) and energy per component
(:class:`EnergySplit`). Each is also a read-only mapping under the record keys cost rows print.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from asicsim._src.hw.power import component, is_static, scoped_energy

OPERANDS = ("ifmap", "filter", "ofmap", "psum")
DIRECTIONS = ("reads", "writes")


class Bound(StrEnum):
    """DeepBench's three regimes, a power cap and a GPU's launch floor; ``code`` is a member's index in
    arrays (new members go last, so stored codes keep their meaning)."""

    COMPUTE = "compute"
    BANDWIDTH = "bandwidth"
    OCCUPANCY = "occupancy"
    POWER = "power"  # the design's TDP sets the clock
    # a GPU whose time is mostly its launch floor (a trace's totals: asicsim._src.system.busy.gpu_bound);
    # a single kernel's price calls a launch-floored kernel ``occupancy`` (under half the peak)
    LAUNCH = "launch"

    def __repr__(self) -> str:  # a member reads as its name, as the bound was before it was typed
        return repr(self.value)

    @property
    def code(self) -> int:
        return _BOUND_LIST.index(self)

    @classmethod
    def of(cls, code) -> Bound:
        return _BOUND_LIST[int(code)]

    @classmethod
    def names(cls, codes) -> np.ndarray:
        """An array of codes as an array of names."""
        return np.asarray([b.value for b in _BOUND_LIST])[np.asarray(codes, dtype=np.int64)]


_BOUND_LIST = tuple(Bound)
#: The bound names in code order.
BOUNDS = tuple(b.value for b in Bound)


def _scalar(v):
    a = np.asarray(v)
    return float(a) if a.ndim == 0 else a


@dataclass(frozen=True)
class Traffic(Mapping):
    """Data movement per memory level, operand and direction (arrays ``(level, operand,
    direction) + shape``): ``bytes`` and ``elements`` (a sparse weight counts per dense position).
    ``array_bytes``: what crosses the boundary between the innermost level and the array (or a
    GPU's SMs); ``transfer_cycles``: the cycles the DRAM link is busy."""

    levels: tuple[str, ...]  # outermost last: ("sram", "dram") on a systolic design, ("l2", "dram") on a GPU
    bytes: np.ndarray
    elements: np.ndarray
    array_bytes: np.ndarray
    transfer_cycles: np.ndarray

    def __post_init__(self):
        want = (len(self.levels), len(OPERANDS), len(DIRECTIONS))
        for name in ("bytes", "elements"):
            got = np.shape(getattr(self, name))[:3]
            if got != want:
                raise ValueError(f"Traffic.{name}: leading axes {got}; allowed: {want} (levels {self.levels} "
                                 f"x operands {OPERANDS} x directions {DIRECTIONS})")

    def of(self, level: str, operand: str, direction: str, *, unit: str = "bytes"):
        """One level's, operand's and direction's movement in ``bytes`` or ``elements``."""
        a = self.bytes if unit == "bytes" else self.elements
        return a[self.levels.index(level), OPERANDS.index(operand), DIRECTIONS.index(direction)]

    def level_bytes(self, level: str) -> np.ndarray:
        return self.bytes[self.levels.index(level)].sum(axis=(0, 1))

    @property
    def dram_bytes(self) -> np.ndarray:
        return self.level_bytes("dram")

    def take(self, index) -> Traffic:
        """The movement at ``index`` of the result's shape (``...`` keeps the typed axes)."""
        idx = (slice(None),) * 3 + (index if isinstance(index, tuple) else (index,))
        return Traffic(self.levels, self.bytes[idx], self.elements[idx],
                       np.asarray(self.array_bytes)[index], np.asarray(self.transfer_cycles)[index])

    # -- the record keys: "level.operand.direction" (elements) and "..._bytes"; totals ---------
    def _keys(self) -> tuple[str, ...]:
        per = tuple(f"{lvl}.{o}.{d}{u}" for lvl in self.levels for o in OPERANDS for d in DIRECTIONS
                    for u in ("", "_bytes"))
        return (*per, *(f"{lvl}_bytes" for lvl in self.levels if lvl != "sram"), "array_bytes",
                "dram_transfer_cycles")

    def __getitem__(self, key: str):
        if key == "array_bytes":
            return _scalar(self.array_bytes)
        if key == "dram_transfer_cycles":
            return _scalar(self.transfer_cycles)
        if key.endswith("_bytes") and key[:-6] in self.levels and key[:-6] != "sram":
            return _scalar(self.level_bytes(key[:-6]))
        parts = key.split(".")
        if len(parts) == 3 and parts[0] in self.levels and parts[1] in OPERANDS:
            d, unit = (parts[2][:-6], "bytes") if parts[2].endswith("_bytes") else (parts[2], "elements")
            if d in DIRECTIONS:
                return _scalar(self.of(parts[0], parts[1], d, unit=unit))
        raise KeyError(key)

    def __iter__(self):
        return iter(self._keys())

    def __len__(self) -> int:
        return len(self._keys())


@dataclass(frozen=True)
class EnergySplit(Mapping):
    """Energy in pJ per component (``pj``: ``(component,) + shape``); a mapping component -> pJ."""

    components: tuple[str, ...]
    pj: np.ndarray

    def __post_init__(self):
        if np.shape(self.pj)[:1] != (len(self.components),):
            raise ValueError(f"EnergySplit.pj: leading axis {np.shape(self.pj)[:1]}; allowed: "
                             f"({len(self.components)},), one per component {self.components}")

    @classmethod
    def from_parts(cls, parts: dict, shape=()) -> EnergySplit:
        names = tuple(parts)
        pj = np.empty((len(names), *shape))
        for i, k in enumerate(names):
            pj[i] = parts[k]  # broadcast to the shape by assignment
        return cls(names, pj)

    def __getitem__(self, key: str):
        return _scalar(self.pj[self.components.index(key)]) if key in self.components else _missing(key)

    def __iter__(self):
        return iter(self.components)

    def __len__(self) -> int:
        return len(self.components)

    @property
    def total(self):
        """Every component summed in order (as :func:`asicsim._src.hw.power.scoped_energy` sums the
        board scope, so the two agree to the last bit)."""
        return _scalar(sum((self.pj[i] for i in range(len(self.components))), 0.0))

    @property
    def static(self):
        """Every static component (:func:`asicsim._src.hw.power.is_static`): the idle power over the time."""
        return _scalar(sum((self.pj[i] for i, k in enumerate(self.components) if is_static(k)), 0.0))

    @property
    def dynamic(self):
        return _scalar(np.asarray(self.total) - np.asarray(self.static))

    def scoped(self) -> dict:
        """The schema's ``energy_<scope>_j`` and ``energy_dynamic_<scope>_j`` (joules); the core
        scope is NaN where no component is the core's (a GPU has no separable core)."""
        return scoped_energy(dict(self.items()), has_core=any(component(k)[0] == "core" for k in self.components))

    def take(self, index) -> EnergySplit:
        idx = (slice(None),) + (index if isinstance(index, tuple) else (index,))
        return EnergySplit(self.components, self.pj[idx])


def _missing(key):
    raise KeyError(key)
