"""SCALE-Sim 3.0.0 compatible reports in closed form, vectorised over layers and design points.

``scalesim_report`` returns, for every (design point, layer), the numbers of SCALE-Sim's
COMPUTE_REPORT, BANDWIDTH_REPORT and DETAILED_ACCESS_REPORT under SCALE-Sim's own column names
("Total Cycles", "Overall Util %", "SRAM IFMAP Reads", ...). Design points (array rows, cols,
dataflow, and optionally the memory knobs) broadcast against each other; layers form the other axis;
there is no Python loop over layers, design points or folds. The formulas and their provenance are in
:mod:`asicsim._src.hw.scalesim_compute` and :mod:`asicsim._src.hw.scalesim_memory`. A USER-mode layer that
stalls (its reads miss or its ofmap buffer fills) is replayed cycle by cycle as SCALE-Sim does
(:mod:`asicsim._src.hw.scalesim_replay`; as slow as SCALE-Sim, and only for those rows): its cycles,
stalls and SRAM/DRAM columns are SCALE-Sim's, and ``replayed`` marks it. What neither gives (CALC
mode's DRAM refills once buffers overflow) is NaN, with ``memory_closed_form`` / ``stall_free``
saying which rows are affected.

>>> df = scalesim_report({"M": [64], "N": [48], "K": [40]}, rows=32, cols=32, dataflow="ws",
...                      ifmap_sram_kib=64, filter_sram_kib=64, ofmap_sram_kib=64)
>>> int(df["Total Cycles"][0]), int(df["SRAM IFMAP Reads"][0])
(631, 5120)
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from asicsim._src.hw import limits as lim
from asicsim._src.hw.scalesim_compute import DATAFLOWS, compute_model, conv_dims, dataflow_codes
from asicsim._src.hw.scalesim_files import (
    CONV_FIELDS,
    Topology,
    read_scalesim_config,
    read_scalesim_topology,
)
from asicsim._src.hw.scalesim_memory import memory_model
from asicsim._src.hw.scalesim_replay import replay_layer

COMPUTE_REPORT_COLUMNS = ("Total Cycles (incl. prefetch)", "Total Cycles", "Stall Cycles",
                          "Overall Util %", "Mapping Efficiency %", "Compute Util %")
BANDWIDTH_REPORT_COLUMNS = ("Avg IFMAP SRAM BW", "Avg FILTER SRAM BW", "Avg OFMAP SRAM BW",
                            "Avg IFMAP DRAM BW", "Avg FILTER DRAM BW", "Avg OFMAP DRAM BW")
DETAILED_ACCESS_REPORT_COLUMNS = tuple(
    f"{level} {op} {item}"
    for level in ("SRAM", "DRAM") for op in ("IFMAP", "Filter", "OFMAP")
    for item in ("Start Cycle", "Stop Cycle", "Writes" if op == "OFMAP" else "Reads"))
REPORT_COLUMNS = COMPUTE_REPORT_COLUMNS + BANDWIDTH_REPORT_COLUMNS + DETAILED_ACCESS_REPORT_COLUMNS

# scalesim_report's columns, in order and by dtype
_REPORT_ORDER = ("design_point", "rows", "cols", "dataflow", "LayerID", "layer_name", "M", "N", "K",
                 *REPORT_COLUMNS, "folds", "stall_free", "memory_closed_form", "replayed")
_INT_COLUMNS = ("design_point", "rows", "cols", "LayerID", "M", "N", "K", "SRAM IFMAP Reads",
                "SRAM Filter Reads", "SRAM OFMAP Writes", "folds")
_FLOAT_COLUMNS = tuple(c for c in REPORT_COLUMNS if c not in _INT_COLUMNS)
_BOOL_COLUMNS = ("stall_free", "memory_closed_form", "replayed")
_DTYPE_GROUPS = ((np.int64, _INT_COLUMNS), (np.float64, _FLOAT_COLUMNS), (np.bool_, _BOOL_COLUMNS))
_REPORT_INDEX = pd.Index(_REPORT_ORDER)  # copied per report: an Index's name is mutable


def _positions(*columns: str) -> np.ndarray:
    return np.array([_REPORT_ORDER.index(c) for c in columns])


try:  # pandas >= 3 (public low-level constructor); text columns get its default "str" dtype
    from pandas.api.internals import create_dataframe_from_blocks

    _STR_DTYPE = pd.api.types.pandas_dtype("str")
except ImportError:  # pandas 2
    _STR_DTYPE = None


def layer_table(layers) -> tuple[dict[str, np.ndarray], tuple[str, ...]]:
    """Conv-form int64 layer arrays and names from a Topology, a mapping (keys M, N, K or the conv
    fields, optional ``layer_name``) or a list of (M, N, K) or 7-field conv tuples."""
    if isinstance(layers, Topology):
        return layers.conv_args(), layers.layer_names
    if isinstance(layers, Mapping):
        if {"M", "N", "K"} <= set(layers):
            m, n, k = (np.atleast_1d(np.asarray(layers[x], dtype=np.int64)) for x in "MNK")
            m, n, k = np.broadcast_arrays(m, n, k)
            one = np.ones_like(m)
            conv = dict(zip(CONV_FIELDS, (m, k, one, k, one, n, one), strict=True))
        elif set(CONV_FIELDS) <= set(layers):
            conv = dict(zip(CONV_FIELDS, np.broadcast_arrays(
                *(np.atleast_1d(np.asarray(layers[f], dtype=np.int64)) for f in CONV_FIELDS)),
                strict=True))
        else:
            raise ValueError(f"layers mapping needs keys M, N, K or {CONV_FIELDS}; got {sorted(layers)}")
        names = layers.get("layer_name")
    else:
        table = np.asarray(layers, dtype=np.int64)
        if table.ndim == 2 and table.shape[1] == 3:
            return layer_table({"M": table[:, 0], "N": table[:, 1], "K": table[:, 2]})
        if table.ndim == 2 and table.shape[1] == len(CONV_FIELDS):
            return layer_table(dict(zip(CONV_FIELDS, table.T, strict=True)))
        raise ValueError(f"a layer list needs rows (M, N, K) or {CONV_FIELDS}; got shape {table.shape}")
    count = conv["ifmap_h"].shape[0]
    if conv["ifmap_h"].ndim != 1 or any((v < 1).any() for v in conv.values()):
        raise ValueError("layer dimensions must be 1-D arrays of integers >= 1")
    if (conv["filter_h"] > conv["ifmap_h"]).any() or (conv["filter_w"] > conv["ifmap_w"]).any():
        raise ValueError("a filter is larger than its ifmap (SCALE-Sim rejects such layers)")
    names = tuple(str(x) for x in names) if names is not None else tuple(str(i) for i in range(count))
    return conv, names


def scalesim_arrays(layers, rows, cols, dataflow, *, ifmap_sram_kib=256, filter_sram_kib=256,
                    ofmap_sram_kib=128, bandwidth_mode="CALC", bandwidth_words=10,
                    ifmap_bank_bandwidth_words=10, filter_bank_bandwidth_words=10) -> dict:
    """All report numbers as arrays of shape (design points, layers).

    ``rows``, ``cols``, ``dataflow`` ('os'/'ws'/'is' or codes 0/1/2) and the memory knobs broadcast to
    one 1-D axis of design points. Defaults are SCALE-Sim's own (scale_config.py: 256/256/128 KiB,
    CALC bandwidth mode, bank bandwidth 10).
    """
    conv, _ = layer_table(layers)
    memory = {"ifmap_sram_kib": (ifmap_sram_kib, lim.SCALESIM_KIB),
              "filter_sram_kib": (filter_sram_kib, lim.SCALESIM_KIB),
              "ofmap_sram_kib": (ofmap_sram_kib, lim.SCALESIM_KIB),
              "bandwidth_words": (bandwidth_words, lim.SCALESIM_WORDS),
              "ifmap_bank_bandwidth_words": (ifmap_bank_bandwidth_words, lim.SCALESIM_WORDS),
              "filter_bank_bandwidth_words": (filter_bank_bandwidth_words, lim.SCALESIM_WORDS)}
    checked = {name: np.atleast_1d(limit.check_array("scalesim_arrays", name, value).astype(np.int64))
               for name, (value, limit) in {"rows": (rows, lim.ARRAY_SIDE), "cols": (cols, lim.ARRAY_SIDE),
                                            **memory}.items()}
    mode = np.char.upper(np.char.strip(np.asarray(bandwidth_mode, dtype=str)))
    if not np.isin(mode, ("CALC", "USER")).all():
        bad = mode[~np.isin(mode, ("CALC", "USER"))].ravel()[0] if mode.ndim else str(mode)
        raise ValueError(f"scalesim_arrays: bandwidth_mode = {bad!r}; allowed: 'CALC' or 'USER' "
                         "(SCALE-Sim's InterfaceBandwidth)")
    knobs = np.broadcast_arrays(
        checked["rows"], checked["cols"], np.atleast_1d(dataflow_codes(dataflow)),
        *(checked[name] for name in memory),
        np.atleast_1d(mode == "USER"))
    if knobs[0].ndim != 1:
        raise ValueError("design-point knobs must be scalars or 1-D arrays")
    R, C, df, i_kib, f_kib, o_kib, bw, i_bw, f_bw, user = (k[:, None] for k in knobs)
    with np.errstate(divide="ignore", invalid="ignore"):  # SCALE-Sim divides by 0 too (1x1 array)
        return _arrays(conv, R, C, df, i_kib, f_kib, o_kib, bw, i_bw, f_bw, user)


def _arrays(conv, R, C, df, i_kib, f_kib, o_kib, bw, i_bw, f_bw, user) -> dict:
    g = conv_dims(**{f: v[None, :] for f, v in conv.items()})
    out = compute_model(R, C, df, g)
    out.update(memory_model(out, g, user_bandwidth=user, ifmap_sram_kib=i_kib,
                            filter_sram_kib=f_kib, ofmap_sram_kib=o_kib, bandwidth_words=bw,
                            ifmap_bank_bandwidth_words=i_bw, filter_bank_bandwidth_words=f_bw,
                            rows_=R, cols=C, df_=df))
    stall_free = out["stall_free"]
    out["Total Cycles"] = np.where(stall_free, out["Total Cycles"], np.nan)
    out["Overall Util %"] = np.where(stall_free, out["Overall Util %"], np.nan)
    for key in [k for k in out if k.startswith("SRAM") and "Cycle" in k]:
        out[key] = np.where(stall_free, out[key], np.nan)
    replay = np.broadcast_to(user & ~stall_free, stall_free.shape)
    out["replayed"] = replay
    if replay.any():
        _replay(out, conv, g, replay, R, C, df, i_kib, f_kib, o_kib, bw, i_bw, f_bw)
    total = out["Total Cycles"]
    for op, key in (("IFMAP", "SRAM IFMAP Reads"), ("FILTER", "SRAM Filter Reads"),
                    ("OFMAP", "SRAM OFMAP Writes")):
        out[f"Avg {op} SRAM BW"] = out[key] / total
    for op, name in (("IFMAP", "IFMAP"), ("FILTER", "Filter"), ("OFMAP", "OFMAP")):
        level = f"DRAM {name}"
        count = out[f"{level} Writes" if op == "OFMAP" else f"{level} Reads"]
        out[f"Avg {op} DRAM BW"] = count / (out[f"{level} Stop Cycle"] - out[f"{level} Start Cycle"] + 1)
    out.update(M=g["M"], N=g["N"], K=g["K"], rows=R, cols=C, dataflow=df)
    shape = stall_free.shape
    return {k: v if np.shape(v) == shape else np.broadcast_to(v, shape)
            for k, v in out.items() if not k.startswith("_")}


def _replay(out: dict, conv: dict, g: dict, rows, R, C, df, *knobs) -> None:
    """Fill the rows ``rows`` (design point, layer) of ``out`` by SCALE-Sim's replay."""
    shape = rows.shape
    macs = np.broadcast_to(g["M"] * g["N"] * g["K"], shape)
    for p, lay in zip(*np.nonzero(rows), strict=True):
        layer = tuple(int(conv[f][lay]) for f in CONV_FIELDS)
        r, c = int(R[p, 0]), int(C[p, 0])
        found = replay_layer(layer, r, c, DATAFLOWS[int(df[p, 0])], *(int(k[p, 0]) for k in knobs))
        found["Overall Util %"] = 100 * float(macs[p, lay]) / (found["Total Cycles"] * r * c)
        for col, value in found.items():
            if out[col].shape != shape or not out[col].flags.writeable:
                out[col] = np.array(np.broadcast_to(out[col], shape), dtype=np.float64)
            out[col][p, lay] = value


def scalesim_report(layers, rows, cols, dataflow, **memory) -> pd.DataFrame:
    """SCALE-Sim's per-layer report rows for every design point, as one long DataFrame.

    One row per (design point, layer), design points outer; columns ``design_point``, ``rows``,
    ``cols``, ``dataflow``, ``LayerID``, ``layer_name``, ``M``, ``N``, ``K``, then SCALE-Sim's report
    columns (:data:`REPORT_COLUMNS`) and asicsim's extras (``folds``, ``stall_free``,
    ``memory_closed_form``). ``memory`` takes the keyword knobs of :func:`scalesim_arrays`.
    """
    _, names = layer_table(layers)
    arrays = scalesim_arrays(layers, rows, cols, dataflow, **memory)
    points, count = arrays["folds"].shape
    arrays["design_point"] = np.arange(points)[:, None]
    arrays["LayerID"] = np.arange(count)
    # one (columns, points, layers) block per dtype, filled by broadcasting (no per-column ravel)
    blocks = {}
    for dtype, group in _DTYPE_GROUPS:
        block = np.empty((len(group), points, count), dtype=dtype)
        for i, column in enumerate(group):
            block[i] = arrays[column]
        blocks[group] = block.reshape(len(group), points * count)
    text = {"dataflow": np.asarray(DATAFLOWS, dtype=object)[arrays["dataflow"].ravel()],
            "layer_name": np.asarray(names, dtype=object)[np.tile(np.arange(count), points)]}
    if _STR_DTYPE is None:  # pandas 2: the plain constructor (it infers object for the text)
        columns = dict(text)
        for group, block in blocks.items():
            columns.update(zip(group, block, strict=True))
        return pd.DataFrame({c: columns[c] for c in _REPORT_ORDER})
    # pandas >= 3: hand over the blocks as they are; the plain constructor's per-column inference
    # and consolidation cost more than the numbers themselves on small networks
    return create_dataframe_from_blocks(
        [*((block, _positions(*group)) for group, block in blocks.items()),
         *((pd.array(x, dtype=_STR_DTYPE), _positions(c)) for c, x in text.items())],
        index=pd.RangeIndex(points * count), columns=_REPORT_INDEX.copy())


def scalesim_report_from_files(config: str | Path, topology: str | Path,
                               kind: str = "auto") -> pd.DataFrame:
    """Read a SCALE-Sim config and topology file and return :func:`scalesim_report` for them."""
    cfg = read_scalesim_config(config)
    topo = read_scalesim_topology(topology, kind=kind)
    return scalesim_report(
        topo, cfg.rows, cfg.cols, cfg.dataflow, ifmap_sram_kib=cfg.ifmap_sram_kib,
        filter_sram_kib=cfg.filter_sram_kib, ofmap_sram_kib=cfg.ofmap_sram_kib,
        bandwidth_mode=cfg.bandwidth_mode, bandwidth_words=cfg.bandwidth_words,
        ifmap_bank_bandwidth_words=cfg.ifmap_bank_bandwidth_words,
        filter_bank_bandwidth_words=cfg.filter_bank_bandwidth_words)
