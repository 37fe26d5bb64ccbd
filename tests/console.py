"""The console script run in-process, as a user gets it: the `run` fixture (conftest.py) and the
docs' examples (test_docs.py) both use it."""

import sys
from typing import NamedTuple

from typer.testing import CliRunner

from llmcalc.cli.app import app
from llmcalc.cli.errors import run


class Ran(NamedTuple):
    exit_code: int
    stdout: str
    stderr: str
    output: str  # stdout and stderr as written, interleaved


def llmcalc(*args: str) -> Ran:
    """``llmcalc ARGS...`` with CliRunner's captured streams. (An exit code of 130, Ctrl-C, would
    end this process: errors.run leaves with os._exit; interrupts are tested in subprocesses.)"""
    with CliRunner().isolation() as streams:
        try:
            run(lambda: app([str(a) for a in args], prog_name="llmcalc"))
        except SystemExit as exc:
            code = exc.code
        sys.stdout.flush()
        sys.stderr.flush()
        return Ran(code, *(s.getvalue().decode("utf-8", "replace") for s in streams))


LINE = 300  # a short error line: the longest message llmcalc writes plus a pytest tmp path


def error_line(result: Ran) -> str:
    """The one ``Error:`` line of a bad-input result (exit 2, nothing on stdout)."""
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert result.stdout == ""
    assert result.stderr.endswith("\n") and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("Error: ") and len(result.stderr) <= LINE, result.stderr
    return result.stderr
