"""How the report writes numbers and inputs: one number format in every table (the Roofs table mixed
raw integers, 49152000000000, with 1.979e+15), column names that may wrap, and the recorded
recipes as the TOML a user would write (they were Python reprs on one 21,628 px line)."""

from __future__ import annotations

import tomllib

import numpy as np
import pandas as pd
import pytest

from asicsim._src.emulate.policy import recipes_dir
from asicsim._src.emulate.recipes import load_recipe
from asicsim._src.report import html
from asicsim._src.report.document import Table, fmt
from asicsim._src.report.reproduce import _recipes_toml


@pytest.mark.parametrize(("value", "text"), [
    (49152000000000.0, "4.915e+13"), (1.979e15, "1.979e+15"), (np.int64(49152000000000), "4.915e+13"),
    (75, "75"), (np.int64(999_999), "999999"), (60.0, "60"), (0.5, "0.5"), (2.0e-11, "2e-11"),
    (float("nan"), "–"), (None, "–"), (float("inf"), "∞"), (True, "yes"), ("gpu_v100", "gpu_v100"),
])
def test_one_number_format(value, text):
    assert fmt(value) == text


def test_headers_and_names_may_wrap_numbers_do_not():
    df = pd.DataFrame({"dynamic_energy_ratio_vs_gpu_v100": [0.387], "design": ["edge_int8_32x32[array.rows=16]"]})
    page = html.table(Table(df))
    assert "dynamic_<wbr>energy_<wbr>ratio_<wbr>vs_<wbr>gpu_<wbr>v100</th>" in page
    assert "edge_<wbr>int8_<wbr>32x32[array.rows=16]<wbr></td>" in page
    assert '<td class="">0.387</td>' in page


def test_recorded_recipes_shown_as_toml():
    table = tomllib.loads((recipes_dir() / "bf16.toml").read_text(encoding="utf-8"))
    objs = {"fp8_hybrid": repr(load_recipe("fp8_hybrid")), "odd": "not a repr", "t": table}
    text = _recipes_toml(objs)
    assert "Policy(" not in text and "RoleSpec(" not in text
    assert '# recipe fp8_hybrid\nname = "fp8_hybrid"' in text
    assert 'grad = { format = "fp8_e5m2", scaling = "delayed" }' in text
    assert '# recipe odd\n"not a repr"' in text  # shown as recorded
    assert '# recipe t\nname = "bf16"' in text  # a recipe table (a future spec.json) too
