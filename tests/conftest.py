"""Test-wide settings: no silent dtype or rank promotion anywhere in JAX (asicsim must not rely on
it), and hypothesis runs the same examples on every run unless told otherwise.

Hypothesis profiles (``HYPOTHESIS_PROFILE``): ``repeatable`` (the default, what CI runs) derives each
test's examples from the test itself and from the constants hypothesis collects from the modules
imported so far, so the same pytest command draws the same examples everywhere (one file run alone
may draw others; a failure's ``@reproduce_failure`` line replays it);
``explore`` draws fresh random examples on each run, for hunting new counterexamples before a change
lands (``HYPOTHESIS_PROFILE=explore python -m pytest tests/numerics``).

Every asicsim module is imported before any test runs, so the constants hypothesis collects do not
depend on which tests ran earlier in the process: under pytest-xdist (the README's test command) a
worker's earlier tests depend on the scheduling.
"""

from __future__ import annotations

import importlib
import os
import pkgutil

import jax
from hypothesis import settings

import asicsim

settings.register_profile("repeatable", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))

jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")

for _module in pkgutil.walk_packages(asicsim.__path__, "asicsim."):
    if not _module.name.endswith("__main__"):  # (runs the command line)
        importlib.import_module(_module.name)
