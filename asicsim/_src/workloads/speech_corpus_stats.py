"""Statistics of a speech corpus and the error rates of trivial transcribers: ``asicsim corpus NAME``.

:func:`corpus_stats` reads a ``ctc`` :class:`Dataset`: hours of audio per split (from the frame
counts: ``(frames - 1) x hop + window`` samples, short of the audio by less than one hop), voices
per split and how many are in both, words (tokens and distinct), the out-of-vocabulary rate (the
share of the test split's word tokens that no training transcript holds), the overlap (the share
of test utterances whose transcript is also a training transcript), and :func:`baselines`.

:func:`baselines`: the CER and WER of two transcribers that ignore the audio: one answering
nothing (CER exactly 1: every reference character is a deletion) and one answering, for every
test utterance, the most frequent training transcript (ties: the first in sorted order).
"""

from __future__ import annotations

import sys
from collections import Counter

from asicsim._src.cli_json import json_text
from asicsim._src.workloads.ctc import cer, transcripts, wer
from asicsim._src.workloads.dataset_store import Dataset, DatasetUnavailable

CORPORA = ("speech", "speech_large", "speech_open", "speech_open_gpu")


def baselines(d: Dataset) -> dict[str, float | str]:
    """CER/WER on the test split of an empty transcript and of the most frequent training transcript."""
    train, test = transcripts(d.y_train, d.vocab), transcripts(d.y_test, d.vocab)
    counts = Counter(train)
    top = min(counts, key=lambda t: (-counts[t], t))
    return {"cer_empty": cer(test, [""] * len(test)), "wer_empty": wer(test, [""] * len(test)),
            "most_frequent": top, "cer_most_frequent": cer(test, [top] * len(test)),
            "wer_most_frequent": wer(test, [top] * len(test))}


def baseline_line(dataset: str) -> str:
    """One line of :func:`baselines` on ``dataset`` (what ``asicsim train`` prints beside a CER)."""
    from asicsim._src.workloads.datasets import load_dataset

    b = baselines(load_dataset(dataset))
    return (f"baselines on {dataset}'s test split (no audio): empty output CER {b['cer_empty']:.4f}, most frequent "
            f"training transcript ({b['most_frequent']!r}) CER {b['cer_most_frequent']:.4f}")


def frame_geometry(name: str) -> tuple[float, float]:
    """(window, hop) in seconds of a corpus's features."""
    if name.startswith("speech_open"):
        from asicsim._src.workloads.speech_corpus_open_settings import HOP, RATE, WIN

        return WIN / RATE, HOP / RATE
    from asicsim._src.workloads.speech_settings import PRESETS, SAMPLE_RATE

    win, hop, _ = PRESETS[name].frame
    return win / SAMPLE_RATE, hop / SAMPLE_RATE


def corpus_stats(d: Dataset, window_s: float, hop_s: float) -> dict:
    """The module doc's statistics of ``d`` (a ``ctc`` dataset)."""
    if d.task != "ctc":
        raise ValueError(f"corpus_stats: dataset {d.name!r} is a {d.task!r} dataset, not speech (ctc)")
    train, test = transcripts(d.y_train, d.vocab), transcripts(d.y_test, d.vocab)
    train_words = Counter(w for t in train for w in t.split())
    test_tokens = [w for t in test for w in t.split()]
    seen = set(train)
    names = [{d.speaker_names[i] for i in spk} for spk in (d.speakers_train, d.speakers_test)]
    return {"name": d.name, "description": d.description,
            "hours_train": float(sum((n - 1) * hop_s + window_s for n in d.x_len_train) / 3600),
            "hours_test": float(sum((n - 1) * hop_s + window_s for n in d.x_len_test) / 3600),
            "utterances_train": len(train), "utterances_test": len(test),
            "voices_train": len(names[0]), "voices_test": len(names[1]), "voices_shared": len(names[0] & names[1]),
            "words_train": sum(train_words.values()), "vocabulary_train": len(train_words),
            "words_test": len(test_tokens), "vocabulary_test": len(set(test_tokens)),
            "oov_rate": sum(w not in train_words for w in test_tokens) / max(len(test_tokens), 1),
            "transcripts_train": len(seen), "transcripts_test": len(set(test)),
            "overlap": sum(t in seen for t in test) / len(test), **baselines(d)}


def estimate(name: str) -> dict:
    """Hours expected of an open corpus from its settings and sentence pools, without generating it."""
    from asicsim._src.workloads.speech_corpus_open import pools
    from asicsim._src.workloads.speech_corpus_open_settings import OPEN_PRESETS

    if name not in OPEN_PRESETS:
        raise ValueError(f"--estimate: corpus {name!r} has no settings-based estimate; open corpora are "
                         f"{sorted(OPEN_PRESETS)}")
    s = OPEN_PRESETS[name]
    train, test = pools(s)
    mean_chars = sum(map(len, train)) / len(train)
    hours_train, hours_test = s.estimated_hours(mean_chars)
    return {"name": name, "estimated_hours_train": hours_train, "estimated_hours_test": hours_test,
            "utterances_train": s.train_utterances, "utterances_test": s.test_utterances,
            "voices_train": len(s.train_voices), "voices_test": len(s.test_voices),
            "sentences_train_pool": len(train), "sentences_test_pool": len(test),
            "sentence_pools_shared": len(set(train) & set(test)), "mean_chars": mean_chars}


def sampled_hours(name: str, n: int, settings=None, threads: int | None = None, seed: int = 0) -> dict:
    """Hours of an open corpus from ``n`` utterances per split (at most the split's ``N``), drawn
    without replacement (a permutation seeded by ``seed``) and synthesised exactly as the full
    corpus would synthesise them (an utterance depends on its settings, split and index only:
    :func:`asicsim._src.workloads.speech_corpus_open.utterance`). Per split: the estimate ``N x``
    the sample's mean seconds, with a 95 % interval of ``1.96 N s / sqrt(n) x sqrt((N - n) / (N - 1))``
    (``s``: the sample's standard deviation; normal approximation, finite population); with
    ``n >= N`` the exact hours, interval 0. Also the wall seconds per utterance."""
    import os
    import time
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np

    from asicsim._src.workloads import speech_corpus_open as so
    from asicsim._src.workloads.logmel import mel_filterbank
    from asicsim._src.workloads.speech_corpus_open_settings import N_FFT, OPEN_PRESETS, RATE

    if settings is None and name not in OPEN_PRESETS:
        raise ValueError(f"--sample: corpus {name!r} is not an open corpus; open corpora are {sorted(OPEN_PRESETS)}")
    if not isinstance(n, int) or isinstance(n, bool) or n < 2:
        raise ValueError(f"--sample = {n!r}; allowed: an integer >= 2 (utterances per split)")
    s = settings or OPEN_PRESETS[name]
    fb = mel_filterbank(RATE, N_FFT, s.n_mels, 20.0, RATE / 2)
    out: dict = {"name": name, "sample": n}
    t0 = time.perf_counter()
    with ThreadPoolExecutor(threads or os.cpu_count() or 1) as ex:
        for split, (part, total, voices, pool) in enumerate(zip(
                ("train", "test"), (s.train_utterances, s.test_utterances), (s.train_voices, s.test_voices),
                so.pools(s), strict=True)):
            idx = np.random.default_rng([seed, split]).permutation(total)[:n]
            sec = np.array(list(ex.map(lambda i, v=voices, p=pool, sp=split: so.utterance(
                s, sp, int(i), v[i % len(v)], p, fb)[2], idx)))
            k = len(sec)
            half = 0.0 if k == total else 1.96 * total * sec.std(ddof=1) / k**0.5 * ((total - k) / (total - 1)) ** 0.5
            out |= {f"{part}_indices": idx.tolist(), f"{part}_seconds": sec.tolist(), f"utterances_{part}": total,
                    f"hours_{part}": float(total * sec.mean() / 3600), f"hours_{part}_ci95": float(half / 3600)}
    out["seconds_per_utterance"] = (time.perf_counter() - t0) / (len(out["train_seconds"]) + len(out["test_seconds"]))
    return out


def stats_lines(r: dict) -> list[str]:
    if "sample" in r:
        exact = r["sample"] >= r["utterances_train"]
        return [f"{r['name']}: hours {'(exact: every utterance synthesised)' if exact else 'estimated from a random sample of '}"
                + ("" if exact else f"{len(r['train_seconds'])} train / {len(r['test_seconds'])} test utterances "
                   "synthesised as the corpus would be (95 % interval)"),
                f"  hours        {r['hours_train']:.3f} +- {r['hours_train_ci95']:.3f} train / {r['hours_test']:.3f} "
                f"+- {r['hours_test_ci95']:.3f} test ({r['utterances_train']} / {r['utterances_test']} utterances)",
                f"  synthesis    {r['seconds_per_utterance']:.3f} s of wall time per utterance here"]
    if "estimated_hours_train" in r:
        return [f"{r['name']} (estimated from its settings, not generated): {r['estimated_hours_train']:.2f} h "
                f"train / {r['estimated_hours_test']:.2f} h test",
                f"  utterances {r['utterances_train']} / {r['utterances_test']}; voices {r['voices_train']} "
                f"train / {r['voices_test']} test (none shared)",
                f"  sentence pools {r['sentences_train_pool']} train / {r['sentences_test_pool']} test, "
                f"{r['sentence_pools_shared']} shared; mean {r['mean_chars']:.1f} characters"]
    return [f"{r['name']}: {r['description']}",
            f"  hours        {r['hours_train']:.3f} train / {r['hours_test']:.3f} test "
            f"({r['utterances_train']} / {r['utterances_test']} utterances)",
            f"  voices       {r['voices_train']} train / {r['voices_test']} test, {r['voices_shared']} in both",
            f"  words        {r['words_train']} train ({r['vocabulary_train']} distinct) / {r['words_test']} test "
            f"({r['vocabulary_test']} distinct)",
            f"  OOV rate     {r['oov_rate']:.2%} of test word tokens are not in any training transcript",
            f"  overlap      {r['overlap']:.2%} of test utterances have a transcript that occurs in training "
            f"({r['transcripts_train']} / {r['transcripts_test']} distinct transcripts)",
            f"  baselines    empty output: CER {r['cer_empty']:.4f}, WER {r['wer_empty']:.4f}; most frequent "
            f"training transcript ({r['most_frequent']!r}): CER {r['cer_most_frequent']:.4f}, "
            f"WER {r['wer_most_frequent']:.4f}"]


def add_cli(subparsers) -> None:
    from asicsim._src.cli_commands import command_help

    p = subparsers.add_parser(
        "corpus", help=command_help("corpus"),
        description="Statistics of a speech corpus (generated and cached on first use): hours, voices per "
                    "split, words, out-of-vocabulary rate, overlap of test transcripts with training, and "
                    "the CER/WER of an empty transcript and of the most frequent training transcript. "
                    "--estimate gives an open corpus's hours from its settings without generating it.")
    p.add_argument("name", choices=CORPORA, help="the corpus (a dataset name)")
    p.add_argument("--estimate", action="store_true", help="estimate the hours without generating (open corpora)")
    p.add_argument("--sample", type=int, metavar="N",
                   help="open corpora: hours from N utterances per split synthesised as the corpus would be, "
                        "with a 95 %% interval (exact when N >= the split's size), without generating it all "
                        "(default: none; the statistics of the whole corpus, generated)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run_corpus)


def run_corpus(args) -> int:
    from asicsim._src.workloads.datasets import load_dataset

    try:
        if args.estimate and args.sample is not None:
            raise ValueError("--estimate with --sample; allowed: one of them")
        if args.sample is not None:
            r = sampled_hours(args.name, args.sample)
        elif args.estimate:
            r = estimate(args.name)
        else:
            r = corpus_stats(load_dataset(args.name), *frame_geometry(args.name))
    except (DatasetUnavailable, ValueError) as err:
        print(f"asicsim corpus: error: {err}", file=sys.stderr)
        return 2
    print(json_text(r, indent=1) if args.json else "\n".join(stats_lines(r)))
    return 0
