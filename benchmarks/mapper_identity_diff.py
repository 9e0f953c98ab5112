"""Which figures two ``benchmarks/mapper_identity.py --save`` files differ in, and whether every
schedule that changed is no worse on its own objective (issue 31: a change that widens the
mapper's space, such as folds smaller than the array, may only improve each choice).

    python benchmarks/mapper_identity_diff.py OLD.npz NEW.npz

Per case (``many/<design>/<network>/<objective>``, ``grid/<design>/<objective>``,
``sweep/<format>/<objective>``) and element (design point x operation) whose ``schedule.*`` or
measures differ:
``latency`` compares cycles (compute, fill/drain, stall, sync), ``energy`` the sum of the energy
components, ``dram`` the DRAM bytes; each new value must be at most the old one (relative 1e-9).
``balanced`` (the least energy within 5 % of the fastest candidate) is reported, not held: a
faster fastest candidate can move its window. Exits 1 where a held objective got worse.
"""

from __future__ import annotations

import sys
from collections import defaultdict

import numpy as np


def measures(f: dict, case: str) -> dict:
    g = lambda k: np.asarray(f[f"{case}|{k}"], dtype=np.float64)  # noqa: E731
    cycles = g("cycles_compute") + g("cycles_fill_drain") + g("cycles_stall") + g("cycles_sync")
    energy = sum(g(k.split("|", 1)[1]) for k in f if k.startswith(f"{case}|energy."))
    dram = sum(g(k.split("|", 1)[1]) for k in f if k.startswith(f"{case}|traffic.dram.") and k.endswith("_bytes"))
    return {"latency": cycles, "energy": energy, "dram": dram}


def main() -> None:
    old, new = (dict(np.load(p)) for p in sys.argv[1:3])
    cases = sorted({k.split("|", 1)[0] for k in old if not k.endswith("|error")})
    names = {k.split("|", 1)[1] for k in old}
    only = sorted(set(new) - set(old))
    print(f"{len(only)} arrays only in the new file (fields it adds), e.g. {only[:2]}")
    differ = defaultdict(int)
    for k in sorted(set(old) & set(new)):
        a, b = old[k], new[k]
        if a.shape != b.shape or not np.array_equal(a, b, equal_nan=a.dtype.kind == "f"):
            differ[k.split("|", 1)[1]] += 1
    print(f"{sum(differ.values())} of {len(old)} arrays differ; by figure:",
          ", ".join(f"{n} {c}" for n, c in sorted(differ.items(), key=lambda x: -x[1])))
    worse, changed, better = [], defaultdict(int), defaultdict(list)
    for case in cases:
        objective = case.split("/")[-1] if not case.endswith("/again") else case.split("/")[-2]
        sched = [n for n in names if n.startswith("schedule.")]
        moved = np.zeros(np.shape(old[f"{case}|cycles_compute"]), dtype=bool)
        for n in sched:
            a, b = old[f"{case}|{n}"], new[f"{case}|{n}"]
            moved |= ~((a == b) | (np.isnan(a) & np.isnan(b)))
        mo, mn = measures(old, case), measures(new, case)
        for key in mo:  # a fold or a smaller GEMM of an operation may change with its schedule's tiles
            moved |= mo[key] != mn[key]
        if not moved.any():
            continue
        changed[objective] += int(moved.sum())
        for key in ("latency", "energy", "dram"):
            ratio = np.where(moved, mn[key] / np.where(mo[key] > 0, mo[key], 1.0), 1.0)
            better[(objective, key)].append(ratio[moved])
        if objective in ("latency", "energy", "dram"):
            bad = moved & (mn[objective] > mo[objective] * (1 + 1e-9))
            if bad.any():
                worse.append((case, int(bad.sum()), float(np.max(mn[objective][bad] / mo[objective][bad]))))
    for objective, n in changed.items():
        parts = []
        for key in ("latency", "energy", "dram"):
            r = np.concatenate(better[(objective, key)])
            parts.append(f"{key} new/old min {r.min():.4f} max {r.max():.4f}")
        print(f"objective {objective}: {n} elements changed schedule; " + "; ".join(parts))
    for w in worse:
        print("WORSE on its objective:", w)
    print("every changed schedule no worse on its objective" if not worse else f"{len(worse)} cases worse")
    sys.exit(1 if worse else 0)


if __name__ == "__main__":
    main()
