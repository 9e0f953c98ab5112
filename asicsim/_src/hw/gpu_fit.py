"""The GPU model's constants: ``asicsim/_src/hw/data/gpu_fit.toml`` (which were fitted, on what, and
which are assumptions), and the constants of a GPU generation (``name@Generation``): a generation
without its own value takes the nearest generation's that has one (the earlier on a tie)."""

from __future__ import annotations

import functools
import tomllib
from collections.abc import Mapping
from pathlib import Path

from asicsim._files import read_text_file

FIT_FILE = Path(__file__).parent / "data" / "gpu_fit.toml"
#: GPU generations in order of release (GpuDesign.architecture).
GENERATIONS = ("Maxwell", "Pascal", "Volta", "Turing", "Ampere", "Hopper", "Blackwell")
#: Constants that are the generation's (``name@<generation>`` in the fit file).
GENERATION_KEYS = ("launch_us", "rnn_step_us", "rnn_call_us", "conv_call_us", "cta_k_overhead",
                   "eff_simt", "eff_tensor", "eff_int8_tensor", "unaligned_eff", "unaligned_exp", "occ_exp", "smax_p",
                   "smax_p_stream", "l2_fraction", "l2_bytes_per_sm_clock",
                   "conv_fwd", "conv_bwd_data", "conv_bwd_filter", "conv_fwd_tensor",
                   "conv_bwd_data_tensor", "conv_bwd_filter_tensor", "e_tensor_ratio",
                   "persist_step_us", "persist_eff", "e_fp32_scale", "e_int8_tensor_scale")
#: Generation keys never borrowed by another generation: one library's quirk on one path (cuBLASLt's
#: int8 kernels on Hopper reach 0.42 of the peak; other generations keep their class's efficiency; a
#: path's energy measured on one generation's board).
OWN_GENERATION_ONLY = frozenset({"eff_int8_tensor", "e_fp32_scale", "e_int8_tensor_scale"})


@functools.cache
def _load_fit_file(path: str) -> tuple[tuple[str, float], ...]:
    table = tomllib.loads(read_text_file(path))  # not UTF-8: a TextFileError naming the file
    return tuple((k, float(v["value"])) for k, v in table["constants"].items())


def load_fit(path: str | Path | None = None) -> dict[str, float]:
    """The model constants {name: value} from ``gpu_fit.toml`` (or another file written like it);
    generation constants are keyed ``name@Generation``."""
    return dict(_load_fit_file(str(path or FIT_FILE)))


def fit_table(path: str | Path | None = None) -> dict[str, dict]:
    """The whole fit file: per constant its value, how it was obtained and its bounds."""
    return tomllib.loads(read_text_file(path or FIT_FILE))["constants"]


def generation_constants(fit: Mapping, architecture: str) -> tuple[dict[str, float], dict[str, str]]:
    """The flat constants for a GPU of ``architecture``: each generation key from that generation,
    else from the nearest generation that has it (earlier on a tie; not the keys in
    :data:`OWN_GENERATION_ONLY`), else the shared value. Also returns, per borrowed key, the
    generation it came from."""
    out = {k: v for k, v in fit.items() if "@" not in k}
    borrowed: dict[str, str] = {}
    here = GENERATIONS.index(architecture) if architecture in GENERATIONS else len(GENERATIONS)
    for key in GENERATION_KEYS:
        have = [g for g in GENERATIONS if f"{key}@{g}" in fit]
        if not have or (key in OWN_GENERATION_ONLY and architecture not in have):
            continue
        best = min(have, key=lambda g: (abs(GENERATIONS.index(g) - here), GENERATIONS.index(g)))
        out[key] = fit[f"{key}@{best}"]
        if best != architecture:
            borrowed[key] = best
    return out, borrowed
