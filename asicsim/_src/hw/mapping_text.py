"""A mapping in words (the ``mapping`` text of a cost result): which tensor stays resident, what
streams and how often, the tile, where partial sums live and the buffering."""

from __future__ import annotations

from asicsim._src.hw.counts import FAMILIES
from asicsim._src.hw.residency import STREAM_BITS, streams


def describe(family: int, Mt: float, Nt: float, Kt: float, tiles_m: float, tiles_n: float,
             double_buffered: bool, off_chip: dict[str, bool], psum_spill: str = "", tiles_k: float = 1,
             streamed: float = 0, tile_share: float = 1, fold: tuple = ()) -> str:
    """One mapping in words, e.g. 'weights resident in SRAM (K x 1024 block); activations
    streamed 4x; tile 512x1024x4096; double-buffered'. ``psum_spill``: the buffer partial sums
    are kept in, when not the design's partial-sum buffer; ``tiles_k``: K slivers (outside the
    outputs family, partial sums go to DRAM and back between them); ``streamed``: the kept
    tensors whose overflow streams (:attr:`asicsim._src.hw.counts.Schedule.streamed`) and the share
    of their buffer the tiles take (``tile_share``); ``fold``: ``(rows, cols)`` of a fold smaller
    than the array (asicsim._src.hw.counts), empty where the folds are the array's."""
    fam = FAMILIES[int(family)]
    k = "K" if tiles_k <= 1 else f"{Kt:.0f}"
    parts = {"outputs": f"outputs resident in SRAM ({Mt:.0f} x {Nt:.0f} block)",
             "weights": f"weights resident in SRAM ({k} x {Nt:.0f} block)",
             "activations": f"activations resident in SRAM ({Mt:.0f} x {k} block)"}
    words = [parts[fam]]
    over = {k: not off_chip.get(k, True) and bool(streams(streamed, k)) for k in STREAM_BITS}
    on_chip = {k: "read on chip, the overflow streamed" if over[k] else "read on chip" for k in STREAM_BITS}
    if fam != "activations":
        words.append(f"activations {'streamed' if off_chip['ifmap'] else on_chip['ifmap']} {tiles_n:.0f}x")
    elif over["ifmap"]:
        words.append("activations' overflow streamed once")
    if fam != "weights":
        words.append(f"weights {'streamed' if off_chip['filter'] else on_chip['filter']} {tiles_m:.0f}x")
    elif over["filter"]:
        words.append("weights' overflow streamed once")
    if over["ofmap"]:
        words.append("outputs' overflow written to DRAM")
    if any(over.values()):
        words.append("none of them kept on chip" if tile_share >= 1 else
                     f"tiles in {tile_share:.3g} of their buffer, the rest keeps them")
    if fam != "outputs" and tiles_k > 1:
        words.append(f"partial sums to DRAM and back {tiles_k - 1:.0f}x")
    words.append(f"tile {Mt:.0f}x{Nt:.0f}x{Kt:.0f} (MxNxK)")
    if fold:
        words.append(f"folds of {fold[0]:.0f}x{fold[1]:.0f} PEs")
    if psum_spill:
        words.append(f"partial sums in {psum_spill}")
    words.append("double-buffered" if double_buffered else "single-buffered")
    return "; ".join(words)
