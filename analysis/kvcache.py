"""KV-cache sizes and what fits in a memory budget.

Each layer caches, per token, what its attention kind needs (``mha``: K and V, ``2*g*hd``
values; ``mla``: the latent and the shared RoPE key, ``kv_lora_rank + qk_rope_head_dim``)
for ``min(seq, W)`` tokens on a sliding layer (a rolling buffer of W slots, Mistral) and
``seq`` on a full one: ``sum over layers of B * cached_l * values_l * bytes(kv_dtype)``.
GQA/MQA shrink it through ``g = n_kv_heads``.
"""

from __future__ import annotations

from dataclasses import dataclass

from .config import ModelConfig
from .layout import Layer
from .plan import LayerGroup, layer_plan
from .quant import weights_bytes
from .run import RunSpec, weight_bytes


@dataclass(frozen=True)
class GroupCache:
    group: LayerGroup
    cached_tokens: int  # per sequence, in each layer of the group
    bytes_per_token: int  # one layer
    bytes: int  # one layer, all sequences


@dataclass(frozen=True)
class KVCache:
    seq: int
    batch: int
    kv_dtype: str
    n_layers: int
    cached_tokens: int  # per sequence, in the layer that caches most: min(seq, W) when all slide
    bytes_per_token: int  # every layer's cache entry for one token (no window binding)
    bytes: int
    groups: tuple[GroupCache, ...]

    @property
    def bytes_per_layer(self) -> int:
        """Mean over the layers (layer_groups give each kind's own)."""
        return self.bytes // self.n_layers

    @property
    def bytes_per_sequence(self) -> int:
        return self.bytes // self.batch


def kv_cache(cfg: ModelConfig, run: RunSpec = RunSpec(mode="decode")) -> KVCache:
    run = run.resolve(cfg)
    groups = []
    for group in layer_plan(cfg):
        per_token = weight_bytes(Layer(cfg, group.spec).attention.kv_values_per_token, run.kv_dtype)
        cached = group.spec.keys_seen(run.seq)
        groups.append(GroupCache(group, cached, per_token, run.batch * cached * per_token))
    per_token = sum(g.bytes_per_token * g.group.count for g in groups)
    return KVCache(run.seq, run.batch, run.kv_dtype, cfg.n_layers, max(g.cached_tokens for g in groups),
                   per_token, sum(g.bytes * g.group.count for g in groups), tuple(groups))


@dataclass(frozen=True)
class BudgetFit:
    budget: int
    weights: int  # bytes of the weights in the chosen dtype
    free: int  # budget - weights; negative when the weights alone do not fit
    max_batch: int  # sequences of `seq` tokens whose caches fit in `free`
    max_tokens: int  # cached tokens (over all sequences) that fit in `free`, no window binding


def fit_budget(cfg: ModelConfig, cache: KVCache, budget: int, weights_dtype: str, dtype: str) -> BudgetFit:
    """``dtype``: the compute dtype, that of what a quantized format leaves unquantized."""
    weights = weights_bytes(cfg, weights_dtype, dtype)
    free = budget - weights
    if free <= 0:
        return BudgetFit(budget, weights, free, 0, 0)
    return BudgetFit(budget, weights, free, free // cache.bytes_per_sequence, free // cache.bytes_per_token)
