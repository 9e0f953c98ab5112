"""The commands' one JSON writer (asicsim.cli_json): strict JSON, read back by a reader that
rejects NaN and Infinity, for the values the commands print (numpy scalars and arrays from
pandas and the cost model, paths, non-finite figures)."""

import json
import math
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

from asicsim._src.cli_json import json_text, plain


def _strict(text: str):
    def refuse(constant):
        raise AssertionError(f"not strict JSON: {constant}")
    return json.loads(text, parse_constant=refuse)


def test_numbers_arrays_paths_and_non_finite_values():
    obj = {"a": np.float32(1.5), "b": np.int64(7), "c": np.array([1.0, np.nan, -np.inf]),
           "d": [math.inf, float("nan"), 2.0], "e": (np.bool_(True), None, "x"), "f": Path("/tmp/r.html"),
           "g": jnp.arange(3), "h": {"nested": np.float64(np.inf)}}
    got = _strict(json_text(obj))
    assert got == {"a": 1.5, "b": 7, "c": [1.0, None, None], "d": [None, None, 2.0],
                   "e": [True, None, "x"], "f": "/tmp/r.html", "g": [0, 1, 2], "h": {"nested": None}}
    assert type(got["b"]) is int and plain(np.int64(7)) == 7


def test_indent_is_the_callers():
    assert json_text({"a": [1]}, indent=1) == '{\n "a": [\n  1\n ]\n}'


@pytest.mark.parametrize("value", [object(), {1, 2}, b"bytes"])
def test_a_value_json_cannot_hold_is_an_error_naming_its_type(value):
    with pytest.raises(TypeError, match=f"not JSON serialisable: {type(value).__name__}"):
        json_text({"k": value})
