"""Which cuDNN RNN algorithm a GPU runs a layer with: the standard one (a GEMM and the gate kernels
per time step) or a persistent kernel (Diamos et al., "Persistent RNNs: stashing recurrent weights
on-chip", ICML 2016): one launch for the whole sequence, each SM holding a slice of the recurrent
weights on chip across the time steps, a grid-wide barrier per step.

The choice is the framework's, as PyTorch makes it for cuDNN (``get_algo`` in
``aten/src/ATen/native/cudnn/RNN.cpp``, PyTorch 2.x; the H200 set was timed through it):

* ``PERSIST_STATIC_SMALL_H`` (cuDNN >= 8.2.1, compute capability >= 6.0, any float type but
  double): forward vanilla layers with hidden <= 384, LSTM/GRU <= 192; backward vanilla <= 256,
  LSTM/GRU <= 128.
* ``PERSIST_STATIC`` (fp16 data only; one unidirectional layer with hidden <= 1024 and hidden and
  input sizes multiples of 128): on Volta (sm_70) a batch multiple of 16 (not 80 or 112) or 8 with
  enough steps (>= 40 steps: batch <= 128; >= 20: <= 96; >= 10: <= 32); never on Turing (sm_75);
  on Ampere and later with >= 98 SMs (which leaves out sm_86 parts): never GRU, LSTM with a batch
  multiple of 8 up to 128, vanilla likewise and not with batch >= 96 and hidden >= 896.

DeepBench's sheets called cuDNN directly with the standard algorithm on Maxwell, Pascal and Turing;
none of their layers meets a rule above, so none is priced persistent.
"""

from __future__ import annotations

from asicsim._src.hw.operations import Rnn

#: Compute capability (major) of each generation, as the rules above test it.
_CC_MAJOR = {"Maxwell": 5, "Pascal": 6, "Volta": 7, "Turing": 7, "Ampere": 8, "Hopper": 9, "Blackwell": 10}


def rnn_algo(op: Rnn, pass_name: str, design, act_format: str) -> str:
    """``"standard"``, ``"persist_static"`` or ``"persist_static_small_h"`` for ``op`` in
    ``pass_name`` (``fwd``, ``bwd_data``, ``bwd_weights``) on ``design`` with activations in
    ``act_format`` (a format name: ``float16`` is cuDNN's HALF)."""
    arch = design.architecture
    major = _CC_MAJOR.get(arch, 0)
    h, b, x = op.hidden, op.batch, op.input_size or op.hidden
    if pass_name == "bwd_weights":
        return "standard"  # the weight gradients: one GEMM over all steps, no recurrence
    small = {"vanilla": 384, "lstm": 192, "gru": 192} if pass_name == "fwd" else \
        {"vanilla": 256, "lstm": 128, "gru": 128}
    if major >= 6 and act_format != "float64" and h <= small[op.cell]:
        return "persist_static_small_h"
    if act_format != "float16" or not (h <= 1024 and h % 128 == 0 and x % 128 == 0):
        return "standard"
    if arch == "Volta":
        ok = ((b % 16 == 0 and b not in (80, 112)) or b == 8) and (
            (op.steps >= 40 and b <= 128) or (op.steps >= 20 and b <= 96) or (op.steps >= 10 and b <= 32))
        return "persist_static" if ok else "standard"
    if major >= 8 and design.sm_count >= 98:
        if op.cell == "gru":
            return "standard"
        ok = b % 8 == 0 and b <= 128 and (op.cell == "lstm" or b < 96 or h < 896)
        return "persist_static" if ok else "standard"
    return "standard"


def persistent_steps(M, N, K, w_bytes, sm_count: int, rate_per_sm: float, c) -> tuple:
    """Seconds per time step of a persistent kernel and the share of SMs it keeps busy.

    The recurrent weights (``w_bytes``) are split over ``n = min(SMs, ceil(w_bytes /
    persist_kib_per_sm KiB))`` SMs, each holding its slice on chip; per step each of them does its
    slice's ``2 M N K / n`` ops at ``persist_eff`` of its share of the path's achievable rate
    (``rate_per_sm``), and the step ends with a grid-wide barrier (``persist_step_us``, priced as
    the step overhead). No operand is re-read from L2 or DRAM per step but the state."""
    import numpy as np

    n = np.clip(np.ceil(w_bytes / (c["persist_kib_per_sm"] * 1024.0)), 1, sm_count)
    return 2.0 * M * N * K / (n * rate_per_sm * c["persist_eff"]), n / sm_count
