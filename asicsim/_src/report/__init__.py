"""Reports: a sweep's results directory as one self-contained HTML page (figures inline, nothing
fetched from anywhere), the same as Markdown, and every table as CSV.

>>> from asicsim._src.report import write_report, summary_text
>>> info = write_report("out/", "out/report.html")   # doctest: +SKIP
>>> print(summary_text("out/"))                      # doctest: +SKIP

(Skipped by the doctests: they need a sweep's results in ``out/``; tests/report builds some.)

Modules: :mod:`~asicsim.report.load` (the results directory), :mod:`~asicsim._src.report.tables`
(pandas tables), :mod:`~asicsim._src.report.figures` (matplotlib to inline SVG),
:mod:`~asicsim._src.report.sections` (what the report says; the answer in :mod:`~asicsim._src.report.answer`
and :mod:`~asicsim._src.report.accuracy`, the mapping objective's trade in :mod:`~asicsim._src.report.trade`,
the inputs in :mod:`~asicsim._src.report.reproduce`), :mod:`~asicsim._src.report.html` and
:mod:`~asicsim._src.report.markdown` (rendering), :mod:`~asicsim._src.report.cli` (``asicsim report``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from asicsim._files import atomic_path, check_output, remove_stale_temporaries, write_text_atomic
from asicsim._lazy import lazy_package

if TYPE_CHECKING:
    from asicsim._src.report.load import Results

lazy_package(__name__, {".load": ["Results", "load"]})  # pandas on first use: asicsim --help needs none

__all__ = ["Results", "load", "summary_text", "write_report"]

#: Lines per list in :func:`summary_text`.
SHOW = 8


def _title(res: Results) -> tuple[str, str]:
    name = str(res.spec.get("name") or res.root.name)
    r = res.results
    n = {k: int((r["status"] == k).sum()) if len(r) else 0 for k in ("done", "diverged", "failed")}
    lead = (f"Sweep results from {res.root.name}: {len(r)} points, {n['done']} done, {n['diverged']} diverged, "
            f"{n['failed']} failed" + (" (no result; rerun them with asicsim sweep --retry-failed)"
                                       if n["failed"] else "") + ". "
            "Self-contained: figures are inline SVG; the tables are also in CSV beside this file.")
    if res.skipped:
        lead += (f" {len(res.skipped)} file(s) in points/ were skipped, not being record files (their points "
                 "are missing here; a sweep rerun repeats them): " + "; ".join(res.skipped))
    return f"asicsim report: {name}", lead


def output_paths(results_dir: str | Path, html_path: str | Path | None) -> tuple[Path, Path, Path]:
    """The HTML page, the Markdown beside it and the tables folder, each checked to be writable
    without replacing anything but a regular file (:func:`asicsim._files.check_output`)."""
    html_path = Path(html_path) if html_path is not None else Path(results_dir) / "report.html"
    md_path = html_path.with_suffix(".md")
    if md_path == html_path:
        raise ValueError(f"{html_path}: the Markdown report would replace it; allowed: an HTML file name "
                         "not ending in .md (the Markdown goes beside it, same name, .md)")
    folder = html_path.with_name(f"{html_path.stem}_tables")
    for path in (html_path, md_path):
        check_output(path)
    check_output(folder, folder=True)
    return html_path, md_path, folder


def write_report(results_dir: str | Path, html_path: str | Path | None = None, options: dict | None = None,
                 *, progress=None) -> dict:
    """Write the report of the sweep in ``results_dir``: ``html_path`` (default
    ``results_dir/report.html``), the Markdown beside it (same name, ``.md``) and every table as CSV
    in a folder beside it (``<name>_tables/``). ``options`` override the spec's ``[report]`` table
    (objective, max_accuracy_drop, max_loss_increase). Returns what was written: paths, section
    ids, figure ids, point counts. ``progress(stages_done, stages_total)`` after each stage."""
    from asicsim._src.sweep.store import results_root

    results_root(results_dir)  # a results directory, then a writable output: both before any work
    html_path, md_path, folder = output_paths(results_dir, html_path)
    from asicsim._src.report import html, markdown, objective, reproduce, sections, tables
    from asicsim._src.report.load import load

    def stage(done: int) -> None:
        if progress is not None:
            progress(done, 5)

    stage(0)
    res = load(results_dir)
    opts = objective.options(res, options)
    stage(1)
    html_path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(html_path.parent, [html_path.name, md_path.name])  # a killed run's leftovers
    if folder.is_dir():
        remove_stale_temporaries(folder)
    t = tables.all_tables(res)
    stage(2)
    secs = sections.build(res, t, opts)  # the figures: most of the time
    stage(3)
    title, lead = _title(res)
    write_text_atomic(html_path, html.page(title, lead, secs))
    write_text_atomic(md_path, markdown.document(title, lead, secs))
    stage(4)
    folder.mkdir(exist_ok=True)
    csvs = {}
    for name, df in {**t, "versions": None}.items():
        if df is None:
            import pandas as pd

            v = reproduce.versions()
            df = pd.DataFrame({"package": list(v), "version": list(v.values())})
        path = folder / f"{name}.csv"
        with atomic_path(path) as tmp:
            df.to_csv(tmp, index=False)
        csvs[name] = str(path)
    stage(5)
    r = res.results
    return {"html": str(html_path), "markdown": str(md_path), "tables": csvs,
            "sections": [s.id for s in secs], "figures": [f.id for s in secs for f in s.figures],
            "points": len(r), "done": int((r["status"] == "done").sum()) if len(r) else 0,
            "diverged": int((r["status"] == "diverged").sum()) if len(r) else 0,
            "failed": int((r["status"] == "failed").sum()) if len(r) else 0}


def _quality_line(x, fmt) -> str:
    """One recipe's quality: its value and delta, how many runs diverged, and apart from those the
    runs that failed (no result): a recipe whose runs all failed has no verdict."""
    head = f"  {x.workload} {x.phase} {x.recipe}: "
    if not x.runs:
        return head + f"no verdict: its {x.failed} run{'s' if x.failed != 1 else ''} failed (no result)"
    return (head + f"{x.metric} {fmt(x.value)} ({x.delta_vs_fp32:+.4f})"
            + (f", {x.diverged} of {x.runs} diverged" if x.diverged else "")
            + (f"; {x.failed} more failed (no result)" if x.failed else ""))


def summary_text(results_dir: str | Path, options: dict | None = None) -> str:
    """A short plain-text summary of a sweep (what ``asicsim demo`` prints): the answer (best
    recipe and design per workload), quality per recipe, the best perf/W per design, DeepBench
    speed vs GPU, the distance to Baidu's mark, failures. ``options``: as for :func:`write_report`."""
    from asicsim._src.report import answer, objective, tables
    from asicsim._src.report.document import fmt
    from asicsim._src.report.load import load

    res = load(results_dir)
    r = res.results
    title, lead = _title(res)
    lines = [title, lead.split(" Self-contained")[0]]
    lines += [f"Skipped (not a record file): {s}" for s in res.skipped]
    said = [b.text for b in answer.section(res, objective.options(res, options)).blocks[1:] if hasattr(b, "text")]
    if said and len(r):
        lines.append("Answer:")
        lines += [f"  {x}" for x in said]
    q = tables.quality(res)
    if len(q):
        lines.append("Quality (seed mean; delta vs fp32):")
        lines += [_quality_line(x, fmt) for x in q.head(2 * SHOW).itertuples()]
        if len(q) > 2 * SHOW:
            lines.append(f"  ... and {len(q) - 2 * SHOW} more (see the report)")
    b = tables.baidu(res)
    if len(b):
        b = b.sort_values("achieved_fraction_of_mark", ascending=False, kind="stable")
        lines.append(f"Per design, best first (fraction of Baidu's {tables.BAIDU_FLOPS_PER_W / 1e12:.1f} "
                     "TFLOP/s/W):")
        lines += [f"  {x['design']}: peak {fmt(x['peak_tflops'])} TFLOP/s, {fmt(x['peak_tflops_per_w'])} "
                  f"TFLOP/s/W ({fmt(x['peak_fraction_of_mark'])} of the mark); best achieved "
                  f"{fmt(x['best_achieved_gflops_per_w'])} GFLOP/s/W ({fmt(x['achieved_fraction_of_mark'])}) on "
                  f"{x['best_on']}" for x in b.head(SHOW).to_dict("records")]
        if len(b) > SHOW:
            lines.append(f"  ... and {len(b) - SHOW} more designs (see the report)")
    d = tables.deepbench(res)
    gpus = res.gpus()
    if len(d) and gpus:
        g = gpus[0]
        lines.append(f"DeepBench total time, speed-up vs {g}:")
        d = d.sort_values(["suite", "precision", "time_s"], kind="stable")
        lines += [f"  {x['suite']} {x['precision']} {x['design']}: {fmt(x['time_s'])} s, "
                  f"{fmt(x[f'speedup_vs_{g}'])}x" for x in d.head(2 * SHOW).to_dict("records")]
        if len(d) > 2 * SHOW:
            lines.append(f"  ... and {len(d) - 2 * SHOW} more (see the report)")
    f = tables.failed(res)
    if len(f):
        lines.append(f"Failed points ({len(f)}):")
        lines += [f"  {x.kind} {x.labels}: {x.reason}" for x in f.head(5).itertuples()]
        if len(f) > 5:
            lines.append(f"  ... and {len(f) - 5} more (see the report)")
    if not len(r):
        lines.append("No point has finished yet.")
    if any("–" in x for x in lines[2:]):  # the placeholder fmt() writes for a missing figure
        lines.append("–: no figure: a design that cannot run a suite's precision has no time or perf/W.")
    return "\n".join(lines)
