"""Wall time of `llmcalc verify --device meta` and of `llmcalc verify --against transformers`
for each bundled model (the bar: 60 s each).

Runs each model in its own process, as a user or CI would, and prints seconds per model. The
transformers column is shown for the bundled models that ship their Hugging Face config.json
(model_configs/hf/), and only when transformers is installed (the hf extra).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time

from llmcalc.analysis.load.catalog import MODEL_DIR as _bundled_dir
from llmcalc.analysis.load.catalog import bundled_names

BAR_SECONDS = 60


def _time(args: list[str]) -> tuple[float, int]:
    cmd = [sys.executable, "-c", "import sys; sys.argv[0] = 'llmcalc'; from llmcalc.cli.__main__ import main; main()"]
    start = time.perf_counter()
    proc = subprocess.run(cmd + args, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start, proc.returncode


def main() -> None:
    has_hf = importlib.util.find_spec("transformers") is not None
    worst = {"meta": 0.0, "transformers": 0.0}
    print(f"{'model':16s} {'--device meta':>20s} {'--against transformers':>26s}")
    for name in bundled_names():
        seconds, rc = _time(["verify", name, "--device", "meta", "--json"])
        worst["meta"] = max(worst["meta"], seconds)
        line = f"{name:16s} {seconds:8.1f} s  exit {rc}"
        if has_hf and (_bundled_dir() / "hf" / f"{name}.json").exists():
            seconds, rc = _time(["verify", name, "--against", "transformers", "--json"])
            worst["transformers"] = max(worst["transformers"], seconds)
            line += f" {seconds:16.1f} s  exit {rc}"
        else:
            line += f" {'-':>18s}"
        print(line)
    print(f"slowest: --device meta {worst['meta']:.1f} s, --against transformers {worst['transformers']:.1f} s "
          f"(bar: {BAR_SECONDS} s each)")


if __name__ == "__main__":
    main()
