"""Sweeps: recipes x designs x workloads (x design-parameter ranges) run in parallel into a
results store that survives interruption.

>>> import asicsim as sim
>>> summary = sim.sweep("demo", "out/")          # doctest: +SKIP
>>> table = sim.load_results("out/")             # doctest: +SKIP

(Skipped by the doctests: the demo sweep takes minutes; tests/sweep runs small sweeps.)

See :mod:`asicsim._src.sweep.spec` for the spec file, :mod:`asicsim._src.sweep.store` for the store.
"""

from __future__ import annotations

from asicsim._lazy import lazy_package

__all__ = ["Point", "SweepError", "SweepSpec", "expand", "load_results", "load_spec", "sweep"]


lazy_package(__name__, {
    ".run": ["sweep"],
    ".expansion": ["expand"],
    ".point_identity": ["Point"],
    ".errors": ["SweepError"],
    ".spec": ["SweepSpec", "load_spec"],
    ".store": ["load_results"],
})
