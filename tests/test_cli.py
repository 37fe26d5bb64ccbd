"""The command line as Typer declares it: choices in --help, shell completion, the version."""

import os
import shlex
import subprocess
import sys

import pytest

from llmcalc import __version__

pytestmark = pytest.mark.unit

LLMCALC = [sys.executable, "-c", "import sys; sys.argv[0] = 'llmcalc'; from llmcalc.cli.__main__ import main; main()"]


@pytest.mark.parametrize("command, choices", [
    ("flops", ["train|prefill|decode", "eager|flash", "none|selective|op|full", "table|json|csv|markdown"]),
    ("memory", ["train|inference", "adam|adamw|sgd|sgd-momentum", "fp32|bf16|fp16"]),
    ("time", ["train|prefill|decode|generate"]),
    ("verify", ["auto|meta|cpu|cuda", "transformers"]),
])
def test_help_lists_the_choices(run, monkeypatch, command, choices):
    monkeypatch.setenv("COLUMNS", "200")
    shown = run(command, "--help").stdout
    assert all(c in shown for c in choices), shown


def test_help_shows_the_option_groups_in_their_panels(run, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    shown = run("memory", "--help").stdout
    for panel in ("Workload", "Dtypes", "Parallel layout", "LoRA", "Output"):
        assert f"─ {panel} ─" in shown, panel


def test_help_is_wrapped_by_the_terminal_not_the_docstring(run, monkeypatch):
    """A command's entry in `llmcalc --help` is its first sentence on one line, and its own help
    joins a paragraph's lines (Typer keeps a docstring's line breaks)."""
    monkeypatch.setenv("COLUMNS", "300")
    listed = run("--help").stdout
    assert "│ params    Exact parameter counts: a per-component breakdown for one model, a row per model for " \
           "several." in listed
    assert "With --lora-rank" not in listed
    shown = run("verify", "--help").stdout
    assert " Checked: parameters, forward/backward matmul FLOPs (FlopCounterMode), bytes saved for backward, " \
           "KV-cache bytes; on cpu also cached decode, rolling buffer, chunked prefill, GQA and RoPE" in shown


def _complete(*words: str) -> list[str]:
    """What the shell gets for the last of ``words`` (bash's protocol, as the installed script asks)."""
    env = {**os.environ, "_LLMCALC_COMPLETE": "complete_bash", "COMP_WORDS": " ".join(["llmcalc", *words]),
           "COMP_CWORD": str(len(words))}
    out = subprocess.run(LLMCALC, env=env, capture_output=True, text=True, check=True)
    return out.stdout.split()


def test_completion_offers_commands_options_and_choices():
    assert _complete("fl") == ["flops"]
    assert "--attention" in _complete("flops", "--att")
    assert _complete("flops", "--mode", "") == ["train", "prefill", "decode"]
    assert _complete("params", "mis") == ["mistral-7b"]  # bundled names; a shell completes paths otherwise
    assert _complete("time", "gpt2-small", "--hardware", "h1") == ["h100", "h100-96gb-500w", "h100-pcie"]


def test_install_completion_writes_the_script(tmp_path):
    # Typer finds the shell among the process's parents (shellingham), as a user types it in bash: the
    # command runs in a bash that waits for it (not exec'd), whatever started the tests.
    env = {**os.environ, "HOME": str(tmp_path)}
    line = f"{shlex.join(LLMCALC)} --install-completion; exit $?"
    out = subprocess.run(["bash", "-c", line], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    script = (tmp_path / ".bash_completions" / "llmcalc.sh").read_text()
    assert "_LLMCALC_COMPLETE=complete_bash" in script
    assert "llmcalc.sh" in (tmp_path / ".bashrc").read_text()


def test_version(run):
    assert run("--version").stdout == f"llmcalc {__version__}\n"
