"""Fixtures shared by the test modules (modules never import each other; shared data such as
hypothesis strategies lives in tests/strategies.py, the console script in-process in
tests/console.py)."""

import gc
import importlib.util
import os
import re
import sys

import pytest

from llmcalc.analysis.load.catalog import MODEL_DIR
from tests.console import llmcalc

TIERS = ("unit", "reference")  # unit: no torch, the whole tier in about 40 s on 2 cores; reference: torch


def pytest_configure(config):
    """Under pytest-xdist (`-n 2`, one worker per core) each worker computes on one thread: torch's
    intra-op threads would only contend with the other worker (torch reads it when first imported;
    subprocesses inherit it)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        os.environ["OMP_NUM_THREADS"] = "1"


def pytest_collection_modifyitems(config, items):
    """Every test is in exactly one tier (its module's ``pytestmark``, or its own mark in a module of
    both). A run of unit tests only (``-m unit``) then fails any test that imports torch. The tests
    marked ``slow`` run first (in their order): under pytest-xdist no test of several seconds starts
    last while the other worker has nothing left to run."""
    for item in items:
        tiers = [t for t in TIERS if item.get_closest_marker(t)]
        if len(tiers) != 1:
            raise pytest.UsageError(f"{item.nodeid}: marked {tiers or 'with no tier'}; one of {TIERS} (pyproject)")
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    """The cyclic garbage collector out of the way (below). A unit-only run: torch made unimportable. A run
    with reference tests: the meta device on torch's C++ meta functions, as `llmcalc verify` runs it
    (analysis/verify/meta_kernels.py)."""
    if not session.items:  # pytest-xdist's controller: its workers collect and run the tests
        return
    # The tests build thousands of modules, each a web of cycles: at the default thresholds the cyclic
    # collector ran thousands of times, about 7% of the suite's time (test_hf.py), walking what collection
    # made and every test keeps. Frozen, and run every 100,000 allocations instead of 700.
    gc.collect()
    gc.freeze()
    gc.set_threshold(100_000, 50, 1000)
    if all(item.get_closest_marker("unit") for item in session.items):
        sys.modules["torch"] = None  # `import torch` now raises ImportError
    elif importlib.util.find_spec("torch") is not None:  # reference tests: torch on meta (imported here)
        from llmcalc.analysis.verify.meta_kernels import use_cpp_meta

        use_cpp_meta(True)


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
