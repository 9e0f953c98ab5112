"""Run ZigZag's LOMA search on its shipped tpu_like example and ResNet-18; write one CSV row per layer.

Runs only under the side environment that has ``zigzag-dse`` installed (never asicsim's), e.g.::

    /work/zz-venv/bin/python benchmarks/zigzag/run_zigzag.py --out benchmarks/zigzag/zigzag_resnet18.csv

The stage list is ``zigzag.api.get_hardware_performance_zigzag`` (zigzag-dse 3.9.1, opt="energy",
lpf_limit=6, nb_spatial_mappings_generated=3, loma, uneven) with one stage added after ``WorkloadStage``
that times each layer's search (spatial + temporal mapping generation and the cost model), so the CSV
holds the wall time and the CPU time (``time.process_time``, less sensitive to a shared machine)
ZigZag spends per layer. Inputs are the package's own ``inputs/hardware/tpu_like.yaml``,
``inputs/mapping/tpu_like.yaml`` and ``inputs/workload/resnet18.onnx`` (``--workload alexnet``: its
``alexnet.onnx``, the held-back network of issue 31 item 5).
"""

import argparse
import csv
import datetime
import logging
import os
import platform
import sys
import tempfile
import time
from typing import ClassVar

import zigzag
from zigzag.stages.evaluation.cost_model_evaluation import CostModelStage
from zigzag.stages.main import MainStage
from zigzag.stages.mapping.spatial_mapping_generation import SpatialMappingGeneratorStage
from zigzag.stages.mapping.temporal_mapping_generator_stage import TemporalMappingGeneratorStage
from zigzag.stages.parser.accelerator_parser import AcceleratorParserStage
from zigzag.stages.parser.onnx_model_parser import ONNXModelParserStage
from zigzag.stages.results.reduce_stages import MinimalEnergyStage, MinimalLatencyStage
from zigzag.stages.stage import Stage
from zigzag.stages.workload_iterator import WorkloadStage

try:
    from importlib.metadata import version as _version

    ZIGZAG_VERSION = _version("zigzag-dse")
except Exception:  # pragma: no cover - metadata missing only in odd installs
    ZIGZAG_VERSION = "unknown"

PKG = os.path.dirname(zigzag.__file__)
HARDWARE = os.path.join(PKG, "inputs", "hardware", "tpu_like.yaml")
MAPPING = os.path.join(PKG, "inputs", "mapping", "tpu_like.yaml")
WORKLOADS = ("resnet18", "alexnet", "mobilenetv2")  # the .onnx files the package ships in inputs/workload/
DIMS = ("B", "K", "C", "OY", "OX", "FY", "FX", "G")
DIRS = ("rd_out_to_low", "wr_in_by_low", "rd_out_to_high", "wr_in_by_high")


class TimingStage(Stage):
    """Times the sub-stages of one layer: from the start of its search to its best CME."""

    TIMES: ClassVar[dict] = {}  # layer id -> (wall, CPU) seconds

    def run(self):
        layer = self.kwargs["layer"]
        t0, c0 = time.perf_counter(), time.process_time()
        sub = self.list_of_callables[0](self.list_of_callables[1:], **self.kwargs)
        for cme, extra in sub.run():
            TimingStage.TIMES[layer.id] = (time.perf_counter() - t0, time.process_time() - c0)
            yield cme, extra
            t0, c0 = time.perf_counter(), time.process_time()


def _row(cme, layer, times):
    row = {"layer_id": layer.id, "name": layer.name, "type": layer.type}
    sizes = layer.layer_dim_sizes
    for d in DIMS:
        row[d] = next((int(sizes[k]) for k in sizes.layer_dims if k.name == d), 1)
    row["relations"] = "; ".join(str(r) for r in layer.dimension_relations)
    row["padding"] = repr({str(k): tuple(int(x) for x in v) for k, v in layer.padding.data.items()})
    pr = layer.pr_layer_dim_sizes
    for d in ("IY", "IX"):
        row[d] = next((int(pr[k]) for k in pr.layer_dims if k.name == d), 0) if pr else 0
    row["precision"] = repr({str(k): int(v) for k, v in layer.operand_precision.data.items()})
    row["macs"] = int(layer.total_mac_count)
    row["energy_total_pj"] = float(cme.energy_total)
    row["mac_energy_pj"] = float(cme.mac_energy)
    row["mem_energy_pj"] = float(cme.mem_energy)
    levels = {}
    for op, per_level in cme.mem_energy_breakdown.items():
        mem_op = cme.memory_operand_links.layer_to_mem_op(op)
        names = [lv.name for lv in cme.accelerator.memory_hierarchy.get_memory_levels(mem_op=mem_op)]
        for name, e, acc in zip(names, per_level, cme.memory_word_access[op], strict=False):
            levels[f"{op}@{name}"] = {
                "energy_pj": float(e),
                **{d: int(acc.get(dd)) for d, dd in zip(DIRS, _dirs(), strict=True)},
            }
    row["mem_levels"] = repr(levels)
    row["latency_total2_cycles"] = float(cme.latency_total2)
    row["latency_total0_cycles"] = float(cme.latency_total0)
    row["ideal_cycle"] = float(cme.ideal_cycle)
    row["ideal_temporal_cycle"] = float(cme.ideal_temporal_cycle)
    row["data_onloading_cycles"] = float(cme.latency_total1 - cme.latency_total0)
    row["data_offloading_cycles"] = float(cme.latency_total2 - cme.latency_total1)
    row["spatial_mapping"] = str(cme.spatial_mapping).replace("\n", " ")
    row["temporal_mapping"] = str(cme.temporal_mapping).replace("\n", " | ")
    row["wall_s"], row["cpu_s"] = (float(x) for x in times)
    return row


def _dirs():
    from zigzag.mapping.data_movement import DataDirection

    return (
        DataDirection.RD_OUT_TO_LOW,
        DataDirection.WR_IN_BY_LOW,
        DataDirection.RD_OUT_TO_HIGH,
        DataDirection.WR_IN_BY_HIGH,
    )


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="CSV to write")
    ap.add_argument("--opt", default="energy", choices=("energy", "latency"))
    ap.add_argument("--lpf-limit", type=int, default=6, help="LOMA lpf_limit (api default 6)")
    ap.add_argument("--workload", default="resnet18", choices=WORKLOADS, help="the package's own inputs/workload/<name>.onnx")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    reduce_stage = MinimalEnergyStage if args.opt == "energy" else MinimalLatencyStage
    with tempfile.TemporaryDirectory() as dump:
        stages = [
            ONNXModelParserStage,
            AcceleratorParserStage,
            WorkloadStage,
            TimingStage,
            reduce_stage,
            SpatialMappingGeneratorStage,
            reduce_stage,
            TemporalMappingGeneratorStage,
            CostModelStage,
        ]
        t0 = time.perf_counter()
        main_stage = MainStage(
            list_of_callables=stages,
            accelerator=HARDWARE,
            workload=os.path.join(PKG, "inputs", "workload", f"{args.workload}.onnx"),
            mapping=MAPPING,
            dump_folder=dump,
            pickle_filename=os.path.join(dump, "cmes.pickle"),
            loma_lpf_limit=args.lpf_limit,
            loma_show_progress_bar=False,
            nb_mappings_generated=3,
            enable_mix_spatial_mapping_generation=False,
            access_same_data_considered_as_no_access=True,
            temporal_mapping_type=__import__(
                "zigzag.mapping.temporal_mapping", fromlist=["TemporalMappingType"]
            ).TemporalMappingType("uneven"),
        )
        results = main_stage.run()
        total = time.perf_counter() - t0
    rows = [_row(cme, layer, TimingStage.TIMES.get(layer.id, (float("nan"),) * 2)) for cme, (layer, _) in results]
    with open(args.out, "w", newline="") as f:
        f.write(f"# zigzag-dse {ZIGZAG_VERSION}, LOMA, opt={args.opt}, lpf_limit={args.lpf_limit}, uneven, "
                f"nb_spatial_mappings_generated=3; inputs: zigzag/inputs/hardware/tpu_like.yaml, "
                f"inputs/mapping/tpu_like.yaml, inputs/workload/{args.workload}.onnx\n")
        f.write(f"# command: {sys.executable} benchmarks/zigzag/run_zigzag.py "
                f"{' '.join(argv if argv is not None else sys.argv[1:])}\n")
        f.write(f"# date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M UTC}; machine: "
                f"{platform.processor() or platform.machine()}, {os.cpu_count()} cpus, python "
                f"{platform.python_version()}; total wall {total:.1f} s\n")
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print(f"wrote {len(rows)} layers to {args.out} in {total:.1f} s")


if __name__ == "__main__":
    main()
