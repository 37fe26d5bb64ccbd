"""The rules between a config's keys, and :func:`from_dict`, the one way a mapping of keys
becomes a checked :class:`ModelConfig` (each key's own check is its field's, in
:mod:`analysis.model.config`)."""

from __future__ import annotations

from typing import Any

from ..errors import shorten
from .architecture import build
from .config import Checker, ModelConfig, read_fields
from .formats import WEIGHT_FORMATS, quantized
from .rules import check_rules


def from_dict(raw: Any, source: str | None = None, lines: dict[str, int] | None = None) -> ModelConfig:
    """Validate a mapping of YAML keys and build a ModelConfig (or raise ConfigError)."""
    check = Checker(source, lines or {})
    cfg = read_fields(ModelConfig, raw, check)
    check_rules(cfg, raw, check)
    if cfg.dtype in WEIGHT_FORMATS:
        _format_checks(cfg, check)
    return cfg


def _format_checks(cfg: ModelConfig, check: Checker) -> None:
    """``quant_skip`` names the model's linears (breakdown keys or their prefixes; the LM head's whether
    tied or not)."""
    model = build(cfg)
    keys = [m.key for m, _ in model.layer_linears()] + [model.head.linear.key]
    unknown = [s for s in cfg.quant_skip or () if all(quantized(k, (s,)) for k in keys)]
    if unknown:
        check.fail("quant_skip", f"{shorten(', '.join(unknown))} names none of the model's linears (breakdown keys or "
                                 "their prefixes, e.g. lm_head, attention, moe/router)")
