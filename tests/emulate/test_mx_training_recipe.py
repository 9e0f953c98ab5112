"""Issue 20 item 9: the MXFP8 training recipe against the published one.

``charlm_transformer`` under the old ``mxfp8`` recipe (OCP v1.0's scale rule, as microxcaling
computes it: exponent floor(log2 amax) - emax, beyond-max elements saturate; E5M2 gradients)
reached 1.91 nats/char against fp32's 1.32. The scale rule saturates each block's largest
elements (up to 1/8 of their value for E4M3 and E5M2, whose max is 1.75 * 2**emax), which biases
every gradient GEMM towards zero: one step's weight gradients came out 0.84-0.98x as long as
fp32's. NVIDIA's recipe (Mishra et al. 2025, arXiv:2506.08027: OCP's rounding diverged in LLM
pre-training, the scale rounded toward infinity and E4M3 for every tensor matched BF16) is now
``mxfp8``; the OCP one stays as ``mxfp8_ocp``. The oracle is fp32's own gradient of the same
model and batch.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from asicsim._src.emulate import emulate, load_recipe
from asicsim._src.workloads.models import transformer


@pytest.fixture(scope="module")
def grads():
    model = transformer(65, context=64, d_model=64, heads=4, layers=2)  # charlm_transformer's sizes
    params = model.init(0)
    tokens = jnp.asarray(np.random.default_rng(0).integers(0, 65, (16, 65)))

    def loss(p, x):
        logits = model.apply(p, x[:, :-1])
        return optax.softmax_cross_entropy_with_integer_labels(logits, x[:, 1:]).mean()

    out = {"fp32": jax.grad(loss)(params, tokens)}
    for recipe in ("mxfp8", "mxfp8_ocp"):
        out[recipe] = jax.grad(emulate(loss, recipe))(params, tokens)
    return out


def _per_matrix(ref, got):
    """(1 - cosine, norm ratio) of each weight matrix's gradient against fp32's."""
    rows = []
    for a, b in zip(jax.tree_util.tree_leaves(ref), jax.tree_util.tree_leaves(got), strict=True):
        if a.ndim < 2:
            continue
        a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
        rows.append((1 - a @ b / np.linalg.norm(a) / np.linalg.norm(b), np.linalg.norm(b) / np.linalg.norm(a)))
    return np.asarray(rows)


@pytest.mark.slow  # three gradients of the transformer: about 15 s on 2 cores
def test_mxfp8_gradients_are_unbiased_and_close_to_fp32(grads):
    new = _per_matrix(grads["fp32"], grads["mxfp8"])
    old = _per_matrix(grads["fp32"], grads["mxfp8_ocp"])
    # measured: new 1 - cos 2.5e-3..4.6e-3, norm 0.988..1.007; OCP 2.4e-2..4.3e-2, 0.835..0.984
    assert new[:, 0].max() < 1e-2 and np.all(np.abs(new[:, 1] - 1) < 0.03)
    assert old[:, 0].min() > 1e-2 and old[:, 1].min() < 0.9  # what the old recipe did
    assert new[:, 0].max() < old[:, 0].min() / 3


def test_mxfp8_recipe_names_the_published_scale_rule_and_element():
    pol = load_recipe("mxfp8")
    for role in ("weight", "act", "grad"):
        spec = pol[role].spec
        assert spec.kind == "block" and spec.scale_rule == "up" and spec.element.name == "float8_e4m3fn"
        assert spec.block_size == 32
    assert load_recipe("mxfp8_ocp")["grad"].spec.scale_rule == "floor"
