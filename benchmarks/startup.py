"""Startup cost of an analytic command against the floor any Typer + rich CLI pays.

Runs `llmcalc params gpt2-xl` and `python -c "import typer, rich.console, rich.table, yaml"`
alternately, several times each, and prints the medians and their ratio (the bar is 1.5).

Both sides run with bytecode caching on, as an installed package has it (pip compiles .pyc
files; the floor's libraries have theirs). A sandbox that sets PYTHONDONTWRITEBYTECODE would
otherwise charge llmcalc, run from source, for compiling its modules on every start.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def wall(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=ENV)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()
    # What the console script runs, without a shell shim (pyenv) in front of it.
    tool = [sys.executable, "-c", "import sys; sys.argv[0] = 'llmcalc'; from llmcalc.cli.app import main; main()"]
    cmds = {"floor": [sys.executable, "-c", "import typer, rich.console, rich.table, yaml"],
            "llmcalc params gpt2-xl": tool + ["params", "gpt2-xl"]}
    times: dict[str, list[float]] = {k: [] for k in cmds}
    for c in cmds.values():  # warm the file cache and write the bytecode
        wall(c)
    for _ in range(args.runs):
        for k, c in cmds.items():
            times[k].append(wall(c))
    med = {k: statistics.median(v) for k, v in times.items()}
    for k, v in med.items():
        print(f"{k:28s} median {v * 1000:7.1f} ms over {args.runs} runs")
    print(f"ratio {med['llmcalc params gpt2-xl'] / med['floor']:.2f} (bar: 1.50)")


if __name__ == "__main__":
    main()
