"""The espeak-ng speech corpus: log-mel features against scipy and hand calculations, a deterministic
generation with held-out speakers, its cache identity, and settings that validate themselves.

Tests that run espeak-ng skip where it is missing, and fail under CI (``CI=true``: .ci/run installs it)."""

from __future__ import annotations

import io
import os
import wave

import numpy as np
import pytest
import scipy.signal

from asicsim._src.workloads import datasets
from asicsim._src.workloads import speech_corpus as sc
from asicsim._src.workloads.logmel import (
    hz_to_mel,
    log_mel,
    mel_filterbank,
    mel_to_hz,
    power_spectrogram,
)

TINY = sc.SpeechSettings(train_utterances=24, test_utterances=8, voices=("en-us", "en-gb"),
                         variants=("m1", "f2", "m3"), test_speakers=2, seed=3)


@pytest.fixture
def espeak():
    try:
        return sc.espeak_version()
    except datasets.DatasetUnavailable as err:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must install espeak-ng: {err}")
        pytest.skip(str(err))


def test_htk_mel_scale_and_a_filter_computed_by_hand():
    assert hz_to_mel(1000.0) == pytest.approx(1000.0, abs=0.02)  # the scale's anchor: 1000 Hz ~ 1000 mel
    f = np.array([0.0, 300.0, 4000.0, 11025.0])
    np.testing.assert_allclose(mel_to_hz(hz_to_mel(f)), f, atol=1e-9)
    # One triangle from 0 Hz to 24000/7 Hz: its centre on the HTK scale is exactly 1000 Hz, because
    # 1 + 24000/4900 = (17/7)^2 and 1 + 1000/700 = 17/7. With bins every 1000 Hz (16 kHz, n_fft 16) the
    # weights are 0, 1, then (24000/7 - f) / (24000/7 - 1000): 10/17 at 2000 Hz, 3/17 at 3000 Hz.
    fb = mel_filterbank(16000, 16, 1, 0.0, 24000 / 7)
    np.testing.assert_allclose(fb[0], [0, 1, 10 / 17, 3 / 17, 0, 0, 0, 0, 0], atol=1e-12)
    # Neighbouring triangles share corners and are linear in Hz, so between the first and the last
    # centre they sum to exactly 1 (a partition of unity).
    fb = mel_filterbank(22050, 1024, 40, 20.0, 8000.0)
    assert fb.shape == (40, 513)
    hz = np.arange(513) * 22050 / 1024
    centres = mel_to_hz(np.linspace(hz_to_mel(20.0), hz_to_mel(8000.0), 42))[1:-1]
    inside = (hz >= centres[0]) & (hz <= centres[-1])
    np.testing.assert_allclose(fb.sum(0)[inside], 1.0, atol=1e-12)
    assert fb[:, hz > 8000].max() == 0 and fb[:, hz < 20].max() == 0
    with pytest.raises(ValueError, match="fmax=12000"):
        mel_filterbank(22050, 1024, 40, 0.0, 12000.0)


def test_power_spectrogram_is_scipy_stft():
    x = np.random.default_rng(0).standard_normal(5000)
    ours = power_spectrogram(x, 551, 220, 1024)
    # scipy's "spectrum" scaling divides by the window's sum; its default "hann" is the periodic one
    _, _, z = scipy.signal.stft(x, window="hann", nperseg=551, noverlap=551 - 220, nfft=1024, detrend=False,
                                boundary=None, padded=False, scaling="spectrum")
    z = z * scipy.signal.get_window("hann", 551).sum()
    assert ours.shape == (1 + (5000 - 551) // 220, 513) == z.T.shape
    np.testing.assert_allclose(ours, np.abs(z.T) ** 2, rtol=1e-9, atol=1e-9)


def test_a_tone_lands_in_the_band_around_its_frequency():
    fb = mel_filterbank(22050, 1024, 40, 20.0, 8000.0)
    t = np.arange(22050) / 22050
    for f in (440.0, 1000.0, 3000.0):
        feats = log_mel(np.sin(2 * np.pi * f * t), fb, 551, 220)
        centres = mel_to_hz(np.linspace(hz_to_mel(20.0), hz_to_mel(8000.0), 42))[1:-1]
        assert feats.dtype == np.float32 and feats.shape == (1 + (22050 - 551) // 220, 40)
        assert np.all(feats.argmax(1) == np.abs(centres - f).argmin())


def test_wav_parser_reads_what_the_stdlib_writes():
    samples = (np.arange(-300, 300) * 50).astype("<i2")
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(sc.SAMPLE_RATE)
        w.writeframes(samples.tobytes())
    np.testing.assert_array_equal(sc.wav_samples(buf.getvalue()), samples / 32768.0)
    with pytest.raises(ValueError, match="not a RIFF"):
        sc.wav_samples(b"junk" * 20)
    stereo = bytearray(buf.getvalue())
    stereo[22] = 2  # channels
    with pytest.raises(ValueError, match="mono"):
        sc.wav_samples(bytes(stereo))


@pytest.mark.parametrize(("change", "message"), [
    ({"snr_db": float("nan")}, r"snr_db = nan: must be >= -20"),
    ({"voices": ("en-us", "mb-us1")}, r"voices = \('en-us', 'mb-us1'\): must be .*en-gb-scotland"),
    ({"test_speakers": 6}, r"test_speakers = 6: must be in 1\.\.5"),
    ({"rate": (60, 200)}, r"rate = \(60, 200\): must be \(low, high\) ints with 80 <= low"),
    ({"mix": (0.5, 0.5, 0.5)}, r"mix = \(0\.5, 0\.5, 0\.5\): must be 3 non-negative weights"),
    ({"train_utterances": 2.5}, r"train_utterances = 2\.5: must be an int"),
    ({"variants": ("m1", "f2+x", "m3")}, r"variants = .*: must be .*variant names"),
    ({"fmax": 20000.0}, r"fmax = 20000\.0: need 0 <= fmin < fmax <= 11025"),
])
def test_bad_settings_name_the_field_the_value_and_what_is_allowed(change, message):
    args = {**{f: getattr(TINY, f) for f in ("train_utterances", "test_utterances", "voices", "variants",
                                             "test_speakers")}, **change}
    with pytest.raises(ValueError, match=r"SpeechSettings\." + message):
        sc.SpeechSettings(**args)


def test_phrases_are_plain_words_and_transcripts_normalise():
    phrases = sc.pydoc_phrases()
    assert len(phrases) > 500 and sum(len(p) <= 30 for p in phrases) > 300
    assert all(2 <= len(p.split()) <= 8 and set(p) <= set(sc.VOCAB[1:]) for p in phrases)
    assert sc.normalise_transcript("  Don't STOP,  go-left! 42 ") == "don't stop go left"
    assert sc.VOCAB[:3] == "_ '" and sc.VOCAB[3:] == "abcdefghijklmnopqrstuvwxyz"


def test_generation_is_deterministic_and_holds_out_speakers(espeak, tmp_path, monkeypatch):
    a, b = sc.generate(TINY, threads=3), sc.generate(TINY, threads=1)  # no cache: two fresh generations
    assert a.keys() == b.keys()
    for k in a:
        assert a[k].dtype == b[k].dtype and np.array_equal(a[k], b[k]), k
    monkeypatch.setenv("ASICSIM_CACHE_DIR", str(tmp_path))
    d = sc.load_speech("tiny", TINY)
    assert d.task == "ctc" and d.vocab == sc.VOCAB and d.num_classes == 29 and f"espeak-ng {espeak}" in d.description
    assert d.x_train.shape[0] == 24 and d.x_test.shape[0] == 8 and d.x_train.shape[2] == 40
    for x, lens, y, spk in ((d.x_train, d.x_len_train, d.y_train, d.speakers_train),
                            (d.x_test, d.x_len_test, d.y_test, d.speakers_test)):
        assert x.dtype == np.float32 and lens.dtype == y.dtype == spk.dtype == np.int32
        assert all(not x[i, n:].any() and x[i, n - 1].any() for i, n in enumerate(lens))  # zero padding
        labels = [row[row >= 0] for row in y]
        assert all(len(lab) and (lab >= 1).all() and (lab < 29).all() and (row[len(lab):] == -1).all()
                   for lab, row in zip(labels, y, strict=True))
        # room for CTC after a stride-2 front end: a label sequence with r repeated neighbours needs
        # len + r frames
        assert all((n // 2) >= len(lab) + np.sum(lab[1:] == lab[:-1]) for n, lab in zip(lens, labels, strict=True))
        assert lens.max() <= TINY.max_seconds * 100
    train, test = {d.speaker_names[i] for i in d.speakers_train}, {d.speaker_names[i] for i in d.speakers_test}
    assert len(train) == 4 and len(test) == 2 and not train & test
    assert len(d.speaker_names) == 6 and d.speaker_names[0] == "en-us+m1"
    valid = np.concatenate([x[:n] for x, n in zip(d.x_train, d.x_len_train, strict=True)])
    np.testing.assert_allclose(valid.mean(0), 0, atol=1e-5)  # normalised by the training frames
    np.testing.assert_allclose(valid.std(0), 1, atol=1e-4)


def test_the_cache_key_holds_the_version_and_every_setting(espeak, tmp_path, monkeypatch):
    monkeypatch.setenv("ASICSIM_CACHE_DIR", str(tmp_path))
    first = sc.load_speech("tiny", TINY)
    (path,) = tmp_path.glob("tiny-*.npz")
    again = sc.load_speech("tiny", TINY)  # from the cache
    assert np.array_equal(first.x_test, again.x_test) and np.array_equal(first.y_train, again.y_train)
    key = sc.cache_key("tiny", TINY, espeak)
    assert espeak in key and "snr_db=20.0" in key
    assert sc.cache_key("tiny", TINY, "1.52") != key
    assert sc.cache_key("tiny", sc.SpeechSettings(**{**vars(TINY), "snr_db": 10.0}), espeak) != key
    assert path.stat().st_size > 0


def test_words_are_told_apart_by_their_spectrograms(espeak):
    """A rough check that the task is learnable: each command word, spoken again by the same speaker at
    another rate and pitch with fresh noise, is nearest to itself among the 25 (chance: 1/25)."""
    fb = mel_filterbank(sc.SAMPLE_RATE, 1024, 40, 20.0, 8000.0)
    rng = np.random.default_rng(0)

    def pooled(word, rate, pitch):  # mean log-mel over each quarter of the word, 20 dB noise
        x = sc.trim(sc.synthesize(word, "en-gb+m3", rate, pitch, 0))
        x = x + np.sqrt(np.mean(x * x) / 100) * rng.standard_normal(len(x))
        return np.concatenate([p.mean(0) for p in np.array_split(log_mel(x, fb, 551, 220), 4)])

    slow = np.array([pooled(w, 160, 40) for w in sc.COMMANDS])
    fast = np.array([pooled(w, 200, 65) for w in sc.COMMANDS])
    nearest = np.linalg.norm(fast[:, None] - slow[None], axis=-1).argmin(1)
    assert nearest.tolist() == list(range(len(sc.COMMANDS)))


def test_without_espeak_the_dataset_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no espeak-ng
    with pytest.raises(datasets.DatasetUnavailable, match="apt-get install espeak-ng"):
        datasets._LOADERS["speech"]()
    assert {"speech", "speech_large"} <= set(datasets.DATASETS) and "speech" in datasets.OPTIONAL


def test_lists_become_tuples_so_equal_settings_share_a_cache_key():
    as_list = sc.SpeechSettings(**{**vars(TINY), "voices": list(TINY.voices), "rate": list(TINY.rate)})
    assert as_list == TINY and sc.cache_key("t", as_list, "1.51") == sc.cache_key("t", TINY, "1.51")


@pytest.mark.slow
def test_the_small_corpus_is_learnable_by_held_out_speakers(espeak):
    """``speech`` itself (~30 s to generate on 2 cores, then cached): its shape, its held-out speakers,
    room for CTC in every utterance, and command words told apart across speakers by a 1-nearest-
    neighbour on time-pooled frames (measured 0.93; chance 0.04)."""
    d = datasets.load_dataset("speech")
    assert d.x_train.shape[0] == 3000 and d.x_test.shape[0] == 600 and d.x_train.shape[1] <= 200
    assert len(set(d.speakers_train.tolist())) == 80 and len(set(d.speakers_test.tolist())) == 16
    assert not set(d.speakers_train.tolist()) & set(d.speakers_test.tolist())

    def pooled(x, lens, y):
        texts = ["".join(d.vocab[c] for c in row if c >= 0) for row in y]
        keep = [i for i, t in enumerate(texts) if t in sc.COMMANDS]
        feats = [np.concatenate([p.mean(0) for p in np.array_split(x[i, : lens[i]], 4)]) for i in keep]
        return np.array(feats), np.array([texts[i] for i in keep])

    for lens, y in ((d.x_len_train, d.y_train), (d.x_len_test, d.y_test)):
        for n, row in zip(lens, y, strict=True):
            lab = row[row >= 0]
            assert n // 2 >= len(lab) + np.sum(lab[1:] == lab[:-1])
    ftr, ttr = pooled(d.x_train, d.x_len_train, d.y_train)
    fte, tte = pooled(d.x_test, d.x_len_test, d.y_test)
    nearest = ttr[np.linalg.norm(fte[:, None] - ftr[None], axis=-1).argmin(1)]
    assert len(tte) > 100 and np.mean(nearest == tte) > 0.8
