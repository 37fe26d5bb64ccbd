"""`llmcalc time` on a long generation and a many-chunk prefill, summed in closed form.

Issue 26: `--mode generate --new 100000` answers in under 0.2 s (DESIGN.md section 6: constant time in
`--new` and in the chunks). Then the analysis alone of a generation of 10^4 to 10^8 new tokens on each model with
chunked attention (Llama 4: its chunks recur, summed as blocks) and its ratio to that of 10^5 tokens: the
breakpoints of the expected time's rates (each doubling of the context) make it grow as the logarithm (printed,
not checked against the bar). Runs each command as users do, the console script of a non-editable install
with bytecode (benchmarks/startup.py's), once to warm up and then ``--runs`` times, and prints the
median wall time of each, the median of the analysis alone (in this process, the start-up excluded)
and their ratios to the bar.
`--check` exits 1 when a command's median is over the bar.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from startup import environment, install, once  # benchmarks/startup.py: the install as users run it

BAR_S = 0.2
COMMANDS = (["time", "mistral-7b", "--hardware", "h100", "--mode", "generate", "--prompt", "1024", "--new", "100000"],
            ["time", "mistral-7b", "--hardware", "h100", "--mode", "prefill", "--seq", "1000000", "--chunk", "16"])

SCALING = ("llama-4-scout", "llama-4-maverick")  # chunked attention: a breakpoint every 8,192 positions


def analysis(args: list[str]) -> float:
    """The generate or prefill call alone, the model and hardware loaded."""
    from llmcalc.analysis.load.catalog import load_bundled
    from llmcalc.analysis.perf.hardware import load_hardware
    from llmcalc.analysis.perf.roofline import generate, prefill
    from llmcalc.analysis.spec import RunSpec
    cfg, hw = load_bundled(args[1]), load_hardware("h100")
    opts = dict(zip(args[4::2], args[5::2]))
    start = time.perf_counter()
    if opts["--mode"] == "generate":
        prompt = int(opts["--prompt"])
        generate(cfg, RunSpec("prefill", prompt), hw, prompt, int(opts["--new"]))
    else:
        prefill(cfg, RunSpec("prefill", int(opts["--seq"]), chunk=int(opts["--chunk"])), hw)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--check", action="store_true", help="exit 1 when a median is over the bar")
    args = parser.parse_args()
    over = False
    with tempfile.TemporaryDirectory() as folder:
        install(Path(folder, "llmcalc"))
        python = str(environment(Path(folder)))
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
        tool = [python, str(Path(folder, "llmcalc", "bin", "llmcalc"))]  # the console script pip wrote
        walls_of = {}
        for cmd in COMMANDS:
            once(tool + cmd + ["--json"], env)
            walls_of[" ".join(cmd)] = statistics.median(once(tool + cmd + ["--json"], env)[0] for _ in range(args.runs))
    for cmd in COMMANDS:
        walls = walls_of[" ".join(cmd)]
        alone = statistics.median(analysis(cmd) for _ in range(args.runs))
        print(f"llmcalc {' '.join(cmd)}")
        print(f"  median of {args.runs}: {walls:.3f} s (ratio to the {BAR_S:g} s bar {walls / BAR_S:.2f}); "
              f"the analysis alone {alone:.3f} s (ratio {alone / BAR_S:.2f})")
        over |= walls > BAR_S
    for name in SCALING:
        analysis(["time", name, "--hardware", "h100", "--mode", "generate", "--prompt", "1024", "--new", "1000"])
        alone = {new: statistics.median(analysis(["time", name, "--hardware", "h100", "--mode", "generate", "--prompt",
                                                   "1024", "--new", str(new)]) for _ in range(args.runs))
                 for new in (10**4, 10**5, 10**6, 10**7, 10**8)}
        print(f"{name}, --prompt 1024, the analysis alone: " + "; ".join(
            f"--new {new:,} {s:.3f} s ({s / alone[10**5]:.2f}x)" for new, s in alone.items()))
    return 1 if args.check and over else 0


if __name__ == "__main__":
    sys.exit(main())
