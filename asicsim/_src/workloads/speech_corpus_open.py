"""A speech corpus with unseen voices and unseen sentences, synthesised offline: datasets
``speech_open`` (trains on 2 CPU cores in minutes) and ``speech_open_gpu`` (>= 10 h of training audio).

- Voices (:mod:`.speech_corpus_engines`): espeak-ng, flite and festival voices; the test voices are
  whole voices held out of training, sharing no recorded speaker, espeak-ng accent (base voice) or
  espeak-ng variant with a training voice (:class:`OpenSpeechSettings` refuses settings that would).
- Sentences (:mod:`.speech_corpus_texts`): clauses of GCIDE's definitions using only its most
  frequent words; a hash of each sentence puts it in the training or the test pool, so no test
  transcript occurs in training.
- Per utterance (seeded by (seed, split, index); threads do not change the result): a voice (round
  robin over the split's voices), a sentence, a duration stretch and a pitch factor (uniform in
  their ranges); speech trimmed (:func:`asicsim._src.workloads.speech_corpus.trim`) then resampled to
  16 kHz by the pitch factor; with probability ``reverb_fraction`` a shoebox room (3-8 x 3-6 x
  2.4-3.5 m, source and microphone >= 0.5 m from the walls, RT60 uniform in ``rt60``) convolved in
  by the image method; white or pink noise at an SNR uniform in ``snr_db``
  (:mod:`.speech_corpus_rooms`). An utterance longer than ``max_seconds`` is redrawn.
- Features: 40 HTK log-mel per 25 ms / 10 ms frame at 16 kHz, normalised by the training split's
  mean and standard deviation; labels as in :mod:`.speech_corpus` (same :data:`VOCAB`).

The result depends on the settings, GCIDE and the engines' versions; the cache key holds all three.
"""

from __future__ import annotations

import hashlib
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from asicsim._src.workloads import speech_corpus_rooms as rooms
from asicsim._src.workloads.dataset_store import Dataset, cached_arrays
from asicsim._src.workloads.logmel import log_mel, mel_filterbank
from asicsim._src.workloads.speech_corpus import VOCAB, ctc_dataset, trim
from asicsim._src.workloads.speech_corpus_engines import ENGINES, engine_versions, synthesize
from asicsim._src.workloads.speech_corpus_open_settings import (
    HOP,
    N_FFT,
    OPEN_PRESETS,
    RATE,
    WIN,
    OpenSpeechSettings,
)
from asicsim._src.workloads.speech_corpus_texts import gcide_clauses, gcide_identity, sentence_pools

FORMAT = 1  # bump when generation changes in a way the settings do not capture


def pools(s: OpenSpeechSettings) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The (train, test) sentence pools of ``s`` (:func:`.speech_corpus_texts.sentence_pools`)."""
    all_clauses = gcide_clauses(gcide_identity(), s.min_words, s.max_words, s.max_chars)
    train, test = sentence_pools(all_clauses, s.vocabulary, s.test_percent)
    if len(train) < 10 or len(test) < 10:
        raise ValueError(f"{s}: only {len(train)} training and {len(test)} test sentences; raise max_words, "
                         "max_chars or vocabulary")
    return train, test


def _room(rng: np.random.Generator, s: OpenSpeechSettings) -> np.ndarray:
    room = (rng.uniform(3, 8), rng.uniform(3, 6), rng.uniform(2.4, 3.5))
    source, mic = (tuple(rng.uniform(0.5, side - 0.5) for side in room) for _ in range(2))
    beta = rooms.sabine_beta(room, rng.uniform(*s.rt60))
    return rooms.image_rir(room, source, mic, beta, RATE, s.rir_seconds)


def utterance(s: OpenSpeechSettings, split: int, i: int, voice: str, pool, fb) -> tuple[np.ndarray, str, float]:
    """Log-mel frames, transcript and seconds of audio of utterance ``i`` of ``split`` (0 train, 1 test)."""
    rng = np.random.default_rng([s.seed, split, i])
    for _ in range(50):
        text = pool[rng.integers(len(pool))]
        stretch, pitch = rng.uniform(*s.stretch), rng.uniform(*s.pitch)
        x, rate = synthesize(voice, text, stretch)
        x = rooms.resample(trim(x, margin=rate // 20), rate, RATE, pitch)
        if rng.random() < s.reverb_fraction:
            x = rooms.reverberate(x, _room(rng, s))
        if len(x) <= s.max_seconds * RATE:
            break
    else:
        raise RuntimeError(f"50 draws of utterance {i} were all longer than max_seconds={s.max_seconds}")
    x = rooms.add_noise(rng, x, rng.uniform(*s.snr_db), ("white", "pink")[rng.integers(2)])
    return log_mel(x, fb, WIN, HOP), text, len(x) / RATE


def generate(s: OpenSpeechSettings, threads: int | None = None) -> dict[str, np.ndarray]:
    """The corpus as flat arrays (per split: frames concatenated, lengths, padded labels, voice
    indices into :attr:`OpenSpeechSettings.voices`, seconds of audio)."""
    fb = mel_filterbank(RATE, N_FFT, s.n_mels, 20.0, RATE / 2)
    out = {}
    with ThreadPoolExecutor(threads or os.cpu_count() or 1) as pool:
        for split, (name, n, voices, sentences) in enumerate(zip(
                ("train", "test"), (s.train_utterances, s.test_utterances), (s.train_voices, s.test_voices),
                pools(s), strict=True)):
            offset = 0 if split == 0 else len(s.train_voices)
            who = np.arange(n) % len(voices)
            res = list(pool.map(lambda i, who=who, split=split, voices=voices, sentences=sentences: utterance(
                s, split, i, voices[who[i]], sentences, fb), range(n)))
            labels = [[VOCAB.index(c) for c in text] for _, text, _ in res]
            y = np.full((n, max(map(len, labels))), -1, np.int32)
            for i, lab in enumerate(labels):
                y[i, : len(lab)] = lab
            out |= {f"{name}_x": np.concatenate([f for f, _, _ in res]), f"{name}_y": y,
                    f"{name}_len": np.array([len(f) for f, _, _ in res], np.int32),
                    f"{name}_speaker": (who + offset).astype(np.int32),
                    f"{name}_seconds": np.array([t for _, _, t in res])}
    mean, std = out["train_x"].mean(0, dtype=np.float64), out["train_x"].std(0, dtype=np.float64)
    for name in ("train", "test"):
        out[f"{name}_x"] = ((out[f"{name}_x"] - mean) / std).astype(np.float32)
    return out


def cache_key(name: str, s: OpenSpeechSettings, versions: str) -> str:
    return f"{name} format {FORMAT} {versions} gcide {gcide_identity()} {s!r}"


def used_engines(s: OpenSpeechSettings) -> tuple[str, ...]:
    return tuple(e for e in ENGINES if any(v.startswith(e + ":") for v in s.voices))


def load_arrays(name: str, settings: OpenSpeechSettings | None = None) -> tuple[OpenSpeechSettings, dict, str]:
    """(settings, :func:`generate`'s arrays, engine versions) of ``name``, generated once and cached."""
    s = settings or OPEN_PRESETS[name]
    versions = engine_versions(used_engines(s))
    key = cache_key(name, s, versions)
    return s, cached_arrays(name, key, lambda: generate(s)), versions


def load_open_speech(name: str, settings: OpenSpeechSettings | None = None) -> Dataset:
    """Dataset ``name`` (``speech_open``, ``speech_open_gpu``, or any name with ``settings``)."""
    s, a, versions = load_arrays(name, settings)
    digest = hashlib.sha256(repr(s).encode()).hexdigest()[:8]
    desc = (f"open speech ({versions}; settings {digest}): {s.train_utterances}/{s.test_utterances} "
            f"utterances, {len(s.train_voices)} training / {len(s.test_voices)} held-out voices, GCIDE "
            f"definition clauses (test sentences never in training), stretch {s.stretch}, pitch {s.pitch}, "
            f"rooms for {s.reverb_fraction:.0%}, noise {s.snr_db} dB SNR; {s.n_mels} log-mel 25/10 ms at "
            f"16 kHz, normalised by training mean/std; seed {s.seed}")
    return ctc_dataset(name, a, desc, s.voices)
