"""The report as Markdown: the same sections and tables as the HTML page (pipe tables), the
figures named with a pointer to the HTML report that holds them."""

from __future__ import annotations

import re

from asicsim._src.report.document import MAX_ROWS, Code, Figure, Section, Table, Text, cells

#: What Markdown (CommonMark and GitHub's) would read as markup in a string from a user file or a
#: result: HTML (``< > &``), links and images (``[ ] !``; ``://`` and ``www.`` that GitHub turns into
#: links), code, emphasis and strike-through (backtick, ``*``, ``_`` at a word's edge, ``~``), table
#: cells (``|``) and the backslash itself.
_MARKUP = re.compile(r"[<>&\\`*\[\]!~|]|_(?![^\W_])|(?<![^\W_])_|:(?=//)|(?i:(?<=\bwww))\.")
_ENTITY = {"<": "&lt;", ">": "&gt;", "&": "&amp;"}


def _text(text: str) -> str:
    """Text shown as written, on one line (a line break would end a heading, a caption or a table
    row, or start a block of its own), never rendered as HTML, a link, an image or emphasis by a
    Markdown viewer (an email address may still be linked by GitHub, which links one whatever is
    escaped)."""
    text = " ".join(text.splitlines())
    return _MARKUP.sub(lambda m: _ENTITY.get(m.group(), "\\" + m.group()), text)


def table(t: Table) -> str:
    head, rows = cells(t.df)
    out = [f"**{_text(t.caption)}**\n"] if t.caption else []
    out.append("| " + " | ".join(_text(h) for h in head) + " |")
    out.append("|" + "|".join("---" for _ in head) + "|")
    out.extend("| " + " | ".join(_text(c) for c in r) + " |" for r in rows)
    if len(t.df) > MAX_ROWS:
        out.append(f"\n_First {MAX_ROWS} of {len(t.df)} rows; all of them in {t.csv or 'the CSV'}.csv._")
    return "\n".join(out)


def _fence(text: str) -> str:
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return f"{ticks}\n{text.rstrip()}\n{ticks}"


def block(b) -> str:
    if isinstance(b, Text):
        return _text(b.text)
    if isinstance(b, Table):
        return table(b)
    if isinstance(b, Figure):
        return f"_Figure: {_text(b.caption)} (in the HTML report, #{b.id})._"
    if isinstance(b, Code):
        return (f"{_text(b.caption)}:\n\n" if b.caption else "") + _fence(b.text)
    raise TypeError(f"report block {b!r}: allowed: Text, Table, Figure, Code")


def document(title: str, lead: str, sections: list[Section]) -> str:
    parts = [f"# {_text(title)}", _text(lead)]
    for s in sections:
        parts.append(f"## {_text(s.title)}")
        parts.extend(block(b) for b in s.blocks)
    return "\n\n".join(parts) + "\n"
