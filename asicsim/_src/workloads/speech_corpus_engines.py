"""The text-to-speech engines of the open speech corpus, each a Debian package run as a program:

- ``espeak-ng`` (package ``espeak-ng``, formant synthesis, 22050 Hz): voice ``espeak-ng:BASE+VARIANT``
  with BASE one of the English voices and VARIANT one of ``espeak-ng --voices=variant``; the base
  sets the accent's pronunciation rules, the variant the formants and pitch.
- ``flite`` (package ``flite``, 2.2): voices ``kal`` (diphone, 8000 Hz), ``kal16`` (diphone, 16 kHz),
  ``awb``, ``rms``, ``slt`` (clustergen, 16 kHz). ``awb_time`` speaks only times of day: not used.
- ``festival`` (packages ``festival`` and ``festvox-kallpc16k``): ``kal_diphone`` (16 kHz).

A voice's *speaker* is who was recorded: flite's ``kal`` and ``kal16`` and festival's ``kal_diphone``
are one speaker (Kevin Lenzo's diphones, CMU), so :func:`speaker_parts` gives them one name, and an
espeak-ng voice is the two parts BASE and VARIANT. A test voice shares no part with a training voice.

Every engine gets a duration stretch (espeak-ng ``-s 175 / stretch`` words per minute, its default
being 175; flite ``--setf duration_stretch``; festival ``Duration_Stretch``).
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
import tempfile
import wave
from pathlib import Path

import numpy as np

from asicsim._src.workloads import speech_corpus as sc
from asicsim._src.workloads.dataset_store import DatasetUnavailable

ENGINES = ("espeak-ng", "flite", "festival")
FLITE_VOICES = ("kal", "kal16", "awb", "rms", "slt")
FESTIVAL_VOICES = ("kal_diphone",)
INSTALL = "apt-get install espeak-ng flite festival festvox-kallpc16k (Debian)"
_KAL = ("flite:kal", "flite:kal16", "festival:kal_diphone")


def check_voice(voice: str) -> None:
    """ValueError unless ``voice`` is ``ENGINE:NAME`` of a voice the module doc lists."""
    engine, _, name = voice.partition(":")
    ok = ((engine == "flite" and name in FLITE_VOICES) or (engine == "festival" and name in FESTIVAL_VOICES)
          or (engine == "espeak-ng" and name.count("+") == 1 and name.split("+")[0] in sc.ENGLISH_VOICES
              and re.fullmatch(r"[A-Za-z0-9_-]+", name.split("+")[1]) is not None))
    if not ok:
        raise ValueError(f"voice {voice!r}: must be espeak-ng:BASE+VARIANT (BASE in {sc.ENGLISH_VOICES}), "
                         f"flite:NAME (NAME in {FLITE_VOICES}) or festival:NAME (NAME in {FESTIVAL_VOICES})")


def speaker_parts(voice: str) -> tuple[str, ...]:
    """The recorded speakers or settings a voice is made of (module doc): two for espeak-ng, one else."""
    if voice in _KAL:
        return ("kal",)
    engine, _, name = voice.partition(":")
    if engine == "espeak-ng":
        base, variant = name.split("+")
        return (f"espeak-ng base {base}", f"espeak-ng variant {variant}")
    return (voice,)


def _version(exe: str, args: list[str], pattern: str) -> str:
    path = shutil.which(exe)
    if path is None:
        raise DatasetUnavailable(f"the open speech corpus needs the {exe} program: {INSTALL}")
    out = subprocess.run([path, *args], capture_output=True, text=True, check=False)
    m = re.search(pattern, out.stdout + out.stderr)
    return m[1] if m else (out.stdout + out.stderr).strip()[:40]


@functools.cache
def engine_versions(engines: tuple[str, ...]) -> str:
    """``engine version`` of each engine, e.g. ``espeak-ng 1.51, flite 2.2``; DatasetUnavailable when
    a program (or festival's kal voice) is missing."""
    parts = []
    for e in engines:
        if e == "espeak-ng":
            parts.append(f"espeak-ng {sc.espeak_version()}")
        elif e == "flite":
            parts.append("flite " + _version("flite", ["--version"], r"flite-(\S+)"))
        else:
            parts.append("festival " + _version("festival", ["--version"], r"System: ([0-9.]+)"))
            if not list(Path("/usr/share/festival/voices").glob("*/kal_diphone")):
                raise DatasetUnavailable(f"festival has no kal_diphone voice: {INSTALL}")
    return ", ".join(parts)


def _read_wav(path: Path) -> tuple[np.ndarray, int]:
    with wave.open(str(path), "rb") as w:
        if w.getnchannels() != 1 or w.getsampwidth() != 2:
            raise ValueError(f"{path}: expected mono 16-bit PCM, got {w.getnchannels()} channels, "
                             f"{8 * w.getsampwidth()} bits")
        rate, data = w.getframerate(), w.readframes(w.getnframes())
    return np.frombuffer(data, "<i2") / 32768.0, rate


def synthesize(voice: str, text: str, stretch: float) -> tuple[np.ndarray, int]:
    """(samples in [-1, 1), rate in Hz) of ``voice`` speaking ``text`` at duration ``stretch``."""
    engine, _, name = voice.partition(":")
    if engine == "espeak-ng":
        return sc.synthesize(text, name, round(175 / stretch), 50, 0), sc.SAMPLE_RATE
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.wav"
        if engine == "flite":
            cmd = ["flite", "-voice", name, "--setf", f"duration_stretch={stretch:.4f}", "-t", text, "-o", str(out)]
        else:
            (Path(tmp) / "in.txt").write_text(text + "\n")
            cmd = ["text2wave", "-eval", f"(voice_{name})", "-eval",
                   f"(Parameter.set 'Duration_Stretch {stretch:.4f})", str(Path(tmp) / "in.txt"), "-o", str(out)]
        res = subprocess.run(cmd, capture_output=True, check=False)
        if res.returncode or not out.is_file():
            raise RuntimeError(f"{engine} voice {name} failed on {text!r} (exit {res.returncode}): "
                               f"{res.stderr.decode(errors='replace').strip()[-300:]}")
        return _read_wav(out)
