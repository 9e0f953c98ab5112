"""Which ifmap elements a convolution's windows read: the data a strided DMA must move.

A stride larger than the kernel (a 1x1 stride-2 downsample reads a quarter of its input) or
windows that stop short of the edge leave input elements no output needs; the cost model moves
and the bounds count only the elements some window reads.
"""

from __future__ import annotations

import functools


@functools.lru_cache(maxsize=4096)  # a pure function of whole numbers: the same answer
def _window_cover(size: int, kernel: int, stride: int, pad: int, out: int) -> int:
    """Input positions in ``[0, size)`` that some window reads (windows start at ``o s - pad``)."""
    covered, end = 0, 0  # `end`: first position not yet counted
    for o in range(out):
        lo, hi = max(o * stride - pad, end, 0), min(o * stride - pad + kernel, size)
        covered += max(hi - lo, 0)
        end = max(end, hi)
    return covered


def conv_ifmap_read_elems(conv) -> int:
    """Distinct ifmap elements a :class:`~asicsim._src.hw.operations.Conv` reads, per group (its
    windows' union; the raw tensor unless a stride exceeds the kernel or windows stop short)."""
    def cover(size, kernel, stride, padding, out):
        if padding != "same":
            return _window_cover(size, kernel, stride, 0 if padding == "valid" else padding, out)
        total = max((out - 1) * stride + kernel - size, 0)  # "same" does not say how it splits
        return min(_window_cover(size, kernel, stride, p, out) for p in (total // 2, total - total // 2))
    sw = conv.stride if conv.stride_w is None else conv.stride_w
    pw = conv.padding if conv.padding_w is None else conv.padding_w
    h = cover(conv.in_h, conv.kernel_h, conv.stride, conv.padding, conv.out_h)
    w = cover(conv.in_w, conv.kernel_w, sw, pw, conv.out_w)
    return conv.batch * h * w * (conv.in_channels // conv.groups)
