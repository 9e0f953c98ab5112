"""Start-up time of the CLI's light commands against ``python -c pass`` and ``import jax`` in the
same run (issue 36 item 7: ``asicsim --help`` should take at most 0.3 s on an idle 2-core machine).

``python benchmarks/cli_startup.py [--runs N]``: wall time of each command in a fresh interpreter,
median of N runs (default 7), commands interleaved so that a burst of load hits all of them alike;
then the ten slowest imports of ``asicsim --help`` by ``python -X importtime`` (cumulative).
The ratios to ``python -c pass`` are what to compare between machines (these machines are shared).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

COMMANDS = {
    "python -c pass": ["-c", "pass"],
    "import jax": ["-c", "import jax"],
    "asicsim --help": ["-m", "asicsim", "--help"],
    "asicsim --version": ["-m", "asicsim", "--version"],
    "asicsim formats": ["-m", "asicsim", "formats"],
    "asicsim designs": ["-m", "asicsim", "designs"],
}


def wall(args: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, *args], check=True, capture_output=True)
    return time.perf_counter() - t0


def slowest_imports(args: list[str], n: int = 10) -> list[tuple[int, str]]:
    """(cumulative microseconds, module) of the ``n`` slowest imports, from ``-X importtime``."""
    err = subprocess.run([sys.executable, "-X", "importtime", *args], check=True, capture_output=True,
                         text=True).stderr
    rows = []
    for line in err.splitlines():
        if line.startswith("import time:") and "|" in line and "cumulative" not in line:
            _, cumulative, name = line.split("|")
            rows.append((int(cumulative), name.strip()))
    return sorted(rows, reverse=True)[:n]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    runs = ap.parse_args().runs
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(runs):
        for name, args in COMMANDS.items():
            times[name].append(wall(args))
    base = statistics.median(times["python -c pass"])
    print(f"{'command':<20} {'median s':>9} {'x python -c pass':>17}")
    for name, ts in times.items():
        m = statistics.median(ts)
        print(f"{name:<20} {m:9.3f} {m / base:17.1f}")
    print("\nslowest imports of `asicsim --help` (cumulative ms):")
    for us, mod in slowest_imports(COMMANDS["asicsim --help"]):
        print(f"  {us / 1e3:8.1f}  {mod}")


if __name__ == "__main__":
    main()
