"""The Typer application: one command per noun, errors mapped to exit codes in errors.py.

``app`` has every command. ``main`` (the console script) builds only the one named on the
command line, when one is: a command's module, and what it imports, is loaded only to run it."""

from __future__ import annotations

import sys
from importlib import import_module
from typing import Any, Iterable

import typer

from .errors import ErrorHandlingGroup, run

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


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"llmcalc {version('llmcalc-exact')}")
        except PackageNotFoundError:
            typer.echo("llmcalc (not installed)")
        raise typer.Exit()


def _main(_: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Show the version and exit.")) -> None:
    pass


def build(names: Iterable[str] = COMMANDS) -> typer.Typer:
    """The application with the commands ``names``."""
    application = typer.Typer(
        cls=ErrorHandlingGroup, add_completion=False, no_args_is_help=True,
        help="Exact, explained and checked numbers for transformer language models: parameters, "
             "FLOPs, memory and KV cache, verified against real PyTorch modules.")
    application.callback()(_main)
    for name in names:
        module, function = COMMANDS[name]
        application.command(name)(getattr(import_module(f".{module}", __package__), function))
    return application


def __getattr__(name: str) -> Any:
    if name == "app":  # built on first use, not by `main`
        globals()["app"] = build()
        return globals()["app"]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    # The group's own options (--help, --version) take no value, so the first argument, if it
    # is a command's name, is the command run. Anything else (no arguments, an option, an unknown
    # name: an error that suggests the nearest names) gets every command.
    named = sys.argv[1:2]
    run(build(named if named and named[0] in COMMANDS else COMMANDS))
