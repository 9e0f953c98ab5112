"""What every report figure shares: the style, SVG output, labels that are never cut, legends
outside the axes, tick formatting that does not overlap, and a figure that is only a sentence.

The SVG is made deterministic (fixed ids, no date) and self-contained: no XML prolog, no DOCTYPE,
no metadata, no namespace URLs (the HTML parser knows SVG), text kept as text (matplotlib escapes
it).
"""

from __future__ import annotations

import io
import re
import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import EngFormatter, LogLocator, NullFormatter

STYLE = {"svg.hashsalt": "asicsim-report", "svg.fonttype": "none",
         "font.size": 9, "axes.grid": True, "grid.alpha": 0.3, "figure.dpi": 100,
         "font.family": "sans-serif"}
COLORS = plt.get_cmap("tab10").colors
#: One marker per design (cycled past ten; a large design space draws its top designs only).
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "h", "<")


def to_svg(fig) -> str:
    """The figure as inline SVG text (and the figure closed)."""
    buf = io.StringIO()
    with plt.rc_context(STYLE):
        fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    text = buf.getvalue()
    text = text[text.index("<svg"):]
    text = re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.S)
    text = re.sub(r'\s+xmlns(:\w+)?="[^"]*"', "", text)
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    return text.strip()


def fig(w: float, h: float, *args, **kw):
    with plt.rc_context(STYLE):
        return plt.subplots(*args, figsize=(w, h), layout="constrained", **kw)


def esc(label) -> str:
    """A name from a user file or a result as matplotlib text: its ``$`` escaped (matplotlib would
    read text between two as math)."""
    return str(label).replace("$", r"\$")


def wrap(label, width: int = 40) -> str:
    """A label in full, wrapped onto lines of about ``width`` characters (long design names break
    at their commas and brackets), never cut."""
    label = str(label)
    if len(label) <= width:
        return esc(label)
    spaced = re.sub(r"([,\[\]])", r"\1 ", label)
    lines = textwrap.wrap(spaced, width, break_long_words=True, break_on_hyphens=False)
    return esc("\n".join(line.replace(", ", ",").replace("[ ", "[").replace("] ", "]") for line in lines))


def legend_outside(ax, title: str | None = None, **kw):
    """A legend right of the axes, every entry in full (wrapped, not cut)."""
    return ax.legend(fontsize=7, title=title, title_fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                     borderaxespad=0.0, **kw)


class FewLogTicks(LogLocator):
    """Decades as the major ticks (at most about five labelled), and 3x between them where the
    axis spans few decades (else one label would be left)."""

    def __init__(self):
        super().__init__(base=10, numticks=5)

    def tick_values(self, vmin, vmax):
        lo, hi = sorted((abs(vmin) or 1e-300, abs(vmax) or 1e-300))
        self.set_params(subs=(1.0, 3.0) if np.log10(hi / lo) <= 2.5 else (1.0,))
        return super().tick_values(vmin, vmax)


def log_axis(axis, unit: str = "") -> None:
    """A log axis with a labelled tick only every few decades and engineering labels (100k,
    300k, 1M): long spans do not crowd their labels into each other."""
    axis.set_major_locator(FewLogTicks())
    axis.set_major_formatter(EngFormatter(unit=unit, places=0, sep=""))
    axis.set_minor_formatter(NullFormatter())


def sentence(text: str) -> str:
    """A figure that is a sentence only (an SVG, so a caller that inlines figures keeps working):
    what a panel without data says instead of drawing empty axes."""
    f = plt.figure(figsize=(7, 0.4))
    f.text(0.0, 0.5, esc(text), fontsize=9, va="center", ha="left", wrap=True)
    return to_svg(f)
