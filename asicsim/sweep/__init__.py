"""Sweeps: recipes x designs x workloads (x design-parameter ranges) run in parallel into a
results store that survives interruption.

>>> import asicsim as sim
>>> summary = sim.sweep("demo", "out/")          # doctest: +SKIP
>>> table = sim.load_results("out/")             # doctest: +SKIP

(Skipped by the doctests: the demo sweep takes minutes; tests/sweep runs small sweeps.)

See :mod:`asicsim.sweep.spec` for the spec file, :mod:`asicsim.sweep.store` for the store.
"""

from __future__ import annotations

import sys
import types

from asicsim.sweep.expansion import expand
from asicsim.sweep.run import sweep
from asicsim.sweep.spec import Point, SweepError, SweepSpec, load_spec
from asicsim.sweep.store import load_results

__all__ = ["Point", "SweepError", "SweepSpec", "expand", "load_results", "load_spec", "sweep"]


class _CallableModule(types.ModuleType):
    """Lets ``asicsim.sweep(spec, out)`` run a sweep and keep the submodules."""

    def __call__(self, spec, out, **kwargs):
        return sweep(spec, out, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
