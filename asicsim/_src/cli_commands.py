"""The commands other layers register on ``asicsim`` (their options live beside their models), each
with the one line ``asicsim --help`` lists and the module whose ``add_cli`` registers it.

``asicsim --help`` lists these lines without importing the modules (they load the cost model,
numpy or JAX); a command's module is imported only when that command runs or its own ``--help`` is
asked for (:func:`asicsim.cli.build_parser`).
"""

from __future__ import annotations

#: command -> (the module whose ``add_cli(subparsers)`` registers it, its one-line help)
LAYER_COMMANDS = {
    "cost": ("asicsim._src.cost_cli",
             "price operations on a design (physical model), or reproduce SCALE-Sim from its files"),
    "trace": ("asicsim._src.cost_cli", "price a workload's op trace (one training step) under a recipe on designs"),
    "batching": ("asicsim._src.system.batching_cli", "dynamic batching of inference requests under a latency budget"),
    "scaling": ("asicsim._src.system.scaling_cli",
                "data-parallel training across chips: step time, strong/weak scaling, all-reduce"),
    "train": ("asicsim._src.workloads.cli",
              "train a real workload under a precision recipe (accuracy, divergence, numerics)"),
    "infer": ("asicsim._src.workloads.cli",
              "post-training quantization: the fp32-trained workload evaluated under a recipe"),
    "corpus": ("asicsim._src.workloads.speech_corpus_stats",
               "speech corpus statistics: hours, voices, words, OOV rate, test/train overlap, baselines"),
    "sweep": ("asicsim._src.sweep.cli", "run a sweep spec (recipes x designs x workloads) into a results directory"),
    "report": ("asicsim._src.report.cli",
               "turn a sweep's results directory into a self-contained HTML report (+ Markdown, CSV)"),
    "demo": ("asicsim._src.report.cli",
             "the main job: a small sweep (6 recipes x 5 designs x 3 workloads) and its HTML report"),
}


def command_help(name: str) -> str:
    """The one-line help of a layer's command, as ``asicsim --help`` lists it."""
    return LAYER_COMMANDS[name][1]
