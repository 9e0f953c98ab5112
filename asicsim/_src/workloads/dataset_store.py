"""What every dataset loader shares: the :class:`Dataset` record, the error for a missing optional
dataset with how to install it, and the on-disk cache of generated arrays.

A module of its own so that the loaders in :mod:`asicsim._src.workloads.datasets` and the speech corpus
(:mod:`asicsim._src.workloads.speech_corpus`) share them without importing each other.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from asicsim._files import atomic_path

#: How to install each optional dataset (the message of :class:`DatasetUnavailable`).
OPTIONAL = {"vowels": "pip install 'asicsim[vowels]' (the aeon package ships JapaneseVowels)",
            "fmnist": "apt-get install dataset-fashion-mnist (Debian), or set $ASICSIM_FASHION_MNIST "
                      "to a folder holding the four *-ubyte.gz files",
            "gcide": "apt-get install dict-gcide (Debian), or set $ASICSIM_GCIDE to a gcide.dict.dz",
            "speech": "apt-get install espeak-ng (Debian; the speech corpus is synthesised by it)",
            "speech_large": "apt-get install espeak-ng (Debian; the speech corpus is synthesised by it)",
            "speech_open": "apt-get install espeak-ng flite festival festvox-kallpc16k dict-gcide (Debian)",
            "speech_open_gpu": "apt-get install espeak-ng flite festival festvox-kallpc16k dict-gcide (Debian)"}


class DatasetUnavailable(RuntimeError):
    """An optional dataset is not installed; the message says how to install it."""


@dataclass(frozen=True)
class Dataset:
    """A dataset as numpy arrays.

    Classification (``task == "classify"``): ``x_train`` (N, *feature_shape) float32, ``y_train``
    (N,) int32, same for test. Language model (``task == "lm"``): ``x_train``/``x_test`` are 1-D
    int32 token streams (train: the first 90 %, test: the last 10 %), ``y_*`` empty, ``vocab`` the
    characters. Speech recognition (``task == "ctc"``): ``x_*`` (N, T, features) float32 frames,
    zero-padded after each utterance's ``x_len_*[i]`` frames; ``y_*`` (N, L) int32 character ids
    padded with -1; ``vocab[0]`` is the CTC blank (never a label), ``num_classes == len(vocab)``;
    ``speakers_*`` (N,) int32 index into ``speaker_names`` (the test split's speakers are not the
    training split's).
    """

    name: str
    task: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    num_classes: int
    vocab: str = ""
    description: str = ""
    x_len_train: np.ndarray | None = None
    x_len_test: np.ndarray | None = None
    speakers_train: np.ndarray | None = None
    speakers_test: np.ndarray | None = None
    speaker_names: tuple[str, ...] = ()

    @property
    def feature_shape(self) -> tuple[int, ...]:
        return tuple(self.x_train.shape[1:])

    def summary(self) -> dict:
        return {"name": self.name, "task": self.task, "train": tuple(self.x_train.shape),
                "test": tuple(self.x_test.shape), "classes": self.num_classes}


def cache_dir() -> Path:
    """Where generated datasets are kept between processes: ``$ASICSIM_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/asicsim``, else ``~/.cache/asicsim``."""
    if os.environ.get("ASICSIM_CACHE_DIR"):
        return Path(os.environ["ASICSIM_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "asicsim"


def cached_arrays(name: str, key: str, make) -> dict[str, np.ndarray]:
    """``make()``'s arrays, generated once and kept in :func:`cache_dir` (MNIST-1D takes seconds
    to generate; every training or sweep worker process would otherwise pay that)."""
    import hashlib

    path = cache_dir() / f"{name}-{hashlib.sha256(key.encode()).hexdigest()[:16]}.npz"
    try:
        with np.load(path) as f:
            return dict(f)
    except (OSError, ValueError):  # absent or unreadable: generate it
        pass
    arrays = make()
    try:  # atomic: a concurrent reader sees the whole file or none
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(path, suffix=".tmp.npz") as tmp:  # (np.savez appends .npz otherwise)
            np.savez(tmp, **arrays)
    except OSError:  # a read-only home: the data is still right, only not kept for the next process
        pass
    return arrays
