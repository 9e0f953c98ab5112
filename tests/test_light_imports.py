"""``asicsim --help``, ``--version`` and the catalog listings load neither JAX nor pandas (they took
2.5x an ``import jax``), and ``--help``/``--version`` not even numpy: the package's names load on
first use (:mod:`asicsim._lazy`), and load as they did when imported eagerly; a layer's command
module loads only when its command runs (:mod:`asicsim.cli_commands`)."""

from __future__ import annotations

import importlib
import subprocess
import sys
import types

import pytest

PROBE = """
import contextlib, io, sys
from asicsim.cli import main
with contextlib.redirect_stdout(io.StringIO()) as out:
    try:
        rc = main(sys.argv[1:])
    except SystemExit as e:
        rc = e.code
heavy = sorted(m for m in ("jax", "pandas", "numpy") if m in sys.modules)
print(rc, len(out.getvalue()), ",".join(heavy) or "-")
"""


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["formats"], ["formats", "bf16", "--json"],
                                  ["designs"], ["designs", "--json"], ["recipes"], ["recipes", "--json"],
                                  ["workloads"], ["workloads", "--json"]], ids=" ".join)
def test_help_version_and_listings_load_neither_jax_nor_pandas(argv):
    out = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    rc, printed, heavy = out.stdout.split()
    # --help and --version load not even numpy: no layer's command module is imported for them
    allowed = {"-"} if argv in (["--help"], ["--version"]) else {"-", "numpy"}
    assert rc in ("0", "None") and int(printed) > 0 and set(heavy.split(",")) <= allowed, (argv, heavy)


def test_help_lists_every_command_as_its_module_registers_it():
    import argparse

    from asicsim.cli import build_parser

    def listed(parser):
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        return {a.dest: a.help for a in sub._choices_actions}

    full, light = listed(build_parser()), listed(build_parser(["--help"]))
    assert light == full and {"batching", "scaling", "train", "infer", "sweep", "report", "demo"} <= set(full)


def test_names_load_on_first_use_as_eager_imports_did():
    import asicsim as sim
    import asicsim._src.numerics
    import asicsim._src.numerics.quantize  # the submodule of the same name as the function

    assert isinstance(asicsim._src.numerics.quantize, types.FunctionType)  # the export, not its module
    assert sim.quantize is asicsim._src.numerics.quantize and not hasattr(sim, "format")  # no builtin shadowed
    from asicsim._src.hw import cost  # hw/cost.py and the function cost()

    assert callable(cost) and not isinstance(cost, types.ModuleType)
    assert {"quantize", "cost_table", "emulate", "sweep", "load_results"} <= set(dir(sim))


def test_the_public_surface_is_plain_functions_and_facades():
    # issue 36 item 3: emulate and sweep are ordinary functions; the layers' packages export
    # their documented names and nothing of the implementation behind them (asicsim._src)
    import asicsim as sim

    assert isinstance(sim.emulate, types.FunctionType) and isinstance(sim.sweep, types.FunctionType)
    assert sim.emulate.__module__ == "asicsim._src.emulate.transform"
    assert sim.load_recipe is importlib.import_module("asicsim._src.emulate.recipes").load_recipe
    assert sim.hw.cost is importlib.import_module("asicsim._src.hw.cost").cost
    assert sim.numerics.quantize is sim.quantize
    for package in (sim.numerics, sim.hw, sim.workloads, sim.system, sim.report):
        assert isinstance(package, types.ModuleType) and package.__all__
        for name in package.__all__:
            assert not isinstance(getattr(package, name), types.ModuleType), (package.__name__, name)
    with pytest.raises(AttributeError, match="has no attribute 'gpu'"):
        sim.hw.gpu  # noqa: B018  (a module of the implementation, not exported)
    with pytest.raises(ModuleNotFoundError):
        __import__("asicsim.emulate.policy")
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        sim.no_such_name  # noqa: B018
