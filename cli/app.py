"""The command line: one command per noun, errors mapped to exit codes in errors.py.

``app`` is the Typer application with every command. ``main`` (the console script) imports
only the module of the command named on the command line (and what it imports), and reads its
options with options.parse when it can, so an analytic command never imports Typer; anything
parse leaves (``--help``, an error click words, no command) goes to Typer."""

from __future__ import annotations

import sys
from importlib import import_module
from typing import Any, Callable, Iterable, Optional

from .errors import guarded, run
from .options import parse, typer_command

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


def command(name: str) -> Callable:
    """The function of the command ``name``."""
    module, function = COMMANDS[name]
    return getattr(import_module(f".{module}", __package__), function)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        import typer

        try:
            typer.echo(f"llmcalc {version('llmcalc-exact')}")
        except PackageNotFoundError:
            typer.echo("llmcalc (not installed)")
        raise typer.Exit()


def build(names: Iterable[str] = COMMANDS):
    """The Typer application with the commands ``names``."""
    import typer

    from .group import ErrorHandlingGroup

    def _main(_: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                     help="Show the version and exit.")) -> None:
        pass

    application = typer.Typer(
        cls=ErrorHandlingGroup, add_completion=False, no_args_is_help=True,
        help="Exact, explained and checked numbers for transformer language models: parameters, "
             "FLOPs, memory and KV cache, verified against real PyTorch modules.")
    application.callback()(_main)
    for name in names:
        application.command(name)(typer_command(command(name)))
    return application


def __getattr__(name: str) -> Any:
    if name == "app":  # built on first use, not by `main`
        globals()["app"] = build()
        return globals()["app"]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def answer(argv: list[str], prog_name: Optional[str] = None) -> None:
    """Read the command line ``argv`` and answer it: the command named first, with the
    arguments parse reads, or else Typer with that command (or with every command, where the
    first word is none: no arguments, an option, an unknown name that Typer matches to the
    nearest)."""
    named = argv[:1] if argv and argv[0] in COMMANDS else []
    if named:
        function = command(named[0])
        kwargs = parse(function, argv[1:])
        if kwargs is not None:
            with guarded():
                function(**kwargs)
            return
    build(named or COMMANDS)(args=argv, prog_name=prog_name)


def main() -> None:
    run(lambda: answer(sys.argv[1:]))
