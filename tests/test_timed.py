"""Timed runs of `llmcalc verify` (analysis.verify.timed): the path runs on the CPU here; the
parts that need a CUDA device (events, peak memory) are the tests marked ``gpu``, which the
default run deselects (pyproject's ``addopts``); ``python -m pytest -q -m gpu`` runs them."""

import json
import types

import pytest
import torch

from llmcalc.analysis.load.catalog import load_bundled
from llmcalc.analysis.perf.hardware import for_device, load_hardware
from llmcalc.analysis.perf.roofline import roofline
from llmcalc.analysis.spec import RunSpec
from llmcalc.analysis.verify import timed
from llmcalc.analysis.verify.checks import small_config
from llmcalc.analysis.verify.timed import PEAK_TOLERANCE, RUNS, WARMUP, median_seconds, timed_checks

pytestmark = pytest.mark.reference

CPU_SPEC = """name: laptop
memory: 16GB
memory_bandwidth: 50GB/s
peak_flops: {fp32: 1TFLOP/s}
"""
METRICS = ("time (s)", "achieved TFLOP/s", "achieved GB/s", "fraction of roofline")


def test_median_seconds_runs_warmup_then_takes_the_median(monkeypatch):
    """A scripted clock: the warm-up runs untimed, then timed runs of 10, 200, 10, 30 and 20 ms, whose
    median is 20 ms (their mean 54 ms)."""
    durations = [0.010, 0.200, 0.010, 0.030, 0.020]
    assert RUNS == len(durations)
    ticks = iter(t for d in durations for t in (0.0, d))  # each timed run reads the clock before and after
    monkeypatch.setattr(timed, "time", types.SimpleNamespace(perf_counter=lambda: next(ticks)))  # timed's clock
    calls = []
    assert median_seconds(lambda: calls.append(None), "cpu") == 0.020
    assert len(calls) == WARMUP + RUNS and next(ticks, None) is None


@pytest.mark.parametrize("name, spec", [
    ("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA H100 PCIe", "h100-pcie"), ("NVIDIA H200", "h200"),
    ("NVIDIA A100-SXM4-80GB", "a100-80gb"), ("NVIDIA A100-SXM4-40GB", "a100-40gb"), ("NVIDIA L40S", "l40s"),
    ("NVIDIA L4", "l4"), ("NVIDIA A10G", "a10g"), ("NVIDIA GeForce RTX 4090", "rtx-4090"),
    ("AMD Instinct MI300X", "mi300x"), ("NVIDIA B200", "b200"),
    # datasheets other than the bundled ones: no guess
    ("NVIDIA A100 80GB PCIe", None), ("NVIDIA H100 NVL", None), ("NVIDIA L40", None),
    ("NVIDIA GeForce RTX 4090 D", None), ("NVIDIA H200 NVL", None),
])
def test_device_names_map_to_their_own_datasheet_only(name, spec):
    assert for_device(name) == spec


@pytest.mark.parametrize("model", ["gpt2-small", "mistral-7b", "mixtral-8x7b", "deepseek-v3", "gpt-oss-20b"])
def test_every_phase_is_timed_against_its_roofline_on_cpu(model, tmp_path):
    path = tmp_path / "laptop.yaml"
    path.write_text(CPU_SPEC)
    cfg, hw = small_config(load_bundled(model)), load_hardware(str(path))
    checks = {c.name: c for c in timed_checks(cfg, "cpu", 16, 2, hw)}
    phases = ("prefill 16", "decode 17", "train 16")
    # fp32 on the CPU; the training step is timed without its optimizer step
    for phase, mode, seq in zip(phases, ("prefill", "decode", "train"), (16, 17, 16)):
        r = roofline(cfg, RunSpec(mode, seq, 2, dtype="fp32", weights_dtype="fp32",
                                  kv_dtype=None if mode == "train" else "fp32"), hw)
        optimizer = r.components["optimizer"].time_s if mode == "train" else 0.0
        assert checks[f"laptop/{phase}/time (s), info"].analytic == pytest.approx(r.time_s - optimizer)
        assert optimizer > 0 or mode != "train"
    assert list(checks) == [f"laptop/{p}/{m}, info" for p in phases for m in METRICS]
    for p in phases:
        t, tflops, gbs, frac = (checks[f"laptop/{p}/{m}, info"] for m in METRICS)
        assert t.measured > 0 and t.analytic > 0
        # the achieved rates and the fraction are the roofline's work over the measured time
        assert tflops.measured == pytest.approx(tflops.analytic * t.analytic / t.measured)
        assert gbs.measured == pytest.approx(gbs.analytic * t.analytic / t.measured)
        assert frac.measured == pytest.approx(t.analytic / t.measured)
    # a decode step reads every weight for one token per sequence: lower FLOP/s on the same roof
    assert (checks["laptop/decode 17/achieved TFLOP/s, info"].analytic
            < checks["laptop/prefill 16/achieved TFLOP/s, info"].analytic)


def test_verify_cpu_with_hardware_times_the_phases(run, config_file):
    spec = config_file(CPU_SPEC, "laptop.yaml")
    model = config_file("name: tiny\nvocab_size: 97\ncontext_length: 64\nd_model: 32\nn_layers: 2\n"
                        "n_heads: 4\nd_ff: 64\n")
    result = run("verify", model, "--device", "cpu", "--hardware", spec, "--seq", "16", "--json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert (data["device"], data["hardware"], data["ok"]) == ("cpu", "laptop", True)
    assert sum(c["name"].startswith("laptop/") for c in data["checks"]) == 3 * len(METRICS)


@pytest.mark.parametrize("args, message", [
    (["--device", "meta", "--hardware", "h100"],
     "--hardware applies to --device cuda or cpu (meta runs no real tensors to time)"),
    (["--against", "transformers", "--hardware", "h100"],
     "--hardware does not apply to --against transformers (nothing is timed)"),
    (["--device", "cpu", "--hardware", "h1000"], None),
])
def test_hardware_misuse_exits_2(run, args, message):
    result = run("verify", "gpt2-small", *args)
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr.count("\n") == 1
    if message:
        assert result.stderr == f"Error: {message}\n"


def test_cuda_without_gpu_is_a_usage_error(run, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    result = run("verify", "gpt2-small", "--device", "cuda")
    assert (result.exit_code, result.stderr) == (
        2, "Error: --device cuda: no CUDA device is available (try --device meta or cpu)\n")


def test_cuda_device_without_a_bundled_spec_asks_for_hardware(run, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H100 NVL")
    result = run("verify", "gpt2-small", "--device", "cuda")
    assert (result.exit_code, result.stderr) == (
        2, "Error: --device cuda: 'NVIDIA H100 NVL' is not a bundled accelerator; pass --hardware NAME|FILE "
           "(`llmcalc hardware`, or your own YAML)\n")


@pytest.mark.gpu
def test_gpu_phases_and_training_peak_gpt2_small():
    hw = load_hardware(for_device(torch.cuda.get_device_name(0)) or "h100")
    checks = {c.name.split("/", 1)[1]: c for c in timed_checks(load_bundled("gpt2-small"), "cuda", 512, 8, hw)}
    peak = checks["train 512/peak memory (bytes)"]
    assert abs(peak.measured - peak.analytic) <= PEAK_TOLERANCE * peak.analytic
    assert all(c.measured > 0 for c in checks.values())
    assert 0 < checks["decode 513/fraction of roofline, info"].measured <= 1.0


@pytest.mark.gpu
def test_verify_cuda_json(run):
    data = json.loads(run("verify", "gpt2-small", "--device", "cuda", "--json").stdout)
    assert data["device"] == "cuda" and data["ok"] and data["hardware"]
