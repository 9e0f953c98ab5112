"""The real report (sweep_data.py) opened in headless Chromium at 1400 px: every section and figure
is there and rendered, the page makes no request at all, logs no console error, the answer comes
first and is on the first screen, the tables for reading fit the page, and a screenshot is taken."""

from __future__ import annotations

import re

import pytest
from chromium import render
from sweep_data import html_text, real_report

from asicsim.report.sections import SECTION_IDS

#: The first screen: Chromium's viewport in ``render`` (1400 x 900 CSS pixels).
SCREEN = 900

# Layout measured in the page, in document coordinates (CSS pixels from the top left).
PROBE = """(() => {
  const box = e => { const r = e.getBoundingClientRect();
                     return {top: r.top + scrollY, bottom: r.bottom + scrollY, right: r.right + scrollX}; };
  const answer = document.getElementById('answer');
  return {
    first_section: document.querySelector('main section').id,
    first_table_in: document.querySelector('table').closest('section').id,
    answer: answer ? box(answer.querySelector('h2')) : null,
    sentences: answer ? [...answer.querySelectorAll(':scope > p')].map(box) : [],
    fit: [...document.querySelectorAll('.fit')].map(d => ({
      section: d.closest('section').id, scroll: d.scrollWidth, client: d.clientWidth,
      right: box(d.querySelector('table')).right})),
    page_width: document.documentElement.scrollWidth,
  };
})()"""


@pytest.fixture(scope="module")
def shown(chromium, tmp_path_factory):
    real = real_report(tmp_path_factory)
    shot = tmp_path_factory.mktemp("screenshot") / "report.png"
    return real, render(real["html"], shot, binary=chromium, probe=PROBE)


def test_report_renders_offline(shown):
    real, page = shown
    info = real["info"]
    assert [s.id for s in page.sections] == [s for s in SECTION_IDS if s != "failed"] == info["sections"]
    titles = re.findall(r"<h2>([^<]+)</h2>", html_text(real["html"]))
    assert [s.title for s in page.sections] == [t.replace("&#x27;", "'") for t in titles]
    assert [f.id for f in page.figures] == info["figures"] and len(page.figures) == 9
    for f in page.figures:
        assert f.rendered and f.svg and not f.images, f
    assert page.requests == [] and page.failed_requests == []
    assert page.console_errors == []
    data = page.screenshot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 50_000
    assert page.page_height > 4000  # nine figures and their tables, not an empty page


def test_the_answer_is_on_the_first_screen_and_tables_fit(shown):
    _, page = shown
    p = page.probe
    assert p["first_section"] == "answer" and p["first_table_in"] == "answer"
    assert 0 < p["answer"]["top"] < SCREEN / 3
    # the answer's sentences (the objective, then one per workload and phase) all above the fold
    assert len(p["sentences"]) == 3, p["sentences"]
    assert max(s["bottom"] for s in p["sentences"]) < SCREEN, p["sentences"]
    # the answer's and the recipes x designs tables: no horizontal scroll, inside the page
    assert {f["section"] for f in p["fit"]} == {"answer", "summary"}
    for f in p["fit"]:
        assert f["scroll"] <= f["client"] and f["right"] <= 1400, f
    assert p["page_width"] <= 1400
