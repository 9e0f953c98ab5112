"""Argument types for the ``asicsim`` commands: a number that must lie in a range says so
("--steps: must be an integer >= 1; got '-5'") instead of argparse's "invalid int value", and a
parser that reads a value starting with '-' ("-5,10,10", "-1e3") as a value, so the real problem
with it is what the user sees, not "unrecognized arguments"."""

from __future__ import annotations

import argparse
import math
import re

#: A value that starts with '-' and a digit or '.': a number or a list of numbers, never an option.
NEGATIVE = re.compile(r"^-\.?\d[\w.,+-]*$")


class Parser(argparse.ArgumentParser):
    """argparse's parser, reading ``-5,10,10`` as a value (subparsers are made of this class too)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = NEGATIVE


def number(kind: type = int, minimum: float = 1, *, above: bool = False):
    """An argparse type: ``kind`` (int or float), finite, ``>= minimum`` (``> minimum`` with
    ``above``); anything else is an error saying what is allowed."""
    what = "an integer" if kind is int else "a number"
    allowed = f"{what} {'>' if above else '>='} {minimum:g}"

    def parse(text: str):
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {allowed}; got {text!r}") from None
        if not math.isfinite(v) or not (v > minimum if above else v >= minimum):
            raise argparse.ArgumentTypeError(f"must be {allowed}; got {text!r}")
        return v

    parse.__name__ = kind.__name__
    return parse
