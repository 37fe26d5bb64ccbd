"""The Typer application: one command per noun, errors mapped to exit codes in errors.py."""

from __future__ import annotations

import typer

from . import flops_cmd, kvcache_cmd, memory_cmd, params_cmd, verify_cmd
from .errors import ErrorHandlingGroup

app = typer.Typer(
    cls=ErrorHandlingGroup, add_completion=False, no_args_is_help=True,
    help="Exact, explained and checked numbers for transformer language models: parameters, "
         "FLOPs, memory and KV cache, verified against real PyTorch modules.")


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"llmcalc {version('llmcalc')}")
        except PackageNotFoundError:
            typer.echo("llmcalc (not installed)")
        raise typer.Exit()


@app.callback()
def _main(_: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Show the version and exit.")) -> None:
    pass


app.command("models")(params_cmd.models)
app.command("params")(params_cmd.params)
app.command("flops")(flops_cmd.flops)
app.command("kvcache")(kvcache_cmd.kvcache)
app.command("memory")(memory_cmd.memory)
app.command("verify")(verify_cmd.verify)


def main() -> None:
    app()
