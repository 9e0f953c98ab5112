"""How a frozen settings dataclass stores what it converts at construction: every options object
(formats, MAC specs, designs, workloads, report options, calibrated scales) checks its fields in
``__post_init__`` and keeps the converted value (a list as a tuple, a format name as its resolved
spec, a name as its enum member) in one place, here, as equinox's ``field(converter=...)`` does.

A field declares its converter (:func:`converted`); ``__post_init__`` calls :func:`convert_fields`
where its checks allow (after them, when a converter would fail on a value the checks refuse with
a better message). A value derived from other fields (a default that follows another field) is
stored with :func:`settle`.

>>> from dataclasses import dataclass
>>> @dataclass(frozen=True)
... class Holds:
...     names: tuple = converted(tuple, default=())
...     def __post_init__(self):
...         convert_fields(self)
>>> Holds(["a", "b"]).names
('a', 'b')
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, Field, field, fields
from typing import Any

_CONVERT = "asicsim.convert"


def converted(convert: Callable[[Any], Any], *, default: Any = MISSING, default_factory: Any = MISSING,
              **kw: Any) -> Any:
    """A dataclass field whose value :func:`convert_fields` passes through ``convert``."""
    return field(default=default, default_factory=default_factory,
                 metadata={**kw.pop("metadata", {}), _CONVERT: convert}, **kw)


def converter(f: Field) -> Callable[[Any], Any] | None:
    """The converter a field declares (None: none)."""
    return f.metadata.get(_CONVERT)


def convert_fields(obj: Any) -> None:
    """Store each declared converter's result for ``obj``'s fields, in declaration order."""
    settle(obj, **{f.name: conv(getattr(obj, f.name)) for f in fields(obj) if (conv := converter(f))})


def settle(obj: Any, **values: Any) -> None:
    """Store normalised or derived ``values`` on the frozen dataclass ``obj`` during its
    ``__post_init__`` (the one place a frozen settings object writes its own fields)."""
    for name, value in values.items():
        object.__setattr__(obj, name, value)


def list_as_tuple(value: Any) -> Any:
    """A list (as TOML and JSON give) as the tuple a frozen, hashable object keeps; anything else
    unchanged, for the object's checks to judge."""
    return tuple(value) if isinstance(value, list) else value


def check_scalar_fields(obj: Any, bad: Callable[[str, str], Any]) -> None:
    """Call ``bad(name, allowed)`` (which raises) for a field annotated ``int`` that holds no int
    (a bool is not one) or ``float`` that holds no number: a settings file's ``"3"`` or ``true``
    is refused by name rather than failing later inside a computation."""
    for f in fields(obj):
        v = getattr(obj, f.name)
        if f.type == "int" and (not isinstance(v, int) or isinstance(v, bool)):
            bad(f.name, "must be an int")
        if f.type == "float" and (not isinstance(v, (int, float)) or isinstance(v, bool)):
            bad(f.name, "must be a number")
