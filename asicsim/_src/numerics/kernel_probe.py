"""Each MAC's GPU kernel proven on the device before a result depends on it.

The kernels of :mod:`.mac_kernel` have been checked here in Pallas' interpreter and as verified
Triton IR, not on a GPU; a GPU stack could still differ (a flushed subnormal, a packing order).
So the first time a MAC is traced for a GPU, :func:`proven_path` runs its kernels there on
:func:`probe_operands` and keeps the first whose bits equal the CPU's: the packed FMA, then the
portable kernel, then the XLA loops, with a warning for each kernel it skips.
"""

from __future__ import annotations

import concurrent.futures
import functools
import warnings

import jax
import numpy as np

from . import mac_kernel
from .mac import MacSpec
from .quantize import quantize


@functools.cache
def proven_path(mac: MacSpec, platform: str) -> str:
    """How the GPU computes ``mac``: ``"native"`` (packed FMA), ``"portable"`` or ``"xla"`` (the
    loops of matmul.py). On a GPU each kernel is first run on :func:`probe_operands` and kept only
    if it gives the CPU's bits (the portable kernel in Pallas' interpreter, the arithmetic the
    tests check against the Fraction reference); a kernel that differs is skipped with a
    warning. Run once per (MAC, platform). Elsewhere (lowering for CUDA from a CPU host) the
    portable kernel, unproven."""
    if platform != "gpu":
        return "portable"
    paths = (["native"] if mac_kernel.native_format(mac) else []) + ["portable"]

    def run():
        a, b = probe_operands(mac)
        with jax.default_device(jax.devices("cpu")[0]):
            want = np.asarray(mac_kernel.accumulate(a, b, mac, interpret=True)).view(np.uint32)
        device = jax.devices()[0]  # the default backend's, which ``platform`` names
        for path in paths:
            got = mac_kernel.accumulate(jax.device_put(a, device), jax.device_put(b, device), mac,
                                        native=path == "native")
            if np.array_equal(np.asarray(got).view(np.uint32), want):
                return path
            warnings.warn(f"the GPU's {path} MAC kernel gives other bits than the CPU for {mac} on "
                          "the probe inputs; it is not used", RuntimeWarning, stacklevel=2)
        return "xla"

    return run_eagerly(run)


def run_eagerly(fn):
    """``fn()`` in a fresh thread: a probe asked for while a caller is being traced runs eagerly
    there (JAX's trace state is per thread)."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(fn).result()


def probe_operands(mac: MacSpec, m: int = 48, k: int = 67, n: int = 80):
    """(1, m, k) x (1, k, n) float32 values on ``mac``'s operand grids, inside ``fast32.safe``:
    sums that cancel to zero, signed-zero products, steps of half an accumulator ulp (ties),
    values across 2**-3 .. 2**3; k leaves a short last chunk for most chunk sizes."""
    rng = np.random.default_rng(20)
    fa, fb, acc = mac.spec("a_fmt"), mac.spec("b_fmt"), mac.spec("acc")
    a = np.clip(rng.standard_normal((m, k)) * 2.0 ** rng.integers(-3, 4, (m, k)), -fa.max, fa.max)
    b = np.clip(rng.standard_normal((k, n)) * 2.0 ** rng.integers(-3, 4, (k, n)), -fb.max, fb.max)
    bound = k * np.abs(a).max() * np.abs(b).max()
    if bound > acc.max / 4:  # no sum may overflow the accumulator (inf - inf: NaN bits vary)
        a, b = a * np.sqrt(acc.max / 4 / bound), b * np.sqrt(acc.max / 4 / bound)
    a[:, 1] = a[:, 0]
    b[1] = -b[0]  # cancellation to exact zeros
    a[0] = -0.0  # a row of signed-zero products
    a[1, :] = 1.0
    b[:, 1] = 2.0 ** -(acc.man_bits + 1)  # acc + half an ulp: ties at every step
    qa = np.asarray(quantize(a.astype(np.float32), fa, "rne"))
    qb = np.asarray(quantize(b.astype(np.float32), fb, "rne"))
    return qa[None], qb[None]
