"""A GPU's price for a list of operations: :func:`gpu_cost_many` turns the kernel times of
:mod:`asicsim.hw.gpu_model` into one :class:`asicsim.hw.cost.CostResult` per operation.

Result: ``pes`` x ``clock_hz`` is the path's datasheet peak MAC rate, so ``utilization`` is achieved /
datasheet; ``cycles_compute`` = the useful work at the achievable rate plus what the power cap adds
(the clock drops so that power stays within the TDP), ``cycles_fill_drain`` = launch and call
overheads plus tile, wave and alignment losses, ``cycles_stall`` = memory time beyond the quantized
compute; ``bound`` is ``bandwidth`` when memory time exceeds the quantized compute and the
overheads, ``power`` when the power cap sets the time, else ``occupancy`` when the time is over twice
the ideal, else ``compute``. Traffic: ``dram_bytes`` and ``l2_bytes`` per the residency rule in
:mod:`asicsim.hw.gpu_model`; ``array_bytes`` (``sram_array_bytes``, the on-chip level the report
draws) is the L2 traffic. Energy: ``compute``, ``l2`` (chip, dynamic), ``dram`` (board: HBM/GDDR
access) and the static power ``static_fraction`` x TDP x time split by scope (:func:`gpu_static_split`:
``static.chip``, ``static.hbm``, ``static.board``); ``launch_fraction`` and ``sm_fraction`` say how
much of the time is the launch floor and what share of the SMs the kernels keep busy. ``dram_bound_bytes`` is the compulsory traffic of the residency
rule (each input read once, each output written once; 0 under ``operands="warm"``).
``formats["path"]`` names the precision path and
``sources["compute"]`` why; ``notes`` say which constants a generation without its own
measurements borrowed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from asicsim.hw.cost_record import CostResult
from asicsim.hw.gpu import PATH_ALIGN, GpuDesign, default_formats, precision_path
from asicsim.hw.gpu import resolve_gpu_formats as resolve_gpu_formats
from asicsim.hw.gpu_kernels import Kernels, op_kernels
from asicsim.hw.gpu_model import (
    efficiency,
    energy_per_op_pj,
    generation_constants,
    kernel_times,
    level_energies_pj_per_byte,
    load_fit,
)
from asicsim.hw.node_scaling import energy_factor
from asicsim.hw.operations import Elementwise, Rnn
from asicsim.hw.result import OPERANDS, EnergySplit, Traffic


def rnn_algos(ops: Sequence, passes: Sequence[str], design: GpuDesign, fmts: Mapping) -> list[str]:
    """cuDNN's RNN algorithm per operation (``"standard"`` for anything but an Rnn)."""
    from asicsim.hw.gpu_rnn import rnn_algo
    from asicsim.hw.operations import Rnn

    return [rnn_algo(op, ps, design, fmts["act"].name) if isinstance(op, Rnn) else "standard"
            for op, ps in zip(ops, passes, strict=True)]


def gpu_cost_many(ops: Sequence, design: GpuDesign, formats=None, *, fit: Mapping | None = None,
                  passes: Sequence[str] | None = None, rnn_skip_input: bool = False,
                  operands: str = "cold", sustained: bool = True) -> list:
    """Price operations on a GPU design; one :class:`asicsim.hw.cost.CostResult` per operation.

    ``passes`` (one per op, default ``"fwd"``) selects a conv pass (``fwd``, ``bwd_data``,
    ``bwd_filter``) or an RNN pass (``fwd``, ``bwd_data``, ``bwd_weights``) for the calibration
    against measured training kernels; ``rnn_skip_input`` drops RNN input projections (DeepBench);
    ``operands="warm"`` prices back-to-back calls on the same operands (the measurement protocol)
    instead of the residency rule; ``sustained=False`` prices a burst from idle, which runs at full
    clock until the power averaged over the controller's window reaches the TDP
    (:mod:`asicsim.hw.gpu_power`; default: a sustained load, capped).
    """
    fit = dict(load_fit() if fit is None else fit)
    c, borrowed = generation_constants(fit, design.architecture)
    from asicsim.hw.operations import OperationError
    from asicsim.hw.roles import parse_formats

    fmts = resolve_gpu_formats(design, formats)
    try:
        path = precision_path(design, fmts, parse_formats(formats).get("emulate"))
    except OperationError:
        if not all(isinstance(op, Elementwise) for op in ops):
            raise
        # vector work runs on the SIMT cores in any format (conversions are elementwise too)
        path = precision_path(design, default_formats())
    passes = list(passes) if passes is not None else ["fwd"] * len(ops)
    algos = rnn_algos(ops, passes, design, fmts)
    rows = [r for i, (op, ps) in enumerate(zip(ops, passes, strict=True))
            for r in op_kernels(op, i, ps, rnn_skip_input=rnn_skip_input, rnn_algo=algos[i])]
    n = len(ops)
    if not rows:
        return []
    by = {r: fmts[r].storage_bits / 8 for r in ("act", "weight", "out")}  # memory words: tf32 is 4 bytes
    kern = Kernels.build(rows, by["act"], by["weight"], by["out"])
    t = kernel_times(kern, design, path, c, operands=operands, sustained=sustained)
    sums = {key: np.bincount(kern.owner, weights=np.asarray(v, dtype=np.float64), minlength=n)
            for key, v in t.items()}
    aligned_all = np.bincount(kern.owner, weights=1.0 - t["aligned"], minlength=n) == 0
    pes_exact = path.peak_ops_per_s / 2 / design.clock_hz  # peak MACs per cycle of the path
    pes = max(round(pes_exact), 1)
    clock = design.clock_hz * pes_exact / pes  # so that pes x clock_hz is the path's peak exactly
    e_op = energy_per_op_pj(design, path, c)
    per_byte = level_energies_pj_per_byte(design)
    static_w = c["static_fraction"] * design.tdp_w
    split, split_src = gpu_static_split(design, static_w)
    eff = efficiency(design, path, c)
    names = {r: f.name for r, f in fmts.items()} | {"path": path.name}
    base_src = {
        "compute": (f"path {path.name}: {path.why}; achievable x{eff:.3f}; {e_op:.3g} pJ/op = "
                    f"e_simt_pj_12nm (gpu_fit.toml) x {path.eff_class} ratio x node "
                    f"{energy_factor(design.process_nm, 12.0)[1]}"),
        "dram": per_byte["dram"][1] + (f"; streams at the published copy rate {design.copy_bandwidth_gbps:g} GB/s"
                                       if design.copy_bandwidth_gbps else
                                       f"; streams at bw_eff {c['bw_eff']:.3f} x datasheet"),
        "l2": per_byte["l2"][1],
        **{k: f"{v}; of static_fraction x TDP = {static_w:.3g} W x time (gpu_fit.toml)" for k, v in split_src.items()},
    }
    notes = ()
    if borrowed:
        by_gen: dict[str, list[str]] = {}
        for key, gen in borrowed.items():
            by_gen.setdefault(gen, []).append(key)
        notes = (f"no {design.architecture or 'unnamed'}-generation measurements: "
                 + "; ".join(f"{', '.join(keys)} of {gen}" for gen, keys in by_gen.items()),)
    out = []
    for i, op in enumerate(ops):
        time_s, full = float(sums["time"][i]), float(sums["full_clock_time"][i])
        ideal, quant = sums["compute"][i], sums["quantized"][i]
        body, overhead = sums["body"][i], sums["overhead"][i]
        stall = max(body - quant, 0.0)
        fill = max(full - ideal - stall, 0.0)
        capped = time_s - full  # what the lower, power-capped clock adds to the compute
        mem = sums["memory"][i]
        if capped > 0.05 * time_s:
            bound = "power"
        elif mem > quant and mem >= overhead:
            bound = "bandwidth"  # moving the bytes takes longer than the (quantized) math
        elif time_s > 2 * ideal:
            bound = "occupancy"  # launch floor, tile/wave losses: under half the achievable peak
        else:
            bound = "compute"
        dram_b, l2_b = float(sums["dram_bytes"][i]), float(sums["l2_bytes"][i])
        e = {"compute": float(sums["e_compute"][i]), "dram": float(sums["e_dram"][i]),
             "l2": float(sums["e_l2"][i]), **{k: w * time_s * 1e12 for k, w in split.items()}}
        src = dict(base_src)
        if capped > 0:
            src["compute"] += (f"; power cap: dynamic power at full clock over TDP - static, clock "
                               f"x{full / time_s:.3f}")
        op_notes = notes
        if not aligned_all[i] and path.name in PATH_ALIGN:
            op_notes = (*notes, f"dimensions not multiples of the {path.name} alignment: the library's "
                                f"unaligned fallback (loads as wide as the dimensions' byte alignment: "
                                f"unaligned_eff {c['unaligned_eff']:.3f} x (bytes / 16)^{c['unaligned_exp']:.2f})")
        if algos[i] != "standard":
            op_notes = (*op_notes, f"cuDNN's persistent RNN kernel ({algos[i].upper()}, as PyTorch picks it: "
                                   f"asicsim.hw.gpu_rnn): the recurrent weights stay on chip across the "
                                   f"{op.steps} steps, one launch, a grid barrier per step")
        kinds = op_kernels(op, i, passes[i], rnn_skip_input=rnn_skip_input)
        # the SMs' operand traffic with L2 is a GPU's on-chip level, as a systolic array's with its buffers
        shares = _operand_shares(op, fmts, kinds)
        per_el = {"ifmap": by["act"], "filter": by["weight"], "ofmap": by["out"], "psum": by["out"]}
        moved = np.array([[[total * shares.get(o, (0.0, 0.0))[k] for k in range(2)] for o in OPERANDS]
                          for total in (l2_b, dram_b)])
        traffic = Traffic(("l2", "dram"), moved, moved / np.array([per_el[o] for o in OPERANDS])[None, :, None],
                          np.float64(l2_b), np.float64(mem * clock))
        out.append(CostResult(
            operation=op.label, kind=op.kind, design=design.name, formats=names, pes=pes, clock_hz=clock,
            cycles_compute=float((ideal + capped) * clock), cycles_fill_drain=float(fill * clock),
            cycles_stall=float(stall * clock), macs=float(sums["dense_ops"][i] / 2),
            macs_performed=float(sums["ops"][i] / 2),
            mapping_efficiency=float(ideal / quant) if quant > 0 else math.nan,
            vector_ops=float(getattr(op, "elements", 0) * getattr(op, "ops_per_element", 0)),
            traffic=traffic, energy_pj=EnergySplit.from_parts(e), sources=src, bound=bound, notes=op_notes,
            dram_bound_bytes=float(sums["compulsory_bytes"][i]), dram_bound="compulsory",
            idle_power_w={"chip": split["static.chip"], "board": static_w},
            launch_fraction=float(overhead / time_s) if time_s > 0 else math.nan,
            sm_fraction=float(sums["sm_busy_time"][i] / time_s) if time_s > 0 else math.nan))
    return out


def gpu_costs(ops: Sequence, design: GpuDesign, formats=None) -> list:
    """:func:`gpu_cost_many` as :func:`asicsim.hw.cost.cost_many` prices a GPU. An RNN whose
    lowering has no input projection (every GEMM shares the recurrent weights: DeepBench's kernels,
    which call cuDNN with ``CUDNN_SKIP_INPUT``) is priced with ``rnn_skip_input``, as the systolic
    model prices only what the lowering lists."""
    ops = list(ops)
    skip = [isinstance(op, Rnn) and all(low.shared_weights for low in op.lower()) for op in ops]
    if not any(skip):
        return gpu_cost_many(ops, design, formats)
    if all(skip):
        return gpu_cost_many(ops, design, formats, rnn_skip_input=True)
    out: list = [None] * len(ops)  # each op's price is its own: price both groups, keep the order
    for skips in (False, True):
        idx = [i for i, s in enumerate(skip) if s is skips]
        for i, r in zip(idx, gpu_cost_many([ops[i] for i in idx], design, formats, rnn_skip_input=skips),
                        strict=True):
            out[i] = r
    return out


def _operand_shares(op, fmts: dict, kinds: list[dict]) -> dict[str, tuple[float, float]]:
    """Fractions of an operation's bytes that are ifmap/filter reads and ofmap writes."""
    a, b, c = (fmts[r].storage_bits / 8 for r in ("act", "weight", "out"))
    if isinstance(op, Elementwise):
        tot = op.distinct_reads + op.elements
        return {"ifmap": (op.distinct_reads / tot, 0.0), "filter": (0.0, 0.0), "ofmap": (0.0, op.elements / tot)}
    ia = sum(r.get("a_elems", r["M"] * r["K"]) * r.get("batch", 1) for r in kinds) * a
    fb = sum(r.get("b_elems", r["K"] * r["N"]) * r.get("batch", 1) * r.get("density", 1.0) for r in kinds) * b
    oc = sum(r.get("c_elems", r["M"] * r["N"]) * r.get("batch", 1) for r in kinds) * c
    tot = ia + fb + oc or 1.0
    return {"ifmap": (ia / tot, 0.0), "filter": (fb / tot, 0.0), "ofmap": (0.0, oc / tot)}


def gpu_static_split(design: GpuDesign, static_w: float) -> tuple[dict[str, float], dict[str, str]]:
    """The model's board static power (``static_fraction`` x TDP) split by scope: the voltage
    regulators' loss on it (``static.board``), the memory stacks' or devices' background
    (``static.hbm``) and the rest, the chip's own idle power (``static.chip``); defaults and
    sources from :mod:`asicsim.hw.power`, one model for both kinds of design."""
    from asicsim.hw.gpu import GPU_MEM_TYPES
    from asicsim.hw.power import VR_EFFICIENCY, dram_background_w

    board = static_w * (1.0 - VR_EFFICIENCY[0])
    hbm, hbm_src = dram_background_w(GPU_MEM_TYPES[design.mem_type], design.bandwidth_gbps)
    hbm = min(hbm, static_w - board)
    split = {"static.chip": static_w - board - hbm, "static.hbm": hbm, "static.board": board}
    src = {"static.board": f"regulator losses on the static power: 1 - {VR_EFFICIENCY[0]:g} ({VR_EFFICIENCY[1]})",
           "static.hbm": f"memory background {hbm_src}",
           "static.chip": "the chip's idle power: static_fraction x TDP less the regulator losses and the "
                          "memory background (the compute, l2 energies per op were fitted through the "
                          "board-level power cap, so they carry their share of regulator losses)"}
    return split, src
