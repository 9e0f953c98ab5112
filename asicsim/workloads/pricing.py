"""Price what a training workload runs: its op trace under a recipe, on systolic designs and GPUs.

``workload_trace`` traces one training step (or one inference batch) of a workload under a recipe
with :func:`asicsim.emulate.op_trace` (shapes only, nothing is computed); ``trace_costs`` prices
each of its rows on a design (time, energy split, traffic, bound) and ``price_trace`` sums them per role,
pricing every GEMM with :func:`asicsim.hw.cost.cost_many` in the formats its role uses:

============ ================ ================ ============
trace role   A operand        B operand        output
============ ================ ================ ============
forward      ``act``          ``weight``       ``out``
grad-input   ``grad`` (dY)    ``weight``       ``grad_out``
grad-weight  ``act`` (X^T)    ``grad`` (dY)    ``wgrad``
============ ================ ================ ============

Each row counts ``batch * count`` independent GEMMs (batched dimensions and scan steps), priced as
GEMMs (a convolution by its im2col shape). A training trace ends with one ``optimizer`` row: the
update's elementwise work on every parameter (:data:`OPTIMIZER_OPS` per parameter), priced on the
vector unit (a GPU's SIMT cores) in the master/weight format. Other elementwise work (activations,
losses) is not priced.
"""

from __future__ import annotations

import jax
import numpy as np
import pandas as pd

from asicsim.emulate import load_recipe, op_trace
from asicsim.hw.cost import cost_many
from asicsim.hw.operations import Elementwise, Gemm, OperationError
from asicsim.workloads.training import _batch_fn, _loss_fn, build
from asicsim.workloads.workload import load_workload

#: Elementwise operations per parameter of one update (multiplies, adds, divides, square roots):
#: SGD w -= lr g (2); SGD with momentum m = mu m + g; w -= lr m (4); Adam m, v moments (5),
#: bias corrections (2), sqrt, add eps, divide, scale and subtract (5) = 12.
OPTIMIZER_OPS = {"sgd": 2, "sgd_momentum": 4, "adam": 12}

_ROLE_FORMATS = {"forward": ("act", "weight", "out"), "grad-input": ("grad", "weight", "grad_out"),
                 "grad-weight": ("act", "grad", "wgrad")}


def workload_trace(workload, recipe="fp32", *, batch: int | None = None, training: bool = True) -> pd.DataFrame:
    """The op trace of one training step (``training``) or one inference batch of ``workload``."""
    w = load_workload(workload)
    policy = load_recipe(recipe)
    data, model = build(w)
    b = batch or w.batch
    params = model.init(0)
    idx = np.arange(b, dtype=np.int32)
    arrays = (data.x_train,) if data.task == "lm" else (data.x_train, data.y_train)
    sample = _batch_fn(data.task, w.context)(tuple(jax.numpy.asarray(a) for a in arrays), idx)
    if training:
        trace = op_trace(_loss_fn(model, data.task), policy, params, sample, training=True)
        opt = "sgd_momentum" if w.optimizer == "sgd" and w.momentum else w.optimizer
        update = {"role": "optimizer", "kind": "elementwise", "M": model.num_params(params), "N": 1,
                  "K": OPTIMIZER_OPS[opt], "batch": 1, "count": 1, "macs": 0, "recipe": policy.name}
        return pd.concat([trace, pd.DataFrame([update])], ignore_index=True)
    x = sample if data.task == "lm" else sample[0]
    return op_trace(model.apply, policy, params, x[:, :-1] if data.task == "lm" else x)


def _formats(policy, role: str) -> dict[str, str]:
    a, b, out = _ROLE_FORMATS[role]
    spec = {r: policy.role(r) for r in (a, b, out, "acc")}
    name = {r: (s.spec.name if s is not None else "float32") for r, s in spec.items()}
    return {"act": name[a], "weight": name[b], "acc": name["acc"], "out": name[out]}


_ENERGY_COLUMNS = ("energy_mac_j", "energy_vector_j", "energy_buffers_j", "energy_dram_j", "energy_static_j",
                   "energy_other_j")


def _energy_column(key: str) -> str:
    """The split column a cost result's energy key adds to: MAC (mult + add; a GPU's compute),
    vector unit, on-chip buffers (a GPU's L2), DRAM, static, or other."""
    if key in ("mult", "add", "compute"):
        return "energy_mac_j"
    if key.startswith("buffer.") or key == "l2":
        return "energy_buffers_j"
    return f"energy_{key}_j" if f"energy_{key}_j" in _ENERGY_COLUMNS else "energy_other_j"


def _energy_columns(energy_pj: dict) -> dict[str, float]:
    """A cost result's energy split (picojoules per key) as joules per column."""
    out = dict.fromkeys(_ENERGY_COLUMNS, 0.0)
    for k, v in energy_pj.items():
        out[_energy_column(k)] += v * 1e-12
    return out


def _update_formats(policy) -> dict[str, str]:
    """Formats of the optimizer update: the weights' (the master copy's, else the working
    weights') for its operands and result, the optimizer state's as the accumulator."""
    held = policy.role("master") or policy.role("weight")
    fmt = held.spec.name if held is not None else "float32"
    state = policy.role("opt_state")
    return {"act": fmt, "weight": fmt, "acc": state.spec.name if state else "float32", "out": fmt}


def trace_costs(trace: pd.DataFrame, design, recipe="fp32") -> pd.DataFrame:
    """One row per trace row on one design: the GEMM (or the optimizer update) priced in its role's
    formats, times its repetitions (``reps`` = batch x count): ``time_s``, ``energy_j`` and its
    split (``energy_mac_j``, ``energy_vector_j``, ``energy_buffers_j``, ``energy_dram_j``,
    ``energy_static_j``, ``energy_other_j``), ``dram_bytes``, ``sram_bytes`` (between buffers and
    array), ``bound``, ``utilization`` and the formats."""
    policy = load_recipe(recipe)
    rows = []
    for role, part in trace.groupby("role", sort=False):
        if role == "optimizer":
            rows.append(_price_update(part.iloc[0], design, policy))
            continue
        fmts = _formats(policy, role)
        try:
            res = cost_many([Gemm(int(r.M), int(r.N), int(r.K)) for r in part.itertuples()], design, fmts)
        except OperationError as err:  # formats the design does not execute: said, not priced
            rows += [_not_priced(r, role, design, fmts, err) for r in part.itertuples()]
            continue
        for r, c in zip(part.itertuples(), res, strict=True):
            reps = float(r.batch * r.count)
            energy = {k: reps * v for k, v in _energy_columns(c.energy_pj).items()}
            rows.append({"design": c.design, "role": role, "kind": "gemm", "M": int(r.M), "N": int(r.N),
                         "K": int(r.K), "reps": reps, "macs": float(r.macs), "time_s": reps * c.time_s,
                         "energy_j": reps * c.energy_total_pj * 1e-12, **energy,
                         "dram_bytes": reps * c.dram_bytes, "sram_bytes": reps * c.sram_array_bytes,
                         "bound": c.bound, "utilization": c.utilization,
                         **{f"format_{k}": v for k, v in fmts.items()}, "note": ""})
    return pd.DataFrame(rows)


def trace_totals_family(trace: pd.DataFrame, designs, recipe="fp32") -> dict[str, np.ndarray]:
    """The trace's totals on every design of one family (:mod:`asicsim.hw.family`) in one
    vectorised pass: arrays over the designs of ``time_s``, ``energy_j`` and the ``energy_*_j``
    split, ``dram_bytes``, ``sram_bytes``, ``macs`` — the sums :func:`trace_costs` gives per design."""
    from asicsim.hw.family import cost_family

    policy = load_recipe(recipe)
    n = len(designs)
    keys = ("time_s", "energy_j", *_ENERGY_COLUMNS, "dram_bytes", "sram_bytes", "macs")
    out = {k: np.zeros(n) for k in keys}
    for role, part in trace.groupby("role", sort=False):
        if role == "optimizer":
            fmts = _update_formats(policy)
            row = part.iloc[0]
            ops, reps = [Elementwise(int(row.M), int(row.K), inputs=3)], np.ones(1)
        else:
            fmts = _formats(policy, role)
            ops = [Gemm(int(r.M), int(r.N), int(r.K)) for r in part.itertuples()]
            reps = (part["batch"] * part["count"]).to_numpy(dtype=np.float64)
            out["macs"] += float(part["macs"].sum())
        try:
            c = cost_family(ops, designs, fmts)
        except OperationError:  # a design without a vector unit: the update is not priced
            for k in keys:
                if k != "macs":
                    out[k] += np.nan
            continue
        out["time_s"] += c["time_s"] @ reps
        out["energy_j"] += c["energy_pj"] @ reps * 1e-12
        out["dram_bytes"] += c["dram_bytes"] @ reps
        out["sram_bytes"] += c["sram_array_bytes"] @ reps
        for k in [k for k in c if k.startswith("energy.")]:
            out[_energy_column(k[len("energy."):-len("_pj")])] += c[k] @ reps * 1e-12
    return out


def price_trace(trace: pd.DataFrame, designs, recipe="fp32") -> pd.DataFrame:
    """One row per (design, role): time, energy and DRAM bytes of the trace's GEMMs, summed."""
    designs = [designs] if isinstance(designs, str) else list(designs)
    rows = []
    for design in designs:
        ops = trace_costs(trace, design, recipe)
        for role, part in ops.groupby("role", sort=False):
            fmts = part.iloc[0]
            skip = role == "optimizer"  # an update not priced (no vector unit) is said, not summed
            rows.append({"design": fmts["design"], "role": role,
                         "gemms": int(part["reps"].sum()) if role != "optimizer" else 0,
                         "macs": float(part["macs"].sum()), "time_s": float(part["time_s"].sum(skipna=skip)),
                         "energy_j": float(part["energy_j"].sum(skipna=skip)),
                         "dram_bytes": float(part["dram_bytes"].sum(skipna=skip)),
                         "formats": ",".join(f"{k}={fmts[f'format_{k}']}" for k in ("act", "weight", "acc", "out")),
                         "note": "; ".join(filter(None, part["note"].unique()))})
    df = pd.DataFrame(rows)
    total = df.groupby("design", sort=False)[["gemms", "macs", "time_s", "energy_j", "dram_bytes"]].sum()
    # GEMMs in formats the design does not execute (NaN, with a note) leave the total unknown
    unpriced = df[(df["role"] != "optimizer") & df["time_s"].isna()]["design"].unique()
    total.loc[total.index.isin(unpriced), ["time_s", "energy_j", "dram_bytes"]] = float("nan")
    total = total.reset_index().assign(role="total", formats="", note="")
    return pd.concat([df, total], ignore_index=True)


def _not_priced(r, role: str, design, fmts: dict, err: Exception) -> dict:
    """A GEMM row the design cannot run in its role's formats (asicsim.hw.native): NaN, with why."""
    nan = float("nan")
    return {"design": getattr(design, "name", str(design)), "role": role, "kind": "gemm", "M": int(r.M),
            "N": int(r.N), "K": int(r.K), "reps": float(r.batch * r.count), "macs": float(r.macs),
            "time_s": nan, "energy_j": nan, **dict.fromkeys(_ENERGY_COLUMNS, nan), "dram_bytes": nan,
            "sram_bytes": nan, "bound": "", "utilization": nan,
            **{f"format_{k}": v for k, v in fmts.items()}, "note": f"not priced: {err}"}


def _price_update(row, design, policy) -> dict:
    """The optimizer's elementwise update of every parameter (reads weight, gradient and state)."""
    fmts = _update_formats(policy)
    out = {"role": "optimizer", "kind": "elementwise", "M": int(row.M), "N": 1, "K": int(row.K), "reps": 1.0,
           "macs": 0.0, **{f"format_{k}": v for k, v in fmts.items()}, "note": ""}
    try:
        (r,) = cost_many([Elementwise(int(row.M), int(row.K), inputs=3)], design, fmts)
    except OperationError as err:  # e.g. a design without a vector unit: said, not hidden
        nan = float("nan")
        return {**out, "design": getattr(design, "name", str(design)), "time_s": nan, "energy_j": nan,
                "dram_bytes": nan, "sram_bytes": nan, "bound": "", "utilization": nan,
                "note": f"update not priced: {err}"}
    return {**out, "design": r.design, "time_s": r.time_s, "energy_j": r.energy_total_pj * 1e-12,
            **_energy_columns(r.energy_pj), "dram_bytes": r.dram_bytes, "sram_bytes": r.sram_array_bytes,
            "bound": r.bound, "utilization": r.utilization}
