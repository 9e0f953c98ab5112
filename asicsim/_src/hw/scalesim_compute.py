"""Closed form of SCALE-Sim 3.0.0's compute model (folds, cycles, utilization, SRAM traffic).

SCALE-Sim builds, per layer, explicit per-cycle "demand matrices" (one row per cycle, one column per
array edge lane) and walks them line by line. Every number it reports about compute is a function of
the matrix shapes only, so here it is computed in closed form with numpy broadcasting: every input
may be an array (layers along one axis, design points along another) and every output has the
broadcast shape. Conventions (all read from SCALE-Sim 3.0.0's source, file names in brackets):

- Conv to GEMM [topology_utils.py, operand_matrix.py]: ofmap ``Eh = ceil((H - Fh + s) / s)`` (no
  padding; the last window may overhang the ifmap, its missing elements are address -1), likewise
  ``Ew``; ``M = Eh * Ew`` ofmap pixels, ``N`` filters, ``K = Fh * Fw * C`` window elements. A GEMM
  layer ``M, N, K`` is the conv ``H=M, W=K, Fh=1, Fw=K, C=1, N, s=1``.
- Spatial/temporal mapping [systolic_compute_*.py] on an ``R x C`` array: os ``Sr, Sc, T = M, N, K``;
  ws ``K, N, M``; is ``K, M, N``. Folds ``F = ceil(Sr / R) * ceil(Sc / C)`` (column folds outer).
- Cycles per fold (demand-matrix lines): os ``T + R + C - 2``; ws and is ``T + 2R + C - 2``.
  "Total Cycles" is ``F * lines_per_fold - 1`` plus stalls (the cycle of the last ofmap line, so
  on a 1x1 os array it is ``M N K - 1`` and "Overall Util %" exceeds 100).
- Per-fold compute utilization uses a different cycle count: os ``T + R + C - 2``; ws and is
  ``T + 2R + 2C - 3``; "Compute Util %" and "Mapping Efficiency %" are plain means over folds:
  ``100 T Sr Sc / (F R C cycles_util)`` and ``100 Sr Sc / (F R C)``.
  "Overall Util %" is ``100 M N K / (Total Cycles * R * C)``.
- SRAM counts are the demand-matrix element counts, overhanging (-1) entries included:
  ifmap reads os ``cf M K``, ws ``cf M K``, is ``M K``; filter reads os ``rf N K``, ws ``N K``,
  is ``cf N K``; ofmap writes os ``M N + F (R + C)`` (SCALE-Sim adds ``R + C`` per fold), ws and is
  ``rf M N`` (partial sums written once per row fold); ``rf = ceil(Sr/R)``, ``cf = ceil(Sc/C)``.
- SRAM start/stop cycles: the first/last demand line with a valid address; reads are served one
  cycle after their line (hit latency 1), writes in their line. With overhanging windows the last
  valid ifmap line moves; only the last ofmap row and column can overhang, so the extreme is taken
  over four pixel classes; a fold whose windows all lie wholly outside the ifmap (stride > filter)
  holds no valid address, so the stop cycle comes from the last fold that does.
"""

from __future__ import annotations

import numpy as np

DATAFLOWS = ("os", "ws", "is")


def ceil_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer ceil(a / b) for positive b, elementwise."""
    return -(-np.asarray(a) // np.asarray(b))


def by_dataflow(os_: np.ndarray, ws_: np.ndarray, if_os, if_ws, if_is) -> np.ndarray:
    """Pick per element by dataflow (a cheaper np.select for the three dataflows)."""
    return np.where(os_, if_os, np.where(ws_, if_ws, if_is))


def _stack4(a, b, c, d) -> np.ndarray:
    """Stack four arrays along a new last axis; ``a`` has the full shape, the others broadcast to
    it (cheaper than np.stack on the tiny arrays of one network)."""
    a = np.asarray(a)
    out = np.empty((*a.shape, 4), dtype=np.result_type(a, b, c, d))
    out[..., 0], out[..., 1], out[..., 2], out[..., 3] = a, b, c, d
    return out


def dataflow_codes(dataflow) -> np.ndarray:
    """Map 'os'/'ws'/'is' (scalars or arrays of strings, or codes 0/1/2) to int codes 0/1/2."""
    if isinstance(dataflow, str) and (name := dataflow.strip().lower()) in DATAFLOWS:
        return np.asarray(DATAFLOWS.index(name), dtype=np.int64)  # the common case, without np.char
    arr = np.asarray(dataflow)
    if arr.dtype.kind in "iu":
        if arr.size and (arr.min() < 0 or arr.max() > 2):
            raise ValueError(f"dataflow codes must be 0 (os), 1 (ws) or 2 (is); got {arr!r}")
        return arr.astype(np.int64)
    lowered = np.char.lower(np.char.strip(arr.astype(str)))
    codes = np.full(lowered.shape, -1, dtype=np.int64)
    for code, name in enumerate(DATAFLOWS):
        codes[lowered == name] = code
    if (codes < 0).any():
        bad = sorted(set(lowered[codes < 0].ravel().tolist()))
        raise ValueError(f"dataflow must be one of {DATAFLOWS}; got {bad}")
    return codes


def conv_dims(ifmap_h, ifmap_w, filter_h, filter_w, channels, num_filter, stride) -> dict:
    """SCALE-Sim's conv geometry: ofmap size, GEMM (M, N, K) and the overhanging last row/col."""
    h, w, fh, fw, ch, n, s = (np.asarray(x, dtype=np.int64) for x in
                              (ifmap_h, ifmap_w, filter_h, filter_w, channels, num_filter, stride))
    ofmap_h = ceil_div(h - fh + s, s)
    ofmap_w = ceil_div(w - fw + s, s)
    last_rows = np.minimum(fh, h - (ofmap_h - 1) * s)
    last_cols = np.minimum(fw, w - (ofmap_w - 1) * s)
    return {
        "ofmap_h": ofmap_h, "ofmap_w": ofmap_w, "M": ofmap_h * ofmap_w, "N": n, "K": fh * fw * ch,
        "filter_h": fh, "filter_w": fw, "channels": ch, "stride": s,
        # rows/cols of the last window that lie inside the ifmap (<= 0: wholly outside)
        "last_rows": last_rows, "last_cols": last_cols,
        "used_rows": (ofmap_h - 1) * np.minimum(s, fh) + np.maximum(last_rows, 0),
        "used_cols": (ofmap_w - 1) * np.minimum(s, fw) + np.maximum(last_cols, 0),
    }


def _pixel_classes(g: dict) -> tuple[np.ndarray, ...]:
    """Four pixel classes (inner, last col, last row, corner): rows/cols in bounds, largest index,
    count and whether the class has a pixel with a valid address (cached in ``g``)."""
    if "_classes" not in g:
        fh, fw, eh, ew, m = g["filter_h"], g["filter_w"], g["ofmap_h"], g["ofmap_w"], g["M"]
        lr, lc = g["last_rows"], g["last_cols"]
        hr, wc = _stack4(fh, fh, lr, lr), _stack4(fw, lc, fw, lc)
        idx = _stack4(m - ew - 2, m - ew - 1, m - 2, m - 1)
        count = _stack4((eh - 1) * (ew - 1), eh - 1, ew - 1, np.ones_like(m))
        exists = _stack4((eh >= 2) & (ew >= 2), eh >= 2, ew >= 2, m >= 1)
        g["_classes"] = (hr, wc, idx, count, exists & (hr >= 1) & (wc >= 1))
    return g["_classes"]


def valid_ifmap_entries(g: dict) -> np.ndarray:
    """Number of valid (not overhanging) entries of the M x K ifmap operand matrix."""
    hr, wc, _, count, ok = _pixel_classes(g)
    return (np.where(ok, count * hr * wc, 0).sum(axis=-1)) * g["channels"]


def _ifmap_stop(df, R, C, rf, cf, lines_per_fold, g: dict) -> np.ndarray:
    """Cycle of the last valid ifmap address: in the last fold that holds one (os, is: folds that
    hold only wholly-overhanging windows have none); NaN if the layer has no valid address."""
    _, _, idx, _, ok = _pixel_classes(g)
    last_pixel = np.where(ok, idx, -1).max(axis=-1)  # largest pixel with a valid address
    # (fold, line within it) per dataflow; a dataflow no design point uses is not evaluated (each
    # costs ~25 small array operations, which dominate on small networks)
    fold_val = [branch(R, C, rf, cf, last_pixel, g) if (df == code).any() else (0, -1)
                for code, branch in enumerate((_ifmap_stop_os, _ifmap_stop_ws, _ifmap_stop_is))]
    os_, ws_ = df == 0, df == 1
    fold = by_dataflow(os_, ws_, *(f for f, _ in fold_val))
    val = by_dataflow(os_, ws_, *(v for _, v in fold_val))
    stop = fold * lines_per_fold + val + 1
    return np.where((val >= 0) & (last_pixel >= 0), stop.astype(np.float64), np.nan)


def _last_j(g: dict) -> np.ndarray:
    """Last valid window element j per pixel class."""
    hr, wc = _pixel_classes(g)[:2]
    ch = g["channels"][..., None]
    return (hr - 1) * (g["filter_w"] * g["channels"])[..., None] + (wc - 1) * ch + ch - 1


def _ifmap_stop_os(R, C, rf, cf, last_pixel, g: dict) -> tuple[np.ndarray, np.ndarray]:
    _, _, idx, _, ok = _pixel_classes(g)
    lane_fold = last_pixel // R
    i0 = lane_fold * R  # first pixel of that fold
    # lanes are pixels i in [i0, M), time is window element j: line = j + (i - i0)
    val = np.where(ok & (idx >= i0[..., None]), _last_j(g) + idx - i0[..., None], -1).max(axis=-1)
    return (cf - 1) * rf + lane_fold, val


def _ifmap_stop_ws(R, C, rf, cf, last_pixel, g: dict) -> tuple[np.ndarray, np.ndarray]:
    j0 = (rf - 1) * R  # first window element of the last fold
    # lanes are window elements j in [j0, K), time is pixel i: line = R + i + (j - j0)
    fw_ch = g["filter_w"] * g["channels"]
    ch = g["channels"][..., None]
    eh, ew = g["ofmap_h"][..., None], g["ofmap_w"][..., None]
    lr, lc = g["last_rows"][..., None], g["last_cols"][..., None]
    fh, fw = g["filter_h"][..., None], g["filter_w"][..., None]
    cr = _stack4(fh - 1, fh - 1, lr - 1, lr - 1)[..., 0, :]
    cc = _stack4(fw - 1, lc - 1, fw - 1, lc - 1)[..., 0, :]
    j = cr * fw_ch[..., None] + cc * ch + ch - 1
    o_r = np.where(cr < lr, eh - 1, eh - 2)
    o_c = np.where(cc < lc, ew - 1, ew - 2)
    ok_ws = (cr >= 0) & (cc >= 0) & (o_r >= 0) & (o_c >= 0) & (j >= j0[..., None])
    val = np.where(ok_ws, R[..., None] + o_r * ew + o_c + j - j0[..., None], -1).max(axis=-1)
    return rf * cf - 1, val


def _ifmap_stop_is(R, C, rf, cf, last_pixel, g: dict) -> tuple[np.ndarray, np.ndarray]:
    hr, wc, idx, _, ok = _pixel_classes(g)
    fw_ch = g["filter_w"] * g["channels"]
    lane_fold = last_pixel // C
    i0 = lane_fold * C  # first pixel of that fold
    in_fold = ok & (idx >= i0[..., None])
    # the last row fold of that column fold holding a valid j: the one with the largest valid j
    is_fr = np.where(in_fold, _last_j(g), -1).max(axis=-1) // R
    j0 = is_fr * R  # first window element of the fold
    # rows are window elements j in [j0, K) (flipped), lanes pixels in [i0, i0 + C):
    # line = R - 1 - (j - j0) for the smallest j >= j0 valid for some pixel of the fold
    cr0 = (j0 // fw_ch)[..., None]
    cc0 = ((j0 // g["channels"]) % g["filter_w"])[..., None]
    never = np.iinfo(np.int64).max
    jmin = np.where(in_fold & (cr0 < hr) & (cc0 < wc), j0[..., None],
                    np.where(in_fold & (cr0 + 1 < hr) & (cc0 >= wc), (cr0 + 1) * fw_ch[..., None],
                             never)).min(axis=-1)
    return lane_fold * rf + is_fr, np.where(jmin < never, R - 1 - (jmin - j0), -1)


def compute_model(rows, cols, dataflow, g: dict) -> dict[str, np.ndarray]:
    """SCALE-Sim's compute-side report numbers for layers ``g`` (from :func:`conv_dims`)."""
    R = np.asarray(rows, dtype=np.int64)
    C = np.asarray(cols, dtype=np.int64)
    if (R < 1).any() or (C < 1).any():
        raise ValueError(f"array rows and cols must be >= 1; got rows={rows!r}, cols={cols!r}")
    df = dataflow_codes(dataflow)
    M, N, K = g["M"], g["N"], g["K"]
    os_, ws_, is_ = df == 0, df == 1, df == 2
    Sr = np.where(os_, M, K)
    Sc = np.where(is_, M, N)
    T = by_dataflow(os_, ws_, K, M, N)
    rf, cf = ceil_div(Sr, R), ceil_div(Sc, C)
    F = rf * cf
    os_lines = T + R + C - 2  # os: lines per fold and utilization cycles alike
    lines_per_fold = np.where(os_, os_lines, T + 2 * R + C - 2)
    util_cycles = np.where(os_, os_lines, T + 2 * R + 2 * C - 3)
    lines = F * lines_per_fold
    total_cycles = lines - 1
    arr_macs = R * C
    num_compute = M * N * K
    base = (F - 1) * lines_per_fold  # first line of the last fold
    ur0 = np.minimum(R, Sr)  # rows used by the first fold
    ur_last, uc_last = Sr - (rf - 1) * R, Sc - (cf - 1) * C
    if_stop = _ifmap_stop(df, R, C, rf, cf, lines_per_fold, g)
    ifmap_passes = np.where(is_, 1, cf)  # times each ifmap operand entry is read
    filter_passes = by_dataflow(os_, ws_, rf, 1, cf)
    out = {
        "folds": F, "row_folds": rf, "col_folds": cf, "lines": lines, "T": T, "Sr": Sr,
        "lines_per_fold": lines_per_fold, "rows_last_fold": ur_last, "cols_last_fold": uc_last,
        "Total Cycles": total_cycles,
        "Overall Util %": (num_compute * 100) / (total_cycles * arr_macs),
        "Mapping Efficiency %": Sr * Sc / (F * arr_macs) * 100,
        "Compute Util %": T * Sr * Sc / (F * arr_macs * util_cycles) * 100,
        "SRAM IFMAP Start Cycle": by_dataflow(os_, ws_, 0, R, R - ur0) + 1,
        "SRAM IFMAP Stop Cycle": if_stop,
        "SRAM IFMAP Reads": ifmap_passes * M * K,
        "ifmap_passes": ifmap_passes,
        "filter_passes": filter_passes,
        "SRAM Filter Start Cycle": by_dataflow(os_, ws_, 0, R - ur0, R) + 1,
        "SRAM Filter Stop Cycle": base + by_dataflow(
            os_, ws_, T - 1 + uc_last - 1, R - 1, R + T - 1 + ur_last - 1) + 1,
        "SRAM Filter Reads": filter_passes * N * K,
        "SRAM OFMAP Start Cycle": np.where(os_, T - 1 + R - ur0, 2 * R - 1),
        "SRAM OFMAP Stop Cycle": base + np.where(os_, T - 1 + R - 1, 2 * R - 1 + T - 1) + uc_last - 1,
        "SRAM OFMAP Writes": np.where(os_, M * N + F * (R + C), rf * M * N),
        "num_compute": num_compute,
    }
    # prefetch-matrix sizes (operand matrices padded to whole folds) used by USER-bandwidth mode
    out["ifmap_prefetch_words"] = by_dataflow(os_, ws_, rf * R * K, rf * R * M, cf * C * K)
    out["filter_prefetch_words"] = np.where(is_, rf * R * N, cf * C * K)
    out["ofmap_words"] = np.where(os_, M * N, rf * M * N)  # valid ofmap demand entries
    return out
