"""Wall time of `llmcalc verify --device meta` for each bundled model (the bar: Mixtral < 60 s).

Runs each model in its own process, as a user or CI would, and prints seconds per model.
"""

from __future__ import annotations

import subprocess
import sys
import time

from llmcalc.analysis.config import bundled_names

BAR_SECONDS = 60


def main() -> None:
    cmd = [sys.executable, "-c", "import sys; sys.argv[0] = 'llmcalc'; from llmcalc.cli.app import main; main()"]
    worst = 0.0
    for name in bundled_names():
        start = time.perf_counter()
        proc = subprocess.run(cmd + ["verify", name, "--device", "meta", "--json"],
                              stdout=subprocess.DEVNULL)
        seconds = time.perf_counter() - start
        worst = max(worst, seconds)
        print(f"{name:16s} {seconds:6.1f} s  exit {proc.returncode}")
    print(f"slowest {worst:.1f} s (bar: {BAR_SECONDS} s)")


if __name__ == "__main__":
    main()
