"""The tensor-core order (``tensorcore:k``, every preset of :mod:`.tc_presets`) as one Pallas
(Triton) kernel for NVIDIA GPUs.

On the XLA path (:func:`.tensorcore.tensorcore_accumulate`) every block of ``k`` products reads
and writes the whole (M, N) float64 accumulator in memory. Here each program owns a tile of the
accumulator and walks K itself, block by block: per block it loads the ``k`` rows of ``a.T`` and
of ``b`` (and their alignment exponents) and runs :func:`.tensorcore.block_fma`, the very function
the XLA path runs (exact float64 products, alignment exponents from the exponent fields, the
truncation as scaling by a power of two built from bits, the rounding on the bits), so the kernel
cannot drift from it. Nothing divides or takes a square root (XLA:GPU rounds neither correctly),
and the float64 values stay far above the float64 subnormals.

The kernel has been checked in Pallas' interpreter and as verified Triton IR, not on a GPU
(tests/numerics/test_tc_kernel.py). So the first time a MAC is traced for a GPU,
:func:`proven` runs it there on :func:`probe_operands` (zeros, signed zeros, subnormal, inf and
NaN operands, an initial accumulator, a short last block) against the CPU's XLA path; a kernel
that differs is not used (a warning says so) and the XLA path runs on the GPU instead.
``ASICSIM_TC_KERNEL=0`` (or ``ASICSIM_MAC_KERNEL=0``, which turns off every kernel) turns it off.
"""

from __future__ import annotations

import functools
import os
import warnings

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plt

from ..._jax_compat import enable_x64
from .kernel_probe import run_eagerly
from .mac import MacSpec
from .rounding import f32_to_f64
from .tensorcore import block_fma, fast_rounding, prepare

# A tile is TILE_ROWS x TILE_COLS float64 accumulators. Not tuned on a GPU (none was lent):
# benchmarks/bench_tensorcore.py --kernel times the choices in TILES there.
TILE_ROWS, TILE_COLS, NUM_WARPS = 16, 64, 4
TILES = ((16, 64, 4), (32, 32, 4), (16, 32, 4), (16, 16, 4), (32, 64, 8))
MIN_TILE = 16  # small products are padded up to it


def enabled() -> bool:
    """False when the environment sets ``ASICSIM_TC_KERNEL=0``: the XLA path then runs on a GPU
    too (the same bits, slower). ``ASICSIM_MAC_KERNEL=0`` turns off every kernel (matmul.py)."""
    return os.environ.get("ASICSIM_TC_KERNEL", "1") != "0"


def applies(mac: MacSpec) -> bool:
    """Whether the kernel computes ``mac``: a ``tensorcore:k`` MAC whose block result is rounded
    by :func:`.tensorcore.round_ieee` onto an IEEE-style accumulator with inf (every preset but
    B200's fp8, whose late ``c`` takes the general rounding of ``exact64``: its uint64 constants
    of 2**63 and above do not lower to Triton). The rest runs the XLA path."""
    if mac.order_kind != "tensorcore" or mac.tc_late_c is not None:
        return False
    acc = mac.spec("acc")
    saturate = acc.saturate if mac.saturate is None else mac.saturate
    return fast_rounding(acc, mac.acc_rounding, mac.saturate) and not saturate


def _kernel(at_ref, bt_ref, ea_ref, eb_ref, c_ref, o_ref, *, mac: MacSpec, k_total: int):
    """One output tile: ``at_ref``/``ea_ref`` (K, rows), ``bt_ref``/``eb_ref`` (K, cols),
    ``c_ref`` the tile's initial accumulator."""
    k = mac.order_size
    full, tail = divmod(k_total, k)

    def block(acc, begin, count: int):  # the block's rows, loaded one by one
        rows = [[ref[begin + j, :] for j in range(count)] for ref in (at_ref, bt_ref, ea_ref, eb_ref)]
        return block_fma(acc, *rows, mac)

    acc = c_ref[...]
    if full:
        acc = jax.lax.fori_loop(np.int32(0), np.int32(full), lambda i, acc: block(acc, i * k, k), acc)
    if tail:  # a last, shorter block
        acc = block(acc, np.int32(full * k), tail)
    o_ref[...] = acc


def accumulate(a: jax.Array, b: jax.Array, mac: MacSpec, c: jax.Array | None = None, *,
               interpret: bool = False, tile: tuple[int, int, int] | None = None) -> jax.Array:
    """(B, M, K) x (B, K, N) float32 operands on their grids -> (B, M, N) float64 accumulator
    values, from ``c`` ((B, M, N) float32 on the accumulator's input format; +0 if None): what
    :func:`.tensorcore.tensorcore_accumulate` gives per batch element. K >= 1. ``tile`` is
    (rows, cols, warps), default ``(TILE_ROWS, TILE_COLS, NUM_WARPS)``."""
    rows, cols, warps = tile or (TILE_ROWS, TILE_COLS, NUM_WARPS)
    batch, m, k = a.shape
    n = b.shape[2]
    bm, bn = min(rows, max(MIN_TILE, _pow2(m))), min(cols, max(MIN_TILE, _pow2(n)))
    mp, np_ = -(-m // bm) * bm, -(-n // bn) * bn
    with enable_x64(True):
        at = f32_to_f64(jnp.pad(jnp.swapaxes(a, 1, 2), ((0, 0), (0, 0), (0, mp - m))))
        bt = f32_to_f64(jnp.pad(b, ((0, 0), (0, 0), (0, np_ - n))))
        c64 = None if c is None else f32_to_f64(jnp.pad(c, ((0, 0), (0, mp - m), (0, np_ - n))))
        at, bt, ea, eb, c64 = prepare(at, bt, mac, c64)
        out = pl.pallas_call(
            functools.partial(_kernel, mac=mac, k_total=k),
            out_shape=jax.ShapeDtypeStruct((batch, mp, np_), jnp.float64),
            grid=(batch, mp // bm, np_ // bn),
            in_specs=[pl.BlockSpec((None, k, bm), lambda z, i, j: (z, 0, i)),
                      pl.BlockSpec((None, k, bn), lambda z, i, j: (z, 0, j)),
                      pl.BlockSpec((None, k, bm), lambda z, i, j: (z, 0, i)),
                      pl.BlockSpec((None, k, bn), lambda z, i, j: (z, 0, j)),
                      pl.BlockSpec((None, bm, bn), lambda z, i, j: (z, i, j))],
            out_specs=pl.BlockSpec((None, bm, bn), lambda z, i, j: (z, i, j)),
            compiler_params=plt.CompilerParams(num_warps=warps, num_stages=1),
            interpret=interpret,
        )(at, bt, ea, eb, c64)
        return out[:, :m, :n]


def _pow2(x: int) -> int:
    return 1 << max(0, (x - 1).bit_length())


# --- the proof on the device -------------------------------------------------------------------


def same_values(x, y) -> bool:
    """Equal float64 bits, or both NaN (the sign of a NaN that ``inf - inf`` makes is the host's)."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    return bool(np.all((x.view(np.uint64) == y.view(np.uint64)) | (np.isnan(x) & np.isnan(y))))


def reference(a, b, mac: MacSpec, c=None):
    """What the kernel must give: the XLA path of tensorcore.py per batch element, float64."""
    from .tensorcore import tensorcore_accumulate

    with enable_x64(True):
        at, bt = f32_to_f64(jnp.swapaxes(a, 1, 2)), f32_to_f64(b)
        if c is None:
            return jax.vmap(lambda x, y: tensorcore_accumulate(x, y, mac))(at, bt)
        return jax.vmap(lambda x, y, z: tensorcore_accumulate(x, y, mac, z))(at, bt, f32_to_f64(c))


@functools.cache
def proven(mac: MacSpec, platform: str) -> bool:
    """Whether the kernel runs ``mac`` on ``platform``: on a GPU it is first run on
    :func:`probe_operands` and kept only if it gives the CPU's bits (a warning where not);
    elsewhere (lowering for CUDA from a CPU host) True, unproven. Once per (MAC, platform)."""
    if platform != "gpu":
        return True

    def run():
        a, b, c = probe_operands(mac)
        with jax.default_device(jax.devices("cpu")[0]):
            want = np.asarray(reference(a, b, mac, c))
        device = jax.devices()[0]
        da, db, dc = (jax.device_put(x, device) for x in (a, b, c))
        got = accumulate(da, db, mac, dc)
        if same_values(got, want):
            return True
        warnings.warn(f"the GPU's tensor-core kernel gives other bits than the CPU for {mac} on the "
                      "probe inputs; it is not used (the XLA path runs instead)", RuntimeWarning, stacklevel=2)
        return False

    return run_eagerly(run)


def probe_operands(mac: MacSpec, m: int = 40, k: int | None = None, n: int = 72):
    """(1, m, k) x (1, k, n) float32 operands on ``mac``'s grids and a (1, m, n) initial
    accumulator: values over many binades (alignment shifts that drop bits), cancellation,
    signed zeros and exact-zero results, subnormal operands and c, inf and NaN in a few rows and columns; K = 5 blocks
    and a short last one."""
    from .quantize import quantize

    size = mac.order_size
    k = k or 5 * size + max(1, size // 2 - 1)
    rng = np.random.default_rng(33)
    fa, fb, out = mac.spec("a_fmt"), mac.spec("b_fmt"), mac.spec("out")

    def values(shape, fmt):
        x = rng.standard_normal(shape) * 2.0 ** rng.integers(-12, 13, shape)
        x[rng.random(shape) < 0.1] = 0.0
        x[rng.random(shape) < 0.05] = -0.0
        tiny = rng.random(shape) < 0.05  # subnormals of the format (where it has them)
        x[tiny] = rng.integers(-3, 4, int(tiny.sum())) * 2.0 ** (fmt.emin - fmt.man_bits)
        return np.array(quantize(np.clip(x, -fmt.max, fmt.max).astype(np.float32), fmt, "rne"))

    a, b = values((m, k), fa), values((k, n), fb)
    a[:, 1] = a[:, 0]
    b[1] = -b[0]  # cancellation
    a[2, 3], a[3, 4], b[5, 6] = np.inf, -np.inf, np.nan
    c = values((m, n), out)
    c[4, :] = 2.0 ** out.emin * 0.75 if out.subnormals else 0.0
    c[5, 7] = -np.inf
    a[6], c[6, :8] = -0.0, -0.0  # exact zeros: -0 where every addend is -0, else +0
    return a[None], b[None], np.asarray(c, np.float32)[None]
