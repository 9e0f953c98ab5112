"""Acoustic perturbations of the open speech corpus: room reverberation by the image method, coloured
noise at a signal-to-noise ratio, and resampling (pitch and formant shift).

- :func:`image_rir`: J. B. Allen and D. A. Berkley, "Image method for efficiently simulating
  small-room acoustics", J. Acoust. Soc. Am. 65(4), 943-950 (1979). In a shoebox room of size
  ``L``, the images of a source at ``s`` are, per axis, ``(1 - 2 q) s + 2 n L`` for ``q`` in {0, 1}
  and integer ``n``; that image has met the axis's two walls ``|n - q|`` and ``|n|`` times, each
  reflection scaling the pressure by the wall's reflection coefficient ``beta``. An image at
  distance ``d`` arrives after ``d / c`` seconds with amplitude ``beta^k / (4 pi d)``. Arrival times
  are rounded to the nearest sample (as Allen and Berkley did); images beyond ``seconds`` of travel
  are left out. One ``beta`` for all six walls, from Sabine's formula:
  ``RT60 = 0.161 V / (S alpha)`` with ``alpha = 1 - beta^2`` (Kuttruff, Room Acoustics, ch. 5).
- :func:`coloured_noise`: white (flat power spectrum) or pink (power ~ 1/f) Gaussian noise scaled to
  ``snr_db`` below the signal's mean power.
- :func:`resample`: a signal at ``rate`` read as if it were at ``rate * factor``, resampled to
  ``out_rate`` (scipy's polyphase filter): pitch and formants move up by ``factor`` and the duration
  shrinks by it (the speed perturbation of Ko et al., "Audio augmentation for speech recognition",
  Interspeech 2015).
"""

from __future__ import annotations

import math

import numpy as np

SPEED_OF_SOUND = 343.0  # m/s, air at 20 C


def sabine_beta(room: tuple[float, float, float], rt60: float) -> float:
    """The walls' reflection coefficient that gives ``rt60`` seconds by Sabine's formula in ``room``."""
    lx, ly, lz = room
    volume, surface = lx * ly * lz, 2 * (lx * ly + lx * lz + ly * lz)
    alpha = 0.161 * volume / (surface * rt60)
    if not 0 < alpha <= 1:
        raise ValueError(f"rt60 = {rt60} s in a {room} m room needs absorption {alpha:.3f}: must be in (0, 1]")
    return math.sqrt(1 - alpha)


def image_rir(room, source, mic, beta: float, rate: int, seconds: float) -> np.ndarray:
    """The room impulse response from ``source`` to ``mic`` (metres, inside ``room``), ``seconds`` long
    at ``rate`` Hz, by the image method (module doc)."""
    room, source, mic = (np.asarray(v, float) for v in (room, source, mic))
    if not (np.all(source > 0) and np.all(source < room) and np.all(mic > 0) and np.all(mic < room)):
        raise ValueError(f"image_rir: source {source.tolist()} and mic {mic.tolist()} must be inside the room "
                         f"{room.tolist()}")
    if not 0 <= beta < 1:
        raise ValueError(f"image_rir: beta = {beta}: must be in [0, 1)")
    reach = SPEED_OF_SOUND * seconds
    per_axis = []
    for ax in range(3):  # every (position offset, reflection count) of one axis within reach
        top = math.ceil(reach / (2 * room[ax])) + 1
        n = np.arange(-top, top + 1)
        offs, refl = [], []
        for q in (0, 1):
            offs.append((1 - 2 * q) * source[ax] + 2 * n * room[ax] - mic[ax])
            refl.append(np.abs(n - q) + np.abs(n))
        per_axis.append((np.concatenate(offs), np.concatenate(refl)))
    (dx, kx), (dy, ky), (dz, kz) = per_axis
    dist = np.sqrt(dx[:, None, None] ** 2 + dy[None, :, None] ** 2 + dz[None, None, :] ** 2)
    order = kx[:, None, None] + ky[None, :, None] + kz[None, None, :]
    n_samples = round(seconds * rate)
    delay = np.rint(dist * rate / SPEED_OF_SOUND).astype(np.int64)
    keep = delay < n_samples
    h = np.zeros(n_samples)
    np.add.at(h, delay[keep], beta ** order[keep] / (4 * np.pi * dist[keep]))
    return h


def reverberate(x: np.ndarray, rir: np.ndarray) -> np.ndarray:
    """``x`` convolved with ``rir``, cut to ``x``'s length plus the room's tail, scaled to ``x``'s peak."""
    import scipy.signal

    y = scipy.signal.fftconvolve(x, rir)
    peak = np.abs(y).max()
    return y * (np.abs(x).max() / peak) if peak > 0 else y


def coloured_noise(rng: np.random.Generator, n: int, colour: str) -> np.ndarray:
    """``n`` samples of unit-variance Gaussian noise, ``white`` or ``pink`` (power spectrum ~ 1/f)."""
    w = rng.standard_normal(n)
    if colour == "white":
        return w
    if colour != "pink":
        raise ValueError(f"coloured_noise: colour = {colour!r}: must be 'white' or 'pink'")
    spec = np.fft.rfft(w)
    f = np.arange(len(spec), dtype=float)
    f[0] = 1.0  # the DC bin keeps white noise's weight (a mean of ~0 either way)
    p = np.fft.irfft(spec / np.sqrt(f), n)
    return p / p.std()


def add_noise(rng: np.random.Generator, x: np.ndarray, snr_db: float, colour: str) -> np.ndarray:
    """``x`` plus :func:`coloured_noise` at ``snr_db`` dB below ``x``'s mean power."""
    sigma = math.sqrt(float(np.mean(x * x)) / 10 ** (snr_db / 10))
    return x + sigma * coloured_noise(rng, len(x), colour)


def resample(x: np.ndarray, rate: int, out_rate: int, factor: float = 1.0) -> np.ndarray:
    """``x`` (at ``rate`` Hz) read as at ``rate * factor``, resampled to ``out_rate`` (module doc). The
    source rate is rounded to a multiple of 50 Hz so that the polyphase filter stays short."""
    import scipy.signal

    src = 50 * round(rate * factor / 50)
    g = math.gcd(src, out_rate)
    if src == out_rate:
        return np.asarray(x, float)
    return scipy.signal.resample_poly(x, out_rate // g, src // g)
