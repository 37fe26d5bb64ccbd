"""Exact parameter counts, per component, per layer and in total.

Conventions:
- every tensor a trained checkpoint stores as a parameter counts; buffers (RoPE
  frequencies, sinusoidal tables, causal masks) do not;
- a tied LM head shares the token embedding and is counted once, under
  ``embedding/token``; ``lm_head`` then holds only its bias, if any;
- ``active`` is what one token touches: for MoE the router, ``experts_per_token`` routed
  experts and the shared experts; equal to ``total`` for dense models;
- ``embedding`` counts the token and position tables; ``non_embedding`` is the rest
  (the N of ``6 * N * tokens``), LM head included.
"""

from __future__ import annotations

from dataclasses import dataclass

from .config import DTYPE_BITS, ModelConfig
from .layout import layer_linears, layer_norms


@dataclass(frozen=True)
class ParamCount:
    per_layer: dict[str, int]  # one layer's parameters by key
    components: dict[str, int]  # the whole model by key (layer keys summed over layers)
    total: int
    active: int

    @property
    def embedding(self) -> int:
        return self.components.get("embedding/token", 0) + self.components.get("embedding/position", 0)

    @property
    def non_embedding(self) -> int:
        return self.total - self.embedding


def weight_bytes(params: int, dtype: str) -> int:
    """Bytes to store ``params`` values of ``dtype`` (int4 packs two per byte, rounded up)."""
    return (params * DTYPE_BITS[dtype] + 7) // 8


def _add(into: dict[str, int], key: str, n: int) -> None:
    into[key] = into.get(key, 0) + n


def layer_params(cfg: ModelConfig) -> dict[str, int]:
    per_layer: dict[str, int] = {}
    for m in layer_linears(cfg):
        _add(per_layer, m.key, m.params)
    for n in layer_norms(cfg):
        _add(per_layer, n.key, n.params)
    return per_layer


def position_params(cfg: ModelConfig) -> int:
    if cfg.position == "learned":
        return cfg.context_length * cfg.d_model
    if cfg.position == "relative":  # one bucket table shared by all layers (T5)
        return cfg.relative_buckets * cfg.n_heads
    return 0


def count_params(cfg: ModelConfig) -> ParamCount:
    d, V, L = cfg.d_model, cfg.vocab_size, cfg.n_layers
    per_layer = layer_params(cfg)
    comps: dict[str, int] = {"embedding/token": V * d}
    if position_params(cfg):
        comps["embedding/position"] = position_params(cfg)
    for key, n in per_layer.items():
        comps[key] = n * L
    if cfg.final_norm:
        comps["norm/final"] = d * (2 if cfg.norm_has_bias else 1)
    head = (0 if cfg.tie_embeddings else V * d) + (V if cfg.lm_head_bias else 0)
    if head:
        comps["lm_head"] = head
    total = sum(comps.values())
    inactive = sum((m.copies - m.active) * (m.params // m.copies) for m in layer_linears(cfg)) * L
    return ParamCount(per_layer, comps, total, total - inactive)
