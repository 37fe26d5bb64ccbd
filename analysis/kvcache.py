"""KV-cache sizes and what fits in a memory budget.

The cache holds K and V for every layer: ``2 * L * B * g * hd * cached * bytes(kv_dtype)``,
with ``cached = min(seq, W)`` under a sliding window, whose cache is a rolling buffer of
W slots (Mistral). GQA/MQA shrink it through ``g = n_kv_heads``.
"""

from __future__ import annotations

from dataclasses import dataclass

from .config import ModelConfig
from .params import count_params, weight_bytes


@dataclass(frozen=True)
class KVCache:
    seq: int
    batch: int
    kv_dtype: str
    n_layers: int
    cached_tokens: int  # per sequence: min(seq, W)
    bytes_per_token: int  # all layers, K and V
    bytes: int

    @property
    def bytes_per_layer(self) -> int:
        return self.bytes // self.n_layers


def kv_cache(cfg: ModelConfig, seq: int, batch: int, kv_dtype: str) -> KVCache:
    per_token = weight_bytes(2 * cfg.n_layers * cfg.kv_width, kv_dtype)
    cached = cfg.window(seq)
    return KVCache(seq, batch, kv_dtype, cfg.n_layers, cached, per_token, batch * cached * per_token)


@dataclass(frozen=True)
class BudgetFit:
    budget: int
    weights: int  # bytes of the weights in the chosen dtype
    free: int  # budget - weights; negative when the weights alone do not fit
    max_batch: int  # sequences of `seq` tokens whose caches fit in `free`
    max_tokens: int  # cached tokens (over all sequences) that fit in `free`


def fit_budget(cfg: ModelConfig, cache: KVCache, budget: int, weights_dtype: str) -> BudgetFit:
    weights = weight_bytes(count_params(cfg).total, weights_dtype)
    free = budget - weights
    per_seq = cache.cached_tokens * cache.bytes_per_token
    if free <= 0:
        return BudgetFit(budget, weights, free, 0, 0)
    return BudgetFit(budget, weights, free, free // per_seq, free // cache.bytes_per_token)
