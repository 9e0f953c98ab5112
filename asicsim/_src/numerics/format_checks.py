"""What every kind of number format shares: its error (:class:`FormatError`), the check of a
field's type before any arithmetic uses it, the block-size limit, and the bits an element takes in
memory."""

from __future__ import annotations

import math
import numbers

#: The most elements one scale may share (``block_size``, group sizes): as many as float32 counts
#: exactly. One scale per tensor is its own setting, not a huge block.
MAX_BLOCK_SIZE = 1 << 24
BLOCK_SIZES = f"an integer in 1..{MAX_BLOCK_SIZE} (2**24)"


class FormatError(ValueError):
    """A format name, file or parameter that cannot be turned into a valid spec."""


_ALLOWED_TYPE = {int: "an integer", bool: "true or false", str: "a string"}


def check_field_types(what: str, values: dict[str, object], types: dict[str, type]) -> None:
    """Refuse a field of the wrong type before any arithmetic uses it: a format file's
    ``saturate = "no"`` would otherwise read as true, ``bits = 8.0`` as a float width. ``bool`` is
    not an integer here (TOML's ``true`` is not a bit count)."""
    for key, want in types.items():
        v = values[key]
        ok = isinstance(v, want) and (want is bool or not isinstance(v, bool))
        if want is int and not ok:
            ok = isinstance(v, numbers.Integral) and not isinstance(v, bool)  # numpy integers
        if not ok:
            raise FormatError(
                f"{what}: field {key!r} = {v!r} ({type(v).__name__}); allowed: {_ALLOWED_TYPE[want]}"
            )


def word_storage_bits(bits: int) -> int:
    """Bits an element of ``bits`` significant bits occupies in byte-addressed memory.

    Elements of up to 8 bits are packed (the OCP MX v1.0 formats count fp4/fp6 elements at their
    width, and int4 weights ship two per byte), so they keep their width; wider ones take the next
    power-of-two number of bytes, the widths loads and stores move (9-16 bits -> 16, 17-32 -> 32).
    NVIDIA's rule for TF32 is the case in point: "The storage size of this type is 32 bits in total
    and it requires a 4-byte alignment" (CUDA Math API, ``__nv_tf32``); its 19 value bits are an
    fp32 word whose low 13 mantissa bits the tensor cores ignore.
    """
    if bits <= 8:
        return bits
    return 8 * (1 << (math.ceil(bits / 8) - 1).bit_length())
