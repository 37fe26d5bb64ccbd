"""Options and model loading shared by every command."""

from __future__ import annotations

from typing import Optional

import typer

from analysis.config import ModelConfig, bundled_names, load_model
from analysis.params import count_params

ModelsArg = typer.Argument(
    None, metavar="[MODEL]...",
    help="Bundled name (see `llmcalc models`), a YAML file, or a Hugging Face config.json. "
         "None: every bundled model.")
JsonOpt = typer.Option(False, "--json", help="Print only JSON to stdout.")


def family_order(cfg: ModelConfig) -> tuple[str, int]:
    return cfg.name.split("-")[0], count_params(cfg).total


def load_models(specs: Optional[list[str]]) -> list[ModelConfig]:
    """The configs named on the command line, or every bundled one (by family, then size)."""
    if specs:
        return [load_model(s) for s in specs]
    return sorted((load_model(n) for n in bundled_names()), key=family_order)


def one_or_list(items: list, single: bool):
    return items[0] if single else items
