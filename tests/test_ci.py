"""The GitHub Actions workflow and the pre-commit hook the docs give (docs/examples/, included in
docs/ci.md): the workflow parses and its verify step runs, the hook runs on a small model."""

import re
import shlex
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.reference

EXAMPLES = Path(__file__).resolve().parent.parent / "docs" / "examples"
SMALL = """name: small
vocab_size: 320
context_length: 64
d_model: 64
n_layers: 2
n_heads: 4
d_ff: 128
position: rope
norm: rmsnorm
activation: swiglu
"""


def test_the_docs_include_both_files():
    page = (EXAMPLES.parent / "ci.md").read_text()
    for name in ("github-actions.yml", "pre-commit-config.yaml"):
        assert f'--8<-- "docs/examples/{name}"' in page


def test_the_workflow_runs_verify_and_reports_its_junit(run, tmp_path, monkeypatch):
    workflow = yaml.safe_load((EXAMPLES / "github-actions.yml").read_text())
    on = workflow.get("on", workflow.get(True))  # YAML 1.1 reads the key `on` as true
    assert set(on) == {"pull_request", "push"}
    (job,) = workflow["jobs"].values()
    steps = {step.get("name", step.get("uses")): step for step in job["steps"]}
    command = steps["Verify the model configs"]["run"]
    junit = re.search(r"--junit (\S+)", command).group(1)
    assert steps["Report each check"]["with"]["report_paths"] == junit
    assert "--index-url https://download.pytorch.org/whl/cpu" in steps[
        "Install llmcalc and the CPU build of PyTorch (the default index serves the CUDA one)"]["run"]
    # the step itself, in the runner's working directory, on one small model
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "small.yaml").write_text(SMALL)
    monkeypatch.chdir(tmp_path)
    args = shlex.split(command.replace("models/*.yaml", "models/small.yaml"))
    assert args[:2] == ["llmcalc", "verify"]
    result = run(*args[1:])
    assert result.exit_code == 0, result.output
    (suite,) = ET.parse(tmp_path / junit).getroot().iter("testsuite")
    assert suite.get("name") == "small" and suite.get("failures") == "0" and int(suite.get("tests")) > 50


def test_the_pre_commit_hook_runs_on_a_small_model(run, tmp_path):
    (repo,) = yaml.safe_load((EXAMPLES / "pre-commit-config.yaml").read_text())["repos"]
    (hook,) = repo["hooks"]
    files = re.compile(hook["files"])
    assert files.search("models/small.yaml") and files.search("models/config.json")
    assert not files.search("README.md") and not files.search("src/models.py")
    entry = shlex.split(hook["entry"])
    assert entry[:2] == ["llmcalc", "verify"]
    good, bad = tmp_path / "small.yaml", tmp_path / "bad.yaml"
    good.write_text(SMALL)
    bad.write_text(SMALL + "n_kv_heads: 3\n")
    assert run(*entry[1:], good).exit_code == 0  # pre-commit appends the changed files
    refused = run(*entry[1:], good, bad)
    assert refused.exit_code == 2 and "key 'n_kv_heads': must divide n_heads (4), got 3" in refused.stderr
