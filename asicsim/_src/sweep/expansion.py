"""A sweep spec's points: :func:`expand` (see :mod:`asicsim._src.sweep.spec` for the spec and how a
point's identity is computed)."""

from __future__ import annotations

from typing import Any

from asicsim._src.hw.objectives import DEFAULT_OBJECTIVE
from asicsim._src.sweep.point_identity import Point, canon, content_key, identity
from asicsim._src.sweep.spec import SweepSpec


def same_content(entries: list[tuple[str, Any]]) -> list[tuple[str, str]]:
    """Entries of the spec (label, content key) as (the first label of each distinct content, the
    label its points carry): entries of one content are one point, labelled with every name the
    spec gave it in spec order (``bf16 = my_bf16_copy.toml``), so no label the user wrote vanishes."""
    names: dict = {}
    for label, key in entries:
        if label not in names.setdefault(key, []):
            names[key].append(label)
    return [(labels[0], " = ".join(labels)) for labels in names.values()]


def expand(spec: SweepSpec) -> list[Point]:
    """The spec's points, in a stable order: training and inference first (the long ones), then
    costs and kernels. Entries of the same content (a recipe and its copy, a design by name and
    by path) make one point whose label names them all (:func:`same_content`)."""
    points: list[Point] = []
    recipe_obj = {r: spec.recipe(r) for r in spec.recipes + spec.infer_recipes}
    recipe_key = {r: content_key("recipe", obj) for r, obj in recipe_obj.items()}
    recipes_of = {kind: same_content([(r, recipe_key[r]) for r in names])
                  for kind, names in (("train", spec.recipes), ("infer", spec.infer_recipes))}
    design_text = {label: canon(d) for label, d in spec.designs}  # once per design, not per point
    designs = same_content(list(design_text.items()))
    workload_label = dict(same_content([(w["label"], w["key"]) for w in spec.workloads]))
    shown = {w["key"]: workload_label[w["label"]] for w in spec.workloads if w["label"] in workload_label}
    for w in spec.workloads:
        wl = w["workload"]
        wid = {"workload": canon(wl)}
        base = {"workload": w["key"]}  # the job runs the workload of this content, whatever its name
        for kind in ("train", "infer"):
            if kind not in w["run"]:
                continue
            for r, r_label in recipes_of[kind]:
                for s in spec.seeds:
                    pid = identity({"kind": kind, **wid, "recipe": canon(recipe_obj[r]), "seed": s})
                    labels = {"workload": shown[w["key"]], "recipe": r_label, "seed": s}
                    # inference points of one (workload, seed) share the fp32-trained model
                    group = identity({"group": "infer", **wid, "seed": s}) if kind == "infer" else ""
                    points.append(Point(pid, kind, labels, {**base, "recipe": r, "recipe_key": recipe_key[r],
                                                            "seed": s}, group))
    for w in spec.workloads:
        if "cost" not in w["run"]:
            continue
        wid = {"workload": canon(w["workload"])}
        phases = ["train"] if "train" in w["run"] or "infer" not in w["run"] else []
        phases += ["infer"] if "infer" in w["run"] else []
        for phase in phases:
            for r, r_label in recipes_of[phase]:
                group = identity({"group": "cost", **wid, "recipe": canon(recipe_obj[r]), "phase": phase})
                for label, d_label in designs:
                    # the mapping objective is an input: results under another default are other points
                    pid = identity({"kind": "cost", **wid, "recipe": canon(recipe_obj[r]), "phase": phase,
                                    "design": design_text[label], "objective": DEFAULT_OBJECTIVE})
                    labels = {"workload": shown[w["key"]], "recipe": r_label, "phase": phase, "design": d_label}
                    inputs = {"workload": w["key"], "recipe": r, "recipe_key": recipe_key[r],
                              "phase": phase, "design": label}
                    points.append(Point(pid, "cost", labels, inputs, group))
    for k in spec.kernels:
        group = identity({"group": "kernels", **k})
        for label, d_label in designs:
            pid = identity({"kind": "kernels", **k, "design": design_text[label], "objective": DEFAULT_OBJECTIVE})
            labels = {"suite": k["suite"], "precision": k["precision"], "formats": k["formats"], "design": d_label}
            points.append(Point(pid, "kernels", labels, {**k, "design": label}, group))
    ids = [p.id for p in points]
    if len(set(ids)) != len(ids):  # one workload's content in two entries that run the same kinds: one label
        seen: set = set()
        points = [p for p in points if not (p.id in seen or seen.add(p.id))]
    return points
