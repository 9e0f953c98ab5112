"""The real report (sweep_data.py) opened in headless Chromium at 1400 px: every section and figure
is there and rendered, the page makes no request at all, logs no console error, the answer comes
first and is on the first screen, the tables for reading fit the page, and a screenshot is taken."""

from __future__ import annotations

import re

import pytest
from chromium import render
from sweep_data import html_text, real_report

from asicsim._src.report.sections import SECTION_IDS

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
    tables: [...document.querySelectorAll('table')].map(t => ({
      section: t.closest('section').id, caption: t.caption ? t.caption.textContent.slice(0, 50) : '',
      width: t.getBoundingClientRect().width, right: box(t).right,
      scroll: t.parentElement.scrollWidth, client: t.parentElement.clientWidth})),
    code: [...document.querySelectorAll('pre')].map(p => ({
      section: p.closest('section').id, scroll: p.scrollWidth, client: p.clientWidth, right: box(p).right})),
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
    # the answer's, the mapping objective's and the recipes x designs tables: no horizontal scroll, inside the page
    assert {f["section"] for f in p["fit"]} == {"answer", "trade", "summary"}
    for f in p["fit"]:
        assert f["scroll"] <= f["client"] and f["right"] <= 1400, f
    assert p["page_width"] <= 1400


def test_no_table_and_no_code_block_is_wider_than_the_page(shown):
    # README: no table scrolls sideways. At 1,400 px the energy, DeepBench and Baidu tables were
    # 1,459 to 2,530 px wide, and the recorded recipes one 21,628 px line.
    _, page = shown
    p = page.probe
    assert {t["section"] for t in p["tables"]} >= {"energy", "roofline", "deepbench", "baidu", "numerics"}
    for t in p["tables"]:
        assert t["scroll"] <= t["client"] and t["right"] <= 1400 and t["width"] <= 1400, t
    assert p["code"] and all(c["scroll"] <= c["client"] and c["right"] <= 1400 for c in p["code"]), p["code"]


def test_a_deepbench_table_against_two_gpus_fits(chromium, tmp_path):
    # 11 columns and 3 per GPU: the ratios are rows of their own table, so more GPUs add no column
    import numpy as np
    import pandas as pd

    from asicsim._src.report import html
    from asicsim._src.report.document import Section, Table
    from asicsim._src.report.sections import split_gpu_ratios

    gpus = ["gpu_v100", "gpu_h100_sxm"]
    cols = ["suite", "precision", "design", "design_kind", "kernels", "time_s", "geomean_tflops", "energy_j",
            "energy_dynamic_j", "energy_static_j", "gflops_per_w"]
    cols += [f"{r}_vs_{g}" for g in gpus for r in ("speedup", "energy_ratio", "dynamic_energy_ratio")]
    designs = ["edge_int8_32x32[array.rows=16,array.cols=64]", "dc_bf16_128x128", *gpus]
    rng = np.random.default_rng(0)
    df = pd.DataFrame([{"suite": "deepbench_gemm_inference_server", "precision": "fp16_mixed", "design": d,
                        "design_kind": "systolic", "kernels": 75,
                        **{c: -float(rng.lognormal(0, 6)) for c in cols[5:]}} for d in designs], columns=cols)
    main, vs = split_gpu_ratios(df, ["suite", "precision", "design"], gpus)
    assert len(vs) == len(designs) * len(gpus) - len(gpus) and main.shape[1] == 11
    path = tmp_path / "t.html"
    path.write_text(html.page("t", "", [Section("deepbench", "DeepBench").add(Table(main), Table(vs))]))
    probe = "[...document.querySelectorAll('table')].map(t => t.parentElement.scrollWidth - t.parentElement.clientWidth)"
    shown = render(path, tmp_path / "t.png", binary=chromium, probe=probe)
    assert shown.probe == [0, 0]
