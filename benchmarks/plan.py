"""`llmcalc plan` on the issue's question: a 70B model on 64 H100s at 8k context.

Issue 12: ranked layouts in under 2 s. Runs the command as its console script would (`python -c`
importing the entry point), once to warm up and then ``--runs`` times, and prints the median wall
time, the layouts it ranked and the ratio to the 2 s bar. `--check` exits 1 over the bar.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

BAR_S = 2.0
ARGS = ["plan", "llama-3.1-70b", "--gpus", "64", "--hardware", "h100", "--seq", "8192", "--global-batch", "512"]


def once() -> tuple[float, dict]:
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", "from llmcalc.cli.app import main; main()", *ARGS, "--json"],
                         check=True, capture_output=True, text=True).stdout
    return time.perf_counter() - start, json.loads(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--check", action="store_true", help="exit 1 when the median is over the bar")
    args = parser.parse_args()
    once()
    times, data = [], {}
    for _ in range(args.runs):
        t, data = once()
        times.append(t)
    median = statistics.median(times)
    layouts = data["layouts"]
    print(f"llmcalc {' '.join(ARGS)}")
    print(f"  {len(layouts)} layouts, {sum(r['fits'] for r in layouts)} fit; median of {args.runs}: {median:.2f} s")
    print(f"  ratio to the {BAR_S:g} s bar: {median / BAR_S:.2f} (bar 1.0)")
    return 1 if args.check and median > BAR_S else 0


if __name__ == "__main__":
    sys.exit(main())
