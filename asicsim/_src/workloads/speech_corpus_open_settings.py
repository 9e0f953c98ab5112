"""The settings of the open speech corpus (:mod:`asicsim._src.workloads.speech_corpus_open`): which voices
train and which test, the sentence pool, the perturbations, checked when built; the named corpora
(:data:`OPEN_PRESETS`) and an estimate of a corpus's hours from its settings alone."""

from __future__ import annotations

from dataclasses import dataclass

from asicsim._src.numerics.frozen_fields import (
    check_scalar_fields,
    convert_fields,
    converted,
    list_as_tuple,
)
from asicsim._src.workloads.speech_corpus_engines import check_voice, speaker_parts

RATE = 16000  # every engine's output is resampled to this rate
WIN, HOP, N_FFT = 400, 160, 512  # 25 ms / 10 ms frames at RATE
#: Seconds of trimmed speech per character of the transcript at stretch 1 and pitch factor 1,
#: measured on 6 training sentences of `speech_open` per voice, its 48 voices (0.0582; espeak-ng
#: 0.060, flite 0.069, festival 0.062); tests/workloads/test_speech_corpus_open.py checks the
#: estimate against the generated corpus's hours.
SECONDS_PER_CHAR = 0.0582

_TRAIN_BASES = ("en-us", "en-gb", "en-gb-x-rp", "en-gb-x-gbclan", "en-us-nyc")
_TEST_BASES = ("en-gb-scotland", "en-029", "en-gb-x-gbcwmd")
_TRAIN_VARIANTS = ("m1", "m2", "m4", "m6", "m7", "f1", "f3", "f4")
_TEST_VARIANTS = ("m3", "m5", "f2", "f5")
TRAIN_VOICES = (*(f"espeak-ng:{b}+{v}" for b in _TRAIN_BASES for v in _TRAIN_VARIANTS),
                "flite:kal16", "flite:awb", "flite:slt", "festival:kal_diphone")
TEST_VOICES = (*(f"espeak-ng:{b}+{v}" for b in _TEST_BASES for v in _TEST_VARIANTS), "flite:rms")


@dataclass(frozen=True)
class OpenSpeechSettings:
    """Everything the corpus depends on (with the engines' versions and GCIDE); validated when built."""

    train_utterances: int = 3000
    test_utterances: int = 500
    train_voices: tuple[str, ...] = converted(list_as_tuple, default=TRAIN_VOICES)
    test_voices: tuple[str, ...] = converted(list_as_tuple, default=TEST_VOICES)
    min_words: int = 2
    max_words: int = 5
    max_chars: int = 28
    vocabulary: int = 1000  # sentences use only the most frequent words of GCIDE's clauses
    test_percent: int = 10  # share of the sentence pool held out for test
    stretch: tuple[float, float] = converted(list_as_tuple, default=(0.85, 1.2))  # duration factor
    pitch: tuple[float, float] = converted(list_as_tuple, default=(0.9, 1.12))  # resampling factor
    reverb_fraction: float = 0.5  # share of utterances in a simulated room
    rt60: tuple[float, float] = converted(list_as_tuple, default=(0.15, 0.5))  # seconds, Sabine's (nominal)
    rir_seconds: float = 0.2
    snr_db: tuple[float, float] = converted(list_as_tuple, default=(10.0, 30.0))
    max_seconds: float = 3.0
    n_mels: int = 40
    seed: int = 0

    def __post_init__(self):
        def bad(name, allowed):
            raise ValueError(f"OpenSpeechSettings.{name} = {getattr(self, name)!r}: {allowed}")

        convert_fields(self)
        check_scalar_fields(self, bad)
        for name in ("train_utterances", "test_utterances", "min_words", "n_mels", "vocabulary"):
            if getattr(self, name) < 1:
                bad(name, "must be >= 1")
        for name in ("train_voices", "test_voices"):
            voices = getattr(self, name)
            if not voices or len(set(voices)) != len(voices):
                bad(name, "must be a non-empty tuple of distinct voices")
            for v in voices:
                try:
                    check_voice(v)
                except ValueError as err:
                    bad(name, str(err))
        shared = {p for v in self.train_voices for p in speaker_parts(v)} & {
            p for v in self.test_voices for p in speaker_parts(v)}
        if shared:
            bad("test_voices", f"share {sorted(shared)} with train_voices: a test voice must be unheard in training")
        if not self.min_words <= self.max_words <= 20:
            bad("max_words", "need min_words <= max_words <= 20")
        if not 3 <= self.max_chars <= 200:
            bad("max_chars", "must be in 3..200")
        if not 1 <= self.test_percent <= 50:
            bad("test_percent", "must be in 1..50")
        for name, lo, hi in (("stretch", 0.5, 2.0), ("pitch", 0.7, 1.4), ("rt60", 0.05, 2.0),
                             ("snr_db", -10.0, 100.0)):
            r = getattr(self, name)
            if len(r) != 2 or not all(isinstance(v, (int, float)) for v in r) or not lo <= r[0] <= r[1] <= hi:
                bad(name, f"must be (low, high) with {lo} <= low <= high <= {hi}")
        if not 0 <= self.reverb_fraction <= 1:
            bad("reverb_fraction", "must be in [0, 1]")
        if not 0.01 <= self.rir_seconds <= 1:
            bad("rir_seconds", "must be in [0.01, 1]")
        if not 0.5 <= self.max_seconds <= 30:
            bad("max_seconds", "must be in [0.5, 30]")

    @property
    def voices(self) -> tuple[str, ...]:
        """Training voices then test voices (the order of a dataset's ``speaker_names``)."""
        return (*self.train_voices, *self.test_voices)

    def estimated_hours(self, mean_chars: float) -> tuple[float, float]:
        """(train, test) hours of audio expected from the settings, for sentences of ``mean_chars``
        characters on average: :data:`SECONDS_PER_CHAR` x the mean stretch / the mean pitch factor,
        plus the 2 x 50 ms kept around the trimmed speech and the mean reverberation tail."""
        per = (mean_chars * SECONDS_PER_CHAR * sum(self.stretch) / 2 / (sum(self.pitch) / 2) + 0.1
               + self.reverb_fraction * self.rir_seconds)
        return self.train_utterances * per / 3600, self.test_utterances * per / 3600


OPEN_PRESETS = {
    # trains on 2 CPU cores in minutes
    "speech_open": OpenSpeechSettings(),
    # a GPU's corpus: >= 10 h of training audio (asicsim corpus speech_open_gpu --estimate)
    "speech_open_gpu": OpenSpeechSettings(train_utterances=28000, test_utterances=2000, max_words=10,
                                          max_chars=60, vocabulary=6000, max_seconds=6.0),
}
