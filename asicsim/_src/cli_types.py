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


class DefaultsFormatter(argparse.HelpFormatter):
    """Help that states every option's default: ``(default: X)`` is appended where the help text
    does not already say it; an option without a value (None) must say in words what happens
    when it is left out (tests/test_cli_habits.py holds this)."""

    def _get_help_string(self, action):
        text = action.help or ""
        if (action.default is not None and action.default is not False and action.default != argparse.SUPPRESS
                and "default" not in text
                and (action.option_strings or action.nargs in ("?", "*"))):
            text += " (default: %(default)s)"
        return text


class Parser(argparse.ArgumentParser):
    """argparse's parser, reading ``-5,10,10`` as a value, with every option's default in its help
    (subparsers are made of this class too)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", DefaultsFormatter)
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = NEGATIVE


def number(kind: type = int, minimum: float = 1, *, above: bool = False, maximum: float | None = None):
    """An argparse type: ``kind`` (int or float), finite, ``>= minimum`` (``> minimum`` with
    ``above``) and ``<= maximum`` when given; anything else is an error saying what is allowed
    (``--steps 99999999999999999999999`` is a typo, not a run that never ends)."""
    what = "an integer" if kind is int else "a number"

    def shown(x: float) -> str:
        return str(int(x)) if kind is int else f"{x:g}"

    allowed = f"{what} {'>' if above else '>='} {shown(minimum)}"
    if maximum is not None:
        allowed = f"{what} in {'(' if above else '['}{shown(minimum)}, {shown(maximum)}]"

    def parse(text: str):
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {allowed}; got {text!r}") from None
        if (not math.isfinite(v) or not (v > minimum if above else v >= minimum)
                or (maximum is not None and v > maximum)):
            raise argparse.ArgumentTypeError(f"must be {allowed}; got {text!r}")
        return v

    parse.__name__ = kind.__name__
    return parse
