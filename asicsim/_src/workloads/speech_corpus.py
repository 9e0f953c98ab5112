"""A speech-recognition corpus synthesised offline with ``espeak-ng``: datasets ``speech`` and ``speech_large``.

Nothing is downloaded: ``espeak-ng`` (Debian package ``espeak-ng``) speaks texts that ship with Python.

- Speakers: a speaker is a (voice, variant) pair, ``espeak-ng -v VOICE+VARIANT``: the eight English
  formant voices (``espeak-ng --voices=en``, not the ``mb-*`` MBROLA ones, which need mbrola) times
  variants (``espeak-ng --voices=variant``). A seeded shuffle holds ``test_speakers`` pairs out: the
  test split's speakers never speak in the training split (the texts are shared).
- Texts, each utterance one of (weights ``mix``): a digit string of 1..``max_digits`` digits spelled
  as words; one of the 25 non-digit words of Speech Commands v2 (Warden 2018, arXiv:1804.03209,
  table 1); a 2-8 word phrase of ``pydoc_data.topics`` (Python's own help texts, which every Python
  ships, so the corpus needs no further package; also the ``pydoc`` dataset's text): the text is cut
  at ``.!?;:,`` and a clause is kept when all its words are plain words (letters, one apostrophe; no
  identifiers, numbers, capitals inside) and it has at most ``max_sentence_chars`` characters.
- Per utterance (seeded by (seed, split, index), so threads cannot change the result): rate
  (words/minute, ``-s``), pitch (0-99, ``-p``), word gap (units of 10 ms, ``-g``); silence beyond
  50 ms trimmed at both ends; an utterance longer than ``max_seconds`` is redrawn; white Gaussian
  noise at ``snr_db`` relative to the utterance's mean power.
- Features: :func:`asicsim._src.workloads.logmel.log_mel` (HTK mel, periodic Hann, no centre padding) at
  espeak-ng's 22050 Hz, normalised per feature by the training split's mean and standard deviation.
- Labels: transcripts in lowercase a-z, space and apostrophe; :data:`VOCAB` is ``"_"`` (the CTC
  blank placeholder, index 0, never a label), ``" "`` (1), ``"'"`` (2), ``a``-``z`` (3-28).

The result depends only on the settings, the texts and the espeak-ng version; the cache key holds
all three (the version is also in the description). Utterances are synthesised in parallel threads
(each waits on its own espeak-ng process): ``speech`` (3600 utterances) takes ~30 s on 2 cores.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import struct
import subprocess
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from asicsim._src.workloads.dataset_store import (
    OPTIONAL,
    Dataset,
    DatasetUnavailable,
    cached_arrays,
)
from asicsim._src.workloads.logmel import log_mel, mel_filterbank
from asicsim._src.workloads.speech_settings import ENGLISH_VOICES as ENGLISH_VOICES
from asicsim._src.workloads.speech_settings import LARGE_VARIANTS as LARGE_VARIANTS
from asicsim._src.workloads.speech_settings import PRESETS as PRESETS
from asicsim._src.workloads.speech_settings import SAMPLE_RATE as SAMPLE_RATE
from asicsim._src.workloads.speech_settings import SMALL_VARIANTS as SMALL_VARIANTS
from asicsim._src.workloads.speech_settings import VOCAB as VOCAB
from asicsim._src.workloads.speech_settings import SpeechSettings as SpeechSettings

FORMAT = 1  # bump when generation changes in a way the settings do not capture
DIGITS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
COMMANDS = ("yes", "no", "up", "down", "left", "right", "on", "off", "stop", "go", "bed", "bird", "cat",
            "dog", "happy", "house", "marvin", "sheila", "tree", "wow", "backward", "forward", "follow",
            "learn", "visual")
_WORD = re.compile(r"[A-Za-z][a-z]*('[a-z]+)?")


def normalise_transcript(text: str) -> str:
    """Lowercase; anything outside a-z and apostrophe becomes a space; spaces collapsed."""
    return " ".join(re.sub(r"[^a-z']+", " ", text.lower()).split())


@functools.cache
def pydoc_phrases() -> tuple[str, ...]:
    """The plain-English 2-8 word clauses of ``pydoc_data.topics`` (module docstring), sorted, unique."""
    from pydoc_data.topics import topics

    text = " ".join(" ".join(topics[k] for k in sorted(topics)).split())
    out = set()
    for clause in re.split(r"(?<=[a-z])[.!?;:,](?=\s)", text):
        words = clause.split()
        if 2 <= len(words) <= 8 and all(_WORD.fullmatch(w) for w in words) and not any(
                w[0].isupper() and w != "I" for w in words[1:]):
            out.add(normalise_transcript(clause))
    return tuple(sorted(out))


def espeak_version() -> str:
    """``espeak-ng --version``'s version, e.g. ``1.51``; DatasetUnavailable when it is not installed."""
    exe = shutil.which("espeak-ng")
    if exe is None:
        raise DatasetUnavailable(f"the speech datasets need the espeak-ng program: {OPTIONAL['speech']}")
    out = subprocess.run([exe, "--version"], capture_output=True, text=True, check=True).stdout
    m = re.search(r"text-to-speech:\s*(\S+)", out)
    return m[1] if m else out.strip()


def wav_samples(data: bytes) -> np.ndarray:
    """Float64 samples in [-1, 1) of a mono 16-bit PCM WAV at :data:`SAMPLE_RATE`. espeak-ng's
    ``--stdout`` cannot seek back to write the lengths, so the data chunk runs to the end of the bytes."""
    if data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise ValueError("espeak-ng output is not a RIFF WAVE file")
    pos, fmt = 12, None
    while pos + 8 <= len(data):
        cid, size = data[pos:pos + 4], int.from_bytes(data[pos + 4:pos + 8], "little")
        if cid == b"fmt ":  # format tag, channels, rate, byte rate, block align, bits
            fmt = struct.unpack("<HHIIHH", data[pos + 8:pos + 24])
        elif cid == b"data":
            if fmt is None or (fmt[0], fmt[1], fmt[2], fmt[5]) != (1, 1, SAMPLE_RATE, 16):
                raise ValueError(f"espeak-ng WAV fmt chunk {fmt}: expected PCM (1), mono, "
                                 f"{SAMPLE_RATE} Hz, 16 bits")
            body = data[pos + 8:]
            return np.frombuffer(body[: len(body) // 2 * 2], "<i2") / 32768.0
        pos += 8 + size + (size & 1)
    raise ValueError("espeak-ng output has no data chunk")


def synthesize(text: str, speaker: str, rate: int, pitch: int, gap: int) -> np.ndarray:
    """``espeak-ng --stdout -v SPEAKER -s RATE -p PITCH -g GAP TEXT``'s samples (see :func:`wav_samples`)."""
    out = subprocess.run(["espeak-ng", "--stdout", "-v", speaker, "-s", str(rate), "-p", str(pitch),
                          "-g", str(gap), text], capture_output=True, check=False)
    if out.returncode or out.stderr:  # an unknown variant only prints an error, and speaks anyway
        raise RuntimeError(f"espeak-ng -v {speaker} {text!r} failed (exit {out.returncode}): "
                           f"{out.stderr.decode(errors='replace').strip()}")
    return wav_samples(out.stdout)


def trim(x: np.ndarray, margin: int = SAMPLE_RATE // 20, threshold: float = 0.01) -> np.ndarray:
    """``x`` without the silence (below ``threshold`` x peak) at its ends, keeping ``margin`` samples."""
    loud = np.flatnonzero(np.abs(x) > threshold * np.abs(x).max())
    if len(loud) == 0:
        return x
    return x[max(0, loud[0] - margin): loud[-1] + 1 + margin]


def draw_text(rng: np.random.Generator, s: SpeechSettings, phrases: tuple[str, ...]) -> str:
    kind = rng.choice(3, p=s.mix)
    if kind == 0:
        return " ".join(DIGITS[d] for d in rng.integers(0, 10, rng.integers(1, s.max_digits + 1)))
    return COMMANDS[rng.integers(len(COMMANDS))] if kind == 1 else phrases[rng.integers(len(phrases))]


def utterance(s: SpeechSettings, split: int, i: int, speaker: str, phrases, filterbank) -> tuple[np.ndarray, str]:
    """Log-mel frames and transcript of utterance ``i`` of ``split`` (0 train, 1 test) by ``speaker``."""
    rng = np.random.default_rng([s.seed, split, i])
    max_samples = int(s.max_seconds * SAMPLE_RATE)
    for _ in range(50):
        text = draw_text(rng, s, phrases)
        rate, pitch, gap = (int(rng.integers(lo, hi + 1)) for lo, hi in (s.rate, s.pitch, s.gap))
        x = trim(synthesize(text, speaker, rate, pitch, gap))
        if len(x) <= max_samples:
            break
    else:
        raise RuntimeError(f"50 draws of utterance {i} were all longer than max_seconds={s.max_seconds}; "
                           "raise max_seconds or lower max_sentence_chars / max_digits / gap")
    if np.isfinite(s.snr_db):
        sigma = np.sqrt(np.mean(x * x) / 10 ** (s.snr_db / 10))
        x = x + sigma * rng.standard_normal(len(x))
    win, hop, _ = s.frame
    return log_mel(x, filterbank, win, hop), text


def generate(s: SpeechSettings, threads: int | None = None) -> dict[str, np.ndarray]:
    """The corpus as flat arrays (per split: frames concatenated, lengths, padded labels, speakers);
    ``threads`` parallel espeak-ng processes (the result does not depend on it)."""
    phrases = tuple(p for p in pydoc_phrases() if len(p) <= s.max_sentence_chars)
    if not phrases and s.mix[2] > 0:
        raise ValueError(f"SpeechSettings.max_sentence_chars = {s.max_sentence_chars}: no phrase is that short")
    _, _, n_fft = s.frame
    fb = mel_filterbank(SAMPLE_RATE, n_fft, s.n_mels, s.fmin, s.fmax)
    out = {}
    with ThreadPoolExecutor(threads or os.cpu_count() or 1) as pool:
        for split, (name, n, spk) in enumerate(zip(("train", "test"), (s.train_utterances, s.test_utterances),
                                                   s.speaker_split(), strict=True)):
            who = spk[np.arange(n) % len(spk)]  # round robin: every speaker speaks equally often
            res = list(pool.map(lambda i, who=who, split=split: utterance(
                s, split, i, s.speakers[who[i]], phrases, fb), range(n)))
            labels = [[VOCAB.index(c) for c in text] for _, text in res]
            y = np.full((n, max(map(len, labels))), -1, np.int32)
            for i, lab in enumerate(labels):
                y[i, : len(lab)] = lab
            out |= {f"{name}_x": np.concatenate([f for f, _ in res]), f"{name}_y": y,
                    f"{name}_len": np.array([len(f) for f, _ in res], np.int32), f"{name}_speaker": who.astype(np.int32)}
    mean, std = out["train_x"].mean(0, dtype=np.float64), out["train_x"].std(0, dtype=np.float64)
    for name in ("train", "test"):
        out[f"{name}_x"] = ((out[f"{name}_x"] - mean) / std).astype(np.float32)
    return out


def ctc_dataset(name: str, a: dict[str, np.ndarray], description: str, speaker_names) -> Dataset:
    """The :class:`Dataset` (task ``ctc``) of a corpus's arrays (concatenated frames, lengths,
    labels, speakers), frames zero-padded to the longest utterance."""
    steps = int(max(a["train_len"].max(), a["test_len"].max()))

    def pad(x, lens):
        out = np.zeros((len(lens), steps, x.shape[1]), np.float32)
        for i, (start, n) in enumerate(zip(np.cumsum(lens) - lens, lens, strict=True)):
            out[i, :n] = x[start: start + n]
        return out

    return Dataset(name, "ctc", pad(a["train_x"], a["train_len"]), a["train_y"], pad(a["test_x"], a["test_len"]),
                   a["test_y"], len(VOCAB), vocab=VOCAB, description=description, x_len_train=a["train_len"],
                   x_len_test=a["test_len"], speakers_train=a["train_speaker"], speakers_test=a["test_speaker"],
                   speaker_names=speaker_names)


def to_dataset(name: str, s: SpeechSettings, a: dict[str, np.ndarray], version: str) -> Dataset:
    """The :class:`Dataset` (task ``ctc``) of :func:`generate`'s arrays, frames zero-padded to the longest."""
    win, hop, _ = s.frame
    desc = (f"espeak-ng {version} speech, {s.train_utterances}/{s.test_utterances} utterances, "
            f"{len(s.speakers)} speakers (voice+variant), {s.test_speakers} held out for test; digits, "
            f"commands, pydoc_data phrases; white noise at {s.snr_db} dB SNR; {s.n_mels} HTK log-mel "
            f"{win}/{hop} samples at {SAMPLE_RATE} Hz, normalised by training mean/std; seed {s.seed}")
    return ctc_dataset(name, a, desc, s.speakers)


def cache_key(name: str, s: SpeechSettings, version: str) -> str:
    texts = hashlib.sha256("\n".join(pydoc_phrases()).encode()).hexdigest()[:16]
    return f"{name} format {FORMAT} espeak-ng {version} texts {texts} {s!r}"


def load_speech(name: str, settings: SpeechSettings | None = None) -> Dataset:
    """Dataset ``name`` (``speech``, ``speech_large``, or any name with ``settings``), generated once
    and kept in :func:`asicsim._src.workloads.dataset_store.cache_dir`."""
    s = settings or PRESETS[name]
    version = espeak_version()
    return to_dataset(name, s, cached_arrays(name, cache_key(name, s, version), lambda: generate(s)), version)
