"""Exact parameter counts, per component, per layer group and in total.

Conventions:
- every tensor a trained checkpoint stores as a parameter counts; buffers (RoPE
  frequencies, sinusoidal tables, causal masks) do not;
- a tied LM head shares the token embedding and is counted once, under
  ``embedding/token``; ``lm_head`` then holds only its bias, if any;
- ``active`` is what one token touches: for MoE layers the router, ``experts_per_token``
  routed experts and the shared experts; equal to ``total`` for dense models;
- ``embedding`` counts the token and position tables; ``non_embedding`` is the rest
  (the N of ``6 * N * tokens``), LM head included.
"""

from __future__ import annotations

from dataclasses import dataclass

from .config import ModelConfig
from .inventory import Linear, Norm, Vector
from .layout import Layer, final_norm
from .plan import LayerGroup, layer_plan
from .run import weight_bytes

__all__ = ["ParamCount", "count_params", "layer_params", "position_params", "weight_bytes"]


@dataclass(frozen=True)
class ParamCount:
    """A model's parameters: by layer group and by breakdown key, total and active (MoE top-k)."""

    groups: tuple[tuple[LayerGroup, dict[str, int]], ...]  # each group with one layer's parameters by key
    components: dict[str, int]  # the whole model by key (layer keys summed over layers)
    total: int
    active: int

    @property
    def embedding(self) -> int:
        return self.components.get("embedding/token", 0) + self.components.get("embedding/position", 0)

    @property
    def non_embedding(self) -> int:
        return self.total - self.embedding


def _add(into: dict[str, int], key: str, n: int) -> None:
    into[key] = into.get(key, 0) + n


def layer_params(layer: Layer) -> dict[str, int]:
    """One layer's parameters by key (linears, then norms, then learned vectors)."""
    out: dict[str, int] = {}
    parts: list[Linear | Norm | Vector] = [*layer.linears(), *layer.norms(), *layer.vectors()]
    for part in parts:
        _add(out, part.key, part.params)
    return out


def _inactive(layer: Layer) -> int:
    """Parameters of the experts a token does not visit."""
    return sum((m.copies - m.active) * m.per_copy for m in layer.linears())


def position_params(cfg: ModelConfig) -> int:
    if cfg.position == "learned":
        return cfg.context_length * cfg.d_model
    if cfg.position == "relative":  # one bucket table shared by all layers (T5)
        return cfg.relative_buckets * cfg.n_heads
    return 0


def count_params(cfg: ModelConfig) -> ParamCount:
    d, V = cfg.d_model, cfg.vocab_size
    comps: dict[str, int] = {"embedding/token": V * d}
    if position_params(cfg):
        comps["embedding/position"] = position_params(cfg)
    groups, inactive = [], 0
    for group in layer_plan(cfg):
        layer = Layer(cfg, group.spec)
        per_layer = layer_params(layer)
        groups.append((group, per_layer))
        for key, n in per_layer.items():
            _add(comps, key, n * group.count)
        inactive += _inactive(layer) * group.count
    final = final_norm(cfg)
    if final is not None and final.params:
        comps[final.key] = final.params
    head = (0 if cfg.tie_embeddings else V * d) + (V if cfg.lm_head_bias else 0)
    if head:
        comps["lm_head"] = head
    total = sum(comps.values())
    return ParamCount(tuple(groups), comps, total, total - inactive)
