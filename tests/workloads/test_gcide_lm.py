"""The GCIDE character corpus (Debian's dict-gcide) and the GPT-2-shaped LM workload on it.

The reader is tested on a file made here (hand-computed tokens, the cache, the missing-package
message) and on the installed package: locally a missing dict-gcide skips those tests; under CI
(``CI=true``) it fails them, since .ci/run installs it."""

from __future__ import annotations

import gzip
import os
import re
from pathlib import Path

import numpy as np
import pytest

from asicsim._src.workloads import datasets
from asicsim._src.workloads.datasets import ASCII_VOCAB, DatasetUnavailable, load_dataset
from asicsim._src.workloads.training import train


def _decode(tokens) -> str:
    return "".join(ASCII_VOCAB[i] for i in tokens)


def test_reader_on_a_made_file_collapses_spaces_and_caches(tmp_path, monkeypatch):
    src = tmp_path / "gcide.dict.dz"
    unit = b"Abuse \\A*buse\"\\, v. t.\n      [1913 Webster]\n\tcaf\xe9   "
    src.write_bytes(gzip.compress(unit * 10))
    monkeypatch.setenv("ASICSIM_GCIDE", str(src))
    monkeypatch.setenv("ASICSIM_CACHE_DIR", str(tmp_path / "cache"))
    d = datasets._gcide()
    want = 'Abuse \\A*buse"\\, v. t.\n [1913 Webster]\n?caf? ' * 10  # tab and the latin-1 byte: "?"
    assert _decode(np.concatenate([d.x_train, d.x_test])) == want
    assert len(d.x_train) == int(len(want) * 0.9) and d.x_train.dtype == np.int32
    assert (d.task, d.num_classes, d.vocab) == ("lm", 96, ASCII_VOCAB)
    cached = list((tmp_path / "cache").glob("gcide-*.npz"))
    assert len(cached) == 1
    src.write_bytes(gzip.compress(unit * 2))  # another file (size): another cache entry
    assert _decode(np.concatenate([(e := datasets._gcide()).x_train, e.x_test])) == want[: len(want) // 5]
    assert len(list((tmp_path / "cache").glob("gcide-*.npz"))) == 2


def test_missing_gcide_names_the_package(tmp_path, monkeypatch):
    monkeypatch.setenv("ASICSIM_GCIDE", str(tmp_path / "none.dict.dz"))
    with pytest.raises(DatasetUnavailable, match=r"none\.dict\.dz: apt-get install dict-gcide"):
        datasets._gcide()


def _real():
    try:
        return load_dataset("gcide")
    except DatasetUnavailable as err:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must install dict-gcide: {err}")
        pytest.skip(str(err))


def test_installed_gcide_is_the_dictionary():
    if os.environ.get("ASICSIM_GCIDE"):
        pytest.skip("$ASICSIM_GCIDE points elsewhere")
    d = _real()
    raw = gzip.decompress(Path(datasets.GCIDE_FILE).read_bytes())
    n = len(d.x_train) + len(d.x_test)
    assert n == len(re.sub(rb" +", b" ", raw)) and n > 30_000_000  # 35.7 M in dict-gcide 0.48.5
    assert len(d.x_train) == int(n * 0.9)
    newline = ASCII_VOCAB.index("\n")
    assert int(np.sum(d.x_train == newline) + np.sum(d.x_test == newline)) == raw.count(b"\n")
    head = _decode(d.x_train[:3_000_000])
    assert "The . . . tellers of news abused the general." in head  # under "Abuse", v. t. (1913 Webster)
    assert "  " not in head


@pytest.mark.experiment
def test_small_gpt2_lm_learns_gcide():
    _real()
    r = train("gpt2_small_lm", "bf16", seeds=(0,), stats=False)  # the small scale: ~3 min on 2 cores
    # chance is ln 96 = 4.56 nats per character; measured 1.95 (benchmarks/RESULTS.md)
    assert r.mean < 2.2 and not r.diverged, r.mean
