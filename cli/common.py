"""Options and model loading shared by every command."""

from __future__ import annotations

from typing import Optional

import typer

from ..analysis.config import ModelConfig, bundled_names, load_model
from ..analysis.params import count_params
from .errors import UsageError
from .render import warn

ModelsArg = typer.Argument(
    None, metavar="[MODEL]...",
    help="Bundled name (see `llmcalc models`), a YAML file, or a Hugging Face config.json. "
         "None: every bundled model.")
JsonOpt = typer.Option(False, "--json", help="Print only JSON to stdout.")
BatchOpt = typer.Option(1, "--batch", help="Sequences.")
ExactOpt = typer.Option(False, "--exact", help="Exact integers instead of units.")


def family(cfg: ModelConfig) -> str:
    """The leading all-letter words of the name: ``llama-3.1-8b`` -> ``llama``, ``gpt2-xl`` ->
    ``gpt``, ``gpt-oss-20b`` -> ``gpt-oss``."""
    import re

    return re.match(r"[a-z]*(?:-[a-z]+(?![a-z0-9]))*", cfg.name.lower()).group(0) or cfg.name


def family_order(cfg: ModelConfig) -> tuple[str, int]:
    return family(cfg), count_params(cfg).total


def load_models(specs: Optional[list[str]]) -> list[ModelConfig]:
    """The configs named on the command line, or every bundled one (by family, then size)."""
    if specs:
        return [load_model(s) for s in specs]
    return sorted((load_model(n) for n in bundled_names()), key=family_order)


def one_or_list(items: list, specs: Optional[list[str]]):
    """JSON shape: an object for one model named on the command line, else a list."""
    return items[0] if specs and len(items) == 1 else items


def parse_seqs(text: Optional[str], option: str = "--seq") -> list[Optional[int]]:
    """A comma list of positive integers; None (the model's context length) when not given."""
    if text is None:
        return [None]
    out = []
    for part in text.split(","):
        try:
            value = int(part.strip().replace("_", ""))
        except ValueError:
            raise UsageError(f"{option} expects positive integers (a comma list), got {part!r}") from None
        out.append(positive(value, option))
    return out


def positive(value: int, option: str) -> int:
    if value < 1:
        raise UsageError(f"{option} must be >= 1, got {value}")
    return value


def choice(value: str, choices: tuple[str, ...], option: str) -> str:
    if value not in choices:
        raise UsageError(f"{option} must be one of {', '.join(choices)}, got {value!r}")
    return value


def warn_past_context(cfg: ModelConfig, seq: int) -> None:
    if seq > cfg.context_length:
        warn(f"{cfg.name}: --seq {seq:,} exceeds its context length ({cfg.context_length:,}); "
             "computing anyway")


_SIZE_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
               "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
               "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


def parse_size(text: str, option: str = "--budget") -> int:
    """'80GiB', '80GB', '24G' (= GiB), '512MiB', '1e9' -> bytes. GB = 10^9, GiB = 2^30."""
    import math
    import re

    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][0-9]+)?)\s*([a-zA-Z]*)\s*", text)
    unit = m.group(2).lower() if m else None
    if m is None or unit not in _SIZE_UNITS:
        raise UsageError(f"{option} expects a size such as 80GiB, 80GB, 24G or 512MiB, got {text!r}")
    value = float(m.group(1)) * _SIZE_UNITS[unit]
    if not math.isfinite(value):
        raise UsageError(f"{option} is too large: {text!r}")
    return positive(int(value), option)


def dtype_option(value: Optional[str], default: str, option: str) -> str:
    from ..analysis.config import DTYPE_BITS

    return choice(value or default, tuple(DTYPE_BITS), option)


def checked_dtypes(dtype: Optional[str], weights_dtype: Optional[str], kv_dtype: Optional[str]) -> None:
    """The dtype options as given (None: RunSpec's defaults); compute must be a float type."""
    from ..analysis.config import FLOAT_DTYPES

    for value, option in ((dtype, "--dtype"), (weights_dtype, "--weights-dtype"), (kv_dtype, "--kv-dtype")):
        if value is not None:
            dtype_option(value, value, option)
    if dtype is not None and dtype not in FLOAT_DTYPES:
        raise UsageError(f"--dtype must be a float type ({', '.join(FLOAT_DTYPES)}) for compute, "
                         f"got {dtype!r}; quantized weights: --weights-dtype")


DtypeOpt = typer.Option(None, "--dtype", help="Compute dtype (fp32 | bf16 | fp16). Default: bf16 for "
                        "training; for inference the model's dtype, or bf16 when it is quantized.")
WeightsDtypeOpt = typer.Option(None, "--weights-dtype", help="Stored weights, e.g. int4 (default: the "
                               "compute dtype for training, the model's dtype for inference).")
KvDtypeOpt = typer.Option(None, "--kv-dtype", help="KV-cache dtype: fp32 | fp16 | bf16 | fp8 | int8 | int4 "
                          "(default: the compute dtype).")
