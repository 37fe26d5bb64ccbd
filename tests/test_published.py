"""benchmarks/published.yaml, the published measurements `llmcalc time` is calibrated on (issue 26 item 7),
and benchmarks/heldout.yaml, those it is judged on and not calibrated on: the files parse, every case
of the first cites one of the four named sources and every case of the second another source, each names
a model and accelerator that exist, and every case is a valid `llmcalc time` invocation or is listed as
refused. When a feature lands (--vpp, --dtype fp8, generate with a layout, ...), the refused cases it
makes runnable fail here by name, so that their `refused` line is deleted and the benchmark counts them.
The error itself is benchmarks/published.py's to print, not a test's."""

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
HELD_OUT = published.load(published.HELD_OUT)
ALL_CASES = CASES + HELD_OUT["cases"]
KEYS = {"id", "source", "cite", "model", "hardware", "args", "measure", "published"}


def test_the_data_names_the_four_sources_and_nothing_else():
    assert set(DATA["sources"]) == set(published.SOURCES)
    assert {c["source"] for c in CASES} == set(published.SOURCES)
    assert {o["source"] for o in DATA["omitted"]} <= set(published.SOURCES)
    ids = [c["id"] for c in ALL_CASES]
    assert len(ids) == len(set(ids))


def test_the_held_out_sources_are_not_calibrated_on():
    assert HELD_OUT["sources"] and not set(HELD_OUT["sources"]) & set(published.SOURCES)
    assert {c["source"] for c in HELD_OUT["cases"]} == set(HELD_OUT["sources"])
    assert {o["source"] for o in HELD_OUT["omitted"]} <= set(HELD_OUT["sources"])


@pytest.mark.parametrize("case", ALL_CASES, ids=lambda c: c["id"])
def test_case_is_complete(case):
    assert KEYS <= set(case) <= KEYS | {"refused", "notes"}, set(case) ^ KEYS
    assert case["measure"] in published.MEASURES
    assert isinstance(case["published"], (int, float)) and case["published"] > 0
    assert case["cite"] and not case["args"].count("--json")
    if case["measure"] == "tflops_per_gpu":  # Eq. 3 needs the batch, the sequence and the model's shape
        assert case["model"].endswith(".yaml") and published.narayanan_flops(case) > 0


@pytest.mark.parametrize("case", ALL_CASES, ids=lambda c: c["id"])
def test_model_and_hardware_exist(case):
    model = case["model"]
    if model.endswith(".yaml"):
        assert model.startswith("benchmarks/models/") and (ROOT / model).is_file(), model
    else:
        assert (ROOT / "model_configs" / f"{model}.yaml").is_file(), f"{model} is not bundled"
    assert (ROOT / "model_configs" / "hardware" / f"{case['hardware']}.yaml").is_file(), case["hardware"]


@pytest.mark.parametrize("case", ALL_CASES, ids=lambda c: c["id"])
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


# Each benchmark model's size as its source prints it: Narayanan et al. 2021 Table 1 (billions, one
# decimal; their Eq. 2) and Table 2 (174.6B); Korthikanti et al. 2022 Table 3 ("22B"); the BLOOM paper
# (176,247M); Llama 2 70B's checkpoint (68,976,648,192 parameters).
PUBLISHED_SIZES = {"megatron-gpt-1.7b": (1.7e9, 1e8), "megatron-gpt-3.6b": (3.6e9, 1e8),
                   "megatron-gpt-7.5b": (7.5e9, 1e8), "megatron-gpt-18.4b": (18.4e9, 1e8),
                   "megatron-gpt-39.1b": (39.1e9, 1e8), "megatron-gpt-76.1b": (76.1e9, 1e8),
                   "megatron-gpt-145.6b": (145.6e9, 1e8), "megatron-gpt-310.1b": (310.1e9, 1e8),
                   "megatron-gpt-529.6b": (529.6e9, 1e8), "megatron-gpt-1t": (1008.0e9, 1e8),
                   "megatron-gpt-175b": (174.6e9, 1e8), "megatron-gpt-22b": (22e9, 1e9),
                   "bloom-176b": (176_247e6, 1e6), "llama-2-70b": (68_976_648_192, 1)}


def test_the_benchmark_models_have_their_published_sizes():
    """Every model under benchmarks/models/ counts as its source prints it, to the digits printed."""
    import llmcalc

    files = sorted((ROOT / "benchmarks" / "models").glob("*.yaml"))
    assert {f.stem for f in files} == set(PUBLISHED_SIZES)
    for f in files:
        printed, unit = PUBLISHED_SIZES[f.stem]
        total = llmcalc.count_params(llmcalc.load_model(str(f))).total
        assert round(total / unit) * unit == printed, (f.stem, total)
