"""`llmcalc time` against the published measurements it is calibrated on (issue 26 item 7, DESIGN.md 11).

Every case of benchmarks/published.yaml (Korthikanti et al. 2022, Narayanan et al. 2021, torchtitan's
performance notes, the gpt-fast README) runs as `llmcalc time MODEL --hardware HW ARGS --json`, in
process as the console script runs it, with the default settings. Its JSON is converted into the
published measure exactly as the source defines it (the data file's header says how, measure by
measure), and the table prints the published figure, llmcalc's, and the error factor
max(p/q, q/p), marked `faster` when llmcalc predicts a faster run than was measured. Then the median
and worst factor over the cases that ran, and the cases llmcalc refuses today, with its message.

The JSON's existing keys hold the ideal roofline; where a later llmcalc adds `expected` figures
beside them (DESIGN.md 11: an `expected` object with the same keys, or `expected_<key>`), both columns
are printed and the error is the expected one's; the header line says which. `--check` exits 1 when
the median is over 1.10, the worst over 1.35 (DESIGN.md section 6), or a case is refused.

`--held-out` runs benchmarks/heldout.yaml instead: published runs of other sources (the Llama 3 paper,
NVIDIA's NeMo and Megatron-Bridge performance tables, BLOOM), which nothing is calibrated on. They
judge the model; no bar applies to them (`--check` then fails on a refused case only).
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).with_name("published.yaml")
HELD_OUT = Path(__file__).with_name("heldout.yaml")
SOURCES = ("korthikanti2022", "narayanan2021", "torchtitan", "gpt-fast")  # calibrated on: these, no others
MEASURES = {"step_s": "s/step", "tflops_per_gpu": "TFLOP/s/GPU", "tokens_per_s_per_gpu": "tok/s/GPU",
            "decode_tokens_per_s": "tok/s", "model_tflops_per_gpu": "TFLOP/s/GPU"}
SPEED_UP = {"step_s": False, "tflops_per_gpu": True, "tokens_per_s_per_gpu": True, "decode_tokens_per_s": True,
            "model_tflops_per_gpu": True}
MEDIAN_BAR, WORST_BAR = 1.10, 1.35


def load(path: Path = DATA) -> dict:
    with open(path) as f:
        return yaml.safe_load(f)


def model_arg(case: dict) -> str:
    """The model as llmcalc takes it: a bundled name, or a YAML path (relative to the repository)."""
    model = case["model"]
    return str(ROOT / model) if model.endswith((".yaml", ".yml")) else model


def command(case: dict) -> list[str]:
    return ["time", model_arg(case), "--hardware", case["hardware"], *shlex.split(case["args"]), "--json"]


def invoke(args: list[str]) -> tuple[int, str, str]:
    """``llmcalc ARGS...`` run in process (CliRunner's streams, as tests/console.py does): exit code,
    stdout, stderr."""
    from typer.testing import CliRunner

    from llmcalc.cli.app import app
    from llmcalc.cli.errors import run

    with CliRunner().isolation() as streams:
        code = 0
        try:
            run(lambda: app(args, prog_name="llmcalc"))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        sys.stdout.flush()
        sys.stderr.flush()
        out, err, _ = (s.getvalue().decode("utf-8", "replace") for s in streams)
    return code, out, err


def option(case: dict, name: str, default: str | None = None) -> str | None:
    """The value of ``--name`` in the case's args."""
    args = shlex.split(case["args"])
    return args[args.index(name) + 1] if name in args else default


def figures(data: dict, key: str) -> tuple[float, float | None]:
    """(ideal, expected) of a JSON figure: the existing key is the ideal roofline; `expected` is read
    from an ``expected`` object beside it or an ``expected_<key>`` key, None while absent."""
    expected = data.get("expected")
    if isinstance(expected, dict) and isinstance(expected.get(key), (int, float)):
        return data[key], expected[key]
    if isinstance(data.get(f"expected_{key}"), (int, float)):
        return data[key], data[f"expected_{key}"]
    return data[key], None


def narayanan_flops(case: dict) -> float:
    """Narayanan et al. 2021, Eq. 3: F = 96 B s L h^2 (1 + s/(6h) + V/(16 L h)) per iteration, the
    FLOPs of forward, backward and the recomputed forward (their Table 1's TFLOP/s use it)."""
    with open(ROOT / case["model"]) as f:
        model = yaml.safe_load(f)
    B, s = int(option(case, "--global-batch")), int(option(case, "--seq"))
    L, h, V = model["n_layers"], model["d_model"], model["vocab_size"]
    return 96 * B * s * L * h * h * (1 + s / (6 * h) + V / (16 * L * h))


def convert(case: dict, data: dict, time_s: float) -> float:
    """The published measure from a step (or generate) time ``time_s`` and the run's JSON."""
    measure = case["measure"]
    if measure == "step_s":
        return time_s
    if measure == "tflops_per_gpu":
        return narayanan_flops(case) / (time_s * data.get("gpus", 1)) / 1e12
    if measure == "tokens_per_s_per_gpu":
        return data["tokens"] / time_s / data.get("gpus", 1)
    if measure == "model_tflops_per_gpu":  # llmcalc's model FLOPs (PaLM's definition), not the source's count
        return data["utilization"]["model_flops_per_token"] * data["tokens"] / time_s / data.get("gpus", 1) / 1e12
    if measure == "decode_tokens_per_s":
        return data["new"] * data["batch"] / time_s
    raise ValueError(f"{case['id']}: unknown measure {measure!r}")


@dataclass
class Result:
    case: dict
    ideal: float | None = None
    expected: float | None = None
    refusal: str | None = None  # llmcalc's message when it exits 2

    @property
    def value(self) -> float | None:
        return self.expected if self.expected is not None else self.ideal


def run_case(case: dict) -> Result:
    return result(case, *invoke(command(case)))


def result(case: dict, code: int, out: str, err: str) -> Result:
    """A case's figures from its run's exit code and streams."""
    if code != 0:
        return Result(case, refusal=err.strip().splitlines()[-1] if err.strip() else f"exit {code}")
    data = json.loads(out)
    key = "total_s" if data.get("mode") == "generate" else "time_s"
    ideal_s, expected_s = figures(data, key)
    return Result(case, convert(case, data, ideal_s), None if expected_s is None else convert(case, data, expected_s))


def factor(case: dict, value: float) -> tuple[float, str]:
    """max(p/q, q/p) and whether llmcalc's run is faster or slower than the published one."""
    p = case["published"]
    faster = value > p if SPEED_UP[case["measure"]] else value < p
    return max(p / value, value / p), ("faster" if faster else "slower") if value != p else "equal"


def fmt(x: float) -> str:
    return f"{x:,.0f}" if x >= 1000 else f"{x:,.3g}" if x < 10 else f"{x:,.1f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true",
                    help=f"exit 1 when the median is over {MEDIAN_BAR}, the worst over {WORST_BAR}, "
                    "or a case is refused")
    ap.add_argument("--held-out", action="store_true",
                    help=f"the cases of {HELD_OUT.name}, which nothing is calibrated on (no bar)")
    ap.add_argument("--source", help="only this source's cases")
    args = ap.parse_args()
    path = HELD_OUT if args.held_out else DATA
    data = load(path)
    if args.source not in (None, *data["sources"]):
        ap.error(f"--source: one of {', '.join(data['sources'])} ({path.name})")
    cases = [c for c in data["cases"] if args.source in (None, c["source"])]
    results = [run_case(c) for c in cases]
    ran = [r for r in results if r.refusal is None]
    with_expected = any(r.expected is not None for r in ran)
    which = "expected (calibrated)" if with_expected else "ideal roofline (no `expected` in the JSON yet)"
    print(f"llmcalc time vs published measurements ({path.relative_to(ROOT)}): error of the {which}")
    head = f"{'source':21} {'case':44} {'measure':12} {'published':>10} {'ideal':>10}"
    head += f" {'expected':>10}" if with_expected else ""
    print(head + f" {'error':>7}")
    errors: list[tuple[float, str]] = []
    for r in ran:
        c = r.case
        err, way = factor(c, r.value)
        errors.append((err, c["id"]))
        line = f"{c['source']:21} {c['id']:44} {MEASURES[c['measure']]:12} {fmt(c['published']):>10} {fmt(r.ideal):>10}"
        line += f" {fmt(r.expected) if r.expected is not None else '-':>10}" if with_expected else ""
        print(line + f" {err:6.2f}x {way}")
    print()
    median = worst = None
    if errors:
        median = statistics.median(e for e, _ in errors)
        worst, worst_id = max(errors)
        bars = ("", "") if args.held_out else (f" (bar {MEDIAN_BAR})", f"; bar {WORST_BAR}")
        print(f"{len(ran)} of {len(results)} cases ran: median error {median:.2f}x{bars[0]}, "
              f"worst {worst:.2f}x ({worst_id}{bars[1]})")
        if with_expected:
            ideal = [factor(r.case, r.ideal)[0] for r in ran]
            print(f"  the ideal roofline beside it: median {statistics.median(ideal):.2f}x, worst {max(ideal):.2f}x")
        for source in data["sources"]:
            es = [e for (e, _), r in zip(errors, ran) if r.case["source"] == source]
            if es:
                print(f"  {source:21} {len(es):3} cases: median {statistics.median(es):.2f}x, worst {max(es):.2f}x")
    refused = [r for r in results if r.refusal is not None]
    if refused:
        print(f"\n{len(refused)} cases refused by llmcalc today:")
        for r in refused:
            print(f"  {r.case['id']}: {r.refusal}")
    over = not args.held_out and (median is None or median > MEDIAN_BAR or worst is None or worst > WORST_BAR)
    if args.check and (not errors or over or refused):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
