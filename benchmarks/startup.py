"""Startup of the analytic commands against the CLI stack they are built on (DESIGN.md section 6).

An analytic command's wall time is held within 1.3x of the floor every Typer + rich + PyYAML
command line pays:

  floor   python -c "import typer, rich.console, rich.table, yaml"

measured on a non-editable install with bytecode, as users run it: the checkout is installed with
pip (no dependencies) into a temporary folder, run by a fresh virtual environment whose path reaches
that folder and the dependencies of the interpreter running this script. Neither the source tree
nor an editable install runs, and no editable install's import hook (which ``site`` imports at
every start, ~10 ms on both sides of the ratio) is loaded. Each command
runs as the console script pip writes (run by the environment's python), alternately with the
floor, ``--runs`` times after one warm-up run each; the median wall time of each is printed (and
the median CPU time, user + system, which a busy machine inflates less), then each command's ratio
to the floor. ``--check`` exits 1 when a ratio is over the bar.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BAR = 1.3
FLOOR = "import typer, rich.console, rich.table, yaml"
COMMANDS = (["params", "gpt2-small"], ["flops", "gpt2-small", "--seq", "1024"], ["kvcache", "mistral-7b"],
            ["memory", "llama-3-8b", "--seq", "4096"], ["time", "mistral-7b", "--hardware", "h100", "--mode", "decode"])


def install(target: Path) -> None:
    """The checkout as pip installs it (a wheel's files, bytecode compiled), into ``target``."""
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--target",
                    str(target), str(ROOT)], check=True, stdout=subprocess.DEVNULL)


def environment(folder: Path) -> Path:
    """A virtual environment in ``folder`` that imports the install in ``folder / "llmcalc"``, then
    this interpreter's packages (by path: their .pth files, an editable hook among them, are not
    run); its python."""
    venv = folder / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import site; print(site.getsitepackages()[0])"], check=True,
                          capture_output=True, text=True).stdout.strip()
    paths = [str(folder / "llmcalc"), *(p for p in sys.path if p.endswith("site-packages"))]
    Path(site, "benchmark.pth").write_text("\n".join(paths) + "\n")
    return python


def once(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of one run of ``cmd``, its output discarded."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, env=env, cwd="/")
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if status != 0:
        raise SystemExit(f"failed ({status}): {' '.join(cmd)}")
    return wall, usage.ru_utime + usage.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=21)
    ap.add_argument("--check", action="store_true", help="exit 1 when a ratio is over the bar")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        install(Path(folder, "llmcalc"))
        python = str(environment(Path(folder)))
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
        tool = [python, str(Path(folder, "llmcalc", "bin", "llmcalc"))]  # the console script pip wrote
        cmds = {"floor: " + FLOOR: [python, "-c", FLOOR],
                **{"llmcalc " + " ".join(c): tool + c for c in COMMANDS}}
        where = subprocess.run([python, "-c", "import sys, llmcalc; print(llmcalc.__file__, "
                                "*(m for m in sys.modules if m.startswith('__editable__')))"],
                               env=env, cwd="/", capture_output=True, text=True, check=True).stdout.split()
        assert where[0].startswith(folder) and len(where) == 1, f"llmcalc runs from {where}, not the install alone"
        wall: dict[str, list[float]] = {k: [] for k in cmds}
        cpu: dict[str, list[float]] = {k: [] for k in cmds}
        for c in cmds.values():  # warm the file cache
            once(c, env)
        load = os.getloadavg()[0]
        for _ in range(args.runs):
            for k, c in cmds.items():
                w, u = once(c, env)
                wall[k].append(w)
                cpu[k].append(u)
        load = max(load, os.getloadavg()[0])
    med = {k: statistics.median(v) for k, v in wall.items()}
    print(f"medians over {args.runs} alternating runs (ms), llmcalc installed from this checkout:")
    for k in cmds:
        print(f"  {k:62s} wall {med[k] * 1000:6.1f}   cpu {statistics.median(cpu[k]) * 1000:6.1f}")
    floor, *tools = cmds
    over = [k for k in tools if med[k] / med[floor] > BAR]
    for k in tools:
        ratio = med[k] / med[floor]
        print(f"{k} / floor: {ratio:.2f} (bar {BAR})" + ("  OVER" if ratio > BAR else ""))
    cores = os.cpu_count() or 1
    if load > cores / 2:
        print(f"note: load average {load:.1f} on {cores} cores while measuring: wall times are inflated; "
              "rerun on a quiet machine before judging the bar")
    if args.check and over:
        sys.exit(1)


if __name__ == "__main__":
    main()
