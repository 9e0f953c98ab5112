"""Gradients rounded to a wire format before the optimizer (``train(..., grad_format=...)``): the
rounding against ml_dtypes, fp32 bit-identical to plain training, a coarse format changing the
result, stochastic rounding drawing a stream of its own, bad settings named."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from asicsim._src.emulate.role_spec import RecipeError
from asicsim._src.workloads import train
from asicsim._src.workloads.grad_rounding import gradient_role, round_gradients

STEPS = 60


def _leaves(result):
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(result.runs[0].params)]


@pytest.fixture(scope="module")
def plain():
    return train("digits_mlp", "fp32", seeds=(0,), steps=STEPS, eval_every=STEPS, stats=False, keep_params=True)


def _rounded(fmt, rounding="rne"):
    return train("digits_mlp", "fp32", seeds=(0,), steps=STEPS, eval_every=STEPS, stats=False, keep_params=True,
                 grad_format=fmt, grad_rounding=rounding)


def test_rounding_matches_ml_dtypes():
    x = np.random.default_rng(0).standard_normal((64, 33)).astype(np.float32) * 1e-3
    tx = round_gradients(gradient_role("bf16"))
    out, state = tx.update({"w": jnp.asarray(x)}, tx.init(None))
    want = x.astype(ml_dtypes.bfloat16).astype(np.float32)  # round-to-nearest-even (oracle)
    assert np.array_equal(np.asarray(out["w"]), want) and int(state.count) == 1
    e4m3 = round_gradients(gradient_role("fp8_e4m3"))
    out, _ = e4m3.update({"w": jnp.asarray(x)}, e4m3.init(None))
    assert np.array_equal(np.asarray(out["w"]), x.astype(ml_dtypes.float8_e4m3fn).astype(np.float32))


def test_stochastic_rounding_lands_on_the_neighbours_and_advances():
    x = jnp.full((4096,), 1.0 + 2.0**-9, jnp.float32)  # a quarter of the way from 1 to 1 + 2^-7 in bf16
    tx = round_gradients(gradient_role("bf16", "sr"))
    s0 = tx.init(None)
    a, s1 = tx.update({"g": x}, s0)
    b, _ = tx.update({"g": x}, s1)
    a, b = np.asarray(a["g"]), np.asarray(b["g"])
    assert set(np.unique(a)) <= {1.0, 1.0 + 2.0**-7}
    # unbiased: a quarter round up; the mean's sd is 2^-7 sqrt(3/16) / 64 = 5.3e-5, the bound 5 sd
    assert abs(a.mean() - float(x[0])) < 2.7e-4 and 0.2 < (a > 1).mean() < 0.3
    assert not np.array_equal(a, b)  # the next step draws other bits


def test_fp32_gradients_are_bit_identical_to_plain_training(plain):
    same = _rounded("fp32")
    assert all(np.array_equal(a, b) for a, b in zip(_leaves(plain), _leaves(same), strict=True))
    assert same.settings["grad_format"] == "fp32" and "grad_format" not in plain.settings


def test_a_coarse_format_changes_the_result(plain):
    coarse = _rounded("fp8_e4m3")
    sr = _rounded("fp8_e4m3", "sr")
    assert not all(np.array_equal(a, b) for a, b in zip(_leaves(plain), _leaves(coarse), strict=True))
    assert not all(np.array_equal(a, b) for a, b in zip(_leaves(coarse), _leaves(sr), strict=True))
    assert coarse.runs[0].curves["train_loss"] != plain.runs[0].curves["train_loss"]


@pytest.mark.parametrize("fmt, rounding, words", [
    ("fp99", "rne", ["format = 'fp99'"]),
    ("bf16", "nearest", ["rounding = 'nearest'", "rne", "sr"]),
])
def test_bad_gradient_settings(fmt, rounding, words):
    with pytest.raises(RecipeError) as info:
        train("digits_mlp", "fp32", seeds=(0,), steps=1, stats=False, grad_format=fmt, grad_rounding=rounding)
    for w in words:
        assert w in str(info.value)
