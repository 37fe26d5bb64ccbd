"""The README's command examples are real: each ```console block starting with
`$ llmcalc ...` must show exactly what that command prints to stdout today.

Refresh them after a deliberate change with `python tests/test_readme.py`.
"""

import re
import shlex
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCK = re.compile(r"```console\n\$ (llmcalc [^\n]*)\n(.*?)```", re.S)


def _run(command: str) -> str:
    from typer.testing import CliRunner

    from llmcalc.cli.app import app

    result = CliRunner().invoke(app, shlex.split(command)[1:])
    assert result.exit_code in (0, 1), (command, result.stderr)
    return result.stdout


def _blocks():
    return BLOCK.findall(README.read_text())


def test_readme_has_examples_of_every_command():
    shown = {cmd.split()[1] for cmd, _ in _blocks()}
    assert {"models", "params", "flops", "kvcache", "memory", "verify"} <= shown


@pytest.mark.parametrize("command, shown", _blocks(), ids=[c for c, _ in _blocks()])
def test_readme_output_is_current(command, shown):
    assert _run(command) == shown


if __name__ == "__main__":
    text = README.read_text()
    new = BLOCK.sub(lambda m: f"```console\n$ {m.group(1)}\n{_run(m.group(1))}```", text)
    README.write_text(new)
    print(f"refreshed {len(BLOCK.findall(new))} examples", file=sys.stderr)
