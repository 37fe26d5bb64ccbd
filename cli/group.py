"""The Typer group of every command: click's own errors as one line, like every other error."""

from __future__ import annotations

import sys

import typer
from typer.core import TyperGroup

from .errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, guarded, reader_may_leave, say

try:  # typer 0.27 carries its own copy of click
    from typer._click import exceptions as click_exceptions
except ImportError:  # earlier typer uses click itself
    from click import exceptions as click_exceptions  # type: ignore[no-redef]


class ErrorHandlingGroup(TyperGroup):
    def main(self, *args, standalone_mode: bool = True, **kwargs):
        """Parse and run the command line: click's usage errors (unknown option or command,
        a value click cannot convert) as one line, like every other error, where Typer would
        print a box; then exit with the code."""
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)
        try:
            code = super().main(*args, standalone_mode=False, **kwargs)
        except click_exceptions.ClickException as exc:
            if type(exc).__name__ != "NoArgsIsHelpError":  # its help is already printed (Typer tests it so)
                say(exc.format_message())
            code = EXIT_USAGE
        except typer.Abort:  # end of input at a prompt (typer < 0.27: Ctrl-C too)
            code = EXIT_INTERRUPTED
        sys.exit(code if isinstance(code, int) else EXIT_OK)

    def make_context(self, *args, **kwargs):
        with reader_may_leave():  # --help and --version print while the command line is parsed
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx):
        with guarded():
            return super().invoke(ctx)
