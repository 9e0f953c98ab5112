"""The Pallas kernel of the sequential / folded / chunk orders (asicsim/_src/numerics/mac_kernel.py).

On this CPU the kernel runs through Pallas' interpreter (``interpret=True``): the same kernel
body, the same arithmetic objects, checked bit for bit against the scalar Fraction reference
(``mac_ref.dot_ref``) and against the XLA loops it replaces on a GPU. The GPU's packed FMA
itself cannot run here: the interpreter runs the packed kernel with a software FMA on each half
(which checks the packing and the kernel's structure: the +0 start, chunk partials, the short
last chunk), and every kernel is lowered for CUDA and verified as Triton IR. The proof on the
device (kernel_probe.py) runs against a stand-in device. ``test_gpu_kernel_matches_cpu`` runs on
a GPU only (benchmarks/gpu_emulate.py runs this directory there).
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
from test_mac import assert_same_bits, datasets

from asicsim._src.numerics import fast32, kernel_probe, mac_kernel
from asicsim._src.numerics.mac import MacSpec
from asicsim._src.numerics.mac_ref import dot_ref
from asicsim._src.numerics.matmul import _matmul3d, matmul
from asicsim._src.numerics.quantize import quantize
from asicsim._src.numerics.triton_ir import triton_kernels


def _on_grid(a, b, mac):
    qa = quantize(np.asarray(a, np.float32), mac.spec("a_fmt"), "rne")
    qb = quantize(np.asarray(b, np.float32), mac.spec("b_fmt"), "rne")
    return qa, qb


def _bits(x):
    return np.asarray(x, np.float32).view(np.uint32)


@pytest.mark.parametrize("rounding", ["rne", "rdn"])  # rdn: its own zero signs; rtz, rup: below
@pytest.mark.parametrize("acc", ["fp32", "bf16", "fp16", "e5m2"])
@pytest.mark.parametrize("order", ["sequential", "chunk:5", "chunk:40"])
def test_kernel_matches_scalar_reference(order, acc, rounding):
    """K = 13: chunks of 5 leave a short last chunk, chunk:40 exceeds K (folded:R is the same
    arithmetic: the tile test and the hypothesis test run it)."""
    mac = MacSpec(a_fmt="bf16", acc=acc, order=order, acc_rounding=rounding)
    assert mac_kernel.kernel_orders(mac)
    cases = []
    for name, (a, b) in datasets(acc).items():
        qa, qb = _on_grid(a, b, mac)
        if bool(fast32.safe(qa, qb, mac)):  # the kernel's domain (the rest runs in float64)
            cases.append((name, a, b, qa, qb))
    assert len(cases) >= 3, [c[0] for c in cases]
    got = mac_kernel.accumulate(jnp.stack([c[3] for c in cases]), jnp.stack([c[4] for c in cases]),
                                mac, interpret=True)
    native = mac_kernel.native_format(mac) is not None
    if native:
        structure = mac_kernel.accumulate(jnp.stack([c[3] for c in cases]),
                                          jnp.stack([c[4] for c in cases]), mac, native=True, interpret=True)
    for i, (name, a, b, _, _) in enumerate(cases):
        want = dot_ref(np.float32(a), np.float32(b), mac)
        assert_same_bits(got[i], want, f"{mac} {name}")
        if native:
            assert_same_bits(structure[i], want, f"native structure {mac} {name}")


def test_tiles_padding_and_batch_match_the_xla_loops():
    """Several tiles (32 rows x 128 words), M and N not multiples of a tile, a batch of 2; the
    packed kernel (two columns per word) too."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((2, 40, 21)) * 2.0 ** rng.integers(-8, 4, (2, 40, 21))
    b = rng.standard_normal((2, 21, 300))
    for text in ("a=bf16,acc=bf16,order=chunk:8", "a=e4m3,acc=fp32,order=sequential,acc_rounding=rup",
                 "a=e4m3,acc=bf16,order=folded:5,acc_rounding=rtz"):
        mac = MacSpec.parse(text)
        qa, qb = _on_grid(a, b, mac)
        assert bool(fast32.safe(qa, qb, mac))
        want = _bits(_matmul3d(qa, qb, mac, kernel=False))
        np.testing.assert_array_equal(_bits(mac_kernel.accumulate(qa, qb, mac, interpret=True)), want, text)
        if mac_kernel.native_format(mac):
            got = mac_kernel.accumulate(qa, qb, mac, native=True, interpret=True)
            np.testing.assert_array_equal(_bits(got), want, f"packed {text}")


_FORMATS = ["bf16", "fp16", "e4m3", "e5m2"]


@pytest.mark.slow  # default run's time budget
@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_hypothesis_kernel_matches_xla_loops(data):
    acc = data.draw(st.sampled_from(["fp32", "bf16", "fp16", "e5m2", "tf32"]), "acc")
    a_fmt = data.draw(st.sampled_from(_FORMATS), "a")
    b_fmt = data.draw(st.sampled_from(_FORMATS), "b")
    order = data.draw(st.sampled_from(["sequential", "chunk:3", "folded:7", "chunk:64"]), "order")
    rounding = data.draw(st.sampled_from(["rne", "rtz", "rup", "rdn"]), "rounding")
    fused = data.draw(st.booleans(), "fused")
    mac = MacSpec(a_fmt=a_fmt, b_fmt=b_fmt, acc=acc, order=order, acc_rounding=rounding, fused=fused)
    if not mac_kernel.kernel_orders(mac):
        return
    m, k, n = (data.draw(st.integers(1, 9), d) for d in "mkn")
    seed = data.draw(st.integers(0, 2**32 - 1), "seed")
    rng = np.random.default_rng(seed)
    spread = data.draw(st.integers(0, 12), "spread")
    a = rng.standard_normal((1, m, k)) * 2.0 ** rng.integers(-spread, spread + 1, (1, m, k))
    b = rng.standard_normal((1, k, n)) * 2.0 ** rng.integers(-spread, spread + 1, (1, k, n))
    qa, qb = _on_grid(a, b, mac)
    if not bool(fast32.safe(qa, qb, mac)):
        return
    want = _matmul3d(qa, qb, mac, kernel=False)
    got = mac_kernel.accumulate(qa, qb, mac, interpret=True)
    if mac.spec("out") != mac.spec("acc"):
        got = fast32.round32(got, mac.spec("out"), mac.final_rounding, mac.saturate)
    same = (_bits(got) == _bits(want)) | (np.isnan(got) & np.isnan(want))
    assert same.all(), mac
    if mac_kernel.native_format(mac):
        got = mac_kernel.accumulate(qa, qb, mac, native=True, interpret=True)
        same = (_bits(got) == _bits(want)) | (np.isnan(got) & np.isnan(want))
        assert same.all(), f"native structure {mac}"


@pytest.mark.parametrize(("text", "native"), [
    ("a=bf16,acc=bf16,order=sequential", "bfloat16"),
    ("a=e4m3,b=e5m2,acc=bf16,order=chunk:32", "bfloat16"),  # fp8 values are bf16 values
    ("a=fp16,acc=fp16,order=folded:4", "float16"),
    ("a=e5m2,acc=fp16,order=sequential", "float16"),
    ("a=bf16,acc=fp16,order=sequential", None),  # bf16's range is not fp16's
    ("a=fp16,acc=bf16,order=sequential", None),  # nor fp16's precision bf16's
    ("a=bf16,acc=bf16,order=sequential,acc_rounding=rtz", None),  # the FMA rounds to nearest
    ("a=bf16,acc=bf16,order=sequential,fused=false", None),  # the product rounded first
    ("a=fp16,acc=fp16,order=sequential,saturate=true", None),  # the FMA overflows to inf
    ("a=bf16,acc=fp32,order=sequential", None),  # portable kernel: fp32 adds are native already
])
def test_native_fma_only_where_it_is_the_model(text, native):
    mac = MacSpec.parse(text)
    assert mac_kernel.kernel_orders(mac)
    assert mac_kernel.native_format(mac) == native


def test_orders_the_kernel_leaves_to_xla():
    for text in ("a=bf16,acc=bf16,order=tree", "a=fp16,acc=fp32,order=tensorcore:8",
                 "a=fp32,acc=fp32,order=sequential", "a=int8,acc=int32,order=sequential",
                 "a=bf16,acc=fp32,order=fast"):
        assert not mac_kernel.kernel_orders(MacSpec.parse(text)), text


def _cuda_text(fn, *args) -> str:
    return jax.jit(fn).trace(*args).lower(lowering_platforms=("cuda",)).as_text()


def test_lowers_for_cuda_to_valid_triton():
    """Pallas' Triton backend takes every operation of both arithmetics and the kernels verify
    (an inline-assembly result of unsigned type lowers through Pallas without complaint but fails
    Triton's verifier); the CPU lowering of the same function keeps the XLA loops."""
    a, b = jnp.ones((1, 70, 19), jnp.float32), jnp.ones((1, 19, 300), jnp.float32)
    for text in ("a=bf16,acc=bf16,order=chunk:4", "a=e4m3,acc=fp16,order=sequential,acc_rounding=rdn",
                 "a=bf16,acc=fp32,order=sequential"):
        mac = MacSpec.parse(text)
        (kernel,) = triton_kernels(functools.partial(_matmul3d, mac=mac), a, b)
        assert "scf.for" in kernel, text
        assert not triton_kernels(functools.partial(_matmul3d, mac=mac, kernel=False), a, b)
        cpu = jax.jit(functools.partial(_matmul3d, mac=mac)).trace(a, b).lower(lowering_platforms=("cpu",)).as_text()
        assert "triton" not in cpu
    for text, op in (("a=bf16,acc=bf16,order=sequential", "fma.rn.bf16x2"),
                     ("a=fp16,acc=fp16,order=chunk:8", "fma.rn.f16x2")):
        mac = MacSpec.parse(text)
        (kernel,) = triton_kernels(functools.partial(mac_kernel.accumulate, mac=mac, native=True), a, b)
        assert op in kernel and "tensor<32x128xi32>" in kernel, text


def test_environment_can_turn_the_kernel_off(monkeypatch):
    mac = MacSpec.parse("a=bf16,acc=bf16,order=chunk:8")
    a, b = jnp.ones((16, 8), jnp.float32), jnp.ones((8, 16), jnp.float32)
    assert triton_kernels(functools.partial(matmul, mac=mac), a, b)
    monkeypatch.setenv("ASICSIM_MAC_KERNEL", "0")
    assert not triton_kernels(functools.partial(matmul, mac=mac), a, b)


def _device(monkeypatch, broken=()):
    """The "GPU" of these tests: the probe's kernels (in its own thread) run in Pallas' interpreter
    on this CPU, the paths named in ``broken`` with truncation for rounding (a device kernel that
    is wrong); the caller's thread lowers the real kernel."""
    real, main = mac_kernel.accumulate, threading.current_thread()

    def device(a, b, mac, native=False, interpret=False):
        if threading.current_thread() is main:
            return real(a, b, mac, native=native, interpret=interpret)
        if ("native" if native else "portable") in broken and not interpret:
            mac = dataclasses.replace(mac, acc_rounding="rtz")
            native = False
        return real(a, b, mac, native=native, interpret=True)

    monkeypatch.setattr(mac_kernel, "accumulate", device)
    kernel_probe.proven_path.cache_clear()


@pytest.mark.parametrize(("text", "broken", "path", "warned"), [
    ("a=bf16,acc=bf16,order=chunk:8", (), "native", 0),
    ("a=bf16,acc=bf16,order=chunk:8", ("native",), "portable", 1),
    ("a=e4m3,acc=fp16,order=sequential", ("native", "portable"), "xla", 2),
    ("a=bf16,acc=e5m2,order=sequential", ("portable",), "xla", 1),  # no native FMA to try
])
def test_each_kernel_is_proven_on_the_device_before_use(monkeypatch, text, broken, path, warned):
    mac = MacSpec.parse(text)
    assert kernel_probe.proven_path(mac, "cpu") == "portable"  # no GPU: unproven, nothing run
    _device(monkeypatch, broken)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert kernel_probe.proven_path(mac, "gpu") == path
        assert sum("is not used" in str(w.message) for w in caught) == warned
    finally:
        kernel_probe.proven_path.cache_clear()


def test_probe_runs_while_a_caller_is_traced(monkeypatch):
    """``_matmul3d`` asks for the probe while it is being traced; the probe still runs eagerly
    (its own thread) and the proven kernel reaches the lowering."""
    _device(monkeypatch)
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    mac = MacSpec.parse("a=e5m2,acc=bf16,order=folded:6")  # a MAC no other test lowers
    a, b = jnp.ones((1, 8, 9), jnp.float32), jnp.ones((1, 9, 8), jnp.float32)
    try:
        (kernel,) = triton_kernels(functools.partial(_matmul3d, mac=mac), a, b)
        assert "fma.rn.bf16x2" in kernel
        assert kernel_probe.proven_path.cache_info().currsize == 1
    finally:
        kernel_probe.proven_path.cache_clear()


@pytest.mark.parametrize("text", ["a=bf16,acc=bf16,order=chunk:3", "a=e2m1,acc=e5m2,order=chunk:4"])
def test_probe_inputs_are_safe_and_tell_roundings_apart(text):
    """The probe is in the kernel's domain, no sum overflows, and its sums land on ties, so a
    device kernel rounding any other way (toward zero, half away from zero) would show."""
    mac = MacSpec.parse(text)
    a, b = kernel_probe.probe_operands(mac)
    assert bool(fast32.safe(a, b, mac))
    want = _matmul3d(a, b, mac, kernel=False)
    assert np.all(np.isfinite(want))
    for other in ("rtz", "rna"):
        wrong = dataclasses.replace(mac, acc_rounding=other)
        assert np.sum(_bits(_matmul3d(a, b, wrong, kernel=False)) != _bits(want)) > 50, other
    assert np.any(_bits(want) == 0)  # cancellation to +0


@pytest.mark.skipif(jax.default_backend() != "gpu", reason="needs a GPU (run by benchmarks/gpu_emulate.py)")
@pytest.mark.parametrize("text", ["a=bf16,acc=bf16,order=sequential", "a=bf16,acc=bf16,order=chunk:32",
                                  "a=fp16,acc=fp16,order=sequential", "a=bf16,acc=fp32,order=sequential",
                                  "a=e4m3,acc=bf16,order=sequential,acc_rounding=rtz"])
def test_gpu_kernel_matches_cpu(text):
    mac = MacSpec.parse(text)
    rng = np.random.default_rng(5)
    a, b = _on_grid(rng.standard_normal((2, 200, 300)), rng.standard_normal((2, 300, 150)), mac)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a native FMA that fails its probe is a failure here
        got = _matmul3d(a, b, mac)
    cpu = jax.devices("cpu")[0]
    want = _matmul3d(jax.device_put(a, cpu), jax.device_put(b, cpu), mac)
    np.testing.assert_array_equal(_bits(got), _bits(want))
