"""The optional real datasets (JapaneseVowels from aeon, Fashion-MNIST from Debian's
dataset-fashion-mnist) read from their installed copies, and their workloads learn.

Locally a missing dataset skips these tests; under CI (``CI=true``) it fails them: .ci/run installs
both, so there the readers are tested on the real files, not only on files the tests make."""

from __future__ import annotations

import os

import numpy as np
import pytest

from asicsim._src.workloads.datasets import DatasetUnavailable, load_dataset
from asicsim._src.workloads.training import train


def _real(name: str):
    try:
        return load_dataset(name)
    except DatasetUnavailable as err:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must install the optional dataset {name!r}: {err}")
        pytest.skip(str(err))


def test_japanese_vowels_is_the_uci_set():
    d = _real("vowels")
    # Kudo et al. 1999: 270 training and 370 test utterances of 9 speakers, 12 LPC cepstra per frame,
    # 7-29 frames (zero-padded here to the longest)
    assert d.x_train.shape == (270, 29, 12) and d.x_test.shape == (370, 29, 12)
    assert d.num_classes == 9 and set(np.unique(d.y_train)) == set(range(9))
    assert np.bincount(d.y_train).tolist() == [30] * 9  # 30 training utterances per speaker


def test_fashion_mnist_is_the_zalando_set():
    d = _real("fmnist")
    assert d.x_train.shape == (60000, 28, 28, 1) and d.x_test.shape == (10000, 28, 28, 1)
    assert np.bincount(d.y_train).tolist() == [6000] * 10 and np.bincount(d.y_test).tolist() == [1000] * 10
    assert 0.0 <= d.x_train.min() and d.x_train.max() <= 1.0


# the GRU (~8 s) in the slow step
@pytest.mark.parametrize("workload, steps, floor", [pytest.param("vowels_gru", 300, 0.85, marks=pytest.mark.slow),
                                                    ("fmnist_mlp", 400, 0.80)])
def test_optional_workloads_learn(workload, steps, floor):
    _real("vowels" if workload.startswith("vowels") else "fmnist")
    r = train(workload, "fp32", seeds=(0,), steps=steps, eval_every=steps, stats=False)
    assert r.mean > floor, r.mean
