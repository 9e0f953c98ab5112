"""The ring reduce-scatter whose partial sums are rounded to the wire format at every hop
(``Replicas(..., allreduce="ring")``, :mod:`asicsim._src.emulate.ring_reduce`): bit for bit against
an independent numpy reference of the ring order (float32 additions by numpy, the roundings by
ml_dtypes' / numpy's round-to-nearest-even casts), a small gradient the ring swamps where the
float32 sum keeps it (worked by hand), stochastic rounding unbiased through the hops, bad
all-reduce names."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from asicsim._src.emulate.replicas import ReplicaError, Replicas
from asicsim._src.emulate.ring_reduce import ring_sum
from asicsim._src.numerics.random import seed_words
from asicsim._src.workloads import train
from asicsim._src.workloads.grad_rounding import gradient_role

WORDS = seed_words(jax.random.key(5))
DTYPES = {"bf16": ml_dtypes.bfloat16, "fp16": np.float16, "fp8_e4m3": ml_dtypes.float8_e4m3fn,
          "fp8_e5m2": ml_dtypes.float8_e5m2, None: np.float32}


def ring_reference(sent: np.ndarray, dtype) -> np.ndarray:
    """Element j of the flattened leaf lies in chunk i = j // ceil(n / R); chunk i's sum starts
    at replica i + 1 and adds replicas i + 2, ..., i + R (mod R), each float32 sum rounded to dtype."""
    r = sent.shape[0]
    flat = sent.reshape(r, -1)
    n = flat.shape[1]
    c = -(-n // r)
    out = np.empty(n, np.float32)
    for j in range(n):
        i = j // c
        acc = flat[(i + 1) % r, j]
        for k in range(2, r + 1):
            acc = np.float32(np.float32(acc) + flat[(i + k) % r, j]).astype(dtype).astype(np.float32)
        out[j] = acc
    return out.reshape(sent.shape[1:])


@pytest.mark.parametrize("fmt", ["bf16", "fp16", "fp8_e4m3", "fp8_e5m2", None])
@pytest.mark.parametrize("r", [3, 4, 8])
def test_ring_matches_the_reference_bit_for_bit(fmt, r):
    # 35 elements: chunks of ceil(35 / R), the last one short (padded with zeros in the ring)
    rng = np.random.default_rng(r)
    g = (rng.standard_normal((r, 7, 5)) * np.exp2(rng.integers(-6, 2, (r, 7, 5)))).astype(np.float32)
    spec = None if fmt is None else gradient_role(fmt)
    sent = g.astype(DTYPES[fmt]).astype(np.float32)  # each replica's gradient as it is sent
    want = ring_reference(sent, DTYPES[fmt])
    assert np.array_equal(np.asarray(ring_sum(jnp.asarray(sent), spec)), want)
    # the replicas' mean: the ring's sum / R (XLA:CPU divides by a constant as a multiplication by
    # its float32 reciprocal: within one float32 rounding of the quotient where R is not 2^k)
    out = np.asarray(Replicas(r, spec, "ring").reduce({"w": jnp.asarray(g)}, WORDS)["w"])
    np.testing.assert_allclose(out, want / np.float32(r), rtol=2.0**-23, atol=0)
    if r & (r - 1) == 0:
        assert np.array_equal(out, want / np.float32(r))


def test_the_ring_swamps_what_the_float32_sum_keeps():
    # bf16 keeps 8 significant bits: 1 + 2^-8 is a tie between 1 and 1 + 2^-7, rounded to even (1).
    # One element, 4 replicas: chunk 0 starts at replica 1 (gradient 1) and adds 2^-8 three
    # times, each partial sum rounded back to 1. The float32 sum 1 + 3 x 2^-8 = 1 + 1.5 x 2^-7 is a
    # tie between 1 + 2^-7 and 1 + 2^-6, rounded to even: 1 + 2^-6. Means: 1/4 and (1 + 2^-6)/4.
    g = jnp.asarray(np.array([[2.0**-8], [1.0], [2.0**-8], [2.0**-8]], np.float32))
    ring = Replicas(4, gradient_role("bf16"), "ring").reduce({"w": g}, WORDS)["w"]
    once = Replicas(4, gradient_role("bf16"), "sum").reduce({"w": g}, WORDS)["w"]
    assert float(ring[0]) == 0.25 and float(once[0]) == (1 + 2.0**-6) / 4


def test_stochastic_rounding_stays_unbiased_through_the_hops():
    # every replica 1 + 2^-9: sent as 1 or 1 + 2^-7 (a quarter up), then each partial sum (in
    # [2, 8), float32-exact) rounded stochastically to bf16: every rounding is unbiased, so the
    # mean's expectation stays 1 + 2^-9. Variance of the sum <= 4 (2^-7)^2/4 + 2 (2^-6)^2/4 +
    # (2^-5)^2/4 = 4.3e-4: sd of the mean over 8192 elements <= 0.021 / 4 / 90.5 = 5.7e-5; bound 5 sd.
    g = jnp.asarray(np.full((4, 8192), 1.0 + 2.0**-9, np.float32))
    out = np.asarray(Replicas(4, gradient_role("bf16", "sr"), "ring").reduce({"w": g}, WORDS)["w"])
    total = out * 4
    assert np.array_equal(total, total.astype(ml_dtypes.bfloat16).astype(np.float32))  # on bf16's grid
    assert abs(out.mean() - (1 + 2.0**-9)) < 2.9e-4
    rne = np.asarray(Replicas(4, gradient_role("bf16"), "ring").reduce({"w": g}, WORDS)["w"])
    assert np.all(rne == 1.0)  # round-to-nearest sends 1 from every replica: the 2^-9 is lost


def test_bad_allreduce_is_named():
    with pytest.raises(ReplicaError, match="allreduce = 'tree'; allowed: sum, ring"):
        Replicas(2, None, "tree")
    with pytest.raises(ReplicaError, match="allreduce = 'tree'"):
        train("digits_mlp", "fp32", seeds=(0,), steps=1, stats=False, replicas=2, allreduce="tree")


def test_a_ring_run_trains_and_says_so():
    # 20 steps of digits over 4 replicas with bf16 ring partial sums: the run records the
    # all-reduce, and differs from the float32-summed run (more roundings)
    kw = dict(seeds=(0,), steps=20, eval_every=20, stats=False, replicas=4, grad_format="bf16", keep_params=True)
    ring = train("digits_mlp", "fp32", **kw, allreduce="ring")
    once = train("digits_mlp", "fp32", **kw)
    assert ring.settings["allreduce"] == "ring" and "allreduce" not in once.settings
    assert not ring.diverged and ring.per_seed[0] > 0.3
    a, b = (jax.tree_util.tree_leaves(r.runs[0].params) for r in (ring, once))
    assert any(not np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(a, b, strict=True))
