"""Test-wide JAX settings: no silent dtype or rank promotion anywhere (asicsim must not rely on it)."""

from __future__ import annotations

import jax

jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")

