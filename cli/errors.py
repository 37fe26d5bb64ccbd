"""The one place where domain errors become exit codes (DESIGN.md section 5)."""

from __future__ import annotations

import sys

import typer
from typer.core import TyperGroup

from ..analysis.config import ConfigError

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class UsageError(ValueError):
    """A bad option value (``--seq 0``, ``--budget 12XB``): exit 2, one line on stderr."""


class VerificationFailed(Exception):
    """A check of `llmcalc verify` failed (the report is already printed): exit 1."""


class ErrorHandlingGroup(TyperGroup):
    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except VerificationFailed:
            raise typer.Exit(EXIT_FAILED) from None
        except (ConfigError, UsageError) as exc:
            print(f"Error: {exc}", file=sys.stderr)
            raise typer.Exit(EXIT_USAGE) from None
