"""The Pallas kernel of the tensor-core order (asicsim/_src/numerics/tc_kernel.py).

On this CPU the kernel runs through Pallas' interpreter (``interpret=True``): the same kernel
body, checked bit for bit (float64 accumulator bits; NaN as NaN) against the XLA path it
replaces on a GPU (``tensorcore_accumulate``, itself proven on the measured vectors and against
the Fraction model in test_tensorcore*.py), on every preset, with zeros, signed zeros,
subnormal, inf and NaN operands, an initial accumulator, shapes that are not multiples of the
tile and a short last block. The kernels are lowered for CUDA and verified as Triton IR. The
proof on the device runs against a stand-in device; ``test_gpu_kernel_matches_cpu`` runs on a GPU
only (``python benchmarks/bench_tensorcore.py --kernel`` runs it there).
"""

from __future__ import annotations

import dataclasses
import functools
import threading
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from asicsim._src.numerics import tc_kernel, tensor_core
from asicsim._src.numerics.mac import MacSpec
from asicsim._src.numerics.matmul import _matmul3d, matmul
from asicsim._src.numerics.quantize import quantize
from asicsim._src.numerics.tc_presets import MIXED_FP8, PRESETS
from asicsim._src.numerics.triton_ir import triton_kernels

# generic tensorcore:k specs the kernel takes: sticky bits, the product exponent, flushing, the
# product limit, an fp16 / bf16 accumulator, directed roundings
GENERIC = [
    "a=fp16,acc=fp32,order=tensorcore:4,acc_rounding=rtz",
    "a=fp16,acc=fp32,order=tensorcore:4,acc_rounding=rne,guard_bits=1,tc_sticky=true",
    "a=bf16,acc=fp32,order=tensorcore:8,acc_rounding=rne,guard_bits=3,tc_sticky=true,tc_exponent=operands",
    "a=fp16,acc=fp32,order=tensorcore:4,acc_rounding=rup,tc_flush=both,tc_exponent=operands",
    "a=fp16,acc=fp16,order=tensorcore:8,acc_rounding=rdn,tc_product_limit=true,tc_exponent=operands",
    "a=e4m3,b=e5m2,acc=bf16,order=tensorcore:16,acc_rounding=rne,guard_bits=-2,tc_flush=in",
]


def _presets() -> list[str]:
    texts = sorted({text for text, _ in PRESETS.values()})
    texts += [str(tensor_core(gpu, MIXED_FP8[0], "fp32", b_fmt=MIXED_FP8[1])) for gpu in ("h100", "ada")]
    return texts


def _same(got, want, what):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    same = (got.view(np.uint64) == want.view(np.uint64)) | (np.isnan(got) & np.isnan(want))
    assert same.all(), f"{what}: {(~same).sum()} of {same.size} differ, first at {np.argwhere(~same)[0]}"


def _check(mac: MacSpec, a, b, c, tile=None):
    got = np.asarray(tc_kernel.accumulate(a, b, mac, c, interpret=True, tile=tile))
    _same(got, tc_kernel.reference(a, b, mac, c), mac)
    return got


def test_kernel_matches_xla_path_with_specials_and_partial_tiles():
    """V100 fp16 (4-product blocks): the probe operands (subnormal, inf, NaN operands and c,
    cancellation, a short last block), a batch of 2, 40 x 72 outputs over 16 x 64 tiles (both
    padded). Essential (the default run's proof of the kernel), so not marked slow (~10 s)."""
    mac = tensor_core("v100", "fp16", "fp32")
    a, b, c = tc_kernel.probe_operands(mac)
    a, b, c = (np.concatenate([x, x[:, ::-1]]) for x in (a, b, c))
    got = _check(mac, a, b, c)
    assert np.isnan(got).any() and np.isinf(got).any() and (got == 0).any()


@pytest.mark.experiment  # 40 interpreted kernels, 7 s each on 2 cores
@pytest.mark.parametrize("text", _presets() + GENERIC)
def test_every_preset_matches_xla_path(text):
    """The probe operands with c; the generic specs also without c, on 32 x 32 tiles (the
    presets' own tiles without c: the hypothesis test below)."""
    mac = MacSpec.parse(text)
    if not tc_kernel.applies(mac):
        assert mac.tc_late_c is not None, text  # B200 fp8: the XLA path (see applies)
        return
    a, b, c = tc_kernel.probe_operands(mac)
    _check(mac, a, b, c)
    if text in GENERIC:
        _check(mac, a, b, None, tile=(32, 32, 4))


@pytest.mark.slow
@settings(max_examples=12, deadline=None)
@given(data=st.data())
def test_hypothesis_kernel_matches_xla_path(data):
    text = data.draw(st.sampled_from([t for t in _presets() + GENERIC if tc_kernel.applies(MacSpec.parse(t))]))
    mac = MacSpec.parse(text)
    size = mac.order_size
    m, n = data.draw(st.integers(1, 40), "m"), data.draw(st.integers(1, 80), "n")
    k = data.draw(st.integers(1, 3 * size + 3), "k")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), "seed"))
    spread = data.draw(st.integers(0, 30), "spread")
    special = data.draw(st.sampled_from([0.0, 0.02]), "special rate")

    def values(shape, fmt):
        x = rng.standard_normal(shape) * 2.0 ** rng.integers(-spread, spread + 1, shape)
        x[rng.random(shape) < 0.1] = -0.0
        x[rng.random(shape) < special] = rng.choice([np.inf, -np.inf, np.nan])
        x[rng.random(shape) < 0.05] = 2.0 ** (fmt.emin - 1)  # a subnormal (or zero)
        return np.asarray(quantize(x.astype(np.float32), fmt, "rne"))[None]

    a, b = values((m, k), mac.spec("a_fmt")), values((k, n), mac.spec("b_fmt"))
    c = values((m, n), mac.spec("out")) if data.draw(st.booleans(), "c") else None
    _check(mac, a, b, c)


def test_applies_to_every_preset_but_late_c():
    for text in _presets():
        mac = MacSpec.parse(text)
        assert tc_kernel.applies(mac) == (mac.tc_late_c is None), text
    for text in ("a=fp16,acc=fp32,order=tensorcore:4,saturate=true", "a=bf16,acc=bf16,order=sequential",
                 "a=fp16,acc=fp32,order=tensorcore:4,acc_rounding=rna"):
        assert not tc_kernel.applies(MacSpec.parse(text)), text


_LOWERED = [str(tensor_core(*key)) for key in (("v100", "fp16", "fp32"), ("h100", "fp16", "fp16"),
                                                ("h100", "fp8_e4m3", "fp32"), ("b200", "fp8_e5m2", "fp32"))]


@pytest.mark.parametrize("texts", [
    pytest.param(_LOWERED, id="four"),
    pytest.param(_presets() + GENERIC, id="all", marks=pytest.mark.slow),
])
def test_lowers_for_cuda_to_valid_triton(texts):
    """The presets the kernel takes (and the generic specs) lower through ``_matmul3d`` to one
    Triton kernel that verifies (with c); B200 fp8 (late c) to none; ``kernel=False`` and the CPU
    lowering keep the XLA path. Fails on the tensorcore.py before this kernel: Pallas' Triton
    lowering has no ``round``, breaks on ``isfinite`` and on uint64 constants of 2**63 and up."""
    a, b = jnp.ones((1, 20, 37), jnp.float32), jnp.ones((1, 37, 30), jnp.float32)
    c = jnp.ones((1, 20, 30), jnp.float32)
    for text in texts:
        mac = MacSpec.parse(text)
        run = functools.partial(_matmul3d, mac=mac)
        kernels = triton_kernels(lambda x, y, z, run=run: run(x, y, c=z), a, b, c)
        assert len(kernels) == tc_kernel.applies(mac), text
        if kernels:
            assert "scf.for" in kernels[0] and "f64" in kernels[0], text
    mac = tensor_core("h100", "fp8_e4m3", "fp32")
    assert len(triton_kernels(functools.partial(_matmul3d, mac=mac), a, b)) == 1
    assert not triton_kernels(functools.partial(_matmul3d, mac=mac, kernel=False), a, b)
    cpu = jax.jit(functools.partial(_matmul3d, mac=mac)).trace(a, b).lower(lowering_platforms=("cpu",))
    assert "triton" not in cpu.as_text()


@pytest.mark.parametrize("name", ["ASICSIM_TC_KERNEL", "ASICSIM_MAC_KERNEL"])
def test_environment_can_turn_the_kernel_off(monkeypatch, name):
    mac = tensor_core("a100", "bf16", "fp32")
    a, b = jnp.ones((16, 8), jnp.float32), jnp.ones((8, 16), jnp.float32)
    assert triton_kernels(functools.partial(matmul, mac=mac), a, b)
    monkeypatch.setenv(name, "0")
    assert not triton_kernels(functools.partial(matmul, mac=mac), a, b)


def _device(monkeypatch, broken: bool):
    """The "GPU" of these tests: the probe's kernel (in its own thread) runs in Pallas'
    interpreter on this CPU, with one guard bit more where ``broken`` (a device kernel that is
    wrong); the caller's thread lowers the real kernel."""
    real, main = tc_kernel.accumulate, threading.current_thread()

    def device(a, b, mac, c=None, interpret=False, tile=None):
        if threading.current_thread() is main:
            return real(a, b, mac, c, interpret=interpret, tile=tile)
        if broken:
            mac = dataclasses.replace(mac, guard_bits=mac.guard_bits + 1)
        return real(a, b, mac, c, interpret=True, tile=tile)

    monkeypatch.setattr(tc_kernel, "accumulate", device)
    tc_kernel.proven.cache_clear()


@pytest.mark.slow  # two interpreted kernels and their references
@pytest.mark.parametrize("broken", [False, True])
def test_kernel_is_proven_on_the_device_before_use(monkeypatch, broken):
    mac = tensor_core("a100", "tf32", "fp32")
    assert tc_kernel.proven(mac, "cpu")  # no GPU: unproven, nothing run
    _device(monkeypatch, broken)
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    m = 8 + broken  # a shape of its own: the jit cache must not answer for the other case
    a, b = jnp.ones((1, m, 9), jnp.float32), jnp.ones((1, 9, 8), jnp.float32)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            kernels = triton_kernels(functools.partial(_matmul3d, mac=mac), a, b)
        assert sum("is not used" in str(w.message) for w in caught) == broken
        assert len(kernels) == (not broken)  # a kernel that fails its probe: the XLA path
        assert tc_kernel.proven.cache_info().currsize == 1
    finally:
        tc_kernel.proven.cache_clear()


@pytest.mark.slow  # six XLA compilations
def test_probe_inputs_tell_wrong_kernels_apart():
    """The probe has inf and NaN results, exact zeros and subnormal c, and one guard bit more or
    less, or rounding to nearest for toward zero, changes its results."""
    mac = tensor_core("h100", "bf16", "fp32")
    a, b, c = tc_kernel.probe_operands(mac)
    want = np.asarray(tc_kernel.reference(a, b, mac, c))
    assert np.isnan(want).any() and np.isinf(want).any() and (want == 0).any()
    for wrong in (dict(guard_bits=1), dict(guard_bits=3), dict(acc_rounding="rne")):
        got = np.asarray(tc_kernel.reference(a, b, dataclasses.replace(mac, **wrong), c))
        assert (got.view(np.uint64) != want.view(np.uint64)).sum() > 20, wrong


@pytest.mark.skipif(jax.default_backend() != "gpu", reason="needs a GPU (benchmarks/bench_tensorcore.py --kernel)")
@pytest.mark.parametrize("gpu,fmt,out", [("v100", "fp16", "fp32"), ("a100", "tf32", "fp32"),
                                          ("h100", "fp16", "fp16"), ("h100", "fp8_e4m3", "fp32")])
def test_gpu_kernel_matches_cpu(gpu, fmt, out):
    mac = tensor_core(gpu, fmt, out)
    rng = np.random.default_rng(5)
    a = rng.standard_normal((2, 200, 300)) * 2.0 ** rng.integers(-10, 10, (2, 200, 300))
    b = rng.standard_normal((2, 300, 150))
    a, b = (np.asarray(quantize(x.astype(np.float32), mac.spec(f), "rne")) for x, f in ((a, "a_fmt"), (b, "b_fmt")))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a kernel that fails its probe is a failure here
        got = _matmul3d(a, b, mac)
    cpu = jax.devices("cpu")[0]
    want = _matmul3d(jax.device_put(a, cpu), jax.device_put(b, cpu), mac)
    np.testing.assert_array_equal(np.asarray(got).view(np.uint32), np.asarray(want).view(np.uint32))
