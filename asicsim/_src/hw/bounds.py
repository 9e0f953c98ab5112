"""Lower bounds on the DRAM bytes of a GEMM (or convolution), printed beside the cost model's figure.

No schedule can move fewer DRAM bytes than these; the cost model's (and the mapper's) ``dram_bytes``
must never fall below them, and the ratio says how far a schedule is from optimal. Two bounds, both
vectorised (every argument may be a numpy array; results broadcast, so a sweep prices 10^5 design
points at once), and the larger one is shown with the name of the one that binds.

**Compulsory** (:func:`compulsory_dram_bytes`): where an operand lives between operations is the
design's choice (``dram.holds``; TPU v1 keeps activations in its unified buffer and only weights in
DRAM). An input that lives off chip is read at least once (its footprint), an output that lives off
chip is written at least once. An operand kept on chip moves only what cannot be on chip: at the
start at most ``on_chip_bytes`` of an input can be on chip, so ``max(0, S - on_chip_bytes)`` must be
read; likewise for an output at the end. This is a lower bound *given the placement* (``dram.holds``
and ``on_chip_bytes``), not over placements; it assumes every element of an input is used (true for
a dense GEMM; for a convolution the caller passes the ifmap elements its windows read, which is the
raw tensor unless a stride exceeds the kernel or the last window stops short: see
:func:`conv_ifmap_read_elems`; the im2col ``M x K`` matrix repeats elements and is no footprint).

**Pebble** (:func:`pebble_dram_bytes`): the red-blue pebble game of Hong & Kung (STOC 1981) gives
``Omega(MNK / sqrt(S))`` I/Os for a classical ``M x K`` by ``K x N`` product with ``S`` words of fast
memory; Irony, Toledo & Tiskin (JPDC 2004) gave an explicit constant (about ``MNK / (2 sqrt(2)
sqrt(S))``, weaker; not used); Smith, Lowery, Langou & van de Geijn ("A tight I/O lower bound for matrix multiplication",
arXiv:1702.02017v2, 2019) raised the leading term to ``2 MNK / sqrt(S)``, counting reads only (the
abstract: the FMA form lets them "reason about only the cost associated with reading the matrices"),
lower-order term ``-2S``, and gave an algorithm whose leading term attains it. (Kwasniewski et al., SC'19 (COSMA), state
``2 MNK / sqrt(S) + MN`` with the output writes added.) Their argument reads ``C`` as an operand of
the FMAs (``C := AB + C``); ``C := AB`` need not read it, and an algorithm for ``AB`` becomes one for
``AB + C`` by loading each ``c_ij`` into the register where its first product lands (``MN`` more
reads), so we use ``Q >= 2 MNK / sqrt(S) - 2S - MN`` words, which holds whether the theorem counts
reads or reads and writes and whether or not its ``C`` is an input.
Conditions and how they are met:

* ``S`` counts words (elements). Fast memory here is EVERYTHING on chip: all SRAM buffers (both
  halves of a double buffer) and the array's registers (``R x C`` PEs, each counted with an ifmap,
  two filter and an accumulator register: :func:`fast_memory_bytes`), so no schedule of the real chip has
  more fast memory than the game allows.
* Mixed element widths: on-chip bytes are turned into words at the narrowest width ``w`` of any value
  (ifmap, filter, ofmap, accumulator), which over-counts the words that fit (a larger ``S``; the
  bound decreases in ``S``), and every word moved is charged ``w`` bytes, which under-counts the bytes.
  Both errors make the result smaller, so it stays a lower bound.
* Operands kept on chip start (inputs) or end (outputs) in fast memory, not slow memory as the game
  assumes. A schedule that starts with ``X`` input words and ends with ``Y`` output words on chip
  becomes a game schedule with ``X + Y`` more I/Os (load them first, store them last), so ``X =
  min(A, S)`` and ``Y = min(C, S)`` words are subtracted for on-chip ifmap and ofmap.
* Classical (``MNK`` multiply-adds on distinct elements) only: the pebble bound is zero for sparse
  weights (skipped zeros remove multiply-adds), for convolutions other than unpadded 1 x 1 (im2col
  repeats ifmap elements; a proven conv bound, Demmel & Dinh 2018 "Communication-optimal
  convolutional neural nets", arXiv:1802.06905, is asymptotic, without the constants a byte figure
  needs, so convolutions fall back to the compulsory bound) and for RNN steps whose activations are
  produced on chip (the ifmap is not an input of the game).
* Repetitions: ``reps`` GEMMs with shared weights and off-chip activations are one ``(reps M) x N x
  K`` GEMM (stacked rows), so the bound applies with ``reps M``. Independent repetitions (a grouped
  conv's groups) form a disjoint union; deleting the other repetitions' moves from a schedule leaves
  a schedule of one, so one repetition's bound holds (a ``reps``-times larger bound is likely but not
  proven in a cited form, so it is not claimed).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from asicsim._src.hw.conv_windows import conv_ifmap_read_elems as conv_ifmap_read_elems

OPERANDS = ("ifmap", "filter", "ofmap")


@dataclass(frozen=True)
class DramBounds:
    """Lower bounds on DRAM bytes (arrays, broadcast): ``bound`` is the one to show."""

    compulsory: np.ndarray
    pebble: np.ndarray

    @property
    def bound(self) -> np.ndarray:
        return np.maximum(self.compulsory, self.pebble)

    @property
    def binding(self) -> np.ndarray:
        """"pebble" where the pebble bound is the larger, else "compulsory"."""
        return np.where(self.pebble > self.compulsory, "pebble", "compulsory")


def _f(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def _check_off_chip(off_chip: dict) -> dict[str, np.ndarray]:
    bad = sorted(set(off_chip) - set(OPERANDS))
    missing = [o for o in OPERANDS if o not in off_chip]
    if bad or missing:
        raise ValueError(f"off_chip: keys {sorted(off_chip)}; allowed: exactly {list(OPERANDS)} "
                         "(each a bool or boolean array: does DRAM hold the operand)")
    return {o: np.asarray(off_chip[o], dtype=bool) for o in OPERANDS}


def _check_positive(**values) -> None:
    for name, v in values.items():
        if type(v) in (int, float) and math.isfinite(v) and v >= 0:  # the common case, without numpy
            continue
        a = _f(v)
        if not np.all(np.isfinite(a) & (a >= 0)):
            raise ValueError(f"{name} = {v!r}; allowed: finite numbers >= 0")


def fast_memory_bytes(capacity_bytes, rows, cols, *, a_bytes, b_bytes, acc_bytes) -> np.ndarray:
    """Everything on chip that can hold a value: the buffers' total capacity (``capacity_bytes``, a
    sequence of buffers is summed; double buffers count both halves) plus ``rows x cols`` PEs of one
    ifmap, two filter (TPU v1 double-buffers its weights: Jouppi et al. ISCA 2017, Sec. 2) and one
    accumulator register each: at least what the os, ws and is PEs modelled here keep, so the pebble
    bound stays valid."""
    caps = sum(_f(c) for c in capacity_bytes) if isinstance(capacity_bytes, (list, tuple)) else _f(capacity_bytes)
    return caps + _f(rows) * _f(cols) * (_f(a_bytes) + 2 * _f(b_bytes) + _f(acc_bytes))


def compulsory_dram_bytes(M, N, K, *, a_bytes, b_bytes, out_bytes, off_chip: dict, on_chip_bytes,
                          ifmap_elems=None, reps=1, shared_weights=False,
                          activations_on_chip=False) -> np.ndarray:
    """Compulsory DRAM bytes of ``reps`` GEMMs ``(M x K) @ (K x N)`` (module docstring).

    ``ifmap_elems``: the ifmap elements one repetition reads (a conv's, :func:`conv_ifmap_read_elems`;
    default ``M K``). ``b_bytes``: stored bytes per weight position (compressed formats amortised).
    ``off_chip``: ``{"ifmap", "filter", "ofmap"}`` -> bool (array): does DRAM hold the operand.
    ``shared_weights``: the repetitions reuse one weight matrix. ``activations_on_chip``: later
    repetitions' ifmaps are produced on chip (RNN steps), so only one repetition's ifmap and ofmap
    can have to cross the chip boundary.
    """
    _check_positive(M=M, N=N, K=K, a_bytes=a_bytes, b_bytes=b_bytes, out_bytes=out_bytes,
                    on_chip_bytes=on_chip_bytes, reps=reps)
    off = _check_off_chip(off_chip)
    M, N, K, reps, cap = _f(M), _f(N), _f(K), _f(reps), _f(on_chip_bytes)
    a_raw = M * K if ifmap_elems is None else _f(ifmap_elems)
    act_reps = np.where(activations_on_chip, 1.0, reps)
    S_A = act_reps * a_raw * _f(a_bytes)
    S_B = np.where(shared_weights, 1.0, reps) * N * K * _f(b_bytes)
    S_O = act_reps * M * N * _f(out_bytes)

    def need(S, o):  # off chip: all of it; kept on chip: what cannot be on chip
        return np.where(off[o], S, np.maximum(S - cap, 0.0))

    return need(S_A, "ifmap") + need(S_B, "filter") + need(S_O, "ofmap")


def pebble_words(F, S_words, C_elems) -> np.ndarray:
    """I/O words of ``F`` classical multiply-adds producing ``C_elems`` outputs with ``S_words`` of
    fast memory: ``max(0, 2F/sqrt(S) - 2S - C)`` (Smith et al. 2019 less ``C``; module docstring)."""
    F, S, Cn = _f(F), _f(S_words), _f(C_elems)
    q = 2 * F / np.sqrt(np.maximum(S, 1e-300)) - 2 * S - Cn
    return np.where(S > 0, np.maximum(q, 0.0), np.where(F > 0, np.inf, 0.0))


def pebble_dram_bytes(M, N, K, *, a_bytes, b_bytes, out_bytes, acc_bytes, off_chip: dict,
                      on_chip_bytes, reps=1, shared_weights=False, activations_on_chip=False,
                      classical=True) -> np.ndarray:
    """Red-blue pebble lower bound on DRAM bytes (module docstring for the form and conditions).

    ``classical``: False (sparse weights, a conv that is not an unpadded 1 x 1) gives 0: no proven
    bound with constants applies. ``on_chip_bytes``: all on-chip storage (:func:`fast_memory_bytes`).
    """
    _check_positive(M=M, N=N, K=K, a_bytes=a_bytes, b_bytes=b_bytes, out_bytes=out_bytes,
                    acc_bytes=acc_bytes, on_chip_bytes=on_chip_bytes, reps=reps)
    off = _check_off_chip(off_chip)
    M, N, K, reps = _f(M), _f(N), _f(K), _f(reps)
    w = np.minimum(np.minimum(_f(a_bytes), _f(b_bytes)), np.minimum(_f(out_bytes), _f(acc_bytes)))
    w = np.maximum(w, 1e-300)
    S = _f(on_chip_bytes) / w  # words: at least as many as really fit
    rows = np.where(shared_weights, reps * M, M)  # shared weights: one stacked GEMM
    q = pebble_words(rows * N * K, S, rows * N)
    q = q - np.where(off["ifmap"], 0.0, np.minimum(rows * K, S))
    q = q - np.where(off["ofmap"], 0.0, np.minimum(rows * N, S))
    usable = np.asarray(classical, dtype=bool) & ~np.asarray(activations_on_chip, dtype=bool)
    return np.where(usable, np.maximum(q, 0.0) * w, 0.0)


def dram_bounds(M, N, K, *, a_bytes, b_bytes, out_bytes, acc_bytes, off_chip: dict, on_chip_bytes,
                ifmap_elems=None, reps=1, shared_weights=False, activations_on_chip=False,
                classical=True) -> DramBounds:
    """Both bounds of one lowered GEMM (arguments as :func:`compulsory_dram_bytes` and
    :func:`pebble_dram_bytes`)."""
    common = dict(off_chip=off_chip, on_chip_bytes=on_chip_bytes, reps=reps,
                  shared_weights=shared_weights, activations_on_chip=activations_on_chip)
    return DramBounds(
        compulsory=compulsory_dram_bytes(M, N, K, a_bytes=a_bytes, b_bytes=b_bytes, out_bytes=out_bytes,
                                         ifmap_elems=ifmap_elems, **common),
        pebble=pebble_dram_bytes(M, N, K, a_bytes=a_bytes, b_bytes=b_bytes, out_bytes=out_bytes,
                                 acc_bytes=acc_bytes, classical=classical, **common))


def classical(op) -> bool:
    """Does the pebble bound apply to ``op``'s GEMMs: dense weights, and a conv only when it is an
    unpadded 1 x 1 (its im2col matrix is then a plain GEMM's operand; module docstring)."""
    if getattr(op, "weight_sparsity", 0.0) != 0:
        return False
    if getattr(op, "kind", "") != "conv":
        return True
    pads = (op.padding, op.padding if op.padding_w is None else op.padding_w)
    return op.kernel_h == op.kernel_w == 1 and all(p in (0, "valid") for p in pads)


def problem_bounds(p, activations_on_chip, owner, n: int, on_chip_bytes, classical_gemm) -> DramBounds:
    """Bounds per operation of the pipeline's problem (:func:`asicsim._src.hw.pipeline.gemm_problem`:
    the lowered GEMMs, their stored bytes per element and placement, exactly as priced), arrays of
    shape ``on_chip_bytes.shape + (n,)``. ``activations_on_chip[j]``: lowering ``j``'s ifmap and
    ofmap never leave the chip (RNN steps); ``owner[j]``: the operation lowering ``j`` belongs to (in
    order); ``classical_gemm[j]``: whether the pebble bound applies to it (:func:`classical`).

    Several lowerings of one operation (an RNN's projection and steps): compulsory bytes add
    (disjoint data); the pebble bound is the largest lowering's (a schedule restricted to one
    lowering is a schedule of it; adding them is not proven). Work without a GEMM gets 0: its
    traffic is the cost model's stream, not bounded here."""
    fast = _f(on_chip_bytes)[..., None]
    shape = (*fast.shape[:-1], n)
    owner = np.asarray(owner, dtype=np.int64)
    if owner.size == 0:
        return DramBounds(np.zeros(shape), np.zeros(shape))
    b = dram_bounds(p.M, p.N, p.K, a_bytes=p.a_bytes, b_bytes=p.b_bytes, out_bytes=p.out_bytes,
                    acc_bytes=p.acc_bytes, off_chip=p.off_chip, on_chip_bytes=fast,
                    ifmap_elems=p.a_footprint / _f(p.a_bytes), reps=p.reps, shared_weights=p.shared_weights,
                    activations_on_chip=np.asarray(activations_on_chip, dtype=bool), classical=np.asarray(classical_gemm, dtype=bool))
    comp = np.broadcast_to(b.compulsory, (*shape[:-1], owner.size))
    peb = np.broadcast_to(b.pebble, (*shape[:-1], owner.size))
    mine, starts = np.unique(owner, return_index=True)  # lowerings come grouped by operation
    out_c, out_p = np.zeros(shape), np.zeros(shape)
    out_c[..., mine] = np.add.reduceat(comp, starts, axis=-1)
    out_p[..., mine] = np.maximum.reduceat(peb, starts, axis=-1)
    return DramBounds(compulsory=out_c, pebble=out_p)
