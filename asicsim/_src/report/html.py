"""The report as one self-contained HTML page: inline CSS, figures as inline SVG, no script and
no external resource of any kind (it opens offline, from a mail attachment, anywhere).

Every string that comes from a user's files or a sweep's results (names, labels, reasons, the
spec text) is escaped with :func:`html.escape`; the SVG comes from matplotlib, which escapes the
text it draws.
"""

from __future__ import annotations

import re
from html import escape

from asicsim._src.report.document import MAX_ROWS, Code, Figure, Section, Table, Text, cells

CSS = """
:root { --fg: #1b1f24; --muted: #57606a; --line: #d0d7de; --head: #f3f5f7; --accent: #0b5cad; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: var(--fg);
       margin: 0 auto; max-width: 1200px; padding: 1.5rem; }
h1 { font-size: 1.6rem; margin: 0 0 .3rem; }
h2 { font-size: 1.25rem; border-bottom: 1px solid var(--line); padding-bottom: .25rem; margin-top: 2.2rem; }
nav ol { columns: 2; margin: .5rem 0 0; padding-left: 1.4rem; }
a { color: var(--accent); }
p.lead { color: var(--muted); margin: 0; }
.scroll { overflow-x: auto; max-height: 34rem; overflow-y: auto; margin: .6rem 0; border: 1px solid var(--line); }
table { border-collapse: collapse; font-size: 12px; font-variant-numeric: tabular-nums; }
th, td { padding: .2rem .5rem; border-bottom: 1px solid var(--line); text-align: right; white-space: nowrap; }
th { background: var(--head); position: sticky; top: 0; white-space: normal; vertical-align: bottom; }
td.t, th.t { text-align: left; }
td.t { white-space: normal; }
caption { caption-side: top; text-align: left; font-weight: 600; padding: .3rem .5rem; }
figure { margin: 1rem 0; }
figure svg { max-width: 100%; height: auto; }
figcaption { color: var(--muted); font-size: 12px; }
pre { background: var(--head); border: 1px solid var(--line); padding: .6rem; overflow: auto; max-height: 30rem;
      font-size: 12px; white-space: pre-wrap; overflow-wrap: anywhere; }
.note { color: var(--muted); font-size: 12px; }
.fit { margin: .6rem 0; }
.fit th { white-space: normal; overflow-wrap: anywhere; vertical-align: bottom; position: static; }
.fit td.t { white-space: normal; overflow-wrap: anywhere; }
#answer p { font-size: 15px; max-width: 70rem; }
"""


def scope_ids(svg: str, prefix: str) -> str:
    """Prefix every id the SVG defines and every reference to one, so several figures' ids (matplotlib
    names them ``figure_1``, ``axes_1``, ...) cannot collide in one page."""
    svg = re.sub(r'\bid="([^"]+)"', lambda m: f'id="{prefix}-{m.group(1)}"', svg)
    svg = re.sub(r'(xlink:href|href)="#([^"]+)"', lambda m: f'{m.group(1)}="#{prefix}-{m.group(2)}"', svg)
    return re.sub(r"url\(#([^)]+)\)", lambda m: f"url(#{prefix}-{m.group(1)})", svg)


def _numeric(text: str) -> bool:
    """A number, alone or with a unit or ratio after it ("3.14 µs", "41x less", "-0.14 (over)")."""
    return bool(re.fullmatch(r"[-+]?[0-9.,e+\-∞–]+", text)
                or re.fullmatch(r"[-+]?[0-9][0-9.,]*(e[-+]?[0-9]+)?x?( [A-Za-zµ/·()]+)*", text)
                or text.startswith("about "))


def _breakable(text: str) -> str:
    """Escaped text that may wrap after ``_ , ]`` (a column name, a design-space label) as well as
    at spaces: headers and names wrap instead of widening a table past the page."""
    return re.sub(r"([_,\]])", r"\1<wbr>", escape(text))


def table(t: Table) -> str:
    head, rows = cells(t.df)
    kinds = ["" if all(_numeric(r[i]) for r in rows) else "t" for i in range(len(head))]
    out = [f'<div class="{"fit" if t.narrow else "scroll"}"><table>']
    if t.caption:
        out.append(f"<caption>{escape(t.caption)}</caption>")
    out.append("<thead><tr>" + "".join(f'<th class="{k}">{_breakable(h)}</th>' for h, k in zip(head, kinds,
                                                                                                 strict=True))
               + "</tr></thead><tbody>")
    for r in rows:
        out.append("<tr>" + "".join(f'<td class="{k}">{_breakable(c) if k else escape(c)}</td>'
                                    for c, k in zip(r, kinds, strict=True)) + "</tr>")
    out.append("</tbody></table></div>")
    more = []
    if len(t.df) > MAX_ROWS:
        more.append(f"First {MAX_ROWS} of {len(t.df)} rows.")
    if t.csv:
        more.append(f"All of it: {t.csv}.csv in the tables folder beside this report.")
    if more:
        out.append(f'<p class="note">{escape(" ".join(more))}</p>')
    return "\n".join(out)


def block(b) -> str:
    if isinstance(b, Text):
        return f"<p>{escape(b.text)}</p>"
    if isinstance(b, Table):
        return table(b)
    if isinstance(b, Figure):
        return (f'<figure id="{escape(b.id)}">\n{scope_ids(b.svg, b.id)}\n'
                f"<figcaption>{escape(b.caption)}</figcaption>\n</figure>")
    if isinstance(b, Code):
        pre = f"<pre>{escape(b.text)}</pre>"
        if b.collapsed:
            return f"<details><summary>{escape(b.caption)}</summary>\n{pre}\n</details>"
        return (f'<p class="note">{escape(b.caption)}</p>\n' if b.caption else "") + pre
    raise TypeError(f"report block {b!r}: allowed: Text, Table, Figure, Code")


def section(s: Section) -> str:
    body = "\n".join(block(b) for b in s.blocks)
    return f'<section id="{escape(s.id)}">\n<h2>{escape(s.title)}</h2>\n{body}\n</section>'


def page(title: str, lead: str, sections: list[Section]) -> str:
    """The whole page."""
    toc = "".join(f'<li><a href="#{escape(s.id)}">{escape(s.title)}</a></li>' for s in sections)
    body = "\n".join(section(s) for s in sections)
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{escape(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
            f'<header>\n<h1>{escape(title)}</h1>\n<p class="lead">{escape(lead)}</p>\n'
            f"<nav><ol>{toc}</ol></nav>\n</header>\n<main>\n{body}\n</main>\n</body>\n</html>\n")
