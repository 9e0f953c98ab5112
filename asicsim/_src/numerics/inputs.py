"""What the public numerics accept, checked once at their boundary.

Values (``quantize``, ``encode``, ``block_scales``, group quantization; ``dot``/``matmul`` through
``quantize``) are real numbers: a JAX array, a numpy array or scalar, a list of numbers or a
Python number. A numpy array in big-endian (non-native) byte order is converted to native order
first: the kernels read bit patterns, and read as native those of ``np.array([1.0], '>f4')``
gave 9.2e-41. Strings, ``None``, booleans, complex numbers and other objects are a TypeError
(``np.asarray('1.5', np.float64)`` would have parsed the string, ``None`` became NaN).

Codes (``decode``) are integers in ``0 .. 2**bits - 1``, in native byte order; anything else is an
error, not wrapped modulo ``2**bits``. Flags such as ``saturate`` are ``True``, ``False`` or ``None``:
the string ``'no'`` is truthy and would have saturated.
"""

from __future__ import annotations

import numpy as np

# JAX is imported where it is used: MacSpec checks its flags here, and ``asicsim --help`` builds
# MacSpecs without JAX (tests/test_light_imports.py).


def _describe(x) -> str:
    if isinstance(x, np.ndarray | np.generic):
        return f"an array of dtype {x.dtype}"
    text = repr(x)
    return f"{type(x).__name__} {text if len(text) <= 40 else text[:37] + '...'}"


def _native(arr):
    """``arr`` in native byte order (a copy only where it was not)."""
    return arr if arr.dtype.isnative else arr.astype(arr.dtype.newbyteorder("="))


def real_input(x, op: str):
    """``x`` as given, or converted to native byte order; TypeError unless it holds real numbers.

    Integer arrays pass here (the caller says whether it takes them); lists keep being lists, so
    the caller converts them as before (quantize rounds a list of Python floats from float64)."""
    import jax

    from ..._jax_compat import is_floating

    if isinstance(x, jax.Array):  # tracers included: always native; the dtype is checked later
        return x
    if isinstance(x, bool | np.bool_):
        raise TypeError(f"{op}: got the boolean {x!r}; pass real numbers (floats)")
    if isinstance(x, int | float):
        return x
    arr = x if isinstance(x, np.ndarray | np.generic) else np.asarray(x)
    if arr.dtype.kind not in "iuf" and not is_floating(arr.dtype):
        raise TypeError(
            f"{op}: expects real numbers (a float array, a list of numbers or a Python number), "
            f"got {_describe(x)}"
        )
    if isinstance(x, np.ndarray | np.generic):
        return _native(x)
    return x


def code_input(codes, bits: int, name: str, what: str = "codes"):
    """Integer ``codes`` of a ``bits``-bit format as a JAX array, each in ``0 .. 2**bits - 1``.

    Out-of-range codes are a ValueError wherever the values can be inspected: host arrays and
    lists always (checked in numpy, before JAX could cut a 64-bit code to 32 bits), JAX arrays
    outside ``jit`` (under it the low ``bits`` bits are used)."""
    import jax
    import jax.numpy as jnp

    hi = (1 << bits) - 1
    if isinstance(codes, jax.Array):
        if not jnp.issubdtype(codes.dtype, jnp.integer):
            raise TypeError(f"decode expects integer {what}, got dtype {codes.dtype}")
        bad = codes < 0
        if jnp.iinfo(codes.dtype).max > hi:
            bad = bad | (codes > hi)
        try:
            count = int(jnp.sum(bad))
        except jax.errors.ConcretizationTypeError:  # under jit: no check possible
            return codes
        if count:
            _out_of_range(np.asarray(codes)[np.asarray(bad)], hi, name, what)
        return codes
    arr = np.asarray(codes)
    if arr.dtype.kind not in "iu":
        got = f"dtype {arr.dtype}" if isinstance(codes, np.ndarray | np.generic) else _describe(codes)
        raise TypeError(f"decode expects integer {what}, got {got}")
    bad = (arr < 0) | (arr > hi)
    if bad.any():
        _out_of_range(arr[bad], hi, name, what)
    return jnp.asarray(arr.astype(np.uint32))  # native, and every code fits


def _out_of_range(bad_codes: np.ndarray, hi: int, name: str, what: str):
    raise ValueError(
        f"decode {name!r}: {bad_codes.size} of the {what} lie outside 0..{hi} (e.g. "
        f"{bad_codes.flat[0]}); {what} are the format's {hi.bit_length()}-bit patterns as "
        "unsigned integers, as encode returns them"
    )


def check_flag(value, name: str, allowed: str = "True, False or None") -> None:
    """TypeError unless ``value`` is a boolean (or None): ``saturate='no'`` would be truthy."""
    if value is None or isinstance(value, bool | np.bool_):
        return
    raise TypeError(f"{name}={value!r} ({type(value).__name__}); allowed: {allowed}")
