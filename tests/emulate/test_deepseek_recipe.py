"""Issue 34 item 2: 2-D block tiles, and DeepSeek-V3's FP8 recipe against its published description.

The oracle transcribes, in numpy float32, DeepSeek-V3 Technical Report (arXiv:2412.19437) section
3.3.2 -- activations scaled per 1x128 tile (per token per 128 channels), weights per 128x128 block
(128 input by 128 output channels), E4M3 on all tensors, the scale from the tile's amax computed
online -- with the arithmetic of deepseek-ai/DeepSeek-V3 ``inference/kernel.py``:
``act_quant_kernel`` (``s = max(|x|) / 448.``, ``y = x / s``, cast to float8_e4m3fn) and
``weight_dequant_kernel`` (``y = x * s`` in float32). The cast is ml_dtypes' (round to nearest
even); a quotient above 448 by rounding rounds back to 448 either way.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from asicsim._src.emulate import emulate, load_recipe, round_role
from asicsim._src.emulate.policy import RecipeError, RoleSpec

F32 = np.float32


def deepseek_tiles(x, rows: int, cols: int):
    """x (2-D float32) quantized per (rows x cols) tile as the published kernels do; a short
    edge tile is its own tile."""
    out = np.empty_like(x)
    for i in range(0, x.shape[0], rows):
        for j in range(0, x.shape[1], cols):
            t = x[i:i + rows, j:j + cols]
            s = F32(np.abs(t).max()) / F32(448.0)
            q = (t / s).astype(ml_dtypes.float8_e4m3fn).astype(F32)
            out[i:i + rows, j:j + cols] = q * s
    return out


def _data(shape, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(F32) * np.exp2(rng.integers(-8, 8, shape[1])).astype(F32)
    x[:, 3] *= F32(300.0)  # an outlier channel: only its own tiles lose precision
    return x


@pytest.mark.parametrize("shape", [(256, 384), pytest.param((200, 130), marks=pytest.mark.slow)])
def test_weight_tiles_are_deepseek_128x128_blocks(shape):
    """A Dense kernel (in, out) contracted along axis 0: 128x128 tiles, for the forward GEMM
    (contraction axis 0) and the dgrad GEMM (contraction axis 1) alike."""
    pol = load_recipe("fp8_deepseek_v3")
    w = _data(shape, 0)
    want = deepseek_tiles(w, 128, 128)
    for axis in (0, 1):
        got = np.asarray(round_role(jnp.asarray(w), pol["weight"], axis=axis))
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("shape", [(16, 384), pytest.param((7, 200), marks=pytest.mark.slow)])
def test_activation_tiles_are_deepseek_1x128(shape):
    """Activations (tokens, channels) contracted along the channels: one scale per token per 128
    channels; the wgrad GEMM contracts over tokens: 128x1 tiles."""
    pol = load_recipe("fp8_deepseek_v3")
    x = _data(shape, 1)
    got = np.asarray(round_role(jnp.asarray(x), pol["act"], axis=1))
    np.testing.assert_array_equal(got.view(np.uint32), deepseek_tiles(x, 1, 128).view(np.uint32))
    got_t = np.asarray(round_role(jnp.asarray(x), pol["act"], axis=0))
    np.testing.assert_array_equal(got_t.view(np.uint32), deepseek_tiles(x, 128, 1).view(np.uint32))


@pytest.mark.slow  # ~15 s on 2 busy cores; test_every_training_recipe_trains_a_tiny_mlp runs it by default
def test_deepseek_recipe_runs_a_small_mlp_in_emulation():
    """The forward GEMM's result is bf16(q(x) @ q(W)) with the published tiles (fp32 accumulation:
    compared within one bf16 ulp of the float64 product of the oracle's operands); the gradients
    are finite and close to fp32's."""
    rng = np.random.default_rng(2)
    params = {"w1": jnp.asarray(rng.standard_normal((256, 384)).astype(F32) * F32(0.06)),
              "w2": jnp.asarray(rng.standard_normal((384, 8)).astype(F32) * F32(0.05))}
    x = jnp.asarray(_data((16, 256), 3))

    def layer(w, x):
        return x @ w

    got = np.asarray(jax.jit(emulate(layer, "fp8_deepseek_v3"))(params["w1"], x), np.float64)
    qx = deepseek_tiles(np.asarray(x), 1, 128).astype(np.float64)
    qw = deepseek_tiles(np.asarray(params["w1"]), 128, 128).astype(np.float64)
    exact = qx @ qw
    # bf16 output (half an ulp: 2**-9 relative) of an fp32 sum of 256 products (at most 256
    # roundings of 2**-24 relative to sum |products|); the operands' tiles must match exactly for
    # this to hold: one element off by an E4M3 step moves the product by far more
    bound = np.abs(exact) * 2.0**-8 + 256 * 2.0**-24 * (np.abs(qx) @ np.abs(qw))
    assert np.all(np.abs(got - exact) <= bound), np.abs(got - exact).max()
    assert np.abs(got - exact).max() > 0  # rounded to bf16

    def loss(p, x):
        return jnp.mean((jax.nn.relu(x @ p["w1"]) @ p["w2"]) ** 2)

    x = jnp.asarray(rng.standard_normal((16, 256)).astype(F32))
    ref_loss, ref = jax.value_and_grad(loss)(params, x)
    emu_loss, grads = jax.jit(jax.value_and_grad(emulate(loss, "fp8_deepseek_v3")))(params, x)
    assert abs(float(emu_loss) - float(ref_loss)) < 0.05 * float(ref_loss)
    for k in params:
        a, b = np.asarray(ref[k], np.float64).ravel(), np.asarray(grads[k], np.float64).ravel()
        cos = a @ b / np.linalg.norm(a) / np.linalg.norm(b)
        assert np.all(np.isfinite(b)) and cos > 0.99, (k, cos)


@pytest.mark.parametrize(("fields", "field", "message"), [
    ({"scaling": "tensor", "tile": (128, 128)}, "tile", "only with scaling = 'block'"),
    ({"scaling": "block", "tile": (128,)}, "tile", "two integers"),
    ({"scaling": "block", "tile": (0, 128)}, "tile", "two integers"),
    ({"scaling": "block", "tile": (128, "x")}, "tile", "two integers"),
    ({"scaling": "block", "tile": (128, 128), "block_size": 64}, "block_size", "absent or 128"),
    ({"scaling": "block"}, "block_size", "required by scaling = 'block'"),
])
def test_bad_tiles_are_refused(fields, field, message):
    """Table-driven: a role's tile is checked at construction (field, value, what is allowed)."""
    with pytest.raises(RecipeError, match=message) as err:
        RoleSpec(format="fp8_e4m3", **fields)
    assert any(f == field for f, _, _ in err.value.problems)
