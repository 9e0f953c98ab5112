"""The report as data: sections of paragraphs, tables, figures and code blocks, which
:mod:`asicsim._src.report.html` and :mod:`asicsim._src.report.markdown` render. Plain strings throughout:
the renderers escape them."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

#: Rows of a table shown in the report; the CSV files hold every row.
MAX_ROWS = 200


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class Code:
    text: str
    caption: str = ""
    collapsed: bool = False  # shown folded (HTML <details>) where long


@dataclass(frozen=True)
class Table:
    df: pd.DataFrame
    caption: str = ""
    csv: str = ""  # the CSV file (name without .csv) that holds all of it
    narrow: bool = False  # a table for reading: headers wrap, no scroll box, it fits the page


@dataclass(frozen=True)
class Figure:
    id: str
    svg: str
    caption: str


@dataclass
class Section:
    id: str
    title: str
    blocks: list = field(default_factory=list)

    def add(self, *blocks) -> Section:
        self.blocks.extend(blocks)
        return self

    @property
    def figures(self) -> list[Figure]:
        return [b for b in self.blocks if isinstance(b, Figure)]


#: Integers (counts, seeds, steps) are written in full below this; every other number with
#: :data:`DIGITS` significant digits.
EXACT_BELOW = 10**6
DIGITS = 4


def fmt(v) -> str:
    """A table cell as text: one format for every number, 4 significant digits (``4.915e+13`` next
    to ``1.979e+15``, never a raw 49152000000000), integers below a million in full, '–' for
    missing."""
    if v is None or v is pd.NA:
        return "–"
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "no"
    if isinstance(v, (int, np.integer)) and abs(int(v)) < EXACT_BELOW:
        return str(int(v))
    if isinstance(v, (int, np.integer, float, np.floating)):
        v = float(v)
        if math.isnan(v):
            return "–"
        if math.isinf(v):
            return "∞" if v > 0 else "-∞"
        return f"{v:.{DIGITS}g}"
    return str(v)


def cells(df: pd.DataFrame, limit: int = MAX_ROWS) -> tuple[list[str], list[list[str]]]:
    """Header and formatted rows of a table (at most ``limit`` rows)."""
    head = [str(c) for c in df.columns]
    rows = [[fmt(v) for v in row] for row in df.head(limit).itertuples(index=False, name=None)]
    return head, rows
