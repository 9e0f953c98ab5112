"""A sweep's progress output: a banner at once (how many points of each kind, how many from
before, on how many workers), then points done / diverged / failed / left and an ETA on one line (a
terminal, redrawn in place) or a line every few seconds (a log), always ending on a newline.

The ETA is the work left priced at the measured cost of the work done, spread over the workers:
each point left costs the mean seconds (its record's ``seconds``) of the finished points of its
group (same kind, workload and recipe: another seed of it), else its steps times the seconds
per step of its recipe on another workload, else of every finished training point; a priced
point (next to free) the mean of those finished. The line shows it smoothed and counted down between finishes, never below a
tenth of the last estimate, so one slow or fast point does not make it jump.
"""

from __future__ import annotations

import sys
import time

#: Weight of a new estimate against the previous one counted down (0..1): lower is steadier.
SMOOTHING = 0.5


def _clock(s: float) -> str:
    s = round(s)
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


class Progress:
    """Progress of ``total`` points, ``skipped`` of them finished before; silent when ``stream``
    is None. ``weights``: id -> its work, optimizer steps (0 for a priced point); ``workers``: how many run
    at once."""

    def __init__(self, total: int, skipped: int, stream=sys.stderr, weights: dict | None = None,
                 workers: int = 1, groups: dict | None = None):
        self.total, self.skipped, self.stream = total, skipped, stream
        self.weights = dict(weights or {})
        self.workers = max(int(workers), 1)
        # id -> group (kind, workload, recipe): the finished seeds of a group price the others
        self.groups = dict(groups or {})
        self.left = set(self.weights) | set(self.groups)
        self.group_s: dict = {}  # group -> [seconds, points]
        self.recipe_s: dict = {}  # recipe -> [seconds, work] of its finished training points
        self.work_left = float(sum(self.weights.values()))
        self.priced_left = sum(1 for w in self.weights.values() if not w)
        self.work_done = self.train_s = 0.0  # work of finished training points, their seconds
        self.priced_done, self.priced_s = 0, 0.0
        self.done = self.diverged = self.failed = 0
        self.t0 = time.monotonic()
        self._last = 0.0
        self._eta: tuple[float, float] | None = None  # (seconds left, when estimated)
        self._floor = 0.0
        self._shown: tuple = ()
        self._width = 0  # of the line drawn in place, to blank what a shorter one leaves
        self._open = False  # a line drawn in place without its newline yet
        self._tty = bool(stream) and getattr(stream, "isatty", lambda: False)()

    def banner(self, text: str) -> None:
        """One line printed at once, before any point finishes."""
        if self.stream is not None:
            self.stream.write(text + "\n")
            self.stream.flush()

    def update(self, records: list[dict], final: bool = False) -> None:
        for r in records:
            w = float(self.weights.get(r["id"], 0.0))
            secs = float(r.get("seconds") or 0.0)
            self.left.discard(r["id"])
            if r["id"] in self.groups and secs:
                acc = self.group_s.setdefault(self.groups[r["id"]], [0.0, 0])
                acc[0] += secs
                acc[1] += 1
                if w:  # seconds per step of this recipe, on any workload
                    rate = self.recipe_s.setdefault(self.groups[r["id"]][2], [0.0, 0.0])
                    rate[0] += secs
                    rate[1] += w
            if w:
                self.work_left -= w
                self.work_done += w
                self.train_s += secs
            elif r["id"] in self.weights:
                self.priced_left -= 1
                self.priced_done += 1
                self.priced_s += secs
            if r["status"] == "done":
                self.done += 1
            elif r["status"] == "diverged":
                self.diverged += 1
            else:
                self.failed += 1
        if records:
            self._estimate()
        if self.stream is None:
            return
        now = time.monotonic()
        state = (self.done, self.diverged, self.failed)
        if final:
            if state != self._shown or self._open:
                self._write(self.line(), end=True)
            return
        if not (self._tty or now - self._last >= 5):
            return
        self._last, self._shown = now, state
        self._write(self.line(), end=not self._tty)

    def _write(self, line: str, end: bool) -> None:
        if self._tty:
            pad = " " * max(self._width - len(line), 0)
            self.stream.write("\r" + line + pad + ("\n" if end else ""))
            self._width, self._open = (0, False) if end else (len(line), True)
        else:
            self.stream.write(line + "\n")
        self._shown = (self.done, self.diverged, self.failed)
        self.stream.flush()

    def _estimate(self) -> None:
        """A new ETA from the work left, blended with the previous one counted down."""
        if self.work_left > 0 and not self.work_done:
            return  # training left and none finished: no basis yet
        now = time.monotonic()
        # records without their own seconds (older workers): the wall clock of all the workers
        spent = (now - self.t0) * self.workers
        per_work = (self.train_s or spent) / self.work_done if self.work_done else 0.0
        per_priced = (self.priced_s or spent) / self.priced_done if self.priced_done else 0.0
        if self.work_done and self.priced_done and not (self.train_s or self.priced_s):
            per_priced = 0.0  # the wall clock cannot be split between them: the training dominates
        if self.group_s:
            left = 0.0
            for pid in self.left:
                group = self.groups.get(pid)
                acc = self.group_s.get(group)
                w = float(self.weights.get(pid, 0.0))
                rate = self.recipe_s.get(group[2]) if group else None
                if acc:
                    left += acc[0] / acc[1]
                elif w:
                    left += w * (rate[0] / rate[1] if rate else per_work)
                else:
                    left += per_priced
        else:
            left = max(self.work_left, 0.0) * per_work + max(self.priced_left, 0) * per_priced
        new = left / self.workers
        if self._eta is not None:
            before = max(self._eta[0] - (now - self._eta[1]), 0.0)
            new = SMOOTHING * new + (1 - SMOOTHING) * before
        self._eta = (new, now)
        self._floor = new / 10

    def seconds_left(self) -> float | None:
        """The ETA in seconds (None before there is a basis for one)."""
        if self._eta is None:
            return None
        return max(self._eta[0] - (time.monotonic() - self._eta[1]), self._floor)

    @property
    def ran(self) -> int:
        """Points finished in this run (done, diverged or failed)."""
        return self.done + self.diverged + self.failed

    def line(self) -> str:
        ran = self.ran
        left = self.total - self.skipped - ran
        elapsed = time.monotonic() - self.t0
        eta_s = self.seconds_left()
        eta = "finished" if not left else ("ETA ?" if eta_s is None else f"ETA {_clock(eta_s)}")
        width = 24
        filled = int(width * (self.skipped + ran) / max(self.total, 1))
        return (f"[{'#' * filled}{'.' * (width - filled)}] {self.skipped + self.done}/{self.total} done"
                f" ({self.skipped} from before), " + (f"{self.diverged} diverged, " if self.diverged else "")
                + f"{self.failed} failed, {left} left, {_clock(elapsed)} "
                f"elapsed, {eta}")


def banner_text(name: str, kinds: dict[str, int], total: int, skipped: int, jobs: int, workers: int) -> str:
    """``demo: 36 points (10 train, 4 infer, ...); 0 from before; 36 to run as 20 jobs on 2 workers``."""
    per = ", ".join(f"{n} {k}" for k, n in kinds.items() if n)
    return (f"{name}: {total} points ({per}); {skipped} from before; {total - skipped} to run as {jobs} "
            f"job{'s' if jobs != 1 else ''} on {workers} worker{'s' if workers != 1 else ''}")
