"""One search over a list of candidate schedules (:func:`asicsim._src.hw.mapper_candidates.candidates`):
measured in one chunk (a design point, small grids; a network's GEMMs in groups,
:mod:`asicsim._src.hw.mapper_groups`) or in many, and the best per element picked by the
objective (``balanced``: the fastest, then the least energy within its slack)."""

from __future__ import annotations

import numpy as np

from asicsim._src.hw import mapper_groups as groups
from asicsim._src.hw import mapper_passes as passes
from asicsim._src.hw.counts import ArrayHardware, GemmProblem
from asicsim._src.hw.objectives import BALANCED_SLACK


def search_over(p: GemmProblem, hw: ArrayHardware, shape, objective: str, score_energy, cands: list, chunks) -> tuple:
    """``((score, second), best fields)`` over candidate blocks ``cands`` and their stacked
    ``chunks`` (:func:`asicsim._src.hw.mapper_cache.searched`): the objective and its tie-break
    (``balanced``: the energy, then the latency) of the choice."""
    # one chunk (a design point, small grids): measured once for both of balanced's passes
    once = 2 * len(cands) * max(1, int(np.prod(shape))) <= passes.STACK_ELEMENTS
    grouped = groups.search_in_groups(p, hw, chunks[0], shape, score_energy,
                                      lambda m, sh: passes.search_once(m, sh, objective)) if once and chunks else None
    if grouped is not None:  # a network's one chunk, in groups of its GEMMs (same figures)
        score, best = grouped
    elif once:
        score, best = passes.search_once(list(passes.measure_chunks(p, hw, cands, shape, score_energy, chunks)),
                                         shape, objective)
    else:
        measured = passes.measure_chunks(p, hw, cands, shape, score_energy)
        if objective == "balanced":  # two passes: the fastest, then the least energy near it
            fast = lambda m: (m["latency"], m["energy"])  # noqa: E731
            kept: list = []
            limit = passes.search(passes.keeping(measured, kept, passes.candidate_count(cands, shape), shape), shape, fast)[0][0] * (1.0 + BALANCED_SLACK)
            measured = passes.kept_measures(p, hw, cands, shape, score_energy, kept)
            key = lambda m: (np.where(m["latency"] <= limit, m["energy"], np.inf), m["latency"])  # noqa: E731
        else:
            key = passes.objective_key(objective)
        score, best = passes.search(measured, shape, key)
    return score, best
