"""Fixtures shared by the test modules (modules never import each other; shared data such as
hypothesis strategies lives in tests/strategies.py, the console script in-process in
tests/console.py)."""

import os
import re

import pytest

from llmcalc.analysis.load.catalog import MODEL_DIR
from tests.console import llmcalc


def pytest_configure(config):
    """Under pytest-xdist (`-n 2`, one worker per core) each worker computes on one thread: torch's
    intra-op threads would only contend with the other worker. Subprocesses inherit it."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        os.environ["OMP_NUM_THREADS"] = "1"
        import torch

        torch.set_num_threads(1)


@pytest.fixture
def run():
    """Run the console script in-process (tests/console.py); returns exit_code, stdout, stderr."""
    return llmcalc


@pytest.fixture
def config_file(tmp_path):
    """Write a config's text to a fresh file under tmp_path and return its path."""
    def write(text: str, name: str = "model.yaml"):
        path = tmp_path / name
        path.write_text(text)
        return path

    return write


@pytest.fixture
def bundled_copy(config_file):
    """A bundled model's YAML with ``n_layers`` layers, written as ``<name>.yaml`` under tmp_path:
    its shapes at a fraction of verify's time (CI verifies every bundled model whole)."""
    def write(name: str, n_layers: int):
        text = (MODEL_DIR / f"{name}.yaml").read_text()
        return config_file(re.sub(r"(?m)^n_layers: \d+$", f"n_layers: {n_layers}", text), f"{name}.yaml")

    return write
