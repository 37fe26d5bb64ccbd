"""Fixtures shared by the test modules (modules never import each other; shared data such as
hypothesis strategies lives in tests/strategies.py)."""

import pytest
from typer.testing import CliRunner

from llmcalc.cli.app import app


@pytest.fixture
def run():
    """Invoke the CLI in-process; returns click's Result (exit_code, stdout, stderr)."""
    runner = CliRunner()

    def invoke(*args: str):
        return runner.invoke(app, [str(a) for a in args])

    return invoke


@pytest.fixture
def config_file(tmp_path):
    """Write a config's text to a fresh file under tmp_path and return its path."""
    def write(text: str, name: str = "model.yaml"):
        path = tmp_path / name
        path.write_text(text)
        return path

    return write
