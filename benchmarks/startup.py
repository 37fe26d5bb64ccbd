"""Startup of the analytic commands against the floor and against the fastest pure-Python peer.

DESIGN.md section 6: an analytic command's wall time is within 1.3x of the floor any Typer +
rich + PyYAML command line pays, and no slower than the fastest pure-Python calculator people
use for the same question. Runs, alternately and several times each (after one warm-up run
each):

  floor                                 python -c "import typer, rich, yaml"
  llmcalc params gpt2-xl
  llmcalc flops gpt2-small --seq 1024   the question the peer answers
  peer                                  llm-flops gpt2 --seq-len 1024

and prints the median wall time of each (and the median CPU time, user + system, which a busy
machine inflates less), then the ratios with their bars: each llmcalc command / floor (bar
1.3), llmcalc flops / peer (bar 1.0). `--check` exits 1 when a ratio is over its bar.

The peer is llm-flops 0.0.1 (PyPI `llm-flops`, the `bench` extra; pure Python, no dependencies;
import package `llmflops`), run by the interpreter that runs this script (`--peer-path DIR`:
from a folder made with `pip install --target DIR llm-flops==0.0.1`). Where it is not installed,
the peer is the stand-in STANDIN below, and the output says so. llm-flops answers the question
in one process:
argparse, its package's top-level imports (json, dataclasses, typing, urllib.request,
urllib.error, base64, io, time, itertools; urllib.request pulls in http.client, email, ssl,
socket, tempfile), a bundled gpt2 config, closed-form parameter, FLOP, memory and roofline
arithmetic, and a 30-line text report. The stand-in does the same: the same standard-library
imports, the same kind of arithmetic, a report of the same size. It lacks llm-flops' own twenty
module bodies, so it starts faster than the real tool (by 4 to 9 ms, about 5%, on 2 busy cores
when this was written): against it llmcalc is held to a stricter bar, never a looser one.

Every command runs as its console script would, minus the shell shim: `python -c` importing the
entry point. All run with bytecode caching on, as an installed package has it (pip compiles .pyc
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
FLOOR_BAR, PEER_BAR = 1.3, 1.0

# `llm-flops gpt2 --seq-len 1024` without llm-flops: see the module docstring.
STANDIN = r'''import argparse  # these imports: llm-flops' at startup
import base64
import io
import itertools
import json
import sys
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from typing import Dict

_BITS = {"fp32": 32, "bf16": 16, "fp16": 16, "fp8": 8, "int8": 8, "int4": 4}


@dataclass(frozen=True)
class Config:
    name: str
    d: int
    layers: int
    heads: int
    vocab: int
    ctx: int
    ffn: int


@dataclass(frozen=True)
class GPU:
    name: str
    flops: float  # dense bf16, FLOP/s
    bandwidth: float  # bytes/s
    memory: int
    watts: float


REGISTRY = {"gpt2": Config("gpt2", 768, 12, 12, 50257, 1024, 3072),
            "gpt2-medium": Config("gpt2-medium", 1024, 24, 16, 50257, 1024, 4096),
            "gpt2-large": Config("gpt2-large", 1280, 36, 20, 50257, 1024, 5120),
            "gpt2-xl": Config("gpt2-xl", 1600, 48, 25, 50257, 1024, 6400)}
GPUS = {"A100": GPU("A100-80GB-SXM", 312e12, 2.039e12, 80 * 2**30, 400.0)}


def estimate(cfg: Config, batch: int, seq: int, precision: str, gpu: GPU) -> Dict[str, float]:
    d, L, V, f = cfg.d, cfg.layers, cfg.vocab, cfg.ffn
    per_layer = 4 * d * d + 4 * d + 2 * d * f + f + d + 4 * d
    params = V * d + cfg.ctx * d + L * per_layer + 2 * d
    tokens = batch * seq
    attention = L * (2 * tokens * 4 * d * d + 2 * 2 * batch * seq * seq * d)
    mlp = L * 2 * tokens * 2 * d * f
    head = 2 * tokens * d * V
    norms = (2 * L + 1) * 5 * tokens * d
    forward = attention + mlp + head + norms + tokens * d
    nbytes = _BITS[precision] / 8
    weights = params * nbytes
    kv = 2 * L * tokens * d * nbytes
    activations = 2 * tokens * d * nbytes
    prefill = max(forward / (0.6 * gpu.flops), weights / (0.8 * gpu.bandwidth))
    decode = max(2 * params / (0.6 * gpu.flops), (weights + kv) / (0.8 * gpu.bandwidth))
    return {"params": params, "forward": forward, "backward": 2 * forward, "attention": attention,
            "mlp": mlp, "head": head, "norms": norms, "weights": weights, "kv": kv,
            "activations": activations, "memory": weights + kv + activations, "prefill_s": prefill,
            "decode_s": decode, "energy_j": prefill * gpu.watts}


def human(n: float, unit: str) -> str:
    for prefix in ("", "K", "M", "G", "T", "P"):
        if abs(n) < 1000:
            return f"{n:.3f} {prefix}{unit}"
        n /= 1000
    return f"{n:.3f} E{unit}"


def main() -> int:
    ap = argparse.ArgumentParser(prog="llm-flops")
    ap.add_argument("model")
    ap.add_argument("-s", "--seq-len", type=int, default=2048)
    ap.add_argument("-b", "--batch-size", type=int, default=1)
    ap.add_argument("-p", "--precision", default="bf16")
    ap.add_argument("-g", "--gpu", default="A100")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    cfg, gpu = REGISTRY[args.model], GPUS[args.gpu]
    r = estimate(cfg, args.batch_size, args.seq_len, args.precision, gpu)
    if args.json:
        print(json.dumps({"config": asdict(cfg), **r}, indent=2))
        return 0
    rule = "=" * 62
    print(f"{rule}\n LLM-FLOPS estimate: {cfg.name}\n  batch={args.batch_size}  seq_len={args.seq_len}  "
          f"precision={args.precision}  gpu={gpu.name}\n{rule}")
    print(f" Parameters        : {r['params'] / 1e6:.0f}M  ({r['params']:,})\n{'-' * 62}")
    print(" FLOPs (single forward pass over batch x seq)")
    for label, key in (("Forward", "forward"), ("Backward", "backward"), ("  - attention", "attention"),
                       ("  - mlp", "mlp"), ("  - layernorm", "norms"), ("  - output head", "head")):
        print(f"   {label:16s}: {human(r[key], 'FLOP')}")
    print(f"{'-' * 62}\n Memory")
    for label, key in (("Total", "memory"), ("  - weights", "weights"), ("  - activations", "activations"),
                       ("  - kv cache", "kv")):
        print(f"   {label:16s}: {human(r[key], 'B')}")
    print(f"   Fits on GPU     : {'yes' if r['memory'] < gpu.memory else 'no'}\n{'-' * 62}")
    print(f" Performance (roofline)\n   Prefill latency : {r['prefill_s'] * 1e3:.2f} ms\n"
          f"   Decode/token    : {r['decode_s'] * 1e6:.2f} us\n"
          f"   Forward energy  : {r['energy_j'] * 1e3:.2f} mJ\n{rule}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''


def entry(module: str, prog: str) -> list[str]:
    return [sys.executable, "-c", f"import sys; sys.argv[0] = {prog!r}; from {module} import main; sys.exit(main())"]


def peer(path: str | None) -> tuple[str, list[str], dict[str, str]]:
    """Name, command and environment of the peer: llm-flops if importable, else STANDIN."""
    env = dict(ENV, PYTHONPATH=os.pathsep.join(filter(None, [path, ENV.get("PYTHONPATH")]))) if path else ENV
    found = subprocess.run([sys.executable, "-c", "import llmflops"], env=env, capture_output=True).returncode == 0
    if found:
        return "llm-flops 0.0.1", entry("llmflops.cli", "llm-flops") + ["gpt2", "--seq-len", "1024"], env
    return ("a stand-in for llm-flops (STANDIN in this script; `pip install llm-flops==0.0.1` for the "
            "real one)", [sys.executable, "-c", STANDIN, "gpt2", "--seq-len", "1024"], ENV)


def once(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of one run of ``cmd``, its output discarded."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if status != 0:
        raise SystemExit(f"failed ({status}): {' '.join(cmd)}")
    return wall, usage.ru_utime + usage.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=21)
    ap.add_argument("--check", action="store_true", help="exit 1 when a ratio is over its bar")
    ap.add_argument("--peer-path", help="a folder holding llm-flops (pip install --target DIR llm-flops==0.0.1)")
    args = ap.parse_args()
    tool = entry("llmcalc.cli.app", "llmcalc")
    peer_name, peer_cmd, peer_env = peer(args.peer_path)
    cmds = {"floor: import typer, rich, yaml": [sys.executable, "-c", "import typer, rich, yaml"],
            "llmcalc params gpt2-xl": tool + ["params", "gpt2-xl"],
            "llmcalc flops gpt2-small --seq 1024": tool + ["flops", "gpt2-small", "--seq", "1024"],
            "peer: llm-flops gpt2 --seq-len 1024": peer_cmd}
    wall: dict[str, list[float]] = {k: [] for k in cmds}
    cpu: dict[str, list[float]] = {k: [] for k in cmds}
    envs = {k: peer_env if c is peer_cmd else ENV for k, c in cmds.items()}
    for k, c in cmds.items():  # warm the file cache and write the bytecode
        once(c, envs[k])
    load = os.getloadavg()[0]
    for _ in range(args.runs):
        for k, c in cmds.items():
            w, u = once(c, envs[k])
            wall[k].append(w)
            cpu[k].append(u)
    load = max(load, os.getloadavg()[0])
    med = {k: statistics.median(v) for k, v in wall.items()}
    print(f"medians over {args.runs} alternating runs (ms):")
    for k in cmds:
        print(f"  {k:38s} wall {med[k] * 1000:6.1f}   cpu {statistics.median(cpu[k]) * 1000:6.1f}")
    print(f"  (peer = {peer_name})")
    floor, _, flops, peer_key = cmds
    over = []
    for k, base, bar in (("llmcalc params gpt2-xl", floor, FLOOR_BAR), (flops, floor, FLOOR_BAR),
                         (flops, peer_key, PEER_BAR)):
        ratio = med[k] / med[base]
        if ratio > bar:
            over.append(k)
        print(f"{k.removeprefix('llmcalc ')} / {base.split(':')[0]}: {ratio:.2f} (bar {bar:.1f})"
              + ("" if ratio <= bar else "  OVER"))
    cores = os.cpu_count() or 1
    if load > cores / 2:
        print(f"note: load average {load:.1f} on {cores} cores while measuring: wall times are inflated; "
              "rerun on a quiet machine before judging a bar")
    if args.check and over:
        sys.exit(1)


if __name__ == "__main__":
    main()
