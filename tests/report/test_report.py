"""asicsim.report on a real sweep (sweep_data.py) and on partial results directories made from its
records: every section and figure there, nothing fetched from anywhere, every user string escaped,
the numbers equal to the sweep's own, and a section without data saying so instead of crashing."""

from __future__ import annotations

import argparse
import copy
import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from sweep_data import EVIL, GPU, SPEC_NAME, html_text, real_report

from asicsim._src.report import cli as report_cli
from asicsim._src.report import summary_text, write_report
from asicsim._src.report.sections import SECTION_IDS
from asicsim._src.report.tables import BAIDU_FLOPS_PER_W
from asicsim._src.report.units import eng
from asicsim._src.sweep import load_results
from asicsim._src.sweep.store import Store

SLUG = "edge-b-x-b-script-alert-1-script"


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    return real_report(tmp_path_factory)


@pytest.fixture(scope="module")
def page(real):
    return html_text(real["html"])


def _section(page: str, sid: str) -> str:
    m = re.search(rf'<section id="{sid}">(.*?)</section>', page, re.S)
    assert m, f"no section {sid}"
    return m.group(1)


# --- the full report -----------------------------------------------------------------------


def test_every_section_and_figure(real, page):
    info = real["info"]
    want = [s for s in SECTION_IDS if s != "failed"]  # no point failed
    assert info["sections"] == want
    for sid in want:
        assert re.search(rf'<section id="{sid}">\s*<h2>[^<]+</h2>', page), sid
    assert 'id="failed"' not in page
    figs = ["fig-pareto-digits_mlp", "fig-curves-digits_mlp", "fig-numerics-digits_mlp",
            "fig-energy-digits_mlp-infer", "fig-energy-digits_mlp-train", f"fig-roofline-{SLUG}",
            f"fig-roofline-{GPU}", "fig-deepbench", "fig-baidu"]
    assert info["figures"] == figs
    found = re.findall(r'<figure id="([^"]+)">\s*<svg[^>]*>', page)
    assert found == figs
    assert page.count("<figure") == page.count("</figure>") == len(figs)
    assert page.count("<svg") == page.count("</svg>") == len(figs)
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert len(ids) == len(set(ids)), "duplicate ids across the inline SVGs"
    assert (info["points"], info["done"], info["failed"]) == (11, 11, 0)


def test_self_contained(page):
    assert "http://" not in page and "https://" not in page
    assert "//" not in re.sub(r"<pre>.*?</pre>", "", page, flags=re.S).replace("://", "")  # no protocol-relative URL
    for attr in re.findall(r'\b(?:src|href|xlink:href|srcset|poster|data)\s*=\s*"([^"]*)"', page):
        assert attr.startswith(("#", "data:")), attr
    assert not re.search(r"<(script|link|img|iframe|object|embed|base)\b", page)
    assert "@import" not in page
    assert not re.search(r"url\((?!#)", page)


def test_user_strings_escaped(real, page):
    md = real["html"].with_suffix(".md").read_text()
    assert "<b>" not in page and "<script" not in page.lower()
    assert "edge&lt;b&gt;x&lt;/b&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "t &lt;script&gt;alert(&#x27;spec&#x27;)&lt;/script&gt;" in page  # the spec's name, in the title
    # Markdown: raw only inside code fences (shown as text there), escaped everywhere else
    outside = re.sub(r"```.*?```", "", md, flags=re.S)
    assert "<" not in outside and "edge&lt;b&gt;x" in outside
    assert SPEC_NAME in md  # inside the spec.toml fence, as written


def test_files_written(real):
    info = real["info"]
    html = real["html"]
    assert info["html"] == str(html) and info["markdown"] == str(html.with_suffix(".md"))
    folder = html.with_name("report_tables")
    names = {"summary", "pareto", "numerics", "energy", "roofs", "roofline_points", "deepbench", "baidu",
             "failed", "versions"}
    assert set(info["tables"]) == names
    assert {p.stem for p in folder.glob("*.csv")} == names
    md = html.with_suffix(".md").read_text()
    for title in re.findall(r"<h2>([^<]+)</h2>", html_text(html)):
        assert f"## {title.replace('&#x27;', chr(39))}" in md
    assert len(pd.read_csv(folder / "roofline_points.csv")) > 75  # every DeepBench kernel, at least


def test_summary_numbers_match_the_results(real, page):
    r = load_results(real["out"])
    s = pd.read_csv(real["html"].with_name("report_tables") / "summary.csv")
    train = r[r["kind"] == "train"]
    fp32 = train[train["recipe"] == "fp32"]["value"].mean()
    bf16 = train[train["recipe"] == "bf16"]["value"].mean()
    cost = r[r["kind"] == "cost"].set_index(["recipe", "phase", "design"])
    for recipe in ("fp32", "bf16"):
        row = s[(s["recipe"] == recipe) & (s["phase"] == "train") & (s["design"] == EVIL)].iloc[0]
        mine, gpu = cost.loc[(recipe, "train", EVIL)], cost.loc[(recipe, "train", GPU)]
        value = fp32 if recipe == "fp32" else bf16
        assert row["value"] == pytest.approx(value)
        assert row["delta_vs_fp32"] == pytest.approx(value - fp32, abs=1e-12)
        assert row["energy_j"] == pytest.approx(mine["energy_j"])
        assert row["time_s"] == pytest.approx(mine["time_s"])
        assert row["dram_bytes"] == pytest.approx(mine["dram_bytes"])
        assert row["gflops_per_w"] == pytest.approx(mine["flops_per_j"] / 1e9)
        assert row[f"speedup_vs_{GPU}"] == pytest.approx(gpu["time_s"] / mine["time_s"])
        assert row[f"energy_ratio_vs_{GPU}"] == pytest.approx(mine["energy_j"] / gpu["energy_j"])
        assert eng(mine["energy_j"], "J") in _section(page, "summary")  # the recipes x designs table
    inf = r[r["kind"] == "infer"].iloc[0]
    row = s[(s["phase"] == "infer") & (s["design"] == GPU)].iloc[0]
    assert row["delta_vs_fp32"] == pytest.approx(inf["value"] - inf["fp32_value"], abs=1e-12)
    assert row["energy_j"] == pytest.approx(cost.loc[("int8_ptq_tensor", "infer", GPU)]["energy_j"])
    # DeepBench vs GPU, and the distance to Baidu's mark (a board figure: the systolic design gives no
    # TDP, so its peak is its array at full rate with its board's idle power, issue 30)
    k = r[r["kind"] == "kernels"].set_index("design")
    db = pd.read_csv(real["html"].with_name("report_tables") / "deepbench.csv").set_index("design")
    assert db.loc[EVIL, f"speedup_vs_{GPU}"] == pytest.approx(k.loc[GPU, "time_s"] / k.loc[EVIL, "time_s"])
    assert db.loc[EVIL, "geomean_tflops"] == pytest.approx(k.loc[EVIL, "geomean_tflops"])
    b = pd.read_csv(real["html"].with_name("report_tables") / "baidu.csv").set_index("design")
    quoted = r[r["design"] == EVIL]["peak_flops_per_w_board"].max()
    assert quoted > 0 and b.loc[EVIL, "peak_fraction_of_mark"] == pytest.approx(quoted / BAIDU_FLOPS_PER_W)
    peak = r[(r["design"] == GPU)]["peak_ops_per_s"].max()
    assert b.loc[GPU, "peak_fraction_of_mark"] == pytest.approx(peak / 300 / BAIDU_FLOPS_PER_W)
    best = r[(r["design"] == EVIL) & r["kind"].isin(["cost", "kernels"])]["flops_per_j"].max()
    assert b.loc[EVIL, "achieved_fraction_of_mark"] == pytest.approx(best / BAIDU_FLOPS_PER_W)


def test_summary_text(real):
    text = summary_text(real["out"])
    assert SPEC_NAME in text and EVIL in text and GPU in text
    assert "digits_mlp train bf16: test_accuracy" in text
    assert len(text.splitlines()) < 31
    # the systolic design gives no TDP, yet has a peak perf/W at board scope (issue 30); a placeholder
    # left anywhere is explained
    assert "TFLOP/s/W (– of the mark)" not in text
    assert ("–" not in text) or text.splitlines()[-1].startswith("–: no figure")


# --- partial results ------------------------------------------------------------------------


def _partial(real, tmp_path, keep, extra=()) -> object:
    """A results directory holding some of the real sweep's records (and ``extra`` ones)."""
    out = tmp_path / "partial"
    store = Store(out)
    store.points.mkdir(parents=True)
    for f in ("spec.toml", "spec.json"):
        shutil.copy(real["out"] / f, out / f)
    for rec in store_records(real):
        if keep(rec):
            store.write([rec])
    for rec in extra:
        store.write([rec])
    return out


def store_records(real) -> list[dict]:
    return Store(real["out"]).records()


def test_only_kernels_deterministic_and_cli(real, tmp_path, capsys):
    out = _partial(real, tmp_path, lambda rec: rec["kind"] == "kernels")
    info = write_report(out, tmp_path / "a" / "report.html")
    assert info["figures"] == [f"fig-roofline-{SLUG}", f"fig-roofline-{GPU}", "fig-deepbench", "fig-baidu"]
    page = html_text(info["html"])
    assert "No workload was trained, evaluated or priced in this sweep." in _section(page, "summary")
    for sid in ("pareto", "curves", "numerics", "energy"):
        assert "<figure" not in _section(page, sid) and "in this sweep" in _section(page, sid)
    # deterministic: the same directory gives the same bytes, every file (the CLI writes the second)
    parser = argparse.ArgumentParser()
    report_cli.add_cli(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["report", str(out), "-o", str(tmp_path / "b" / "report.html"), "--json"])
    assert args.func(args) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["sections"] == info["sections"] and again["figures"] == info["figures"]
    for a, b in ((info["html"], again["html"]), (info["markdown"], again["markdown"]),
                 *zip(info["tables"].values(), again["tables"].values(), strict=True)):
        assert Path(a).read_bytes() == Path(b).read_bytes(), a


def test_only_training_with_a_failed_point(real, tmp_path):
    train = [r for r in store_records(real) if r["kind"] == "train"]
    bad = copy.deepcopy(next(r for r in train if r["labels"]["recipe"] == "bf16"))
    bad["id"] = "f" * 20
    bad["labels"]["recipe"] = "bf16<i>nan</i>"
    bad["status"] = "failed"
    bad["reason"] = "diverged at step 7: <overflow> & NaN\nTraceback..."
    bad["result"].update(value=None, diverged=True, diverged_step=7, diverged_cause="<overflow> & NaN")
    crash = {**copy.deepcopy(bad), "id": "e" * 20, "kind": "cost", "tables": {}, "result": {},
             "labels": {"workload": "digits_mlp", "recipe": "fp32", "phase": "train", "design": EVIL},
             "reason": "MemoryError: out of memory"}
    out = _partial(real, tmp_path, lambda rec: rec["kind"] == "train", [bad, crash])
    info = write_report(out, tmp_path / "report.html")
    assert info["sections"] == [s for s in SECTION_IDS if s != "trade"]  # no cost point done: no pick to trade
    # the record an older asicsim wrote for a diverged run (failed, with its step) is a divergence
    assert (info["done"], info["diverged"], info["failed"]) == (2, 1, 1)
    page = html_text(info["html"])
    # fp32 and bf16 on digits_mlp neither underflow nor overflow: a sentence stands for the panels
    assert info["figures"] == ["fig-curves-digits_mlp"]
    assert "no value underflowed or overflowed" in _section(page, "numerics")
    failed = _section(page, "failed")
    assert "diverged at step 7" not in failed and "bf16&lt;i&gt;nan&lt;/i&gt;" not in failed
    assert "recipe=fp32" in failed and f"design={EVIL}" not in failed
    assert "MemoryError: out of memory" in failed
    curves = _section(page, "curves")  # the diverged-runs table
    assert "bf16&lt;i&gt;nan&lt;/i&gt;" in curves and "diverged at step 7: &lt;overflow&gt; &amp; NaN" in curves
    assert "Traceback" not in curves
    for sid in ("pareto", "energy", "roofline", "deepbench", "baidu"):
        assert "in this sweep" in _section(page, sid), sid
    assert "<i>" not in page and "<script" not in page
    s = pd.read_csv(tmp_path / "report_tables" / "summary.csv")
    assert set(s["recipe"]) == {"fp32", "bf16", "bf16<i>nan</i>"} and s["design"].isna().all()
    row = s[s["recipe"] == "bf16<i>nan</i>"].iloc[0]
    assert pd.isna(row["value"]) and row["diverged"] == 1
    assert "1 of 1 diverged" in summary_text(out)


def test_empty_directory(tmp_path, capsys):
    (tmp_path / "points").mkdir()
    info = write_report(tmp_path, None)
    assert info["html"] == str(tmp_path / "report.html")
    assert info["figures"] == [] and info["points"] == 0
    page = html_text(info["html"])
    assert all(f'<section id="{s}">' in page for s in SECTION_IDS if s not in ("failed", "trade"))
    assert "no spec.toml" in page
    parser = argparse.ArgumentParser()
    report_cli.add_cli(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["report", str(tmp_path)])
    assert args.func(args) == 0
    assert "No point has finished yet." in capsys.readouterr().out


def test_not_a_results_directory(tmp_path):
    from asicsim._src.sweep import SweepError

    with pytest.raises(SweepError, match="not a sweep results directory"):
        write_report(tmp_path / "nothing")


def test_large_design_space_energy_figure_capped():
    from asicsim._src.report import figures
    from asicsim._src.report.load import ENERGY_PARTS

    n = figures.MAX_BARS + 30
    df = pd.DataFrame({"workload": "w", "phase": "train", "recipe": "fp32",
                       "design": [f"d{i:03d}" for i in range(n)] + ["gpu_x"],
                       "design_kind": ["systolic"] * n + ["gpu"], "energy_j": [*range(n, 0, -1), 1e9],
                       **{f"energy_{p}_j": 1.0 for p in ENERGY_PARTS}, "dram_bytes": 1.0, "sram_bytes": 0.0})
    svg = figures.energy(df, "w", "train")
    shown = set(re.findall(r"(d\d{3}|gpu_x) · fp32", svg))
    assert "gpu_x" in shown and len(shown) == figures.MAX_BARS + 1
    assert f"d{n - 1:03d}" in shown and "d000" not in shown  # the lowest energies kept
