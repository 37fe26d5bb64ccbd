"""The command line: one Typer application, one command per noun.

Each command is a function of a command module (``models`` and ``params`` share one, as do ``time``
and ``hardware``), declared with Typer's options (:mod:`.options`).
The group imports a command's module and has Typer build it only when the command line names it
(click's lazily loaded subcommands), so ``llmcalc params`` loads neither the modules of the other
commands nor the analysis they use: startup is within 1.3x of importing the CLI's own stack
(DESIGN.md section 6). ``--help`` and shell completion list every command, loading them all.
Errors become exit codes in :mod:`.errors`, the one place that maps them."""

from __future__ import annotations

import inspect
import sys
from importlib import import_module
from typing import Annotated, Optional

import typer
from typer.core import TyperGroup

from .. import __version__
from .errors import EXIT_INTERRUPTED, EXIT_OK, guarded, reader_may_leave, run, usage_error
from .terminal import drop_warnings, say_warnings

# command -> (module in this package, function); in the order --help lists them
COMMANDS = {
    "models": ("params_cmd", "models"),
    "params": ("params_cmd", "params"),
    "flops": ("flops_cmd", "flops"),
    "kvcache": ("kvcache_cmd", "kvcache"),
    "memory": ("memory_cmd", "memory"),
    "time": ("time_cmd", "time_command"),
    "plan": ("plan_cmd", "plan"),
    "hardware": ("time_cmd", "hardware"),
    "verify": ("verify_cmd", "verify"),
    "plot": ("plot_cmd", "plot"),
}

# commands with sub-commands: command -> {sub-command: (module, function)}; the command's own
# function runs when no sub-command is named (`llmcalc hardware` lists, `hardware calibrate` measures)
SUBCOMMANDS = {"hardware": {"calibrate": ("calibrate_cmd", "calibrate")}}


def command(name: str):
    """The function of the command ``name``."""
    module, function = COMMANDS[name]
    return getattr(import_module(f".{module}", __package__), function)


def help_text(function) -> str:
    """A command's docstring as ``--help`` shows it: each paragraph of prose one line, for the
    terminal to wrap (Typer keeps a docstring's line breaks), the examples as written."""
    paragraphs = inspect.cleandoc(function.__doc__ or "").split("\n\n")
    return "\n\n".join(p if p.startswith("Examples:") else " ".join(p.split()) for p in paragraphs)


def summary(function) -> str:
    """The first sentence of a command's docstring: its entry in ``llmcalc --help``."""
    head, dot, _ = help_text(function).partition("\n\n")[0].partition(". ")
    return head + "." if dot else head


def _own(function):
    """``function`` as the callback of its group: run when the command line names no sub-command."""
    def own(ctx: typer.Context, **kwargs) -> None:
        if ctx.invoked_subcommand is None:
            function(**kwargs)

    signature = inspect.signature(function)
    context = inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context)
    own.__signature__ = signature.replace(parameters=[context, *signature.parameters.values()])  # type: ignore
    own.__annotations__ = {**function.__annotations__, "ctx": typer.Context}
    own.__doc__ = function.__doc__
    return own


def group(name: str):
    """The command ``name`` with its :data:`SUBCOMMANDS`, each built by Typer."""
    function = command(name)
    one = typer.Typer(add_completion=False)
    one.callback(invoke_without_command=True, help=help_text(function), short_help=summary(function))(_own(function))
    for sub, (module, attribute) in SUBCOMMANDS[name].items():
        subcommand = getattr(import_module(f".{module}", __package__), attribute)
        one.command(sub, help=help_text(subcommand), short_help=summary(subcommand))(subcommand)
    built = typer.main.get_command(one)
    built.name = name  # Typer names a group after its callback
    return built


class Commands(TyperGroup):
    """The commands of :data:`COMMANDS`, each built by Typer when asked for; click's own errors said
    in one line like every other error (errors.usage_error), where Typer would print a box."""

    def list_commands(self, ctx) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx, name: str):
        if name not in COMMANDS:
            return None
        if name in SUBCOMMANDS:
            return group(name)
        one = typer.Typer(add_completion=False)
        function = command(name)
        one.command(name, help=help_text(function), short_help=summary(function))(function)
        return typer.main.get_command(one)

    def main(self, *args, standalone_mode: bool = True, **kwargs):
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)
        try:
            code = super().main(*args, standalone_mode=False, **kwargs)
        except typer.Abort:  # end of input at a prompt
            code = EXIT_INTERRUPTED
        except Exception as exc:  # click's errors carry their message and exit code
            if not hasattr(exc, "format_message"):
                raise
            code = usage_error(exc)
        sys.exit(code if isinstance(code, int) else EXIT_OK)

    def make_context(self, *args, **kwargs):
        with reader_may_leave():  # --help and --version print while the command line is parsed
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx):
        try:
            with guarded():
                result = super().invoke(ctx)
                say_warnings()  # those of a command that wrote no report (plot)
                return result
        finally:
            drop_warnings()  # those of a command that failed: its one line is the error


def _version(value: bool) -> None:
    if value:
        typer.echo(f"llmcalc {__version__}")
        raise typer.Exit()


app = typer.Typer(
    cls=Commands, no_args_is_help=True,
    help="Exact, explained and checked numbers for transformer language models: parameters, FLOPs, memory and KV "
         "cache, verified against real PyTorch modules.")


@app.callback()
def _main(version_: Annotated[Optional[bool], typer.Option(
        "--version", callback=_version, is_eager=True, help="Show the version and exit.")] = None) -> None:
    pass


def main() -> None:
    """The application as a process (errors.run, the one boundary); the console script
    (:mod:`.__main__`) runs it."""
    run(lambda: app(prog_name="llmcalc"))
