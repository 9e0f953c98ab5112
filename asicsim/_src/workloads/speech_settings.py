"""The settings of the synthesised speech corpus (:mod:`asicsim._src.workloads.speech_corpus`, whose
module doc says what each one does): :class:`SpeechSettings`, checked when built, the voices and
variants it draws speakers from, the label vocabulary, and the named corpora (:data:`PRESETS`)."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from asicsim._src.numerics.frozen_fields import (
    check_scalar_fields,
    convert_fields,
    converted,
    list_as_tuple,
)

VOCAB = "_ '" + "abcdefghijklmnopqrstuvwxyz"
SAMPLE_RATE = 22050  # espeak-ng's output rate
ENGLISH_VOICES = ("en-us", "en-gb", "en-gb-scotland", "en-gb-x-rp", "en-gb-x-gbclan", "en-gb-x-gbcwmd",
                  "en-029", "en-us-nyc")
SMALL_VARIANTS = ("m1", "m2", "m3", "m4", "m5", "m6", "m7", "f1", "f2", "f3", "f4", "f5")
LARGE_VARIANTS = (*SMALL_VARIANTS, "m8", "klatt", "klatt2", "klatt3", "klatt4", "klatt5", "klatt6", "croak",
                                   "grandma", "grandpa", "Alex", "Annie", "adam", "edward", "john", "linda",
                                   "steph", "travis")


@dataclass(frozen=True)
class SpeechSettings:
    """Everything the corpus depends on (with the espeak-ng version); validated at construction."""

    train_utterances: int = 3000
    test_utterances: int = 600
    voices: tuple[str, ...] = converted(list_as_tuple, default=ENGLISH_VOICES)
    variants: tuple[str, ...] = converted(list_as_tuple, default=SMALL_VARIANTS)
    test_speakers: int = 16
    mix: tuple[float, float, float] = converted(list_as_tuple, default=(0.3, 0.3, 0.4))  # digit strings, command words, phrases
    max_digits: int = 4
    max_sentence_chars: int = 30
    rate: tuple[int, int] = converted(list_as_tuple, default=(150, 220))  # words per minute, espeak-ng -s (its default is 175)
    pitch: tuple[int, int] = converted(list_as_tuple, default=(20, 80))  # espeak-ng -p, 0-99 (default 50)
    gap: tuple[int, int] = converted(list_as_tuple, default=(0, 3))  # extra pause between words, units of 10 ms, espeak-ng -g
    snr_db: float = 20.0  # inf: no noise
    max_seconds: float = 2.0
    n_mels: int = 40
    win_ms: float = 25.0
    hop_ms: float = 10.0
    fmin: float = 20.0
    fmax: float = 8000.0
    seed: int = 0

    def __post_init__(self):
        def bad(name, allowed):
            raise ValueError(f"SpeechSettings.{name} = {getattr(self, name)!r}: {allowed}")

        convert_fields(self)  # a list (from TOML) keys as a tuple
        check_scalar_fields(self, bad)
        for name in ("train_utterances", "test_utterances", "max_digits", "n_mels"):
            if getattr(self, name) < 1:
                bad(name, "must be >= 1")
        if not self.voices or any(v not in ENGLISH_VOICES for v in self.voices):
            bad("voices", f"must be a non-empty tuple of espeak-ng English voices {ENGLISH_VOICES}")
        if not self.variants or any(not re.fullmatch(r"[A-Za-z0-9_-]+", v) for v in self.variants):
            bad("variants", "must be a non-empty tuple of espeak-ng variant names (espeak-ng --voices=variant)")
        if len(set(self.voices)) != len(self.voices) or len(set(self.variants)) != len(self.variants):
            bad("voices" if len(set(self.voices)) != len(self.voices) else "variants", "has duplicates")
        if not 1 <= self.test_speakers < len(self.voices) * len(self.variants):
            bad("test_speakers", f"must be in 1..{len(self.voices) * len(self.variants) - 1} (leave training "
                                 "speakers among the voices x variants)")
        if len(self.mix) != 3 or min(self.mix) < 0 or abs(sum(self.mix) - 1) > 1e-9:
            bad("mix", "must be 3 non-negative weights (digits, commands, phrases) summing to 1")
        for name, lo, hi in (("rate", 80, 450), ("pitch", 0, 99), ("gap", 0, 100)):
            r = getattr(self, name)
            if len(r) != 2 or not all(isinstance(v, int) for v in r) or not lo <= r[0] <= r[1] <= hi:
                bad(name, f"must be (low, high) ints with {lo} <= low <= high <= {hi}")
        if not self.snr_db >= -20:
            bad("snr_db", "must be >= -20 dB (inf for no noise)")
        if not 0 < self.max_seconds <= 30:
            bad("max_seconds", "must be in (0, 30]")
        if self.max_sentence_chars < 3:
            bad("max_sentence_chars", "must be >= 3")
        if not 1 <= self.hop_ms <= self.win_ms <= 100:
            bad("hop_ms" if self.hop_ms < 1 else "win_ms", "need 1 <= hop_ms <= win_ms <= 100")
        if not 0 <= self.fmin < self.fmax <= SAMPLE_RATE / 2:
            bad("fmax" if self.fmin >= 0 else "fmin", f"need 0 <= fmin < fmax <= {SAMPLE_RATE / 2} Hz")

    @property
    def speakers(self) -> tuple[str, ...]:
        """All speakers, ``voice+variant``, voices major (the order of ``speaker_names``)."""
        return tuple(f"{v}+{w}" for v in self.voices for w in self.variants)

    def speaker_split(self) -> tuple[np.ndarray, np.ndarray]:
        """(train, test) indices into :attr:`speakers`, sorted; a seeded shuffle picks the test ones."""
        perm = np.random.default_rng([self.seed, 12345]).permutation(len(self.speakers))
        return np.sort(perm[self.test_speakers:]), np.sort(perm[: self.test_speakers])

    @property
    def frame(self) -> tuple[int, int, int]:
        """(window, hop, n_fft) in samples; n_fft is the window rounded up to a power of two."""
        win = round(self.win_ms * SAMPLE_RATE / 1000)
        return win, round(self.hop_ms * SAMPLE_RATE / 1000), 1 << (win - 1).bit_length()


PRESETS = {
    "speech": SpeechSettings(),
    # A GPU's corpus: 10x the utterances, 240 speakers (40 held out)
    "speech_large": SpeechSettings(train_utterances=30000, test_utterances=6000, variants=LARGE_VARIANTS,
                                   test_speakers=40),
}
