"""benchmarks/published.yaml, the published measurements `llmcalc time` is judged on (issue 26 item 7):
the file parses, every case cites one of the four named sources and names a model and accelerator that
exist, and every case is a valid `llmcalc time` invocation or is listed as refused. When a feature
lands (--vpp, --dtype fp8, generate with a layout, ...), the refused cases it makes runnable fail here
by name, so that their `refused` line is deleted and the benchmark counts them. The error bar itself is
benchmarks/published.py's to print, not a test's."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SPEC = importlib.util.spec_from_file_location("published", ROOT / "benchmarks" / "published.py")
published = importlib.util.module_from_spec(SPEC)
sys.modules.setdefault("published", published)  # its dataclass looks its module up
SPEC.loader.exec_module(published)

pytestmark = pytest.mark.unit

DATA = published.load()
CASES = DATA["cases"]
KEYS = {"id", "source", "cite", "model", "hardware", "args", "measure", "published"}


def test_the_data_names_the_four_sources_and_nothing_else():
    assert set(DATA["sources"]) == set(published.SOURCES)
    assert {c["source"] for c in CASES} == set(published.SOURCES)
    assert {o["source"] for o in DATA["omitted"]} <= set(published.SOURCES)
    ids = [c["id"] for c in CASES]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["id"])
def test_case_is_complete(case):
    assert KEYS <= set(case) <= KEYS | {"refused", "notes"}, set(case) ^ KEYS
    assert case["measure"] in published.MEASURES
    assert isinstance(case["published"], (int, float)) and case["published"] > 0
    assert case["cite"] and not case["args"].count("--json")
    if case["measure"] == "tflops_per_gpu":  # Eq. 3 needs the batch, the sequence and the model's shape
        assert case["model"].endswith(".yaml") and published.narayanan_flops(case) > 0


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["id"])
def test_model_and_hardware_exist(case):
    model = case["model"]
    if model.endswith(".yaml"):
        assert model.startswith("benchmarks/models/") and (ROOT / model).is_file(), model
    else:
        assert (ROOT / "model_configs" / f"{model}.yaml").is_file(), f"{model} is not bundled"
    assert (ROOT / "model_configs" / "hardware" / f"{case['hardware']}.yaml").is_file(), case["hardware"]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["id"])
def test_case_runs_or_is_refused_as_listed(case):
    code, out, err = published.invoke(published.command(case))
    if "refused" in case:
        assert code == 2 and out == "", (
            f"{case['id']} runs now (exit {code}): delete its `refused` line so the benchmark counts it")
        assert err.startswith("Error:"), err
    else:
        assert code == 0, f"{case['id']} is refused: {err.strip()}"
        result = published.result(case, code, out, err)
        assert result.refusal is None and result.ideal > 0
        assert json.loads(out)["hardware"] == case["hardware"]


def test_expected_figures_are_read_beside_the_ideal_ones():
    """A later JSON's `expected` object (or `expected_<key>`) is preferred; today's keys are the ideal."""
    assert published.figures({"time_s": 2.0}, "time_s") == (2.0, None)
    assert published.figures({"time_s": 2.0, "expected": {"time_s": 3.0}}, "time_s") == (2.0, 3.0)
    assert published.figures({"total_s": 1.0, "expected_total_s": 1.5}, "total_s") == (1.0, 1.5)
    case = {"measure": "step_s", "published": 2.0}
    assert published.factor(case, 1.0) == (2.0, "faster")
    assert published.factor({**case, "measure": "decode_tokens_per_s"}, 1.0) == (2.0, "slower")


def test_the_setups_the_sources_print_are_the_cases_options():
    """A row or table that says it ran async TP runs with --async-tp, one that says float8 rowwise with
    --fp8-scaling rowwise, one that says per-op selective checkpointing with --recompute op (the Dec 2024
    notes' "selective AC" is train_configs/llama3_8b.toml's at 9dec370: selective_ac_option 'op'), and no
    other."""
    for case in CASES:
        args, cite = case["args"].split(), case["cite"]
        assert ("--async-tp" in args) == ("AsyncTP" in cite or "Async TP" in cite), case["id"]
        assert ("rowwise" in args) == ("float8 rowwise" in cite), case["id"]
        per_op = "selective op" in cite or "per op SAC" in cite or (
            "llama3_h100_202412" in cite and "selective AC" in cite)
        assert ("--recompute op" in case["args"]) == per_op, case["id"]
