"""The report's last section, "Inputs: how to reproduce": the results directory and its point
counts, the versions that computed the results and that write the report, the sweep spec as
written and the inputs it resolved (designs, workloads, recipes as the sweep loaded them), and
the training settings the runs recorded."""

from __future__ import annotations

import json
import platform
from importlib import metadata

import pandas as pd

from asicsim._src.report.document import Code, Section, Table, Text
from asicsim._src.report.load import Results


def versions() -> dict[str, str]:
    """The versions of the environment writing the report (each point records its own too)."""
    out = {"python": platform.python_version()}
    for pkg in ("asicsim", "jax", "jaxlib", "numpy", "ml_dtypes", "pandas", "matplotlib"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def _computed_with(r: pd.DataFrame):
    """The versions each point recorded (python, asicsim, jax, numpy, ...), all distinct sets."""
    sets = [json.loads(x) for x in sorted(set(r["versions"].dropna().astype(str)))] if len(r) else []
    sets = [x for x in sets if x]
    if not sets:
        return Text("The points recorded no package versions (results written by an older asicsim).")
    pkgs = sorted({k for x in sets for k in x})
    df = pd.DataFrame({"package": pkgs,
                       "version": [", ".join(sorted({x.get(p, "?") for x in sets})) for p in pkgs]})
    return Table(df, "Versions that computed the results (as each point recorded them)", csv="versions_computed")


def inputs(res: Results, t: dict) -> Section:
    s = Section("inputs", "Inputs: how to reproduce")
    r = res.results
    ran = sorted(set(r["asicsim"].dropna().astype(str))) if len(r) else []
    s.add(Text(f"Results directory: {res.root.name}. Points: {len(r)} "
               f"({int((r['status'] == 'done').sum()) if len(r) else 0} done, "
               f"{int((r['status'] == 'diverged').sum()) if len(r) else 0} diverged, "
               f"{int((r['status'] == 'failed').sum()) if len(r) else 0} failed), computed with asicsim "
               f"{', '.join(ran) or 'unknown'}. Rerun with: asicsim sweep spec.toml --out DIR, then "
               "asicsim report DIR."))
    s.add(_computed_with(r))
    v = versions()
    s.add(Table(pd.DataFrame({"package": list(v), "version": list(v.values())}),
                "Versions of the environment that wrote this report", csv="versions"))
    s.add(Code(res.spec_text or "(no spec.toml in the results directory)", "The sweep spec (spec.toml)"))
    spec = res.spec
    if spec:
        recorded = ("design_objects", "workload_objects", "recipe_objects")
        brief = {k: v for k, v in spec.items() if k not in recorded}
        s.add(Code(json.dumps(brief, indent=1, sort_keys=True, default=str),
                   "Workloads, recipes, designs and kernels the sweep resolved (spec.json)"))
        for key, what in (("workload_objects", "workloads (after the spec's overrides)"),
                          ("recipe_objects", "recipes"), ("design_objects", "designs")):
            objs = spec.get(key) or {}
            if objs:
                text = (_recipes_toml(objs) if key == "recipe_objects"
                        else json.dumps(objs, indent=1, sort_keys=True, default=str))
                s.add(Code(text, f"The {len(objs)} {what} as the sweep loaded them"
                           + (", as recipe files (TOML)" if key == "recipe_objects" else "")
                           + " (a point's id hashes these, so a file changed since makes new points on a rerun)",
                           collapsed=True))
    else:
        s.add(Text("The results directory has no spec.json (resolved inputs)."))
    settings = _train_settings(res)
    if len(settings):
        s.add(Table(settings, "Training settings the runs recorded"))
    return s


def _recipes_toml(objs: dict) -> str:
    """The recipes a sweep recorded (their Policy repr, or a recipe table) as the TOML a user would
    write; one that cannot be read back is shown as recorded."""
    from asicsim._src.emulate.recipe_toml import policy_from_repr, recipe_toml
    from asicsim._src.emulate.recipes import policy_from_table

    out = []
    for name, obj in objs.items():
        try:
            text = recipe_toml(policy_from_repr(obj) if isinstance(obj, str) else policy_from_table(obj))
        except (TypeError, ValueError):  # RecipeError is a ValueError
            text = json.dumps(obj, indent=1, default=str) + "\n"
        out.append(f"# recipe {name}\n{text}")
    return "\n".join(out)


def _train_settings(res: Results) -> pd.DataFrame:
    r = res.results
    cols = ["workload", "recipe", "steps", "batch", "lr", "optimizer"]
    r = r[r["kind"] == "train"]
    if not len(r) or not set(cols) <= set(r.columns):
        return pd.DataFrame(columns=cols)
    return r[cols].drop_duplicates().sort_values(["workload", "recipe"], kind="stable").reset_index(drop=True)
