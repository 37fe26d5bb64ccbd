"""The ``mla`` and ``dsa`` mappings' schemas: imported when a config has one (:func:`.keys.nested`), so
that a model with multi-head attention never creates their dataclasses (start-up, DESIGN.md section 6).
MLA's descriptor, with DSA's indexer, is :class:`.attention.MLA`."""

from __future__ import annotations

from dataclasses import dataclass

from .keys import boolean, checked, integer, optional, pattern


@dataclass(frozen=True)
class MLAConfig:
    """Multi-head latent attention (DeepSeek-V2/V3, Kimi K2)."""

    kv_lora_rank: int = checked(integer())  # the compressed KV latent per token
    qk_nope_head_dim: int = checked(integer())  # per-head query/key size without positions
    qk_rope_head_dim: int = checked(integer())  # per-head query size with RoPE; one shared rope key
    v_head_dim: int = checked(integer())
    q_lora_rank: int | None = checked(optional(integer()), None)  # None: a full-rank query projection


@dataclass(frozen=True)
class DSAConfig:
    """DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5): MLA's lightning indexer, which scores every
    cached key and lets each query attend to its ``topk`` best keys only."""

    n_heads: int = checked(integer())  # the indexer's query heads (index_n_heads)
    head_dim: int = checked(integer())  # its query/key head size; one key per token, cached (index_head_dim)
    topk: int = checked(integer())  # keys each query attends to (index_topk)
    # per layer, cyclic: true where the layer reuses the previous indexed layer's top-k (no indexer of its own, no
    # indexer key cached: Hy4's and GLM-5.2's shared layers)
    shared: tuple[bool, ...] | None = checked(optional(pattern(boolean)), None)
