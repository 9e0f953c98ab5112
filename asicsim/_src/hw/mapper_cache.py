"""What the mapper keeps by content between calls (a network priced again on the same design
point): the stacked candidates of small problems and the schedule chosen for them. Every key is
the content of what the kept value is a function of (dtype, shape and bytes of each array, the
buffer layout; never a name), so a hit gives what a miss computes (``tests/hw/test_mapper_fast.py``
holds it); kept arrays are read-only."""

from __future__ import annotations

import dataclasses

import numpy as np

from asicsim._src.hw import mapper_passes as passes
from asicsim._src.hw.count_inputs import ArrayHardware, GemmProblem, Schedule
from asicsim._src.hw.mapper_shapes import FIELDS

#: The stacked candidates of small problems (a network on one design point), by the content of the
#: problem and the hardware (every array's dtype, shape and bytes, the buffer layout: never a
#: name): pricing the same GEMMs on the same design point again skips generating them. The
#: candidates are a function of exactly these (:func:`asicsim._src.hw.mapper_candidates.candidates`,
#: :func:`asicsim._src.hw.mapper_passes.stacked_chunks`), so a hit
#: gives the arrays a miss would build; they are read-only. Design sweeps (more than
#: :data:`CACHE_PAIRS` candidate-element pairs) are not kept.
_CACHE: dict = {}
CACHE_ENTRIES = 128
CACHE_PAIRS = 1 << 16


def clear_cache() -> None:
    """Forget the cached candidates and choices (timing a first call)."""
    _CACHE.clear()
    _CHOSEN.clear()


def _content(v) -> tuple:
    """A value's content for a key: an array's dtype, shape and bytes; a tuple item by item."""
    if isinstance(v, tuple):
        return tuple(map(_content, v))
    if isinstance(v, np.ndarray | np.generic):
        a = np.asarray(v)
        return (a.dtype.str, a.shape, a.tobytes())
    return (type(v).__name__, v)


def _content_key(p: GemmProblem, hw: ArrayHardware) -> tuple:
    """Every field of the problem and of the hardware by content (never by name), so a field
    added to either is in the key without a change here."""
    problem = [(f.name, _content(getattr(p, f.name))) for f in dataclasses.fields(GemmProblem) if f.name != "off_chip"]
    off_chip = [(k, _content(np.asarray(p.off_chip[k]))) for k in sorted(p.off_chip)]
    hardware = [(f.name, _content(getattr(hw, f.name))) for f in dataclasses.fields(ArrayHardware)]
    return (tuple(problem), tuple(off_chip), tuple(hardware))


#: The chosen schedule of small problems by the content of the problem and the hardware
#: (:func:`_content_key`), the objective and the content of what ``score_energy`` reads
#: (``energy_key``: :func:`asicsim._src.hw.pricing.schedule_energy_key`): the choice is a function of
#: exactly these, so pricing the same network on the same design point again counts the chosen
#: schedule only. Read-only arrays; without an ``energy_key`` for a ``score_energy`` nothing is kept.
_CHOSEN: dict = {}


def chosen_key(p: GemmProblem, hw: ArrayHardware, shape, objective: str, score_energy, energy_key):
    """The :data:`_CHOSEN` key of a search, or None where it is not kept (a design sweep, or an
    energy function without the content of what it reads)."""
    if max(1, int(np.prod(shape))) > CACHE_PAIRS // 1024 or (score_energy is not None and energy_key is None):
        return None
    return (_content_key(p, hw), objective, energy_key)


def chosen(key) -> Schedule | None:
    """The schedule chosen before for ``key`` (:func:`chosen_key`), or None."""
    return None if key is None else _CHOSEN.get(key)


def remember(key, s: Schedule) -> None:
    """Keep schedule ``s`` chosen for ``key`` (None: not kept)."""
    if key is None:
        return
    for f in FIELDS:
        np.asarray(getattr(s, f)).flags.writeable = False
    if len(_CHOSEN) >= CACHE_ENTRIES:
        _CHOSEN.pop(next(iter(_CHOSEN)))
    _CHOSEN[key] = s


def searched(p: GemmProblem, hw: ArrayHardware, shape, generate, variant=None) -> tuple:
    """(candidate blocks ``generate(p, hw)``, :func:`asicsim._src.hw.mapper_passes.prepared`; their
    stacked chunks or None where there are several): from the cache where the content matches
    (one ``generate`` per ``variant``: the mapper's, with that many smaller array levels)."""
    small = max(1, int(np.prod(shape))) <= CACHE_PAIRS // 1024
    key = (_content_key(p, hw), variant) if small else None
    if key is not None and key in _CACHE:
        return _CACHE[key]
    cands = passes.prepared(generate(p, hw), shape)
    if 2 * len(cands) * max(1, int(np.prod(shape))) > min(passes.STACK_ELEMENTS, CACHE_PAIRS) or key is None:
        return cands, None
    chunks = list(passes.stacked_chunks(p, hw, cands, shape, narrow=False))
    for c in chunks:
        for f in FIELDS:
            getattr(c, f).flags.writeable = False
    if len(_CACHE) >= CACHE_ENTRIES:
        _CACHE.pop(next(iter(_CACHE)))
    _CACHE[key] = (cands, chunks)
    return cands, chunks
