"""Every options object is a frozen dataclass that checks and converts its fields when built: one
built in code is checked as one read from a file (same message, naming field, value and what is
allowed), and converted values (lists as tuples, names as resolved specs, ints as floats) are
stored in one place, :mod:`asicsim._src.numerics.frozen_fields`."""

from __future__ import annotations

import ast
import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

import asicsim as sim
from asicsim._src.emulate.recipes import load_recipe
from asicsim._src.emulate.role_spec import RecipeError
from asicsim._src.hw import Gemm
from asicsim._src.hw.cost_record import CostResult
from asicsim._src.hw.design_parts import BufferSpec, DramSpec, PESpec
from asicsim._src.hw.native import MacMode
from asicsim._src.hw.result import Bound
from asicsim._src.numerics.formats import FloatFormat
from asicsim._src.sweep.errors import SweepError
from asicsim._src.sweep.report_options import REPORT_DEFAULTS, ReportOptions, report_options
from asicsim._src.workloads.prune_rules import PruneRule
from asicsim._src.workloads.speech_corpus import SpeechSettings

PACKAGE = Path(__file__).resolve().parents[1] / "asicsim"

# ---- [report] options: the same checks in code and from a spec ---------------------------------

BAD_REPORT = [
    ({"objective": "speed"}, "objective = 'speed': allowed: ['energy', 'time', 'edp']"),
    ({"scope": "die"}, "scope = 'die': allowed: ['core', 'chip', 'board']"),
    ({"max_accuracy_drop": -1}, "max_accuracy_drop = -1: allowed: a finite number >= 0"),
    ({"max_accuracy_drop": math.inf}, "max_accuracy_drop = inf: allowed: a finite number >= 0"),
    ({"max_accuracy_drop": math.nan}, "max_accuracy_drop = nan: allowed: a finite number >= 0"),
    ({"max_loss_increase": True}, "max_loss_increase = True: allowed: a finite number >= 0"),
    ({"max_loss_increase": "0.1"}, "max_loss_increase = '0.1': allowed: a finite number >= 0"),
]


@pytest.mark.parametrize(("values", "fragment"), BAD_REPORT)
def test_report_options_built_in_code_are_checked_as_from_a_spec(values, fragment):
    _, problems = report_options(values, "spec.toml: report")
    assert problems == [f"spec.toml: report.{fragment}"]
    with pytest.raises(SweepError) as e:
        ReportOptions(**values)
    assert str(e.value) == f"ReportOptions.{fragment}"


def test_report_options_convert_and_read_as_the_table():
    opts = ReportOptions(objective="edp", max_accuracy_drop=1)
    assert opts.max_accuracy_drop == 1.0 and isinstance(opts.max_accuracy_drop, float)
    assert opts == {**REPORT_DEFAULTS, "objective": "edp", "max_accuracy_drop": 1.0}
    assert opts["objective"] == "edp" and dict(opts)["scope"] == "board"
    assert hash(opts) == hash(ReportOptions(objective="edp", max_accuracy_drop=1.0))
    assert report_options({"objective": "edp", "max_accuracy_drop": 1}) == (opts, [])
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.objective = "time"  # type: ignore[misc]
    with pytest.raises(KeyError):
        opts["colour"]
    with pytest.raises(TypeError, match="colour"):
        ReportOptions(colour=1)  # type: ignore[call-arg]


# ---- calibrated scales of a recipe ------------------------------------------------------------

BAD_SCALES = [
    ({"static_scales": "x"}, "static_scales = 'x'; allowed: a tuple"),
    ({"static_scales": ((0, (1.0, -1.0, 0.0)),)}, "static_scales[0] = (0, (1.0, -1.0, 0.0)); allowed: (row, "),
    ({"static_scales": ((0, (1.0, 1.0)),)}, "static_scales[0] = (0, (1.0, 1.0)); allowed: (row, (lhs, rhs, grad))"),
    ({"static_scales": ((-1, (1.0, 1.0, 1.0)),)}, "static_scales[0] = (-1, (1.0, 1.0, 1.0)); allowed"),
    ({"static_scales": ((0, (math.nan, 1.0, 1.0)),)}, "three finite amaxes >= 0"),
    ({"static_scales": ((0, (1.0, 1.0, 0.0)), (0, (2.0, 2.0, 0.0)))}, "static_scales = [0, 0]; allowed: distinct rows"),
    ({"channel_scales": ((0, 2, (1.0,)),)}, "channel_scales[0] = (0, 2, (1.0,)); allowed: (row, operand, amaxes)"),
    ({"channel_scales": ((0, 0, ()),)}, "a non-empty sequence of finite amaxes >= 0"),
    ({"channel_scales": ((0, 0, (1.0,)), (0, 0, (2.0,)))}, "allowed: distinct (row, operand) pairs"),
    ({"uncalibrated": ((0, 5),)}, "uncalibrated[0] = (0, 5); allowed: (row, operand)"),
]


@pytest.mark.parametrize(("fields", "fragment"), BAD_SCALES)
def test_calibrated_scales_are_checked_when_the_recipe_is_built(fields, fragment):
    with pytest.raises(RecipeError) as e:
        dataclasses.replace(load_recipe("int8_ptq_tensor"), **fields)
    assert fragment in str(e.value)
    assert "recipe 'int8_ptq_tensor'" in str(e.value)


def test_calibrated_scales_are_stored_as_tuples_of_floats():
    pol = dataclasses.replace(load_recipe("int8_ptq_tensor"),
                              static_scales=[[1, np.array([1, 2.5, 0])]],
                              channel_scales=[(1, 0, np.array([0.5, 1.0], np.float32))], uncalibrated=[[0, 1]])
    assert pol.static_scales == ((1, (1.0, 2.5, 0.0)),)
    assert pol.channel_scales == ((1, 0, (0.5, 1.0)),)
    assert pol.uncalibrated == ((0, 1),)
    assert all(type(x) is float for x in pol.static_scales[0][1] + pol.channel_scales[0][2])
    hash(pol)  # a static argument of jax.jit


# ---- converters of the hardware and workload settings -----------------------------------------


def test_formats_and_lists_are_converted_at_construction():
    pe = PESpec(a_format="bfloat16", b_format="bf16", acc_format="fp32")
    assert pe == PESpec(a_format="bf16", b_format="bf16", acc_format="float32")
    assert isinstance(pe.a_format, FloatFormat) and pe.modes[0].a == pe.a_format
    mode = MacMode(a="int8", b="int8", acc="int32")
    assert mode.a.name == "int8" and hash(mode)
    buf = BufferSpec(name="b", holds=["ifmap", "filter"], capacity_kib=64)
    assert buf.holds == ("ifmap", "filter") and hash(buf)
    dram = DramSpec(kind="HBM2", bandwidth_gbps=900, holds=["filter"])
    assert dram.holds == ("filter",) and hash(dram)
    settings = SpeechSettings(voices=["en-us", "en-gb"], test_speakers=2)
    assert settings.voices == ("en-us", "en-gb")
    assert PruneRule(schedule="2:4", start=5).end == 5


def test_cost_result_bound_converts_a_name_and_refuses_another():
    r = _a_cost_result()
    assert CostResult(**{**r.__dict__, "bound": "bandwidth"}).bound is Bound.BANDWIDTH
    with pytest.raises(ValueError, match="speed"):
        CostResult(**{**r.__dict__, "bound": "speed"})


def _a_cost_result() -> CostResult:
    return sim.cost(Gemm(8, 8, 8), "tpu_v1")


def test_no_settings_object_writes_its_fields_outside_frozen_fields():
    """``object.__setattr__`` on a frozen object happens in one place (``settle``)."""
    writers = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Attribute) and node.attr == "__setattr__"
                    and isinstance(node.value, ast.Name) and node.value.id == "object"):
                writers.append(str(path.relative_to(PACKAGE)))
    assert writers == ["_src/numerics/frozen_fields.py"]
