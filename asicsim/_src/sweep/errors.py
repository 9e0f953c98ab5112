"""The sweep's own error and warning, in a module of their own so that every sweep module (the spec
reader, the design spaces, the store) can raise them without importing each other."""

from __future__ import annotations


class SweepError(ValueError):
    """A bad sweep spec, or a sweep that cannot run (the message says which field and why)."""


class SweepWarning(UserWarning):
    """A spec that runs, but with something said about it (e.g. a very large design space)."""
