"""The CUDA path of `llmcalc verify`.

The tests marked ``gpu`` need a CUDA device; the default run deselects them (pyproject's
``addopts``), and ``python -m pytest -q -m gpu`` runs them on a machine with one.
"""

import json

import pytest
import torch

from llmcalc.analysis.config import load_bundled
from llmcalc.analysis.verify.gpu import PEAK_TOLERANCE, gpu_checks

needs_gpu = pytest.mark.gpu


@needs_gpu
def test_gpu_checks_gpt2_small():
    checks = gpu_checks(load_bundled("gpt2-small"), 512, 2)
    peak = checks[0]
    assert peak.name.endswith("peak memory (bytes)")
    assert abs(peak.measured - peak.analytic) <= PEAK_TOLERANCE * peak.analytic
    assert all(c.measured > 0 for c in checks)


@needs_gpu
def test_verify_cuda_json(run):
    data = json.loads(run("verify", "gpt2-small", "--device", "cuda", "--json").stdout)
    assert data["device"] == "cuda" and data["ok"]


def test_cuda_without_gpu_is_a_usage_error(run, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    result = run("verify", "gpt2-small", "--device", "cuda")
    assert (result.exit_code, result.stderr) == (
        2, "Error: --device cuda: no CUDA device is available (try --device meta or cpu)\n")
