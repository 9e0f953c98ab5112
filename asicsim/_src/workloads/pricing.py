"""Price what a training workload runs: its op trace under a recipe, on systolic designs and GPUs.

``workload_trace`` traces one training step (or one inference batch) of a workload under a recipe
with :func:`asicsim.op_trace` (shapes only, nothing is computed); ``trace_costs`` prices
each of its rows on a design (time, energy split, traffic, bound) and ``price_trace`` sums them per role,
pricing each group of rows in the formats its role uses with one call on a group of designs
(:func:`trace_price`: :func:`asicsim._src.hw.family.cost_designs`, one typed price per group):

============ ================ ================ ============
trace role   A operand        B operand        output
============ ================ ================ ============
forward      ``act``          ``weight``       ``out``
grad-input   ``grad`` (dY)    ``weight``       ``grad_out``
grad-weight  ``act`` (X^T)    ``grad`` (dY)    ``wgrad``
============ ================ ================ ============

Each row counts ``batch * count`` independent GEMMs (batched dimensions and scan steps), priced as
GEMMs (a convolution by its im2col shape). Rows of kind ``elementwise`` are the model's other
work (activations, pooling, normalisation, bias adds, the loss: :mod:`asicsim._src.emulate.elementwise_trace`),
``count`` times each, priced as :class:`~asicsim._src.hw.operations.Elementwise` on the design's vector
unit (a GPU's SIMT cores) in the role's act/out formats; training mirrors them as ``grad-input``
rows (an estimate, see :func:`asicsim._src.emulate.trace.trace_frame`). A training trace ends with one
``optimizer`` row: the update's elementwise work on every parameter (:data:`OPTIMIZER_OPS` per
parameter) in the master/weight format. A design with no vector unit prices all of this at zero
and says so in the row's ``note``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from asicsim._src.emulate import load_recipe, op_trace
from asicsim._src.hw.cost import scheduled_for
from asicsim._src.hw.design_files import labelled_designs
from asicsim._src.hw.objectives import DEFAULT_OBJECTIVE
from asicsim._src.hw.power import derived_power
from asicsim._src.hw.scopes import SCOPE_ENERGY_KEYS
from asicsim._src.workloads import tasks
from asicsim._src.workloads.speech_layers import with_running
from asicsim._src.workloads.trace_price import TracePrice as TracePrice
from asicsim._src.workloads.trace_price import trace_price
from asicsim._src.workloads.training import build
from asicsim._src.workloads.workload import load_workload

#: Elementwise operations per parameter of one update (multiplies, adds, divides, square roots):
#: SGD w -= lr g (2); SGD with momentum m = mu m + g; w -= lr m (4); Adam m, v moments (5),
#: bias corrections (2), sqrt, add eps, divide, scale and subtract (5) = 12.
OPTIMIZER_OPS = {"sgd": 2, "sgd_momentum": 4, "adam": 12}


def workload_trace(workload, recipe="fp32", *, batch: int | None = None, training: bool = True) -> pd.DataFrame:
    """The op trace of one training step (``training``) or one inference batch of ``workload``."""
    w = load_workload(workload).replace(batch=batch)  # a batch is checked as the workload's own
    policy = load_recipe(recipe)
    data, model = build(w)
    b = w.batch
    params = model.init(0)
    n = len(data.x_train) - (w.context + 1 if data.task == "lm" else 0)  # examples (LM: window starts)
    idx = np.arange(b, dtype=np.int64) % max(n, 1)  # a priced batch may exceed the dataset: shapes only
    sample = tasks.batch_fn(data.task, w.context)(tasks.train_arrays(data), idx)
    if training:
        trace = op_trace(tasks.loss_fn(model, data.task), policy, params, sample, training=True, elementwise=True)
        opt = "sgd_momentum" if w.optimizer == "sgd" and w.momentum else w.optimizer
        update = {"role": "optimizer", "kind": "elementwise", "M": model.num_params(params), "N": 1,
                  "K": OPTIMIZER_OPS[opt], "batch": 1, "count": 1, "macs": 0, "recipe": policy.name}
        return pd.concat([trace, pd.DataFrame([update])], ignore_index=True)
    first = getattr(model, "running_init", None)  # a batch norm at inference: by its running statistics
    if first is not None:
        params = with_running(params, first)
    return op_trace(model.apply, policy, params, tasks.model_input(data.task, sample), elementwise=True)


def trace_costs(trace: pd.DataFrame, design, recipe="fp32", *, objective: str = DEFAULT_OBJECTIVE) -> pd.DataFrame:
    """One row per trace row on one design: the GEMM (or the elementwise work, or the optimizer
    update) priced in its role's formats, times its repetitions (``reps`` = batch x count):
    ``time_s``, ``energy_j`` and its split (``energy_mac_j``, ``energy_vector_j``,
    ``energy_buffers_j``, ``energy_dram_j``, ``energy_static_j``, ``energy_other_j``), the
    dynamic energy ``energy_dynamic_j`` (``energy_j`` less static, not another part), ``dram_bytes``, ``sram_bytes`` (between buffers and array), ``bound``, ``utilization``, a GPU's ``launch_fraction`` and ``sm_fraction`` (NaN elsewhere), the
    formats, ``work`` (elementwise rows), ``objective`` (what a systolic design's GEMMs were mapped
    for, :mod:`asicsim._src.hw.objectives`; ``fastest`` on a GPU) and a ``note`` (e.g. no vector unit:
    priced at zero)."""
    return trace_price(trace, [design], recipe, objective=objective).rows(0)


def unpriced_problem(costs: pd.DataFrame, recipe, design_name: str, workload_name: str) -> str | None:
    """What to say when some rows of ``costs`` (:func:`trace_costs`) were not priced (the design
    does not execute a format of the recipe), or None when every row was."""
    unpriced = costs[costs["time_s"].isna()]
    if not len(unpriced):
        return None
    why = str(unpriced.iloc[0]["note"]).removeprefix("not priced: ")
    return (f"recipe = {recipe!r} on design {design_name!r}: {len(unpriced)} op(s) of workload "
            f"{workload_name!r} are not priced ({why}); allowed: a recipe whose formats the design "
            "executes (--recipe), or another --design")


def trace_totals_family(trace: pd.DataFrame, designs, recipe="fp32", *,
                        objective: str = DEFAULT_OBJECTIVE) -> dict[str, np.ndarray]:
    """The trace's totals on every design of one family (:mod:`asicsim._src.hw.family`) in one
    vectorised pass (:meth:`TracePrice.totals`): the sums :func:`trace_costs` gives per design,
    every GEMM mapped for ``objective``."""
    return trace_price(trace, designs, recipe, objective=objective).totals()


#: The energies :func:`price_trace` sums: the total and its dynamic and static shares, and per scope.
_TOTALLED_ENERGY = ("energy_j", "energy_dynamic_j", "energy_static_j", *SCOPE_ENERGY_KEYS)


def price_trace(trace: pd.DataFrame, designs, recipe="fp32", *, objective: str = DEFAULT_OBJECTIVE) -> pd.DataFrame:
    """One row per (design, role): time, energy (total, dynamic, static) and DRAM bytes of the
    trace's GEMMs and elementwise work, summed (``gemms`` counts the GEMMs), and the ``objective``
    the design's schedules were chosen for (``fastest`` on a GPU)."""
    rows = []
    for label, design in labelled_designs(designs):  # the name or path as given
        priced = trace_price(trace, [design], recipe, objective=objective)  # the one typed price per part
        for role in priced.roles():
            parts = [part for part in priced.parts if part.role == role]
            tot = priced.totals(role)  # arrays over the one design
            rows.append({"design": label, "role": role,
                         "gemms": int(sum(part.reps.sum() for part in parts if part.kind == "gemm")),
                         "macs": float(sum(part.rows["macs"].sum() for part in parts)),
                         "time_s": float(tot["time_s"][0]), **{k: float(tot[k][0]) for k in _TOTALLED_ENERGY},
                         "dram_bytes": float(tot["dram_bytes"][0]),
                         "formats": ",".join(f"{k}={parts[0].formats[k]}" for k in ("act", "weight", "acc", "out")),
                         "objective": scheduled_for(design, objective),
                         "note": merged_notes(priced.notes(0, role)),
                         **{f"idle_power_{s}_w": priced.idle_power_w(0, s) for s in ("chip", "board")}})
    df = pd.DataFrame(rows)
    total = df.groupby("design", sort=False)[["gemms", "macs", "time_s", *_TOTALLED_ENERGY, "dram_bytes"]].sum()
    # GEMMs in formats the design does not execute (NaN, with a note) leave the total unknown
    unpriced = df[(df["role"] != "optimizer") & df["time_s"].isna()]["design"].unique()
    total.loc[total.index.isin(unpriced), ["time_s", *_TOTALLED_ENERGY, "dram_bytes"]] = float("nan")
    firsts = df.groupby("design", sort=False)[["idle_power_chip_w", "idle_power_board_w", "objective"]].first()
    total = total.join(firsts).reset_index().assign(role="total", formats="", note="")
    out = pd.concat([df, total], ignore_index=True)
    power = derived_power({k: out[k].to_numpy(dtype=float) for k in SCOPE_ENERGY_KEYS},
                          out["time_s"].to_numpy(dtype=float), out["macs"].to_numpy(dtype=float))
    return out.assign(**{k: v for k, v in power.items() if k not in SCOPE_ENERGY_KEYS})


def merged_notes(notes) -> str:
    """The ops' notes of one role, each said once: a note that another one already holds (an op
    with one caveat beside an op with that caveat and another) is not repeated."""
    unique = list(dict.fromkeys(n for n in notes if isinstance(n, str) and n))
    return "; ".join(n for n in unique if not any(n != m and n in m for m in unique))
