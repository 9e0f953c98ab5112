"""Pruning rules: which weights a training run prunes, on which schedule (a workload's ``[[prune]]``
tables, :class:`PruneRule`), and the schedules' values, computed on the host in float64.

A rule names weight matrices by a glob over their pytree path (``match``, the same mechanism as a
recipe's ``[[layers]]``: :func:`asicsim._src.emulate.layer_rules.match_rule`; first match wins; only
leaves of rank >= 2 are pruned, never biases or norm scales) and one schedule:

``narang``  Narang, Diamos, Sengupta & Elsen, "Exploring Sparsity in Recurrent Neural Networks",
            ICLR 2017 (arXiv:1704.05119), Section 3 and Table 1: after step ``itr`` a weight whose
            magnitude is below the threshold ``eps`` is set to zero (and stays zero), with
            ``eps = theta (itr - start + 1) / freq`` for ``start <= itr < ramp`` and
            ``eps = (theta (ramp - start + 1) + phi (itr - ramp + 1)) / freq`` for
            ``ramp <= itr < end`` (Section 3, Eq. 1), masks updated every ``freq`` (``every``)
            steps; Section 3.1's heuristic ``theta = 2 q freq / (2 (ramp - start) + 3 (end - ramp))``
            and ``phi = 1.5 theta`` (``ramp_factor``) makes ``eps`` reach about ``q`` at ``end``.
            The paper picks ``q`` as the 90th percentile of ``|w|`` of a previously trained model
            (Section 3.1), so that the threshold ends where 90 % of a trained layer's weights lie
            below it. Here no trained model exists: ``q`` is the ``sparsity`` quantile of the
            layer's current ``|w|`` (pruned weights counted as zeros), taken again at every mask
            update, and the threshold at update step ``t`` is ``q_t x eps(t) / eps(t_last)``
            (:func:`narang_fractions`; ``t_last`` the last update step, where the fraction is 1).
            So the last update prunes below the ``sparsity`` quantile of the weights of that step:
            a layer of ``n`` weights ends with exactly ``round(sparsity x n)`` zeros (fewer only
            where weights tie at the threshold). Taking ``q`` once at step ``start`` (this
            module's first version) missed the target: the weights grow while the threshold ramps
            (a GRU aimed at 90 % reached 76-79 %), and with ``every > 1`` the last update falls
            before ``end - 1``, where ``eps`` is below ``q`` (0.93 q for start 200, ramp 600, end
            1000, every 50). The equations as transcribed by IntelLabs/distiller's
            ``BaiduRNNPruner`` (``distiller/pruning/baidu_rnn_pruner.py``), which cites the paper.
``cubic``   Zhu & Gupta, "To prune, or not to prune", 2017 (arXiv:1710.01878), Eq. (1):
            ``s_t = s_f + (s_i - s_f) (1 - (t - t0) / (n dt))^3`` at ``t = t0, t0 + dt, ...,
            t0 + n dt`` (``start``, ``every``, ``end``); each update prunes exactly
            ``round(s_t x size)`` weights (the smallest magnitudes, earlier-pruned ones first), so
            the sparsity at ``end`` is ``sparsity`` exactly.
``N:M``     structured (``"2:4"``: NVIDIA Ampere's sparse tensor cores, Mishra et al.,
            "Accelerating Sparse Deep Neural Networks", arXiv:2104.08378, Section 2: in every group
            of 4 consecutive values along the contraction dimension at most 2 are nonzero): at
            step ``start`` the ``N`` largest magnitudes of each group of ``M`` consecutive weights
            along ``axis`` (default -2: the input axis of the models' ``(in, out)`` and
            ``(kh, kw, in, out)`` kernels) are kept, and the mask stays fixed (the paper's recipe:
            prune a trained dense model once, then retrain with the mask).

Steps count optimizer steps done (1 after the first): the mask update of step ``t`` runs after
optimizer step ``t``, then every pruned leaf is multiplied by its mask.
"""

from __future__ import annotations

import math
import numbers
import re
from dataclasses import dataclass

from asicsim._src.numerics.frozen_fields import settle
from asicsim._src.workloads.deepbench import WorkloadError

SCHEDULES = ("narang", "cubic", "N:M (e.g. 2:4)")
_NM = re.compile(r"^([1-9][0-9]?):([1-9][0-9]?)$")
FIELDS = ("match", "schedule", "sparsity", "start", "end", "ramp", "every", "initial_sparsity",
          "ramp_factor", "axis")


def _int(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _frac(v) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and 0.0 <= v < 1.0


@dataclass(frozen=True)
class PruneRule:
    """One ``[[prune]]`` table (module docstring); checks itself when built."""

    schedule: str
    start: int
    sparsity: float | None = None  # final sparsity (narang: q's quantile; cubic: s_f); N:M: 1 - N/M
    end: int | None = None  # narang/cubic: required; N:M: start
    ramp: int | None = None  # narang only: start <= ramp <= end
    every: int = 1  # steps between mask updates (Narang's freq, Zhu & Gupta's dt)
    initial_sparsity: float = 0.0  # cubic only: s_i
    ramp_factor: float = 1.5  # narang only: phi / theta (Section 3.1)
    axis: int = -2  # N:M only: the contraction axis the groups run along
    match: str = "*"

    def __post_init__(self) -> None:
        problems = rule_problems(self)
        if problems:
            raise WorkloadError(f"prune rule {self.match!r}: " + "; ".join(problems))
        if self.structured and self.end is None:
            settle(self, end=self.start)

    @property
    def structured(self) -> tuple[int, int] | None:
        """(N, M) of an ``N:M`` schedule, else None."""
        m = _NM.match(self.schedule) if isinstance(self.schedule, str) else None
        return (int(m.group(1)), int(m.group(2))) if m else None

    @property
    def final_sparsity(self) -> float:
        nm = self.structured
        return 1.0 - nm[0] / nm[1] if nm else float(self.sparsity)

    def update_steps(self) -> list[int]:
        """The steps after which the mask is updated."""
        if self.structured:
            return [self.start]
        stop = self.end if self.schedule == "cubic" else self.end - 1  # Narang: start <= itr < end
        return list(range(self.start, stop + 1, self.every))


def rule_problems(r: PruneRule) -> list[str]:
    """What is wrong with rule ``r``, one ``field = value: allowed: ...`` each."""
    out = []
    if not isinstance(r.match, str) or not r.match:
        out.append(f"match = {r.match!r}: allowed: a glob over weight paths, e.g. '*/wh'")
    nm = r.structured
    if r.schedule not in ("narang", "cubic") and nm is None:
        out.append(f"schedule = {r.schedule!r}: allowed: {' | '.join(SCHEDULES)}")
        return out
    if nm is not None and not nm[0] < nm[1]:
        out.append(f"schedule = {r.schedule!r}: allowed: N:M with 0 < N < M")
    if not _int(r.start) or r.start < 1:
        out.append(f"start = {r.start!r}: allowed: an integer >= 1 (a step count)")
    if not _int(r.every) or r.every < 1:
        out.append(f"every = {r.every!r}: allowed: an integer >= 1")
    if nm is not None:
        for k, default in (("sparsity", None), ("ramp", None), ("initial_sparsity", 0.0), ("ramp_factor", 1.5)):
            if getattr(r, k) != default:
                out.append(f"{k} = {getattr(r, k)!r}: allowed: not given for an N:M schedule "
                           f"(its sparsity is 1 - N/M)")
        if r.end is not None and r.end != r.start:
            out.append(f"end = {r.end!r}: allowed: not given, or start ({r.start!r}): an N:M mask is set once")
        if not _int(r.axis):
            out.append(f"axis = {r.axis!r}: allowed: an integer axis of the weight")
        return out
    if r.axis != -2:
        out.append(f"axis = {r.axis!r}: allowed: only for an N:M schedule")
    if not _frac(r.sparsity) or r.sparsity == 0:
        out.append(f"sparsity = {r.sparsity!r}: allowed: a fraction of zeros in (0, 1)")
    if not _int(r.end) or (_int(r.start) and r.end <= r.start):
        out.append(f"end = {r.end!r}: allowed: an integer step > start ({r.start!r})")
    elif _int(r.start) and _int(r.every) and r.every >= 1 and r.schedule == "cubic" and (r.end - r.start) % r.every:
        out.append(f"every = {r.every!r}: allowed: a divisor of end - start ({r.end - r.start}): "
                   "the last update is the end step")
    if r.schedule == "cubic":
        if r.ramp is not None or r.ramp_factor != 1.5:
            out.append("ramp, ramp_factor: allowed: only for schedule 'narang'")
        if not _frac(r.initial_sparsity) or (_frac(r.sparsity) and r.initial_sparsity > r.sparsity):
            out.append(f"initial_sparsity = {r.initial_sparsity!r}: allowed: a fraction in [0, sparsity]")
        return out
    if r.initial_sparsity != 0.0:
        out.append(f"initial_sparsity = {r.initial_sparsity!r}: allowed: only for schedule 'cubic'")
    if not _int(r.ramp) or not (_int(r.start) and _int(r.end) and r.start <= r.ramp <= r.end):
        out.append(f"ramp = {r.ramp!r}: allowed: an integer step in [start, end] ({r.start!r}, {r.end!r})")
    f = r.ramp_factor
    if isinstance(f, bool) or not isinstance(f, numbers.Real) or not (math.isfinite(f) and f > 0):
        out.append(f"ramp_factor = {f!r}: allowed: a finite number > 0 (the paper: 1.5)")
    return out


def rule_from_table(i: int, table) -> PruneRule:
    """``[[prune]]`` table ``i`` as a rule; unknown fields and bad values name ``prune[i]``."""
    if not isinstance(table, dict):
        raise WorkloadError(f"prune[{i}] = {table!r}: allowed: a table ([[prune]])")
    unknown = sorted(set(table) - set(FIELDS))
    if unknown:
        raise WorkloadError(f"prune[{i}].{unknown[0]}: no such field; fields are {list(FIELDS)}")
    if "schedule" not in table or "start" not in table:
        raise WorkloadError(f"prune[{i}]: schedule and start are required")
    try:
        return PruneRule(**table)
    except WorkloadError as err:
        raise WorkloadError(f"prune[{i}]: {err}") from None


def narang_theta(q: float, start: int, ramp: int, end: int, every: int) -> float:
    """Section 3.1's start slope: ``theta = 2 q freq / (2 (ramp - start) + 3 (end - ramp))``."""
    return 2.0 * q * every / (2 * (ramp - start) + 3 * (end - ramp))


def narang_threshold(t: int, theta: float, start: int, ramp: int, every: int, ramp_factor: float = 1.5) -> float:
    """Narang et al.'s threshold ``eps`` after step ``t`` (``start <= t < end``; module docstring)."""
    phi = ramp_factor * theta
    if t < ramp:
        return theta * (t - start + 1) / every
    return (theta * (ramp - start + 1) + phi * (t - ramp + 1)) / every


def narang_fractions(rule: PruneRule) -> list[float]:
    """The threshold at each of ``rule``'s update steps as a fraction of the last one's:
    ``eps(t) / eps(t_last)`` of Eq. 1 with Section 3.1's ``theta`` (``q`` cancels); the last is 1."""
    steps = rule.update_steps()
    theta = narang_theta(1.0, rule.start, rule.ramp, rule.end, rule.every)
    eps = [narang_threshold(t, theta, rule.start, rule.ramp, rule.every, rule.ramp_factor) for t in steps]
    return [e / eps[-1] for e in eps[:-1]] + [1.0]


def cubic_sparsity(t: int, final: float, start: int, end: int, initial: float = 0.0) -> float:
    """Zhu & Gupta's Eq. (1): the sparsity after step ``t`` (``start <= t <= end``)."""
    frac = min(max((t - start) / (end - start), 0.0), 1.0)
    if frac in (0.0, 1.0):  # the end points exactly (s_i + (s_f - s_i) is not always s_f in floats)
        return initial if frac == 0.0 else final
    return final + (initial - final) * (1.0 - frac) ** 3


def cubic_counts(rule: PruneRule, size: int) -> list[int]:
    """Weights pruned at each of ``rule``'s update steps of a leaf of ``size`` elements:
    ``round(s_t x size)``, nondecreasing, ``round(sparsity x size)`` at the end step."""
    out, prev = [], 0
    for t in rule.update_steps():
        k = round(cubic_sparsity(t, rule.sparsity, rule.start, rule.end, rule.initial_sparsity) * size)
        prev = max(prev, min(k, size))
        out.append(prev)
    return out
