"""Reports: a sweep's results directory as one self-contained HTML page (figures inline, nothing
fetched from anywhere), the same as Markdown, and every table as CSV.

>>> from asicsim.report import write_report, summary_text
>>> info = write_report("out/", "out/report.html")   # doctest: +SKIP
>>> print(summary_text("out/"))                      # doctest: +SKIP

(Skipped by the doctests: they need a sweep's results in ``out/``; tests/report builds some.)

Modules: ``asicsim.report.load`` (the results directory), ``asicsim._src.report.tables``
(pandas tables), ``asicsim._src.report.figures`` (matplotlib to inline SVG),
``asicsim._src.report.sections`` (what the report says; the answer in ``asicsim._src.report.answer``
and ``asicsim._src.report.accuracy``, the mapping objective's trade in ``asicsim._src.report.trade``,
the inputs in ``asicsim._src.report.reproduce``), ``asicsim._src.report.html`` and
``asicsim._src.report.markdown`` (rendering), ``asicsim._src.report.cli`` (``asicsim report``).

The names below are the supported surface; the modules behind them live in
``asicsim._src.report`` and may change without notice.
"""

from asicsim._lazy import public_facade

public_facade(__name__, "asicsim._src.report")
