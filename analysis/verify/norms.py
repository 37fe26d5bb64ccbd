"""Norm factory: ``layernorm`` (weight, and bias unless ``norm_bias: false``) or ``rmsnorm``
(weight only), both with eps 1e-5 over the last dimension."""

from __future__ import annotations

from torch import nn

from analysis.config import ModelConfig


def make_norm(cfg: ModelConfig, size: int) -> nn.Module:
    if cfg.norm == "rmsnorm":
        return nn.RMSNorm(size, eps=1e-5)
    return nn.LayerNorm(size, eps=1e-5, bias=cfg.norm_bias)
