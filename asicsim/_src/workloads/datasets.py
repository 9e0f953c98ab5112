"""Real datasets that need no download: each ships in a package or is generated offline.

=================== ============================================================================
``digits``          scikit-learn's 8x8 handwritten digits (1797 images, 10 classes), pixels / 16
``mnist1d``         MNIST-1D (Greydanus 2020): ``make_dataset(get_dataset_args())``, 40-sample
                    signals, 10 classes, the package's own 4000 / 1000 split (never
                    ``get_dataset``, which downloads)
``pydoc``           characters of the standard library's ``pydoc_data.topics`` (Python's help
                    texts, ~465k characters), printable ASCII, for a character language model
``vowels``          JapaneseVowels (12 LPC cepstra per frame, 7-29 frames, 9 speakers), read
                    from the ``aeon`` package's shipped copy; optional extra ``asicsim[vowels]``
``fmnist``          Fashion-MNIST (28x28, 10 classes), read from Debian's
                    ``dataset-fashion-mnist`` package (or ``$ASICSIM_FASHION_MNIST``); optional
``speech``          spoken digits, command words and short phrases synthesised offline by
                    ``espeak-ng`` (96 speakers, 16 held out), 40 log-mel per 10 ms, for CTC
                    (:mod:`asicsim._src.workloads.speech_corpus`); optional: needs ``espeak-ng``
``speech_large``    the same at 10x the utterances and 240 speakers, for a GPU
``speech_open``     GCIDE definition clauses spoken by espeak-ng, flite and festival voices,
                    rate and pitch perturbed, in simulated rooms, with noise; test voices and
                    test sentences never occur in training
                    (:mod:`asicsim._src.workloads.speech_corpus_open`); optional: needs the engines
``speech_open_gpu`` the same with >= 10 h of training audio, for a GPU
``gcide``           characters of GCIDE, the GNU Collaborative International Dictionary of
                    English (Webster's 1913 and later additions: ~40 M characters of English
                    prose), read from Debian's ``dict-gcide`` package; optional (see :func:`_gcide`)
=================== ============================================================================

:func:`load_dataset` returns a :class:`Dataset` of numpy arrays with a fixed, seeded split.
A missing optional dataset raises :class:`DatasetUnavailable` naming what to install.
"""

from __future__ import annotations

import functools
import gzip
import importlib.util
import os
import struct
from pathlib import Path

import numpy as np

from asicsim._src.workloads.dataset_store import OPTIONAL as OPTIONAL
from asicsim._src.workloads.dataset_store import Dataset as Dataset
from asicsim._src.workloads.dataset_store import DatasetUnavailable as DatasetUnavailable
from asicsim._src.workloads.dataset_store import cache_dir as cache_dir
from asicsim._src.workloads.dataset_store import cached_arrays
from asicsim._src.workloads.speech_corpus import load_speech
from asicsim._src.workloads.speech_corpus_open import load_open_speech

#: Seed of every fixed split (train/test shuffles); the splits never change between runs.
SPLIT_SEED = 0
DATASETS = ("digits", "mnist1d", "pydoc", "vowels", "fmnist", "gcide", "speech", "speech_large", "speech_open",
            "speech_open_gpu")
GCIDE_FILE = "/usr/share/dictd/gcide.dict.dz"
ASCII_VOCAB = "".join(chr(c) for c in range(32, 127)) + "\n"  # printable ASCII + newline
FMNIST_DIRS = ("/usr/share/dataset-fashion-mnist", "/usr/share/fashion-mnist",
               "/usr/share/datasets/fashion-mnist")


def _split(x: np.ndarray, y: np.ndarray, test_fraction: float, seed: int = SPLIT_SEED):
    perm = np.random.default_rng(seed).permutation(len(x))
    n_test = round(len(x) * test_fraction)
    te, tr = perm[:n_test], perm[n_test:]
    return x[tr], y[tr], x[te], y[te]


def _digits() -> Dataset:
    from sklearn.datasets import load_digits

    d = load_digits()
    x = (d.data / 16.0).astype(np.float32)
    xtr, ytr, xte, yte = _split(x, d.target.astype(np.int32), 0.2)
    return Dataset("digits", "classify", xtr, ytr, xte, yte, 10,
                   description="scikit-learn digits, 8x8 pixels / 16, 80/20 split (seed 0)")


def _mnist1d() -> Dataset:
    from importlib.metadata import version

    from mnist1d.data import get_dataset_args, make_dataset

    args = get_dataset_args()
    keep = ("x", "y", "x_test", "y_test")

    def make() -> dict[str, np.ndarray]:
        d = make_dataset(args)  # generated offline; get_dataset would download
        return {k: np.asarray(d[k]) for k in keep}

    d = cached_arrays("mnist1d", f"mnist1d {version('mnist1d')} {sorted(vars(args).items())}", make)
    return Dataset("mnist1d", "classify", d["x"].astype(np.float32), d["y"].astype(np.int32),
                   d["x_test"].astype(np.float32), d["y_test"].astype(np.int32), 10,
                   description="MNIST-1D, make_dataset(get_dataset_args()) (seed 42), 4000/1000")


def _ascii_tokens(raw: bytes) -> np.ndarray:
    """Character ids (uint8) into :data:`ASCII_VOCAB`: any other byte (tab, non-ASCII) becomes "?"."""
    table = np.full(256, ASCII_VOCAB.index("?"), np.uint8)
    for i, ch in enumerate(ASCII_VOCAB):
        table[ord(ch)] = i
    return table[np.frombuffer(raw, np.uint8)]


def _lm(name: str, tokens: np.ndarray, description: str) -> Dataset:
    """A character LM dataset: the first 90 % of ``tokens`` train, the last 10 % validate."""
    tokens = tokens.astype(np.int32)
    cut = int(len(tokens) * 0.9)
    empty = np.zeros(0, np.int32)
    return Dataset(name, "lm", tokens[:cut], empty, tokens[cut:], empty, len(ASCII_VOCAB),
                   vocab=ASCII_VOCAB, description=description)


def _pydoc() -> Dataset:
    from pydoc_data.topics import topics

    text = "\n".join(topics[k] for k in sorted(topics))
    return _lm("pydoc", _ascii_tokens(text.encode("ascii", "replace")),
               "pydoc_data.topics (sorted by topic), printable ASCII + newline, "
               "first 90 % train / last 10 % validation")


def _gcide() -> Dataset:
    """GCIDE's text, character-level (printable ASCII + newline, the 96 ids of ``pydoc``).

    Why this corpus: it is the largest plainly licensed natural-language text that installs
    offline here. Debian's ``dict-gcide`` (0.48.5, GPL-2+; 14.8 MB download, installs in seconds)
    holds the dictionary as one dictzip (gzip-compatible) file of 39,952,321 bytes: definitions
    and dated quotations in English prose, all but 3 bytes ASCII. The alternatives were smaller:
    ``bible-kjv-text`` (2.6 MB installed), ``dict-wn`` (12 MB installed, but terse WordNet
    glosses and word lists),
    ``fortunes`` (2.6 MB installed), ``pydoc_data`` (~0.47 MB, already the ``pydoc`` dataset); PyPI
    text corpora (nltk's, Hugging Face's) download their data at run time, which we may not.

    Tokens are characters, not BPE (GPT-2's merges would be a download). The dictionary's
    layout indents every line; runs of spaces are collapsed to one, which takes it from 40.0 M
    to 35,715,586 characters (dict-gcide 0.48.5). Entries stay in the file's
    (alphabetical) order: the first 90 % train, the last 10 % (words from "tick" on)
    validate. The token stream is cached (:func:`cache_dir`), keyed by the file's path, size
    and modification time.
    """
    import re

    path = Path(os.environ.get("ASICSIM_GCIDE") or GCIDE_FILE)
    if not path.is_file():
        raise DatasetUnavailable(f"dataset 'gcide' needs {path}: {OPTIONAL['gcide']}")
    st = path.stat()

    def make() -> dict[str, np.ndarray]:
        raw = gzip.decompress(path.read_bytes())  # a dictzip file is a gzip file
        return {"tokens": _ascii_tokens(re.sub(rb" +", b" ", raw))}

    d = cached_arrays("gcide", f"gcide v1 {path.resolve()} {st.st_size} {st.st_mtime_ns}", make)
    return _lm("gcide", d["tokens"], f"GCIDE ({path}), spaces collapsed, printable ASCII + "
                                     "newline, first 90 % train / last 10 % validation")


def _read_ts(path: Path) -> tuple[list[np.ndarray], list[str]]:
    """A sktime/aeon ``.ts`` file: per case ``dim1:dim2:...:label``, dims comma separated."""
    series, labels = [], []
    data = False
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.lower().startswith("@data"):
            data = True
            continue
        if not data or line.startswith("@"):
            continue
        *dims, label = line.split(":")
        series.append(np.array([[float(v) for v in d.split(",")] for d in dims], np.float32).T)
        labels.append(label.strip())
    return series, labels


def _vowels() -> Dataset:
    spec = importlib.util.find_spec("aeon")
    if spec is None or spec.origin is None:
        raise DatasetUnavailable(f"dataset 'vowels' needs the optional extra: {OPTIONAL['vowels']}")
    root = Path(spec.origin).parent / "datasets" / "data" / "JapaneseVowels"
    files = [root / f"JapaneseVowels_{s}.ts" for s in ("TRAIN", "TEST")]
    if not all(f.is_file() for f in files):
        raise DatasetUnavailable(f"aeon is installed but has no {root}/JapaneseVowels_TRAIN.ts; "
                                 f"{OPTIONAL['vowels']}")
    parts = [_read_ts(f) for f in files]
    steps = max(s.shape[0] for series, _ in parts for s in series)
    classes = sorted({lab for _, labels in parts for lab in labels})

    def pad(series):  # zero-pad at the end to the longest utterance: (N, T, 12)
        out = np.zeros((len(series), steps, series[0].shape[1]), np.float32)
        for i, s in enumerate(series):
            out[i, : s.shape[0]] = s
        return out

    (xs, ls), (xt, lt) = parts
    y = [np.array([classes.index(v) for v in lab], np.int32) for lab in (ls, lt)]
    return Dataset("vowels", "classify", pad(xs), y[0], pad(xt), y[1], len(classes),
                   description=f"JapaneseVowels (aeon's copy), 12 cepstra x {steps} frames "
                               "zero-padded, the archive's 270/370 split")


def _idx(path: Path) -> np.ndarray:
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    ndim = raw[3]
    shape = struct.unpack(f">{ndim}I", raw[4:4 + 4 * ndim])
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * ndim).reshape(shape)


def _fmnist() -> Dataset:
    dirs = [os.environ["ASICSIM_FASHION_MNIST"]] if os.environ.get("ASICSIM_FASHION_MNIST") else []
    for d in [*dirs, *FMNIST_DIRS]:
        root = Path(d)
        found = {}
        for stem in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                     "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
            hits = [p for p in (root / f"{stem}.gz", root / stem) if p.is_file()]
            if hits:
                found[stem] = hits[0]
        if len(found) == 4:
            xtr, ytr, xte, yte = (_idx(p) for p in found.values())
            return Dataset("fmnist", "classify", (xtr / 255.0).astype(np.float32)[..., None],
                           ytr.astype(np.int32), (xte / 255.0).astype(np.float32)[..., None],
                           yte.astype(np.int32), 10,
                           description=f"Fashion-MNIST from {root}, 28x28x1 / 255, 60000/10000")
    raise DatasetUnavailable(f"dataset 'fmnist' (Fashion-MNIST) is not installed: {OPTIONAL['fmnist']}")


def _speech(name: str) -> Dataset:
    return load_speech(name)


_LOADERS = {"digits": _digits, "mnist1d": _mnist1d, "pydoc": _pydoc, "vowels": _vowels,
            "fmnist": _fmnist, "gcide": _gcide, "speech": functools.partial(_speech, "speech"),
            "speech_large": functools.partial(_speech, "speech_large"),
            "speech_open": functools.partial(load_open_speech, "speech_open"),
            "speech_open_gpu": functools.partial(load_open_speech, "speech_open_gpu")}


@functools.cache
def load_dataset(name: str) -> Dataset:
    """The dataset ``name`` (one of :data:`DATASETS`), cached per process.

    Raises:
      DatasetUnavailable: an optional dataset is missing (the message names the extra).
      ValueError: an unknown name.
    """
    if name not in _LOADERS:
        raise ValueError(f"unknown dataset {name!r}; datasets are {list(DATASETS)}")
    return _LOADERS[name]()

