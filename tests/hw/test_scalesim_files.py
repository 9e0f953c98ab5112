"""Reading SCALE-Sim's config and topology files, checked against how SCALE-Sim itself read them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from asicsim._src.hw import (
    REPORT_COLUMNS,
    ScaleSimFileError,
    read_scalesim_config,
    read_scalesim_topology,
    scalesim_report_from_files,
)

GOLDEN = Path(__file__).parent / "golden"
INPUTS = GOLDEN / "inputs"
CONV_FIELDS = ("ifmap_h", "ifmap_w", "filter_h", "filter_w", "channels", "num_filter", "stride")


def test_shipped_configs() -> None:
    scale = read_scalesim_config(INPUTS / "shipped_scale.cfg")
    assert (scale.rows, scale.cols, scale.dataflow, scale.bandwidth_mode) == (32, 32, "ws", "CALC")
    assert (scale.ifmap_sram_kib, scale.filter_sram_kib, scale.ofmap_sram_kib) == (64, 64, 64)
    google = read_scalesim_config(INPUTS / "shipped_google.cfg")
    assert (google.rows, google.cols, google.dataflow, google.bandwidth_mode) == (256, 256, "os", "USER")
    assert (google.ifmap_sram_kib, google.ofmap_sram_kib, google.bandwidth_words) == (6144, 2048, 10)
    assert google.ifmap_bank_bandwidth_words == 10


@pytest.mark.parametrize("net", ["alexnet", "Resnet18", "vit_s", "NCF"])
def test_topologies_read_as_scalesim_does(net: str) -> None:
    """Layer names and conv-form dimensions equal those SCALE-Sim parsed (stored in the golden)."""
    topo = read_scalesim_topology(INPUTS / f"{net}.csv")
    assert topo.kind == ("gemm" if net in ("vit_s", "NCF") else "conv")
    g = pd.read_csv(GOLDEN / "scalesim_golden.csv")
    g = g[g.run.str.endswith("/" + net)]
    if g.empty:
        pytest.skip(f"no golden run finished for {net}")
    first = g[g.run == g.run.iloc[0]]
    ids = first.LayerID.to_numpy()  # a run may hold only the layers SCALE-Sim finished
    assert [topo.layer_names[i] for i in ids] == [str(x) for x in first.layer_name]
    for f in CONV_FIELDS:
        np.testing.assert_array_equal(getattr(topo, f)[ids], first[f].to_numpy(), err_msg=f)


@pytest.mark.parametrize("cfg", ["shipped_scale", "shipped_google"])
@pytest.mark.parametrize("net", ["alexnet", "Resnet18", "vit_s", "NCF"])
def test_files_end_to_end(cfg: str, net: str) -> None:
    """Config + topology file in, SCALE-Sim's numbers out (where SCALE-Sim finished the run)."""
    g = pd.read_csv(GOLDEN / "scalesim_golden.csv").query("run == @cfg + '/' + @net")
    if g.empty:
        pytest.skip(f"SCALE-Sim did not finish {cfg}/{net} within the golden run's limit")
    ours = scalesim_report_from_files(INPUTS / f"{cfg}.cfg", INPUTS / f"{net}.csv")
    ours = ours.iloc[g.LayerID.to_numpy()]  # the layers SCALE-Sim finished
    checked = 0
    for col in [c for c in REPORT_COLUMNS if c in g.columns]:
        mine, theirs = ours[col].to_numpy(float), g[col].to_numpy(float)
        have = ~np.isnan(mine)
        np.testing.assert_allclose(mine[have], theirs[have], rtol=1e-12, atol=0, err_msg=col)
        checked += int(have.sum())
    assert checked > 0


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_gemm_spaces_and_optional_trailing_comma(tmp_path: Path) -> None:
    p = _write(tmp_path, "g.csv", "Layer, M, N, K,\n my layer , 3 , 5 ,7,\n\nL2,1,2,3\n")
    t = read_scalesim_topology(p)
    assert t.kind == "gemm" and t.layer_names == ("my layer", "L2")
    assert list(t.ifmap_h) == [3, 1] and list(t.ifmap_w) == [7, 3] and list(t.num_filter) == [5, 2]
    assert list(t.filter_w) == [7, 3] and list(t.filter_h) == [1, 1] and list(t.stride) == [1, 1]


def test_depthwise_expansion_and_dense_sparsity(tmp_path: Path) -> None:
    header = "Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, Num Filter, Strides,\n"
    p = _write(tmp_path, "c.csv", header + "DP1,8,8,3,3,3,1,1,\nc2,8,8,3,3,4,5,2,1:1,\n")
    t = read_scalesim_topology(p)
    assert t.layer_names == ("DP1Channel_0", "DP1Channel_1", "DP1Channel_2", "c2")
    assert list(t.channels) == [1, 1, 1, 4]


@pytest.mark.parametrize(("text", "match"), [
    ("Layer,M,N,K,\nL1,3,x,5,\n", r"line 2: field 'N' = 'x' is not an integer"),
    ("Layer,M,N,K,\nL1,3,0,5,\n", r"line 2: field 'N' = 0 \(allowed: an integer in \[1, 2147483647\]"),
    ("Layer,M,N,K,\nL1,3,4,\n", r"line 2: 3 fields"),
    ("Layer,M,N,K,\nL1,3,4,5,2:4,\n", r"sparsity ratio '2:4' is not supported"),
    ("Layer,M,N,K,\n", r"no layers"),
    ("a,b\n1,2\n", r"line 1: header"),
    ("Layer name,H,W,Fh,Fw,C,N,S,\nc,4,4,5,3,1,1,1,\n", r"filter 5x3 is larger than the ifmap 4x4"),
])
def test_topology_errors(tmp_path: Path, text: str, match: str) -> None:
    p = _write(tmp_path, "t.csv", text)
    with pytest.raises(ScaleSimFileError, match=match) as info:
        read_scalesim_topology(p)
    assert str(p) in str(info.value)


def _cfg(**over: str) -> str:
    values = {"ArrayHeight": "8", "ArrayWidth": "8", "IfmapSramSzkB": "64", "FilterSramSzkB": "64",
              "OfmapSramSzkB": "64", "Dataflow": "os", "Bandwidth": "10", "mode": "CALC",
              "sparse": "false"} | over
    arch = "\n".join(f"{k}: {v}" for k, v in values.items() if k[0].isupper())
    return (f"[general]\nrun_name = t\n[architecture_presets]\n{arch}\n"
            f"[sparsity]\nSparsitySupport : {values['sparse']}\n"
            f"[run_presets]\nInterfaceBandwidth: {values['mode']}\n")


def test_config_defaults_without_layout_section(tmp_path: Path) -> None:
    c = read_scalesim_config(_write(tmp_path, "a.cfg", _cfg()))
    assert (c.rows, c.dataflow, c.ifmap_bank_bandwidth_words, c.bandwidth_mode) == (8, "os", 10, "CALC")


@pytest.mark.parametrize(("over", "match"), [
    ({"Dataflow": "rs"}, r"Dataflow = 'rs' \(allowed: os, ws, is\)"),
    ({"ArrayHeight": "0"}, r"'ArrayHeight' = 0"),
    ({"OfmapSramSzkB": "big"}, r"'OfmapSramSzkB' = 'big' is not an integer"),
    ({"mode": "AUTO"}, r"InterfaceBandwidth = 'AUTO' \(allowed: CALC, USER\)"),
    ({"sparse": "true"}, r"SparsitySupport = 'true' is not supported"),
])
def test_config_errors(tmp_path: Path, over: dict, match: str) -> None:
    p = _write(tmp_path, "b.cfg", _cfg(**over))
    with pytest.raises(ScaleSimFileError, match=match) as info:
        read_scalesim_config(p)
    assert str(p) in str(info.value)


def test_config_missing_key(tmp_path: Path) -> None:
    p = _write(tmp_path, "c.cfg", _cfg().replace("ArrayWidth: 8\n", ""))
    with pytest.raises(ScaleSimFileError, match=r"missing \[architecture_presets\] ArrayWidth"):
        read_scalesim_config(p)
