"""The real report (sweep_data.py) opened in headless Chromium: every section and figure is there
and rendered, the page makes no request at all, logs no console error, and a screenshot is taken."""

from __future__ import annotations

import re

from chromium import render
from sweep_data import html_text, real_report

from asicsim.report.sections import SECTION_IDS


def test_report_renders_offline(chromium, tmp_path_factory, tmp_path):
    real = real_report(tmp_path_factory)
    info = real["info"]
    shot = tmp_path / "report.png"
    page = render(real["html"], shot, binary=chromium)
    assert [s.id for s in page.sections] == [s for s in SECTION_IDS if s != "failed"] == info["sections"]
    titles = re.findall(r"<h2>([^<]+)</h2>", html_text(real["html"]))
    assert [s.title for s in page.sections] == [t.replace("&#x27;", "'") for t in titles]
    assert [f.id for f in page.figures] == info["figures"] and len(page.figures) == 9
    for f in page.figures:
        assert f.rendered and f.svg and not f.images, f
    assert page.requests == [] and page.failed_requests == []
    assert page.console_errors == []
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 50_000
    assert page.page_height > 4000  # nine figures and their tables, not an empty page
