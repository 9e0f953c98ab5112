"""A one-line progress report for the commands that take more than a few seconds (train, infer,
report): steps done / total, elapsed time and an ETA, on stderr so that stdout (``--json``)
stays machine-readable. Silent for the first second, so quick commands print nothing extra."""

from __future__ import annotations

import sys
import time


def clock(seconds: float) -> str:
    s = round(seconds)
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


class StepProgress:
    """``update(done, total)`` as work finishes; ``close()`` at the end. On a terminal the line is
    redrawn in place; in a log a line is written every ``EVERY`` seconds. ``stream=None``: quiet."""

    #: Seconds of silence at the start, and between two lines in a log (not a terminal).
    QUIET_S, EVERY = 1.0, 5.0

    def __init__(self, label: str, unit: str = "steps", stream="stderr"):
        self.label, self.unit = label, unit
        self.stream = sys.stderr if stream == "stderr" else stream  # the stderr of now, not of import
        self.quiet_s, self.every = self.QUIET_S, self.EVERY
        self.t0 = time.monotonic()
        self._last = -float("inf")
        self._shown = False
        self._state = (0, 0)
        self._tty = self.stream is not None and getattr(self.stream, "isatty", lambda: False)()
        self._width = 0
        self._first: tuple[float, int] | None = None  # (time, done) of the first update with work done

    def line(self) -> str:
        done, total = self._state
        elapsed = time.monotonic() - self.t0
        if total and done >= total:
            eta = "finished"
        elif self._first is not None and done > self._first[1]:
            # the rate since the first report: the first piece of work also paid for compilation
            t1, d1 = self._first
            eta = f"ETA {clock((time.monotonic() - t1) * (total - done) / (done - d1))}"
        else:
            eta = "ETA ?"
        return f"{self.label}: {done}/{total} {self.unit}, {clock(elapsed)} elapsed, {eta}"

    def update(self, done: int, total: int) -> None:
        if done < 0 or total < 0:
            raise ValueError(f"progress: done = {done}, total = {total}; allowed: integers >= 0")
        self._state = (done, total)
        now = time.monotonic()
        if self._first is None and done > 0:
            self._first = (now, done)
        if self.stream is None or now - self.t0 < self.quiet_s:
            return
        if not self._tty and now - self._last < self.every:
            return
        self._last = now
        self._write(self.line(), end="" if self._tty else "\n")

    def close(self) -> None:
        """The last state, ending the line (nothing if nothing was shown)."""
        if self.stream is not None and self._shown:
            self._write(self.line(), end="\n")

    def _write(self, line: str, end: str) -> None:
        if self._tty:  # redraw in place, blanking what a longer previous line left
            line, self._width = "\r" + line.ljust(self._width), len(line)
        self._shown = True
        self.stream.write(line + end)
        self.stream.flush()
