"""Readers for SCALE-Sim's input files: the ``.cfg`` config (INI) and the topology CSVs.

Topologies come in two forms, told apart by the header (or by ``kind=``):

- conv: ``name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, Num Filter, Strides,``
- GEMM: ``name, M, N, K,`` (SCALE-Sim's ``input_type_gemm``), stored as the conv SCALE-Sim maps it to:
  ifmap ``M x K``, filter ``1 x K``, 1 channel, ``N`` filters, stride 1.

As in SCALE-Sim, the first line is a header, blank lines are skipped, fields are stripped of spaces,
a trailing comma ends each line (optional here), an optional last field is an ``N:M`` sparsity
ratio (only dense ``1:1`` is supported), and a conv layer whose name contains ``DP`` (depthwise) is
expanded into one single-channel layer per channel, named ``<name>Channel_<i>``.
Errors name the file, line, field, value and what is allowed.
"""

from __future__ import annotations

import configparser
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from asicsim._files import TextFileError, read_text_file
from asicsim._src.hw import limits as lim
from asicsim._src.hw.limits import Limit

CONV_FIELDS = ("ifmap_h", "ifmap_w", "filter_h", "filter_w", "channels", "num_filter", "stride")


class ScaleSimFileError(ValueError):
    """An unreadable SCALE-Sim config or topology file (the message says where and why)."""


@dataclass(frozen=True)
class ScaleSimConfig:
    """The design knobs of a SCALE-Sim config that its compute and memory model use."""

    run_name: str
    rows: int
    cols: int
    dataflow: str
    ifmap_sram_kib: int
    filter_sram_kib: int
    ofmap_sram_kib: int
    bandwidth_mode: str  # "CALC" (estimate) or "USER"
    bandwidth_words: int  # first USER bandwidth (ofmap drain, words/cycle); 10 if absent
    ifmap_bank_bandwidth_words: int  # USER-mode ifmap DRAM words/cycle ([layout] section)
    filter_bank_bandwidth_words: int


@dataclass(frozen=True)
class Topology:
    """Layers of a topology file in SCALE-Sim's conv form (GEMM layers already mapped)."""

    name: str
    kind: str  # "conv" or "gemm"
    layer_names: tuple[str, ...]
    ifmap_h: np.ndarray
    ifmap_w: np.ndarray
    filter_h: np.ndarray
    filter_w: np.ndarray
    channels: np.ndarray
    num_filter: np.ndarray
    stride: np.ndarray

    def conv_args(self) -> dict[str, np.ndarray]:
        """The seven conv fields as int64 arrays (one entry per layer)."""
        return {f: getattr(self, f) for f in CONV_FIELDS}


def _int(path, where: str, field: str, text: str, limit: Limit = lim.OP_DIM) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise ScaleSimFileError(f"{path}: {where}: field {field!r} = {text.strip()!r} is not an "
                                f"integer (allowed: {limit.allowed()})") from None
    if not limit.ok(value):
        raise ScaleSimFileError(f"{path}: {where}: field {field!r} = {value} "
                                f"(allowed: {limit.allowed()})")
    return value


def _text(path, what: str) -> str:
    """The UTF-8 text of a SCALE-Sim file; unreadable or not UTF-8 is a ScaleSimFileError."""
    try:
        return read_text_file(path)
    except TextFileError as exc:
        raise ScaleSimFileError(str(exc)) from None
    except OSError as exc:
        raise ScaleSimFileError(f"{path}: cannot read the {what} file: {exc.strerror}") from None


def _ini_problem(exc: configparser.Error) -> str:
    """What is wrong with an INI text, by line number: never the file's content (a file given by
    mistake, a key or a password, is not echoed)."""
    if isinstance(exc, configparser.MissingSectionHeaderError):
        return (f"line {exc.lineno}: a line before any [section] header (a SCALE-Sim config is INI "
                "text starting with [general] and [architecture_presets])")
    if isinstance(exc, configparser.ParsingError):
        lines = ", ".join(str(n) for n, _ in exc.errors)
        return f"line(s) {lines}: neither a [section] header nor a 'key = value' setting"
    if isinstance(exc, (configparser.DuplicateSectionError, configparser.DuplicateOptionError)):
        what = (f"section [{exc.section}]" if isinstance(exc, configparser.DuplicateSectionError)
                else f"key {exc.option!r} in [{exc.section}]")
        return f"line {exc.lineno}: {what} given twice"
    return type(exc).__name__


def read_scalesim_config(path: str | Path) -> ScaleSimConfig:
    """Read a SCALE-Sim ``.cfg``; unsupported features (sparsity, custom layouts, Ramulator) raise."""
    path = Path(path)
    # no interpolation: a '%' in a value (a run_name "50%") is a character, not a syntax error
    cp = configparser.ConfigParser(interpolation=None)
    try:
        cp.read_string(_text(path, "config"), source=str(path))
    except configparser.Error as exc:
        raise ScaleSimFileError(f"{path}: not a SCALE-Sim config: {_ini_problem(exc)}") from None

    def get(section: str, key: str, default: str | None = None) -> str:
        if cp.has_option(section, key):
            return cp.get(section, key).strip()
        if default is not None:
            return default
        raise ScaleSimFileError(f"{path}: missing [{section}] {key} (required by SCALE-Sim)")

    arch = "architecture_presets"
    mode = get("run_presets", "InterfaceBandwidth").upper()
    if mode not in ("CALC", "USER"):
        raise ScaleSimFileError(f"{path}: [run_presets] InterfaceBandwidth = {mode!r} "
                                "(allowed: CALC, USER)")
    dataflow = get(arch, "Dataflow").lower()
    if dataflow not in ("os", "ws", "is"):
        raise ScaleSimFileError(f"{path}: [{arch}] Dataflow = {dataflow!r} (allowed: os, ws, is)")
    bw_text = get(arch, "Bandwidth", "" if mode == "CALC" else None).split(",")[0]
    bandwidth = (_int(path, f"[{arch}]", "Bandwidth", bw_text, lim.SCALESIM_WORDS)
                 if bw_text.strip() else 10)
    for section, key in (("sparsity", "SparsitySupport"), ("layout", "IfmapCustomLayout"),
                         ("layout", "FilterCustomLayout"), ("run_presets", "UseRamulatorTrace")):
        value = get(section, key, "false")
        if value.lower() not in cp.BOOLEAN_STATES:  # configparser's: true/false, yes/no, on/off, 1/0
            raise ScaleSimFileError(f"{path}: [{section}] {key} = {value!r} is not a boolean "
                                    "(allowed: False)")
        if cp.BOOLEAN_STATES[value.lower()]:
            raise ScaleSimFileError(f"{path}: [{section}] {key} = {value!r} is not supported by "
                                    "asicsim's SCALE-Sim model (allowed: False)")
    return ScaleSimConfig(
        run_name=get("general", "run_name", path.stem),
        rows=_int(path, f"[{arch}]", "ArrayHeight", get(arch, "ArrayHeight"), lim.ARRAY_SIDE),
        cols=_int(path, f"[{arch}]", "ArrayWidth", get(arch, "ArrayWidth"), lim.ARRAY_SIDE),
        dataflow=dataflow,
        **{f"{op.lower()}_sram_kib": _int(path, f"[{arch}]", f"{op}SramSzkB",
                                          get(arch, f"{op}SramSzkB"), lim.SCALESIM_KIB)
           for op in ("Ifmap", "Filter", "Ofmap")},
        bandwidth_mode=mode,
        bandwidth_words=bandwidth,
        **{f"{op.lower()}_bank_bandwidth_words": _int(
            path, "[layout]", f"{op}SRAMBankBandwidth", get("layout", f"{op}SRAMBankBandwidth", "10"),
            lim.SCALESIM_WORDS) for op in ("Ifmap", "Filter")},
    )


def _detect_kind(path, header: list[str]) -> str:
    fields = [h.strip() for h in header if h.strip()]
    if len(fields) >= 4 and [f.upper() for f in fields[1:4]] == ["M", "N", "K"]:
        return "gemm"
    if len(fields) >= 8:
        return "conv"
    raise ScaleSimFileError(
        f"{path}: line 1: header {','.join(header)!r} is neither a GEMM header (name, M, N, K) nor "
        "a conv header (name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, "
        "Num Filter, Strides); pass kind='gemm' or kind='conv'")


def read_scalesim_topology(path: str | Path, kind: str = "auto") -> Topology:
    """Read a SCALE-Sim topology CSV (``kind``: "auto", "conv" or "gemm")."""
    path = Path(path)
    lines = _text(path, "topology").splitlines()
    if not lines:
        raise ScaleSimFileError(f"{path}: empty topology file (a header line and layers expected)")
    if kind == "auto":
        kind = _detect_kind(path, lines[0].split(","))
    if kind not in ("conv", "gemm"):
        raise ScaleSimFileError(f"{path}: kind={kind!r} (allowed: 'auto', 'conv', 'gemm')")
    names = ("M", "N", "K") if kind == "gemm" else (
        "IFMAP Height", "IFMAP Width", "Filter Height", "Filter Width", "Channels", "Num Filter",
        "Strides")
    layer_names, rows = [], []
    for lineno, raw in enumerate(lines[1:], start=2):
        if not raw.strip():
            continue
        fields = [f.strip() for f in raw.strip().split(",")]
        while fields and fields[-1] == "":
            fields.pop()
        where = f"line {lineno}"
        if len(fields) not in (1 + len(names), 2 + len(names)):
            raise ScaleSimFileError(
                f"{path}: {where}: {len(fields)} fields {fields!r}; expected name, "
                f"{', '.join(names)} and optionally a sparsity ratio N:M")
        if len(fields) == 2 + len(names) and fields[-1].replace(" ", "") not in ("1:1",):
            raise ScaleSimFileError(f"{path}: {where}: sparsity ratio {fields[-1]!r} is not "
                                    "supported (allowed: 1:1, dense)")
        vals = [_int(path, where, n, v) for n, v in zip(names, fields[1:1 + len(names)], strict=True)]
        if kind == "gemm":
            m, n, k = vals
            vals = [m, k, 1, k, 1, n, 1]
        if vals[2] > vals[0] or vals[3] > vals[1]:
            raise ScaleSimFileError(f"{path}: {where}: filter {vals[2]}x{vals[3]} is larger than "
                                    f"the ifmap {vals[0]}x{vals[1]} (SCALE-Sim rejects it)")
        if kind == "conv" and "DP" in fields[0]:
            for ch in range(vals[4]):
                layer_names.append(f"{fields[0]}Channel_{ch}")
                rows.append([*vals[:4], 1, *vals[5:]])
        else:
            layer_names.append(fields[0])
            rows.append(vals)
    if not rows:
        raise ScaleSimFileError(f"{path}: no layers after the header line")
    cols = np.asarray(rows, dtype=np.int64).T
    return Topology(path.stem, kind, tuple(layer_names), *cols)
