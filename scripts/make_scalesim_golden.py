"""Run the real SCALE-Sim 3.0.0 and store its per-layer report numbers as golden files for asicsim.

SCALE-Sim is NOT an asicsim dependency (it needs numpy < 2). Run this script with a side virtual
environment that has ``scalesim==3.0.0`` installed, from the repository root::

    python -m venv /tmp/scalesim-venv
    /tmp/scalesim-venv/bin/pip install scalesim==3.0.0 "numpy<2" pandas
    /tmp/scalesim-venv/bin/python scripts/make_scalesim_golden.py [--jobs 3] [--cpu-limit-s 300]
    /tmp/scalesim-venv/bin/python scripts/make_scalesim_golden.py --only grid_8x8,shipped_google/NCF
    /tmp/scalesim-venv/bin/python scripts/make_scalesim_golden.py --finalize

(``SCALESIM_DATA`` points at SCALE-Sim's configs/ and topologies/, default
data/scalesim (a copy of the shared reference data).) A full run takes about 20 CPU minutes (ResNet-18 on the 32x32 config
alone 450 CPU s); ``--only`` reruns some runs and merges them into the existing goldens;
``--finalize`` marks network layers missing from the CSV (a run stopped early) as unfinished.

It writes (small, committed) files under ``tests/hw/golden/``:

- ``scalesim_golden.csv``: one row per (run, layer): the design (array, dataflow, SRAM sizes, interface
  bandwidth mode), the layer in SCALE-Sim's conv form (GEMM layers as SCALE-Sim maps them: ifmap M x K,
  filter 1 x K, 1 channel, N filters, stride 1) and every number of COMPUTE_REPORT.csv and
  DETAILED_ACCESS_REPORT.csv under SCALE-Sim's own column names (BANDWIDTH_REPORT.csv is left out:
  its numbers are quotients of these).
- ``scalesim_runs.json``: one record per run: SCALE-Sim's CPU and wall seconds (networks: summed over
  their layers, each simulated as its own job), status ``ok`` or ``partial``: a layer that uses more
  than ``--cpu-limit-s`` CPU seconds, or ``--timeout-s`` wall seconds, is stopped, left out of the
  CSV and listed in ``unfinished_layer_ids``, its CPU seconds counted (so the total is a lower bound).
- ``inputs/``: the shipped configs and topologies the network runs read (copied unchanged, for the tests).

Regenerate when the SCALE-Sim version used as the reference changes, when the set of golden cases
changes, or when a test shows that a golden row is wrong; never to make a failing asicsim test pass.

Runs: SCALE-Sim's shipped configs (``shipped_scale.cfg``: 32x32 ws, 64 KiB SRAMs, CALC bandwidth;
``shipped_google.cfg``: 256x256 os, 6 MiB SRAMs, USER bandwidth 10) on the topologies alexnet,
Resnet18 (conv) and vit_s, NCF (GEMM); and a grid of small GEMMs and small convs (odd sizes,
smaller and larger than the array, windows that overhang the ifmap) on 8x8, 4x16 and 32x32 arrays,
all three dataflows, 8 MiB SRAMs, in both CALC and USER (bandwidth 10) modes; and the ``stall``
suite: USER mode with 1 and 2 KiB SRAMs (buffers overflow, reads miss, SCALE-Sim stalls) on 4x4,
8x8 and 4x16 arrays, interface bandwidths 1 and 10 (``--only stall_``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GOLDEN_DIR = REPO / "tests" / "hw" / "golden"
SHIPPED_DIR = Path(os.environ.get("SCALESIM_DATA", Path(__file__).resolve().parents[1] / "data" / "scalesim"))
NETWORKS = {"alexnet": "conv", "Resnet18": "conv", "vit_s": "gemm", "NCF": "gemm"}
SHIPPED_CONFIGS = ("shipped_scale", "shipped_google")

# Small GEMMs (M, N, K): sizes 1..70, below, at and above 4, 8, 16, 32.
GRID_GEMMS = [
    (1, 1, 1), (1, 7, 3), (3, 1, 5), (5, 6, 1), (7, 7, 7), (8, 8, 8), (9, 9, 9), (4, 16, 4),
    (16, 4, 16), (17, 3, 33), (31, 33, 2), (33, 31, 65), (64, 64, 64), (70, 1, 13), (1, 70, 29),
    (13, 70, 1), (65, 17, 9), (2, 45, 70), (70, 70, 70), (37, 12, 50), (23, 57, 11), (50, 9, 40),
]
# Small convs (H, W, Fh, Fw, C, N, stride): overhanging windows when stride does not divide H - F.
GRID_CONVS = [
    (7, 9, 3, 2, 3, 5, 2), (10, 10, 1, 1, 4, 6, 3), (8, 5, 3, 3, 2, 9, 4), (12, 11, 5, 4, 3, 7, 3),
    (9, 9, 3, 3, 1, 1, 1), (15, 13, 2, 3, 2, 33, 2), (6, 6, 6, 6, 3, 4, 1), (11, 14, 3, 5, 5, 3, 5),
]
GRID_ARRAYS = [(8, 8), (4, 16), (32, 32)]
# USER-mode runs whose buffers overflow, so SCALE-Sim's replay stalls (issue 31): small arrays, 1 and 2
# KiB SRAMs, interface bandwidths 1 and 10 words/cycle, the grid's layers that outgrow the buffers.
STALL_ARRAYS = [(4, 4), (8, 8), (4, 16)]
STALL_SRAM_KIB = (1, 2)
STALL_BANDWIDTHS = (1, 10)
STALL_GEMMS = [(17, 3, 33), (33, 31, 65), (64, 64, 64), (37, 12, 50), (23, 57, 11), (2, 45, 70)]
STALL_CONVS = [(15, 13, 2, 3, 2, 33, 2), (12, 11, 5, 4, 3, 7, 3), (11, 14, 3, 5, 5, 3, 5)]
DATAFLOWS = ("os", "ws", "is")
REPORT_FILES = ("COMPUTE_REPORT.csv", "DETAILED_ACCESS_REPORT.csv")

CFG_TEMPLATE = """[general]
run_name = {run_name}

[architecture_presets]
ArrayHeight:    {rows}
ArrayWidth:     {cols}
IfmapSramSzkB:   {ifmap_kib}
FilterSramSzkB:  {filter_kib}
OfmapSramSzkB:   {ofmap_kib}
IfmapOffset:    0
FilterOffset:   10000000
OfmapOffset:    20000000
Bandwidth : {bandwidth}
Dataflow : {dataflow}
ReadRequestBuffer: 32
WriteRequestBuffer: 32

[layout]
IfmapCustomLayout: False
IfmapSRAMBankBandwidth: {bandwidth}
IfmapSRAMBankNum: 1
IfmapSRAMBankPort: 2
FilterCustomLayout: False
FilterSRAMBankBandwidth: {bandwidth}
FilterSRAMBankNum: 1
FilterSRAMBankPort: 2

[sparsity]
SparsitySupport : false
SparseRep : ellpack_block
OptimizedMapping : false
BlockSize : 8
RandomNumberGeneratorSeed : 40

[run_presets]
InterfaceBandwidth: {mode}
UseRamulatorTrace: False
"""


def run_one(spec: dict) -> dict:
    """Run one SCALE-Sim job in this process; return its report rows and CPU seconds."""
    import pandas as pd
    from scalesim.scale_sim import scalesim

    work = Path(spec["workdir"])
    t_cpu, t_wall = time.process_time(), time.perf_counter()
    sim = scalesim(save_disk_space=True, verbose=False, config=spec["config"],
                   topology=spec["topology"], layout=spec["layout"],
                   input_type_gemm=spec["input_type"] == "gemm")
    sim.run_scale(top_path=str(work / "out"))
    cpu_s, wall_s = time.process_time() - t_cpu, time.perf_counter() - t_wall
    report_dir = work / "out" / sim.config.get_run_name()
    frames = []
    for name in REPORT_FILES:
        df = pd.read_csv(report_dir / name, skipinitialspace=True)
        frames.append(df.loc[:, ~df.columns.str.startswith("Unnamed")].set_index("LayerID"))
    report = pd.concat(frames, axis=1).reset_index()
    topo = sim.topo
    layers = []
    for lid in range(topo.get_num_layers()):
        p = topo.get_layer_params(lid)
        layers.append({"layer_name": p[0], "ifmap_h": p[1], "ifmap_w": p[2], "filter_h": p[3],
                       "filter_w": p[4], "channels": p[5], "num_filter": p[6], "stride": p[7]})
    return {"rows": report.to_dict(orient="records"), "layers": layers,
            "cpu_s": cpu_s, "wall_s": wall_s}


def write_topology(path: Path, kind: str, layers: list[tuple]) -> None:
    """Write a SCALE-Sim topology CSV (mandatory trailing comma on every line)."""
    if kind == "gemm":
        lines = ["Layer,M,N,K,"] + [f"g{i},{m},{n},{k}," for i, (m, n, k) in enumerate(layers)]
    else:
        lines = ["Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, "
                 "Num Filter, Strides,"]
        lines += [f"c{i},{','.join(str(v) for v in layer)}," for i, layer in enumerate(layers)]
    path.write_text("\n".join(lines) + "\n")


def read_cfg_design(cfg_path: Path) -> dict:
    """The design columns of a SCALE-Sim config (read with configparser, as SCALE-Sim does)."""
    import configparser

    cp = configparser.ConfigParser()
    cp.read(cfg_path)
    arch = cp["architecture_presets"]
    mode = cp["run_presets"]["InterfaceBandwidth"].strip()
    return {"rows": int(arch["ArrayHeight"]), "cols": int(arch["ArrayWidth"]),
            "dataflow": arch["Dataflow"].strip(), "ifmap_kib": int(arch["IfmapSramSzkB"]),
            "filter_kib": int(arch["FilterSramSzkB"]), "ofmap_kib": int(arch["OfmapSramSzkB"]),
            "bw_mode": mode, "bandwidth_words": int(arch["Bandwidth"].split(",")[0]),
            "ifmap_bank_bw_words": int(cp["layout"]["IfmapSRAMBankBandwidth"]),
            "filter_bank_bw_words": int(cp["layout"]["FilterSRAMBankBandwidth"])}


def make_jobs(tmp: Path) -> list[dict]:
    """All jobs: the grid runs, then the networks one layer per job, smallest networks first.

    SCALE-Sim simulates each layer with fresh objects, so a one-layer topology gives the same
    numbers as the layer inside its network; one job per layer keeps every layer that finishes
    when a big network does not finish within the limit, and a network's CPU seconds are the sum.
    """
    jobs = []
    layout = SHIPPED_DIR / "topologies" / "layout_dummy_test.csv"
    for cfg in SHIPPED_CONFIGS:
        for net, kind in NETWORKS.items():
            cfg_path = SHIPPED_DIR / "configs" / f"{cfg}.cfg"
            header, *body = (SHIPPED_DIR / "topologies" / f"{net}.csv").read_text().splitlines()
            body = [line for line in body if line.strip()]
            for lid, line in enumerate(body):
                topo = tmp / f"{net}_{lid}.csv"
                topo.write_text(header + "\n" + line + "\n")
                jobs.append({"suite": "shipped", "run": f"{cfg}/{net}", "layer_index": lid,
                             "config": str(cfg_path), "topology": str(topo),
                             "layout": str(layout), "input_type": kind,
                             "design": read_cfg_design(cfg_path)})
    for rows, cols in GRID_ARRAYS:
        for df in DATAFLOWS:
            for mode in ("CALC", "USER"):
                for kind, layers in (("gemm", GRID_GEMMS), ("conv", GRID_CONVS)):
                    name = f"grid_{rows}x{cols}_{df}_{mode}_{kind}"
                    d = tmp / name
                    d.mkdir()
                    cfg_path = d / "c.cfg"
                    cfg_path.write_text(CFG_TEMPLATE.format(
                        run_name=name, rows=rows, cols=cols, ifmap_kib=8192, filter_kib=8192,
                        ofmap_kib=8192, bandwidth=10, dataflow=df, mode=mode))
                    write_topology(d / "t.csv", kind, layers)
                    jobs.append({"suite": "grid", "run": name, "config": str(cfg_path),
                                 "topology": str(d / "t.csv"), "layout": str(layout),
                                 "input_type": kind, "design": read_cfg_design(cfg_path)})
    for rows, cols in STALL_ARRAYS:
        for df in DATAFLOWS:
            for kib in STALL_SRAM_KIB:
                for bw in STALL_BANDWIDTHS:
                    for kind, layers in (("gemm", STALL_GEMMS), ("conv", STALL_CONVS)):
                        name = f"stall_{rows}x{cols}_{df}_{kib}k_bw{bw}_{kind}"
                        d = tmp / name
                        d.mkdir()
                        cfg_path = d / "c.cfg"
                        cfg_path.write_text(CFG_TEMPLATE.format(
                            run_name=name, rows=rows, cols=cols, ifmap_kib=kib, filter_kib=kib,
                            ofmap_kib=kib, bandwidth=bw, dataflow=df, mode="USER"))
                        write_topology(d / "t.csv", kind, layers)
                        jobs.append({"suite": "stall", "run": name, "config": str(cfg_path),
                                     "topology": str(d / "t.csv"), "layout": str(layout),
                                     "input_type": kind, "design": read_cfg_design(cfg_path)})
    size_order = {"vit_s": 1, "NCF": 2, "alexnet": 3, "Resnet18": 4}  # small first: grid, then nets
    jobs.sort(key=lambda j: size_order.get(j["run"].split("/")[-1], 0))
    return jobs


def run_records(job_records: list[dict]) -> list[dict]:
    """One record per run: CPU/wall seconds summed over its jobs; status ok only if all finished."""
    by_run: dict[str, list[dict]] = {}
    for rec in job_records:
        by_run.setdefault(rec["run"], []).append(rec)
    out = []
    for recs in by_run.values():
        first = {k: v for k, v in recs[0].items() if k not in ("status", "layer_index", "error")}
        failed = sorted(r.get("layer_index", -1) for r in recs if r["status"] != "ok")
        first.update(
            status="ok" if not failed else "partial", jobs=len(recs),
            cpu_s=round(sum(r.get("cpu_s", 0.0) for r in recs), 3),
            wall_s=round(sum(r.get("wall_s", 0.0) for r in recs), 3),
            num_layers=sum(r.get("num_layers", 0) for r in recs))
        if failed:
            first["unfinished_layer_ids"] = failed
            first["note"] = ("cpu_s includes the CPU seconds the unfinished layers had used when "
                             "stopped, so it is a lower bound on SCALE-Sim's time for the run")
        out.append(first)
    return out


def write_outputs(rows: list[dict], runs: list[dict], args, merge: bool) -> None:
    """(Re)write the golden CSV and run record; with ``merge``, keep other runs' existing rows."""
    import pandas as pd

    GOLDEN_DIR.mkdir(parents=True, exist_ok=True)
    csv_path, json_path = GOLDEN_DIR / "scalesim_golden.csv", GOLDEN_DIR / "scalesim_runs.json"
    frame = pd.DataFrame(rows)
    runs = run_records(runs)
    old_runs: list[dict] = []
    if merge and csv_path.exists():
        done = {r["run"] for r in runs}
        old = pd.read_csv(csv_path)
        frame = pd.concat([old[~old["run"].isin(done)], frame], ignore_index=True)
        old_runs = [r for r in json.loads(json_path.read_text())["runs"] if r["run"] not in done]
    if len(frame):
        frame = frame.sort_values(["suite", "run", "LayerID"], kind="stable")
    frame.to_csv(csv_path, index=False)
    from importlib.metadata import version

    meta = {"scalesim_version": version("scalesim"), "numpy_version": version("numpy"),
            "python": sys.version.split()[0], "cpu_limit_s": args.cpu_limit_s,
            "generated_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "runs": sorted(old_runs + runs, key=lambda r: r["run"])}
    json_path.write_text(json.dumps(meta, indent=1) + "\n")


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a running process (Linux /proc; 0 where unavailable)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def finalize() -> None:
    """Mark in the run record every network layer the golden CSV lacks (e.g. after the generation
    was stopped at a deadline): such runs become ``partial`` with ``unfinished_layer_ids``."""
    import pandas as pd

    json_path = GOLDEN_DIR / "scalesim_runs.json"
    meta = json.loads(json_path.read_text())
    frame = pd.read_csv(GOLDEN_DIR / "scalesim_golden.csv")
    recorded = {r["run"] for r in meta["runs"]}
    for cfg in SHIPPED_CONFIGS:
        for net in NETWORKS:
            run = f"{cfg}/{net}"
            if run not in recorded:
                meta["runs"].append({"suite": "shipped", "run": run, "jobs": 0, "cpu_s": 0.0,
                                     **read_cfg_design(SHIPPED_DIR / "configs" / f"{cfg}.cfg")})
    for rec in meta["runs"]:
        if rec["suite"] != "shipped":
            continue
        net = rec["run"].split("/")[1]
        body = [ln for ln in (SHIPPED_DIR / "topologies" / f"{net}.csv").read_text().splitlines()[1:]
                if ln.strip()]
        missing = sorted(set(range(len(body))) - set(frame.loc[frame.run == rec["run"], "LayerID"]))
        if missing:
            rec.update(status="partial", unfinished_layer_ids=missing,
                       note="layers not in the golden CSV were stopped or never started; cpu_s "
                            "covers only the layers that finished, so it is a lower bound")
    meta["runs"].sort(key=lambda r: r["run"])
    json_path.write_text(json.dumps(meta, indent=1) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2, help="SCALE-Sim runs in parallel")
    ap.add_argument("--cpu-limit-s", type=float, default=700.0, help="CPU seconds per SCALE-Sim run")
    ap.add_argument("--timeout-s", type=float, default=5400.0, help="wall seconds per SCALE-Sim run")
    ap.add_argument("--only", default="",
                    help="comma-separated substrings: run only the jobs whose run name contains one "
                         "(the results are merged into the existing goldens)")
    ap.add_argument("--finalize", action="store_true",
                    help="only mark network layers missing from the golden CSV as unfinished")
    ap.add_argument("--one", help=argparse.SUPPRESS)  # internal: run one job spec (JSON) and print
    args = ap.parse_args()
    if args.one:
        print("RESULT " + json.dumps(run_one(json.loads(args.one))))
        return
    if args.finalize:
        finalize()
        return


    tmp = Path(tempfile.mkdtemp(prefix="scalesim_golden_"))
    only = [x for x in args.only.split(",") if x] or [""]
    jobs = [j for j in make_jobs(tmp) if any(x in j["run"] for x in only)]
    running: list[tuple[dict, subprocess.Popen, float]] = []
    rows, runs = [], []
    pending = list(jobs)
    while pending or running:
        while pending and len(running) < args.jobs:
            job = pending.pop(0)
            job["workdir"] = str(tmp / ("w_" + job["run"].replace("/", "_")
                                        + str(job.get("layer_index", ""))))
            Path(job["workdir"]).mkdir(parents=True, exist_ok=True)
            proc = subprocess.Popen([sys.executable, __file__, "--one", json.dumps(job)],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            running.append((job, proc, time.perf_counter()))
        time.sleep(0.2)
        for item in list(running):
            job, proc, t0 = item
            if proc.poll() is None and time.perf_counter() - t0 < args.timeout_s and \
                    _cpu_seconds(proc.pid) < args.cpu_limit_s:
                continue
            running.remove(item)
            record = {"suite": job["suite"], "run": job["run"], **job["design"]}
            if "layer_index" in job:
                record["layer_index"] = job["layer_index"]
            if proc.poll() is None:
                used_cpu_s = _cpu_seconds(proc.pid)
                proc.kill()
                proc.communicate()
                record.update(status="timeout", cpu_s=round(used_cpu_s, 1),
                              wall_s=round(time.perf_counter() - t0, 1))
                print(f"TIMEOUT {job['run']}", flush=True)
            else:
                out, err = proc.communicate()
                lines = [ln for ln in out.splitlines() if ln.startswith("RESULT ")]
                if proc.returncode != 0 or not lines:
                    record.update(status="error", error=err[-2000:])
                    print(f"ERROR {job['run']}: {err[-500:]}", flush=True)
                else:
                    res = json.loads(lines[-1][len("RESULT "):])
                    record.update(status="ok", cpu_s=round(res["cpu_s"], 3),
                                  wall_s=round(res["wall_s"], 3), num_layers=len(res["layers"]))
                    for layer, rep in zip(res["layers"], res["rows"], strict=True):
                        if "layer_index" in job:
                            rep["LayerID"] = job["layer_index"]
                        rows.append({"suite": job["suite"], "run": job["run"],
                                     "input_type": job["input_type"], **job["design"],
                                     **layer, **rep})
                    print(f"ok {job['run']}: {res['cpu_s']:.1f} CPU s", flush=True)
            runs.append(record)
            write_outputs(rows, runs, args, merge=bool(args.only))

    inputs = GOLDEN_DIR / "inputs"
    inputs.mkdir(exist_ok=True)
    for cfg in SHIPPED_CONFIGS:
        shutil.copy(SHIPPED_DIR / "configs" / f"{cfg}.cfg", inputs)
    for net in NETWORKS:
        shutil.copy(SHIPPED_DIR / "topologies" / f"{net}.csv", inputs)
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"wrote {len(rows)} golden rows from {sum(r['status'] == 'ok' for r in runs)} runs")


if __name__ == "__main__":
    main()
