"""What 16-point Hadamard rotations of every GEMM's activation and weight cost in one training step
of the character transformer (issue 34 item 3): fp8 E4M3 per-tensor operands with and without
``rotation = 16`` (QuaRot-style; the backward GEMMs reading the same roles rotate too), the op
trace's rotation work (elements x log2 16 additions, asicsim._src.emulate.rotation_trace) priced on an
H100 and on TPU v4. Usage: ``python benchmarks/rotation_cost.py``."""

from __future__ import annotations

from asicsim._src.emulate import load_recipe
from asicsim._src.emulate.recipe_toml import recipe_table
from asicsim._src.workloads.pricing import price_trace, workload_trace

WORKLOAD, DESIGNS = "charlm_transformer", ("gpu_h100", "tpu_v4")


def recipes() -> dict[str, dict]:
    base = recipe_table(load_recipe("fp8_hybrid"))  # E4M3 forward, E5M2 gradients, bf16 outputs
    plain = {**base, "name": "fp8_tensor", "roles": {**base["roles"], **{
        r: {"format": "fp8_e4m3", "scaling": "tensor"} for r in ("act", "weight")}}}
    rotated = {**plain, "name": "fp8_tensor_rot16", "roles": {**plain["roles"], **{
        r: {"format": "fp8_e4m3", "scaling": "tensor", "rotation": 16} for r in ("act", "weight")}}}
    return {"plain": plain, "rotated": rotated}


def main() -> None:
    totals = {}
    for label, rec in recipes().items():
        tr = workload_trace(WORKLOAD, rec)
        rot = tr[tr.work == "rotation"]
        adds = float((rot.elements_out * rot.ops * rot["count"] * rot.batch).sum())
        print(f"{label}: {len(rot)} rotation rows, {adds:.4g} additions, {float(tr.macs.sum()):.4g} MACs")
        for d in DESIGNS:
            t = price_trace(tr, [d], rec)
            totals[label, d] = t[t.role == "total"].iloc[0]
    for d in DESIGNS:
        a, b = totals["rotated", d], totals["plain", d]
        print(f"{d}: time {b.time_s * 1e3:.4f} -> {a.time_s * 1e3:.4f} ms (+{(a.time_s / b.time_s - 1) * 100:.2f} %), "
              f"energy {b.energy_j:.4f} -> {a.energy_j:.4f} J (+{(a.energy_j / b.energy_j - 1) * 100:.2f} %)")


if __name__ == "__main__":
    main()
