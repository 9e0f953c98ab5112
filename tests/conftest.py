"""Test-wide settings: no silent dtype or rank promotion anywhere in JAX (asicsim must not rely on
it), and hypothesis runs the same examples on every run unless told otherwise.

Hypothesis profiles (``HYPOTHESIS_PROFILE``): ``repeatable`` (the default, what CI runs) derives each
test's examples from the test itself and from the constants hypothesis collects from the modules
imported so far, so the same pytest command draws the same examples everywhere (one file run alone
may draw others; a failure's ``@reproduce_failure`` line replays it);
``explore`` draws fresh random examples on each run, for hunting new counterexamples before a change
lands (``HYPOTHESIS_PROFILE=explore python -m pytest tests/numerics``).
"""

from __future__ import annotations

import os

import jax
from hypothesis import settings

settings.register_profile("repeatable", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))

jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")

