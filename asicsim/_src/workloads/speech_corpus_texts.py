"""Sentences for the open speech corpus (:mod:`asicsim._src.workloads.speech_corpus_open`), cut from the
definitions of GCIDE (Debian's ``dict-gcide``, the text of the ``gcide`` LM dataset).

- Definition lines are the dictionary's lines indented by 3 or 6 spaces (headwords start at column
  0 and quotations are indented 12 or more); bracketed notes (``[1913 Webster]``, ``[Obs.]``),
  parenthesised labels (``(Zool.)``), citations (``--Milton``) and sense numbers are dropped, and
  cross references ``{Afeard}`` keep their word.
- The text is cut into clauses at ``.;:!?,`` and a clause is kept when it has ``min_words`` to
  ``max_words`` words, at most ``max_chars`` characters, its first word is lowercase or capitalised
  and every other word is lowercase letters with at most one apostrophe (no names, numbers, marks),
  and no word follows itself (``a a``: the remains of cut abbreviations).
- The clauses are unique (a clause is one string, so it cannot fall in both splits) and
  :func:`split_of` puts each in the test split when a hash of its text says so: the split of a
  sentence depends on its text only, never on which other sentences the settings keep.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import itertools
import os
import re
from collections import Counter
from pathlib import Path

from asicsim._src.workloads.dataset_store import DatasetUnavailable

GCIDE_FILE = "/usr/share/dictd/gcide.dict.dz"
_WORD = re.compile(r"[a-z]+('[a-z]+)?")


def gcide_path() -> Path:
    """``$ASICSIM_GCIDE`` or Debian's file; DatasetUnavailable when neither is there."""
    path = Path(os.environ.get("ASICSIM_GCIDE") or GCIDE_FILE)
    if not path.is_file():
        raise DatasetUnavailable(f"the open speech corpus's sentences need {path}: apt-get install dict-gcide "
                                 "(Debian), or set $ASICSIM_GCIDE to a gcide.dict.dz")
    return path


def gcide_identity() -> str:
    """The path, size and modification time of the GCIDE file (a cache key's part)."""
    path = gcide_path()
    st = path.stat()
    return f"{path.resolve()} {st.st_size} {st.st_mtime_ns}"


def definition_text(raw: str) -> str:
    """The definition prose of the dictionary's text (see the module doc)."""
    lines = [ln.strip() for ln in raw.split("\n") if re.match(r" {3}\S| {6}\S", ln)]
    text = " ".join(ln for ln in lines if not ln.startswith("["))
    text = re.sub(r"\[[^\]]*\]|--\S+", " ", text).replace("{", "").replace("}", "")
    text = re.sub(r"\b\d+\.\s", " . ", text)
    return re.sub(r"\([^)]*\)", " , ", text)


def clauses(text: str, min_words: int, max_words: int, max_chars: int) -> set[str]:
    """The plain clauses of ``text`` (module doc), lowercased."""
    out = set()
    for clause in re.split(r"[.;:!?,]", text):
        words = clause.split()
        if not min_words <= len(words) <= max_words:
            continue
        words[0] = words[0][0].lower() + words[0][1:]
        sentence = " ".join(words)
        if (len(sentence) <= max_chars and all(_WORD.fullmatch(w) for w in words)
                and all(a != b for a, b in itertools.pairwise(words))):
            out.add(sentence)
    return out


@functools.cache
def gcide_clauses(identity: str, min_words: int, max_words: int, max_chars: int) -> tuple[str, ...]:
    """Every plain clause of GCIDE's definitions, sorted (``identity`` keys the per-process cache)."""
    raw = gzip.decompress(gcide_path().read_bytes()).decode("latin-1")
    return tuple(sorted(clauses(definition_text(raw), min_words, max_words, max_chars)))


def split_of(sentence: str, test_percent: int) -> int:
    """0 (train) or 1 (test): SHA-256 of the sentence, first 8 bytes mod 100, below ``test_percent``."""
    return int(int.from_bytes(hashlib.sha256(sentence.encode()).digest()[:8], "big") % 100 < test_percent)


def sentence_pools(all_clauses: tuple[str, ...], vocabulary: int, test_percent: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(train, test) sentences: the clauses whose words are all among the ``vocabulary`` most frequent
    words of all clauses (ties broken alphabetically), split by :func:`split_of`."""
    counts = Counter(w for c in all_clauses for w in c.split())
    common = {w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:vocabulary]}
    pools: tuple[list[str], list[str]] = ([], [])
    for c in all_clauses:
        if all(w in common for w in c.split()):
            pools[split_of(c, test_percent)].append(c)
    return tuple(pools[0]), tuple(pools[1])
