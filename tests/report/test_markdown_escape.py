"""A string from a user file (a design, recipe or spec name, a failure's reason) is shown as
written in both renderings of the report: never HTML, a link, an image, code or emphasis. The
Markdown is checked with GitHub's own renderer (cmarkgfm, raw HTML let through so that any that
slips is seen), the HTML page by its tags."""

from __future__ import annotations

import html
import re

import cmarkgfm  # a test dependency (pyproject's [test] extra)
import pandas as pd
import pytest
from cmarkgfm.cmark import Options

from asicsim._src.report import html as report_html
from asicsim._src.report import markdown
from asicsim._src.report.document import Code, Figure, Section, Table, Text

NAMES = [
    "[x](javascript:alert(1)) ![t](http://example.com/t.png)",
    "![t][r] [r]\n\n[r]: http://example.com/r",
    "see http://example.com/a and https://example.com/b, ftp://example.com and www.example.com",
    "<b>x</b> <http://example.com> &amp; &#91;x&#93;(http://example.com)",
    "`code` *em* _em_ __strong__ ~~del~~ ~del~",
    r"back\slash \[x\](http://example.com) \\[y](http://example.com)",
    "a|b pipe",
    "mnist1d_cnn fp8_e4m3 _lead trail_ x__y",
]

#: Tags our own Markdown makes: the bold table caption, the table, code fences, paragraphs, the
#: figure line in italics.
OURS = {"p", "strong", "table", "thead", "tbody", "tr", "th", "td", "pre", "code", "h1", "h2", "em"}


def _doc(name: str) -> list[Section]:
    df = pd.DataFrame({name: [name, 1.5]})
    return [Section("s", f"title {name}").add(
        Text(f"text {name}"), Table(df, caption=f"caption {name}"),
        Code("x = 1", caption=f"code {name}"), Figure("f", "<svg></svg>", f"figure {name}"))]


def _gfm(text: str) -> str:
    return cmarkgfm.github_flavored_markdown_to_html(text, options=Options.CMARK_OPT_UNSAFE)


@pytest.mark.parametrize("name", NAMES)
def test_markdown_shows_user_strings_as_text(name):
    md = markdown.document(f"report {name}", f"lead {name}", _doc(name))
    page = _gfm(md)
    tags = set(re.findall(r"<([a-z0-9]+)", page))
    assert tags <= OURS, tags - OURS  # no a, img, del, b, ...
    # the table caption, the fence, the figure's line: ours; none from the string
    assert (page.count("<strong>"), page.count("<code>"), page.count("<em>")) == (1, 1, 1)
    text = html.unescape(re.sub(r"<[^>]+>", "", page))
    one_line = " ".join(name.splitlines())  # Markdown keeps a string on one line
    for where in ("report", "lead", "text", "caption", "code", "figure"):
        assert f"{where} {one_line}" in text, where
    assert text.count(one_line) >= 2  # the header and the cell


@pytest.mark.parametrize("name", NAMES)
def test_html_shows_user_strings_as_text(name):
    page = report_html.page(f"report {name}", f"lead {name}", _doc(name))
    assert not re.search(r"<(img|b|script|code|em|del)\b", page)
    assert re.findall(r"<a\b[^>]*>", page) == ['<a href="#s">']  # the table of contents' own link
    text = html.unescape(re.sub(r"<[^>]+>", "", page))
    for where in ("report", "lead", "text", "caption", "figure"):
        assert f"{where} {name}" in text, where


def test_plain_names_stay_readable_in_the_markdown_source():
    # the escaping touches markup only: a format or workload name reads as written in report.md
    assert markdown.block(Text("mnist1d_cnn under fp8_e4m3 at 3.5 W")) == "mnist1d_cnn under fp8_e4m3 at 3.5 W"
