"""TPU v1's published sensitivities (issue 31, item 5), measured by benchmarks/tpu_v1_sensitivity.py.

Paper: Jouppi et al., ISCA 2017 (arXiv:1704.04760): Table 1 (p. 2), Table 3 (p. 7), Table 7
(p. 10), Figure 11 (p. 11), Sec. 7 (pp. 10-12). The benchmark's docstring says how the applications are rebuilt
from Table 1 and why the model's figures are compared with the matrix-unit rows of Table 3.
On the mapper before issue 31 (b0c40f6) these fail: MLP0's active share 0.595 (paper 0.154),
4x bandwidth 1.54-2.14x (paper 3X), CNN0's active share 0.891."""


import pytest
from benchmark_scripts import load_benchmark

BENCH = load_benchmark("tpu_v1_sensitivity")
MEMORY_BOUND = ("MLP0", "MLP1", "LSTM0", "LSTM1")


@pytest.fixture(scope="module")
def measured():
    return {app: BENCH.measure(app) for app in BENCH.TABLE3}


#: MLP1 with whole-tile weight fetches (designs/tpu_v1.toml ``whole_tiles``): its assumed square
#: 1118-wide layers pad to 1280 (5 x 5 tiles, 1.31x the bytes) and the active share falls from
#: 0.161 to 0.123 against the paper's 0.155 (21 % under), as this test's docstring predicted.
#: Table 1 gives 5M weights in 4 layers, not the shapes: layers of whole tiles would not pad.
MLP1_PADDED = pytest.mark.xfail(strict=True, reason="whole 256x256 tiles pad MLP1's assumed 1118-wide "
                                "layers to 1280: active share 0.123 against Table 3's 0.155")


@pytest.mark.parametrize("app", ["MLP0", pytest.param("MLP1", marks=MLP1_PADDED), "CNN0"])
def test_active_share_of_the_matrix_unit_matches_table3(measured, app):
    """Array active cycles over the matrix unit's cycles (Table 3 rows 1 / (1 + 4 + 5); MLP0 12.7 /
    82.5 = 15.4 %): within 8 %, the paper's own model-vs-counter difference (Table 7). The LSTMs
    are left out: their rows 2 and 9 disagree by 2x (LSTM0: 8.2 % of peak useful MACs = 7.5 TOPS
    against 3.7 measured), and a 64-row batch per 64 KiB weight tile at 34 GB/s cannot keep the
    array active more than 64 / 1349 = 4.7 % of the time; the model says 5.1 %. MLP1's square
    1118-wide layers are an assumption (Table 1 gives 5M weights in 4 layers): with weights fetched
    as whole 256x256 tiles (Sec. 7's LSTM1 example, modelled since issue 31's whole-tile change)
    they pad to 1280 and its share is 12.3 % (:data:`MLP1_PADDED`). MLP0: 0.155 -> 0.148."""
    m = measured[app]
    assert m["active_share"] == pytest.approx(m["paper_active_share"], rel=BENCH.MODEL_VS_COUNTERS)


def test_mlp0_active_cycles_are_12_7_percent_with_table3_non_matrix_cycles(measured):
    """Table 3 row 1: MLP0's array is active 12.7 % of all cycles. The model prices the matrix unit;
    with row 6's 17.5 % non-matrix cycles beside it, its share is 12.2 % (whole-tile weight fetches;
    12.8 % before them; issue 31: 59.5 %)."""
    assert measured["MLP0"]["active_share_all"] == pytest.approx(0.127, rel=BENCH.MODEL_VS_COUNTERS)


def test_mlp0_tera_ops_match_table3_with_whole_tile_weight_fetches(measured):
    """Table 3 row 9: MLP0 runs at 12.3 TOPS. Its 2000 x 2000 layers pad to 2048 x 2048 in whole
    256x256 tiles (1.049x the bytes, DRAM-bound): 12.9 TOPS (4.9 % over). Fetching only the
    matrix's bytes (before the whole-tile change) gave 13.6 TOPS, 10.6 % over: this fails there."""
    m = measured["MLP0"]
    assert m["tops"] == pytest.approx(m["paper_tops"], rel=BENCH.MODEL_VS_COUNTERS)


@pytest.mark.parametrize("app", MEMORY_BOUND)
def test_four_times_the_bandwidth_triples_mlps_and_lstms(measured, app):
    """Figure 11's caption: "MLPs and LSTMs improve 3X with 4X memory bandwidth". The model's
    matrix-unit speed-up (non-matrix time scaling too) and the same with Table 3's non-matrix cycles
    held fixed bound what the paper's model can give: 3 lies between them, and their geometric
    mean is within "3X"'s rounding interval [2.5, 3.5]. Measured (2da1abd): upper 3.73-3.96, lower
    1.99-2.96 (a5d8c6a: 3.55-3.96, 1.96-2.96)."""
    m = measured[app]
    lower, upper = m["memory_4x_nonmatrix_fixed"], m["memory_4x"]
    assert lower <= BENCH.PAPER_MEMORY_4X_MLP_LSTM <= upper <= 4.0
    assert 2.5 <= (lower * upper) ** 0.5 <= 3.5


def test_cnn0_gets_little_from_memory_and_about_2x_from_4x_clock(measured):
    """Figure 11's caption: CNNs get "2X for 4X clock, but little benefit from faster memory"; Sec. 7:
    "improves performance of CNNs by about 2X" ("about 2X": within [1.5, 2.5], its rounding).
    CNN0 at 2888 MACs per weight byte turns memory-bound past 4x the clock (the ridge moves from
    1350 to 5400): the model gives 2.18x. Its 2888 x 256 partial-sum block fits the 4 MiB
    accumulators once, not twice; TPU v1 double-buffers its weights in the Weight FIFO apart from
    its accumulators (Sec. 2; designs/tpu_v1.toml ``double_buffers``), so the weights of a layer
    move once, overlapped (51,547 cycles per layer: tests/hw/test_double_buffers.py). When a
    schedule doubled all its tiles or none (before issue 31's per-operand field) this was 1.49x
    with whole-tile weight fetches (the best was single-buffered, 75,332 cycles per layer) and
    2.03x before them (on 128 of the 256 columns). Table 3 row 9: CNN0 runs at 86.0 TOPS; the
    model 84.8 (:func:`test_cnn0_tops_and_memory`)."""
    m = measured["CNN0"]
    assert 1.5 <= m["clock_4x"] <= 2.5
    assert m["memory_4x"] < 1.25
    assert m["tops"] == pytest.approx(m["paper_tops"], rel=BENCH.MODEL_VS_COUNTERS)


def test_cnn0_tops_and_memory(measured):
    """Figure 11's caption: CNNs "get little benefit from faster memory"; Table 3 row 9: 86.0 TOPS
    (model 84.8, the same with and without whole-tile weight fetches: K = 2304, N = 256 fill whole tiles)."""
    m = measured["CNN0"]
    assert m["memory_4x"] < 1.25
    assert m["tops"] == pytest.approx(m["paper_tops"], rel=BENCH.MODEL_VS_COUNTERS)


@pytest.mark.parametrize(("key", "bandwidth", "paper"), [
    ("memory_4x", 4.0, BENCH.PAPER_MEMORY_4X_WEIGHTED),
    ("memory_tpu_prime", BENCH.TPU_PRIME_BANDWIDTH, BENCH.PAPER_TPU_PRIME_WEIGHTED)])
def test_figure11_weighted_mean_lies_between_the_bounds(measured, key, bandwidth, paper):
    """Figure 11 plots weighted means (Table 1's mix); Sec. 7 (p. 12): "performance improves 3X on
    average when memory increases 4X", and TPU' (ridge point 1350 -> 250: 5.4x the bandwidth)
    reaches a weighted mean of 3.9. Both lie between the model's weighted means with row 6 held
    fixed (lower) and scaling (upper), with room left for CNN1 (not modelled: ``cnn1_slack``, 0.08
    and 0.12). Measured: 2.38-3.71 at 4x, 2.50-4.08 at 5.4x. On b0c40f6 (issue 31: 1.54-2.14x per
    MLP and LSTM at 4x) the upper bound is below 3."""
    rows = list(measured.values())
    upper, lower = BENCH.weighted_mean(rows, key), BENCH.weighted_mean(rows, key + "_nonmatrix_fixed")
    slack = BENCH.cnn1_slack(bandwidth)
    assert lower + slack <= paper <= upper - slack


def test_weighted_mean_uses_table1_mix():
    """Table 1's shares, one per kind, split between its two applications (CNN0 takes CNN1's):
    speed-ups 3, 3, 2, 2, 1 average to (61 x 3 + 29 x 2 + 5 x 1) / 95 = 246 / 95; CNN1's slack at
    4x is 2.5 x 3 / 95."""
    rows = [{"app": a, "x": x} for a, x in (("MLP0", 3), ("MLP1", 3), ("LSTM0", 2), ("LSTM1", 2), ("CNN0", 1))]
    assert BENCH.weighted_mean(rows, "x") == pytest.approx(246 / 95, rel=1e-12)
    assert BENCH.cnn1_slack(4.0) == pytest.approx(7.5 / 95, rel=1e-12)


@pytest.mark.parametrize("app", MEMORY_BOUND)
def test_mlps_and_lstms_get_nothing_from_a_faster_clock(measured, app):
    """Figure 11's caption: MLPs and LSTMs "get nothing from a higher clock" (Sec. 7: "almost no impact")."""
    assert 1.0 <= measured[app]["clock_4x"] <= 1.1


def test_applications_follow_table1():
    """Table 1: MLP0 is 5 FC layers, 20M weights, batch 200; CNN0's 3x3 256-channel 19x19 convs at
    batch 8 reuse each weight 2888 times (its ops per weight byte)."""
    mlp0 = BENCH.operations("MLP0")
    assert len(mlp0) == 5 and all((op.M, op.N, op.K) == (200, 2000, 2000) for op in mlp0)
    assert sum(op.N * op.K for op in mlp0) == 20_000_000
    cnn0 = BENCH.operations("CNN0")
    assert len(cnn0) == 16 and cnn0[0].out_h * cnn0[0].out_w * cnn0[0].batch == 2888


@pytest.mark.parametrize("app", [*MEMORY_BOUND, "CNN0"])
def test_a_512x512_matrix_unit_does_not_help(measured, app):
    """Figure 11's caption: "A bigger matrix multiply unit doesn't help any DNN"; Sec. 7: LSTM1's
    600x600 matrix takes 9 whole-tile steps (18 us) on 256x256 and 4 (32 us) on 512x512
    (tests/hw/test_whole_tiles.py). With whole-tile weight fetches (a 512x512 tile is 256 KiB, the
    Weight FIFO four of them deep) the model gives MLP0 0.996, MLP1 0.691, LSTM0 0.993, LSTM1
    0.979, CNN0 0.931 (FIFO kept at 256 KiB: 0.904, 0.630, 0.900, 0.884, 0.654); fetching only the
    bytes it gave 0.98-1.00 and CNN0 1.086, a gain, so this fails there."""
    assert measured[app]["matrix_512"] <= 1.0


@pytest.mark.xfail(strict=True, reason="whole-tile weight fetches: the 512x512 unit's weighted mean is "
                   "0.89, MLP1 0.69 (its assumed 1118-wide layers pad to 1536); 1.00 before whole tiles")
def test_a_512x512_matrix_unit_degrades_only_slightly(measured):
    """Sec. 7 (p. 12): the average performance in Figure 11 "slightly degrades when the matrix unit
    expands from 256x256 to 512x512 for all apps" (read here as a weighted mean of at least 0.9;
    the paper gives no figure). The model's weighted mean is 0.89 (the Weight FIFO four 512x512
    tiles deep, 1 MiB): MLP0 0.996, LSTM0 0.993, LSTM1 0.979, CNN0 0.931, but MLP1 0.691: the
    512x512 tiles pad its assumed 1118-wide layers to 1536 (1.89x the bytes against 1.31x on
    256x256). With the FIFO kept at 256 KiB (one 512x512 tile, so no double buffering) it was 0.80
    (issue 31's whole-tile change; 1.00 before it, when CNN0 gained 1.09x)."""
    assert BENCH.weighted_mean(list(measured.values()), "matrix_512") >= 0.9
