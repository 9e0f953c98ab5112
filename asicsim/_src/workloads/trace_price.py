"""A trace priced on a group of designs: :func:`trace_price` and :class:`TracePrice`.

The trace's rows are grouped as one pricing call takes them (:func:`_groups`: one role, kind and
set of formats; the formats a row records become the cost model's roles), each group priced on a
group of designs (one family, or one design alone) by :func:`asicsim._src.hw.family.cost_designs`, and
both of :mod:`asicsim._src.workloads.pricing`'s views (per-row tables, vectorised totals) read the
same typed prices.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from asicsim._src.emulate import load_recipe
from asicsim._src.hw.cost import scheduled_for
from asicsim._src.hw.design_files import load_design
from asicsim._src.hw.family import cost_designs
from asicsim._src.hw.objectives import DEFAULT_OBJECTIVE
from asicsim._src.hw.operations import Elementwise, Gemm, OperationError
from asicsim._src.hw.power import derived_power, is_static
from asicsim._src.hw.result import EnergySplit, Price
from asicsim._src.hw.scopes import SCOPE_ENERGY_KEYS
from asicsim._src.numerics.catalog import FormatError, get_format
from asicsim._src.numerics.formats import IntFormat
from asicsim._src.workloads.prune_price import gemm_sparsity

_FORMAT_COLUMNS = ("format_lhs", "format_rhs", "format_acc", "format_out")


def _formats(rows: pd.DataFrame) -> dict[str, str]:
    """The formats a group of trace rows records (one GEMM's own: a layer rule's, the first or
    last layer's, a gradient GEMM's), as the cost model's operand keys."""
    r = rows.iloc[0]
    lhs, rhs, acc, out = (str(r[c]) for c in _FORMAT_COLUMNS)
    rhs = rhs or lhs
    if acc == "float32" and _is_int8_or_narrower(lhs) and _is_int8_or_narrower(rhs):
        # The emulator sums integer x integer products in float32 as an exact stand-in for the
        # int32 accumulator integer hardware has (the int8 recipes say so: TensorRT, gemmlowp and
        # TPU v1 accumulate int8 products in int32); priced as that hardware runs it.
        acc = "int32"
    return {"act": lhs, "weight": rhs, "acc": acc, "out": out}


def _is_int8_or_narrower(name: str) -> bool:
    """A plain integer format of at most 8 bits (int8, uint8, int4: not fixed point)."""
    try:
        f = get_format(name)
        return isinstance(f, IntFormat) and f.frac_bits == 0 and f.bits <= 8
    except FormatError:  # not a scalar format name (e.g. a block format): not integer
        return False


_ENERGY_COLUMNS = ("energy_mac_j", "energy_vector_j", "energy_buffers_j", "energy_dram_j", "energy_static_j",
                   "energy_other_j")


def _energy_column(key: str) -> str:
    """The split column a cost result's energy key adds to: MAC (mult + add; a GPU's compute),
    vector unit, on-chip buffers (a GPU's L2), DRAM, static (every static component at any scope,
    :func:`asicsim._src.hw.power.is_static`), or other (PE registers, control, regulator losses)."""
    if key in ("mult", "add", "compute"):
        return "energy_mac_j"
    if key.startswith("buffer.") or key == "l2":
        return "energy_buffers_j"
    if is_static(key):
        return "energy_static_j"
    return f"energy_{key}_j" if f"energy_{key}_j" in _ENERGY_COLUMNS else "energy_other_j"


def _update_formats(policy) -> dict[str, str]:
    """Formats of the optimizer update: the weights' (the master copy's, else the working
    weights') for its operands and result, the optimizer state's as the accumulator."""
    held = policy.role("master") or policy.role("weight")
    fmt = held.spec.name if held is not None else "float32"
    state = policy.role("opt_state")
    return {"act": fmt, "weight": fmt, "acc": state.spec.name if state else "float32", "out": fmt}


def _elementwise_ops(part: pd.DataFrame) -> list[Elementwise]:
    """A trace's elementwise rows as the vector-unit operations they are (one call's worth); a
    rotation's operand is already on chip, fused with the quantizer that feeds its GEMM
    (:mod:`asicsim._src.emulate.rotation_trace`)."""
    return [Elementwise(int(r.elements_out), int(r.ops), inputs=int(r.inputs), work=r.work,
                        input_elements=int(r.elements_in), name=f"{r.work} {r.primitive}",
                        on_chip=r.work == "rotation")
            for r in part.itertuples()]


def _groups(trace: pd.DataFrame):
    """(role, kind, rows, formats, operations, repetitions) per priced group of the trace."""
    kind = trace["kind"] if "kind" in trace else pd.Series("gemm", index=trace.index)
    ew = kind == "elementwise"
    for role, part in trace.groupby("role", sort=False):
        if role == "optimizer":
            r = part.iloc[0]
            yield role, "elementwise", part, _update_formats, [Elementwise(int(r.M), int(r.K), inputs=3,
                                                                           work="optimizer")], np.ones(1)
            continue
        for is_ew, kind_rows in ((False, part[~ew[part.index]]), (True, part[ew[part.index]])):
            if not len(kind_rows):
                continue
            # rows priced in the formats they record, one cost call per set of formats
            for _, rows in kind_rows.groupby(list(_FORMAT_COLUMNS), sort=False, dropna=False):
                ops = (_elementwise_ops(rows) if is_ew
                       else [Gemm(int(r.M), int(r.N), int(r.K), **gemm_sparsity(r)) for r in rows.itertuples()])
                reps = (rows["batch"] * rows["count"]).to_numpy(dtype=np.float64)
                yield role, "elementwise" if is_ew else "gemm", rows, _formats, ops, reps


@dataclass(frozen=True)
class TracePart:
    """One priced group of a trace's rows (one role, kind and set of formats): its operations'
    :class:`~asicsim._src.hw.result.Price` on every design of the group (``(designs, ops)``), or the
    reason it is not priced (formats the designs do not execute)."""

    role: str
    kind: str
    rows: pd.DataFrame
    formats: dict
    ops: list
    reps: np.ndarray
    price: Price | None
    error: str = ""


@dataclass(frozen=True)
class TracePrice:
    """A trace priced on a group of designs (one family, or one design alone) in one pass per
    :class:`TracePart`: :meth:`totals` sums it per design (vectorised), :meth:`rows` lays out one
    design's per-row table. Both read the same typed prices."""

    designs: tuple
    parts: tuple[TracePart, ...]
    scheduled: tuple[str, ...]  # per design: what its schedules were chosen for

    def totals(self, role: str | None = None) -> dict[str, np.ndarray]:
        """Arrays over the designs: ``time_s``, ``energy_j``, the ``energy_*_j`` split,
        ``energy_dynamic_j``, the per-scope energies, ``dram_bytes``, ``sram_bytes``, ``macs``,
        a GPU's ``launch_fraction`` and ``sm_fraction`` weighted by time (NaN elsewhere), and the
        derived powers; of one ``role``'s rows, or of all. A part that is not priced leaves every
        summed figure NaN."""
        n = len(self.designs)
        keys = ("time_s", "energy_j", *_ENERGY_COLUMNS, *SCOPE_ENERGY_KEYS, "dram_bytes", "sram_bytes")
        out = {k: np.zeros(n) for k in keys} | {"macs": np.zeros(n)}
        launch, sm = np.zeros(n), np.zeros(n)
        for part in self.parts:
            if role is not None and part.role != role:
                continue
            if part.kind == "gemm":
                out["macs"] += float(part.rows["macs"].sum())
            c, reps = part.price, part.reps
            if c is None:
                for k in keys:
                    out[k] += np.nan
                continue
            time = np.broadcast_to(c.time_s, (n, len(reps))) * reps
            out["time_s"] += time.sum(axis=-1)
            out["energy_j"] += c.energy.total @ reps * 1e-12
            out["dram_bytes"] += c.dram_bytes @ reps
            out["sram_bytes"] += c.sram_array_bytes @ reps
            summed = EnergySplit(c.energy.components, c.energy.pj @ reps)  # pJ per component and design
            for k, v in summed.items():
                out[_energy_column(k)] += v * 1e-12
            for k, v in summed.scoped().items():
                out[k] += v
            launch += (np.broadcast_to(c.launch_fraction, time.shape) * time).sum(axis=-1)
            sm += (np.broadcast_to(c.sm_fraction, time.shape) * time).sum(axis=-1)
        out["energy_dynamic_j"] = out["energy_j"] - out["energy_static_j"]
        with np.errstate(divide="ignore", invalid="ignore"):
            t = out["time_s"]
            out["launch_fraction"] = np.where(t > 0, launch / np.where(t > 0, t, 1.0), np.nan)
            out["sm_fraction"] = np.where(t > 0, sm / np.where(t > 0, t, 1.0), np.nan)
        return derived_power(out, out["time_s"], out["macs"])

    def roles(self) -> tuple[str, ...]:
        """The trace's roles in the order its rows first name them."""
        return tuple(dict.fromkeys(part.role for part in self.parts))

    def notes(self, i: int, role: str) -> list[str]:
        """Design ``i``'s note on each row of ``role`` (as :meth:`rows` prints them), in order."""
        out: list[str] = []
        for part in self.parts:
            if part.role == role:
                out += ([f"not priced: {part.error}"] * len(part.ops) if part.price is None
                        else ["; ".join(n) for n in part.price.take(i).notes])
        return out

    def idle_power_w(self, i: int, scope: str) -> float:
        """Design ``i``'s idle power at ``scope`` (NaN where no part is priced)."""
        priced = [part for part in self.parts if part.price is not None]
        return priced[0].price.take(i).idle_power_w(scope) if priced else float("nan")

    def row_figures(self, i: int = 0) -> dict[str, np.ndarray]:
        """Design ``i``'s per-row ``time_s`` and ``energy_j`` (times the row's repetitions, NaN
        where a part is not priced) and each row's ``index`` in the trace, in :meth:`rows`' order
        and with its values to the last bit, read from the typed prices without building the table."""
        index, time, energy = [], [], []
        for part in self.parts:
            index.append(part.rows.index.to_numpy())
            if part.price is None:
                time.append(np.full(len(part.ops), np.nan))
                energy.append(np.full(len(part.ops), np.nan))
                continue
            c = part.price.take(i)
            time.append(part.reps * np.broadcast_to(c.time_s, (len(part.ops),)))
            energy.append(part.reps * np.broadcast_to(c.energy.total * 1e-12, (len(part.ops),)))
        if not self.parts:
            return {"index": np.zeros(0, np.int64), "time_s": np.zeros(0), "energy_j": np.zeros(0)}
        return {"index": np.concatenate(index), "time_s": np.concatenate(time), "energy_j": np.concatenate(energy)}

    def rows(self, i: int = 0) -> pd.DataFrame:
        """Design ``i``'s table: one row per trace row (:func:`trace_costs`)."""
        design, scheduled = self.designs[i], self.scheduled[i]
        rows = []
        for part in self.parts:
            if part.price is None:
                rows += [_not_priced(r, part.role, part.kind, design, part.formats, part.error, n)
                         | {"objective": scheduled} for r, n in zip(part.rows.itertuples(), part.reps, strict=True)]
                continue
            c = part.price.take(i)
            e = c.energy
            scoped = derived_power(e.scoped(), c.time_s, c.macs)
            power = {k: v for k, v in scoped.items() if k.startswith(("power_", "tops_per_w_"))}
            idle = {f"idle_power_{s}_w": c.idle_power_w(s) for s in ("chip", "board")}
            cols = {"time_s": c.time_s, "energy_j": e.total * 1e-12, "energy_dynamic_j": e.dynamic * 1e-12,
                    "dram_bytes": c.dram_bytes, "sram_bytes": c.sram_array_bytes,
                    **{k: scoped[k] for k in SCOPE_ENERGY_KEYS}}
            split = {col: np.zeros(len(part.ops)) for col in _ENERGY_COLUMNS}
            for k, v in e.items():
                split[_energy_column(k)] = split[_energy_column(k)] + v * 1e-12
            each = {k: np.broadcast_to(v, (len(part.ops),)).tolist()
                    for k, v in {**cols, **split, **power, "launch_fraction": c.launch_fraction,
                                 "sm_fraction": c.sm_fraction, "utilization": c.utilization}.items()}
            bounds = np.broadcast_to(c.bound_names, (len(part.ops),)).tolist()
            for j, (r, op, n) in enumerate(zip(part.rows.itertuples(), part.ops, part.reps, strict=True)):
                shape = ({"M": int(r.M), "N": int(r.N), "K": int(r.K), "work": ""} if part.kind == "gemm"
                         else {"M": op.elements, "N": 1, "K": op.ops_per_element, "work": op.work})
                v = {k: x[j] for k, x in each.items()}
                rows.append({"design": design.name, "role": part.role, "kind": part.kind, **shape, "reps": float(n),
                             "macs": float(r.macs), "time_s": n * v["time_s"], "energy_j": n * v["energy_j"],
                             **{k: n * v[k] for k in _ENERGY_COLUMNS}, "energy_dynamic_j": n * v["energy_dynamic_j"],
                             **{k: n * v[k] for k in SCOPE_ENERGY_KEYS}, **{k: v[k] for k in power}, **idle,
                             "dram_bytes": n * v["dram_bytes"], "sram_bytes": n * v["sram_bytes"],
                             "launch_fraction": v["launch_fraction"], "sm_fraction": v["sm_fraction"],
                             "bound": bounds[j], "utilization": v["utilization"],
                             **{f"format_{k}": f for k, f in part.formats.items()}, "objective": scheduled,
                             "note": "; ".join(c.notes[j])})
        return pd.DataFrame(rows)


def trace_price(trace: pd.DataFrame, designs, recipe="fp32", *, objective: str = DEFAULT_OBJECTIVE) -> TracePrice:
    """Price a trace on a group of designs (one family, or one design alone): each priced group
    of its rows (role, kind, formats) in one call (:func:`asicsim._src.hw.family.cost_designs`)."""
    policy = load_recipe(recipe)
    designs = tuple(load_design(d) for d in designs)
    parts = []
    for role, kind, part, formats_of, ops, reps in _groups(trace):
        fmts = formats_of(policy) if role == "optimizer" else formats_of(part)
        try:
            pr, err = cost_designs(ops, designs, fmts, objective=objective), ""
        except OperationError as e:  # formats the designs do not execute: said, not priced
            pr, err = None, str(e)
        parts.append(TracePart(role, kind, part, fmts, ops, reps, pr, err))
    return TracePrice(designs, tuple(parts), tuple(scheduled_for(d, objective) for d in designs))


def _not_priced(r, role: str, kind: str, design, fmts: dict, err: Exception, reps: float) -> dict:
    """A row the design cannot run in its role's formats (asicsim._src.hw.native): NaN, with why."""
    nan = float("nan")
    return {"design": getattr(design, "name", str(design)), "role": role, "kind": kind, "M": int(r.M),
            "N": int(r.N), "K": int(r.K), "work": getattr(r, "work", "") if kind != "gemm" else "",
            "reps": float(reps), "macs": float(r.macs), "time_s": nan, "energy_j": nan,
            **dict.fromkeys(_ENERGY_COLUMNS, nan), "energy_dynamic_j": nan, **dict.fromkeys(SCOPE_ENERGY_KEYS, nan),
            "dram_bytes": nan, "sram_bytes": nan, "bound": "",
            "utilization": nan, **{f"format_{k}": v for k, v in fmts.items()}, "note": f"not priced: {err}"}
