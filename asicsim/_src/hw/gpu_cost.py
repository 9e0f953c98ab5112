"""A GPU's price for a list of operations: :func:`gpu_price` turns the kernel times of
:mod:`asicsim._src.hw.gpu_model` into one typed :class:`asicsim._src.hw.result.Price` over the operations,
in array operations (:func:`gpu_cost_many`: one :class:`asicsim._src.hw.cost.CostResult` per
operation, views of it).

Result: ``pes`` x ``clock_hz`` is the path's datasheet peak MAC rate, so ``utilization`` is achieved /
datasheet; ``cycles_compute`` = the useful work at the achievable rate plus what the power cap adds
(the clock drops so that power stays within the TDP), ``cycles_fill_drain`` = launch and call
overheads plus tile, wave and alignment losses, ``cycles_stall`` = memory time beyond the quantized
compute; ``bound`` is ``bandwidth`` when memory time exceeds the quantized compute and the
overheads, ``power`` when the power cap sets the time, else ``occupancy`` when the time is over twice
the ideal, else ``compute``. Traffic: ``dram_bytes`` and ``l2_bytes`` per the residency rule in
:mod:`asicsim._src.hw.gpu_model`; ``array_bytes`` (``sram_array_bytes``, the on-chip level the report
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

from collections.abc import Mapping, Sequence
from dataclasses import fields

import numpy as np

from asicsim._src.hw.cost_record import CostResult
from asicsim._src.hw.gpu import PATH_ALIGN, GpuDesign, default_formats, precision_path
from asicsim._src.hw.gpu import resolve_gpu_formats as resolve_gpu_formats
from asicsim._src.hw.gpu_kernels import Kernels, conv_chunk, conv_pad, op_kernels
from asicsim._src.hw.gpu_model import (
    efficiency,
    energy_per_op_pj,
    generation_constants,
    kernel_times,
    level_energies_pj_per_byte,
    load_fit,
)
from asicsim._src.hw.node_scaling import energy_factor
from asicsim._src.hw.objectives import FASTEST
from asicsim._src.hw.operations import Conv, Elementwise, OperationError, Rnn
from asicsim._src.hw.result import Bound, EnergySplit, Price, Schedule, Traffic
from asicsim._src.hw.result_table import Labels
from asicsim._src.hw.roles import parse_formats


def rnn_algos(ops: Sequence, passes: Sequence[str], design: GpuDesign, fmts: Mapping) -> list[str]:
    """cuDNN's RNN algorithm per operation (``"standard"`` for anything but an Rnn)."""
    from asicsim._src.hw.gpu_rnn import rnn_algo
    from asicsim._src.hw.operations import Rnn

    return [rnn_algo(op, ps, design, fmts["act"].name) if isinstance(op, Rnn) else "standard"
            for op, ps in zip(ops, passes, strict=True)]


def gpu_price(ops: Sequence, design: GpuDesign, formats=None, *, fit: Mapping | None = None,
              passes: Sequence[str] | None = None, rnn_skip_input: bool | Sequence[bool] = False,
              operands: str = "cold", sustained: bool = True, conv_layout: str = "NHWC") -> Price:
    """Price operations on a GPU design: one typed :class:`~asicsim._src.hw.result.Price` of shape
    ``(operations,)`` (with :class:`~asicsim._src.hw.result_table.Labels`), assembled in array
    operations from the kernels' times.

    ``passes`` (one per op, default ``"fwd"``) selects a conv pass (``fwd``, ``bwd_data``,
    ``bwd_filter``) or an RNN pass (``fwd``, ``bwd_data``, ``bwd_weights``) for the calibration
    against measured training kernels; ``rnn_skip_input`` (one flag, or one per op) drops RNN input
    projections (DeepBench); ``operands="warm"`` prices back-to-back calls on the same operands (the
    measurement protocol) instead of the residency rule; ``sustained=False`` prices a burst from
    idle, which runs at full clock until the power averaged over the controller's window reaches
    the TDP (:mod:`asicsim._src.hw.gpu_power`; default: a sustained load, capped). ``conv_layout``:
    the convolutions' tensors in memory, ``"NHWC"`` (channels last, as :class:`~asicsim._src.hw.operations.Conv`
    defines them) or ``"NCHW"`` (PyTorch's default): on a tensor-core path a channels-first tensor is
    transposed to and from the cores' channels-last layout, and channels are padded to the path's
    alignment (:func:`asicsim._src.hw.gpu_kernels.conv_kernels`).
    """
    return _assemble(ops, design, formats, fit, passes, rnn_skip_input, operands, sustained, conv_layout)[0]


def gpu_cost_many(ops: Sequence, design: GpuDesign, formats=None, *, fit: Mapping | None = None,
                  passes: Sequence[str] | None = None, rnn_skip_input: bool | Sequence[bool] = False,
                  operands: str = "cold", sustained: bool = True, conv_layout: str = "NHWC") -> list:
    """:func:`gpu_price` as one :class:`asicsim._src.hw.cost.CostResult` per operation (views of it)."""
    return gpu_records(*_assemble(ops, design, formats, fit, passes, rnn_skip_input, operands, sustained,
                                  conv_layout), ops)


def gpu_costs(ops: Sequence, design: GpuDesign, formats=None) -> tuple[list, Price]:
    """The records and the price :func:`asicsim._src.hw.cost.cost_many` answers for a GPU. An RNN whose
    lowering has no input projection (every GEMM shares the recurrent weights: DeepBench's kernels,
    which call cuDNN with ``CUDNN_SKIP_INPUT``) is priced with ``rnn_skip_input``, as the systolic
    model prices only what the lowering lists."""
    ops = list(ops)
    skip = [isinstance(op, Rnn) and all(low.shared_weights for low in op.lower()) for op in ops]
    pr, ratio = _assemble(ops, design, formats, None, None, skip, "cold")
    return gpu_records(pr, ratio, ops), pr


def gpu_records(pr: Price, clock_ratio: np.ndarray, ops: Sequence) -> list:
    """One :class:`CostResult` per operation of a GPU's price: views of its arrays; a power-capped
    operation's compute source says by how much the cap lowered its clock (``clock_ratio``)."""
    lab = pr.labels
    (clock,), (names,) = lab.clock_hz, lab.formats
    idle = {"chip": float(pr.idle_w["chip"]), "board": float(pr.idle_w["board"])}
    col = {k: np.asarray(getattr(pr, k)).tolist() for k in (
        "cycles_compute", "cycles_fill_drain", "cycles_stall", "macs", "macs_performed", "mapping_efficiency",
        "vector_ops", "bound", "dram_compulsory_bytes", "launch_fraction", "sm_fraction")}
    pes = int(pr.pes[0]) if len(ops) else 1
    out = []
    for i, op in enumerate(ops):
        src = dict(pr.sources, compute=pr.sources["compute"].split("; power cap on ")[0])
        if np.isfinite(clock_ratio[i]):
            src["compute"] += f"; power cap: dynamic power at full clock over TDP - static, clock x{clock_ratio[i]:.3f}"
        out.append(CostResult(
            operation=op.label, kind=op.kind, design=lab.designs[0], formats=names, pes=pes, clock_hz=clock,
            cycles_compute=col["cycles_compute"][i], cycles_fill_drain=col["cycles_fill_drain"][i],
            cycles_stall=col["cycles_stall"][i], macs=col["macs"][i], macs_performed=col["macs_performed"][i],
            mapping_efficiency=col["mapping_efficiency"][i], vector_ops=col["vector_ops"][i],
            traffic=pr.traffic.take(i), energy_pj=pr.energy.take(i), sources=src, bound=Bound.of(col["bound"][i]),
            notes=pr.notes[i], dram_bound_bytes=col["dram_compulsory_bytes"][i], dram_bound="compulsory",
            idle_power_w=idle, launch_fraction=col["launch_fraction"][i], sm_fraction=col["sm_fraction"][i]))
    return out


def gpu_static_split(design: GpuDesign, static_w: float) -> tuple[dict[str, float], dict[str, str]]:
    """The model's board static power (``static_fraction`` x TDP) split by scope: the voltage
    regulators' loss on it (``static.board``), the memory stacks' or devices' background
    (``static.hbm``) and the rest, the chip's own idle power (``static.chip``); defaults and
    sources from :mod:`asicsim._src.hw.power`, one model for both kinds of design."""
    from asicsim._src.hw.gpu import GPU_MEM_TYPES
    from asicsim._src.hw.power import VR_EFFICIENCY, dram_background_w

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


def _assemble(ops: Sequence, design: GpuDesign, formats, fit, passes, rnn_skip_input, operands, sustained=True,
              conv_layout="NHWC"):
    """The price (shape ``(operations,)``) and each operation's clock ratio under the power cap
    (NaN where uncapped), every figure an array over the operations."""
    fit = dict(load_fit() if fit is None else fit)
    c, borrowed = generation_constants(fit, design.architecture)
    ops = list(ops)
    tensor_convs = any(isinstance(op, Conv) for op in ops)  # the notes name a borrowed conv factor only where used
    n = len(ops)
    fmts = resolve_gpu_formats(design, formats)
    try:
        path = precision_path(design, fmts, parse_formats(formats).get("emulate"))
    except OperationError:
        if not all(isinstance(op, Elementwise) for op in ops):
            raise
        # vector work runs on the SIMT cores in any format (conversions are elementwise too)
        path = precision_path(design, default_formats())
    if not (tensor_convs and path.eff_class == "tensor"):
        borrowed = {k: g for k, g in borrowed.items() if not (k.startswith("conv_") and k.endswith("_tensor"))}
    passes = list(passes) if passes is not None else ["fwd"] * n
    skips = [bool(rnn_skip_input)] * n if isinstance(rnn_skip_input, (bool, np.bool_)) else list(rnn_skip_input)
    algos = rnn_algos(ops, passes, design, fmts)
    rows = [r for i, (op, ps) in enumerate(zip(ops, passes, strict=True))
            for r in op_kernels(op, i, ps, rnn_skip_input=skips[i], rnn_algo=algos[i], conv_pad=conv_pad(path),
                                conv_layout=conv_layout, conv_chunk=conv_chunk(path, c))]
    by = {r: fmts[r].storage_bits / 8 for r in ("act", "weight", "out")}  # memory words: tf32 is 4 bytes
    kern = Kernels.build(rows, by["act"], by["weight"], by["out"])
    t = kernel_times(kern, design, path, c, operands=operands, sustained=sustained) if rows else {}

    def per_op(key) -> np.ndarray:
        return np.bincount(kern.owner, weights=np.asarray(t[key], dtype=np.float64), minlength=n) if rows \
            else np.zeros(0)

    s = {key: per_op(key) for key in ("time", "full_clock_time", "compute", "quantized", "body", "overhead",
                                      "memory", "dram_bytes", "l2_bytes", "e_compute", "e_dram", "e_l2",
                                      "dense_ops", "ops", "compulsory_bytes", "sm_busy_time")}
    aligned_all = (np.bincount(kern.owner, weights=1.0 - t["aligned"], minlength=n) == 0) if rows else np.ones(0, bool)
    pes_exact = path.peak_ops_per_s / 2 / design.clock_hz  # peak MACs per cycle of the path
    pes = max(round(pes_exact), 1)
    clock = design.clock_hz * pes_exact / pes  # so that pes x clock_hz is the path's peak exactly
    static_w = c["static_fraction"] * design.tdp_w
    split, split_src = gpu_static_split(design, static_w)
    time_s, full, ideal, quant = s["time"], s["full_clock_time"], s["compute"], s["quantized"]
    stall = _at_least_zero(s["body"] - quant)
    fill = _at_least_zero(full - ideal - stall)
    capped = time_s - full  # what the lower, power-capped clock adds to the compute
    mem, overhead = s["memory"], s["overhead"]
    bound = np.select([capped > 0.05 * time_s,
                       (mem > quant) & (mem >= overhead),  # moving the bytes takes longer than the math
                       time_s > 2 * ideal],  # launch floor, tile/wave losses: under half the achievable peak
                      [Bound.POWER.code, Bound.BANDWIDTH.code, Bound.OCCUPANCY.code], Bound.COMPUTE.code)
    cc, fd, st = (ideal + capped) * clock, fill * clock, stall * clock
    energy = EnergySplit(("compute", "dram", "l2", *split), np.stack(
        [s["e_compute"], s["e_dram"], s["e_l2"], *(w * time_s * 1e12 for w in split.values())]) if n
        else np.zeros((3 + len(split), 0)))
    with np.errstate(divide="ignore", invalid="ignore"):
        mapped = np.where(quant > 0, ideal / np.where(quant > 0, quant, 1.0), np.nan)
        launch = np.where(time_s > 0, overhead / np.where(time_s > 0, time_s, 1.0), np.nan)
        busy = np.where(time_s > 0, s["sm_busy_time"] / np.where(time_s > 0, time_s, 1.0), np.nan)
        ratio = np.where(capped > 0, full / time_s, np.nan)
    notes = _gpu_notes(ops, design, path, c, borrowed, aligned_all, algos)
    nan = np.full(n, np.nan)
    names = {r: f.name for r, f in fmts.items()} | {"path": path.name}
    sources = _gpu_sources(design, path, c, static_w, split_src, ratio)
    pr = Price(
        cycles_compute=cc, cycles_fill_drain=fd, cycles_stall=st, cycles_sync=np.zeros(n), macs=s["dense_ops"] / 2,
        macs_performed=s["ops"] / 2, mapped_pes=mapped, mapping_slots=np.ones(n),
        vector_ops=np.array([float(getattr(op, "elements", 0) * getattr(op, "ops_per_element", 0)) for op in ops]),
        time_s=(cc + fd + st + 0.0) / clock, pes=np.full(n, float(pes)),
        traffic=_gpu_traffic(kern, ops, by, s["l2_bytes"], s["dram_bytes"], mem * clock), energy=energy,
        bound=bound.astype(np.int64), schedule=Schedule(**{f.name: nan for f in fields(Schedule)}),
        sources=sources, notes=notes, idle_w={"chip": float(split["static.chip"]), "board": float(static_w)},
        dram_compulsory_bytes=s["compulsory_bytes"], dram_pebble_bytes=np.zeros(n), launch_fraction=launch,
        sm_fraction=busy, formats=names,
        labels=Labels(designs=(design.name,), operations=tuple(op.label for op in ops),
                      kinds=tuple(op.kind for op in ops), objectives=(FASTEST,), formats=(names,), gpu=(True,),
                      clock_hz=(clock,), levels=(("l2", "dram"),), components=(energy.components,),
                      mapping=np.full((1, n), "", dtype=object), execution=np.full((3, 1, n), np.nan)))
    return pr, ratio


def _at_least_zero(x: np.ndarray) -> np.ndarray:
    """``max(x, 0.0)`` elementwise as Python takes it (a NaN stays NaN, -0.0 stays -0.0)."""
    return np.where(0.0 > x, 0.0, x)


def _gpu_sources(design: GpuDesign, path, c: Mapping, static_w: float, split_src: dict, ratio) -> dict:
    eff = efficiency(design, path, c)
    e_op = energy_per_op_pj(design, path, c)
    per_byte = level_energies_pj_per_byte(design)
    src = {
        "compute": (f"path {path.name}: {path.why}; achievable x{eff:.3f}; {e_op:.3g} pJ/op = "
                    f"e_simt_pj_12nm (gpu_fit.toml) x {path.eff_class} ratio x node "
                    f"{energy_factor(design.process_nm, 12.0)[1]}"),
        "dram": per_byte["dram"][1] + (f"; streams at the published copy rate {design.copy_bandwidth_gbps:g} GB/s"
                                       if design.copy_bandwidth_gbps else
                                       f"; streams at bw_eff {c['bw_eff']:.3f} x datasheet"),
        "l2": per_byte["l2"][1],
        **{k: f"{v}; of static_fraction x TDP = {static_w:.3g} W x time (gpu_fit.toml)" for k, v in split_src.items()},
    }
    r = ratio[np.isfinite(ratio)]
    if r.size:  # the records say each operation's clock; the price the range
        src["compute"] += (f"; power cap on {r.size} of {len(ratio)} operations: dynamic power at full clock "
                           f"over TDP - static, clock x{r.min():.3f} to x{r.max():.3f}")
    return src


def _gpu_notes(ops, design: GpuDesign, path, c: Mapping, borrowed: dict, aligned_all, algos) -> tuple:
    notes: tuple = ()
    if borrowed:
        by_gen: dict[str, list[str]] = {}
        for key, gen in borrowed.items():
            by_gen.setdefault(gen, []).append(key)
        notes = (f"no {design.architecture or 'unnamed'}-generation measurements inform these constants, "
                 "taken from the nearest generation that has them: "
                 + "; ".join(f"{', '.join(keys)} of {gen}" for gen, keys in by_gen.items()),)
    out = []
    for i, op in enumerate(ops):
        op_notes = notes
        if not aligned_all[i] and path.name in PATH_ALIGN:
            op_notes = (*notes, f"dimensions not multiples of the {path.name} alignment: the library's "
                                f"unaligned fallback (loads as wide as the dimensions' byte alignment: "
                                f"unaligned_eff {c['unaligned_eff']:.3f} x (bytes / 16)^{c['unaligned_exp']:.2f})")
        if algos[i] != "standard":
            op_notes = (*op_notes, f"cuDNN's persistent RNN kernel ({algos[i].upper()}, as PyTorch picks it: "
                                   f"asicsim._src.hw.gpu_rnn): the recurrent weights stay on chip across the "
                                   f"{op.steps} steps, one launch, a grid barrier per step")
        out.append(op_notes)
    return tuple(out)


def _gpu_traffic(kern: Kernels, ops: Sequence, by: dict, l2_b, dram_b, transfer_cycles) -> Traffic:
    """The SMs' operand traffic with L2 (a GPU's on-chip level, as a systolic array's with its
    buffers) and with DRAM, split by operand in the shares of each operation's stored bytes
    (ifmap/filter reads, ofmap writes; an elementwise op's distinct reads and results)."""
    n = len(ops)

    def summed(stored, default, *factors) -> np.ndarray:  # stored elements (-1: the GEMM's) per operation
        w = np.where(stored < 0, default, stored)
        for f in factors:
            w = w * f
        return np.bincount(kern.owner, weights=w, minlength=n)

    ia = summed(kern.a_elems, kern.M * kern.K, kern.batch) * by["act"]
    fb = summed(kern.b_elems, kern.K * kern.N, kern.batch, kern.density) * by["weight"]
    oc = summed(kern.c_elems, kern.M * kern.N, kern.batch) * by["out"]
    ew = np.array([isinstance(op, Elementwise) for op in ops], dtype=bool)
    if ew.any():  # an elementwise op: distinct reads in, results out
        reads = np.array([op.distinct_reads if e else 0 for op, e in zip(ops, ew, strict=True)], dtype=np.float64)
        outs = np.array([op.elements if e else 0 for op, e in zip(ops, ew, strict=True)], dtype=np.float64)
        ia, fb, oc = np.where(ew, reads, ia), np.where(ew, 0.0, fb), np.where(ew, outs, oc)
    tot = ia + fb + oc
    tot = np.where(tot == 0, 1.0, tot)
    zero = np.zeros(n)
    shares = np.array([[ia / tot, zero], [fb / tot, zero], [zero, oc / tot], [zero, zero]])  # (operand, dir, n)
    moved = np.stack([l2_b * shares, dram_b * shares])
    per_el = np.array([by["act"], by["weight"], by["out"], by["out"]])
    return Traffic(("l2", "dram"), moved, moved / per_el[None, :, None, None], l2_b, transfer_cycles)
