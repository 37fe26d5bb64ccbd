"""KV-cache sizes.

Each layer caches, per token, what its attention kind needs (``mha``: K and V, ``2*g*hd``
values; ``mla``: the latent and the shared RoPE key, ``kv_lora_rank + qk_rope_head_dim``)
for ``min(seq, W)`` tokens on a sliding layer (a rolling buffer of W slots, Mistral) and
``seq`` on a full one: ``sum over layers of B * cached_l * values_l * bytes(kv_dtype)``.
GQA/MQA shrink it through ``g = n_kv_heads``.

A recurrent layer (``mamba``) keeps a **state** per sequence instead, constant in the sequence
length: ``B * E * (d_conv + d_state)`` values in ``run.state_dtype`` (default: the KV dtype); the other
recurrent kinds (``mamba2``, ``short_conv``, ``rglru``) theirs, each descriptor's ``state_values``; an
attention layer with a mixer beside it (``parallel_mixer``, Falcon-H1) both its KV and that mixer's state;
a recurrent layer that runs a shared transformer block (Zamba) its state and the K and V of every token
of that use of the block (full attention: each use caches its own).
``bytes`` is KV plus state; ``kv_bytes`` and ``state_bytes`` give each.
"""

from typing import NamedTuple

from ..errors import SpecError
from ..model.architecture import build
from ..model.config import ModelConfig
from ..model.layers import LayerGroup
from ..model.sizes import weight_bytes
from ..spec import RunSpec, check_arguments


class GroupCache(NamedTuple):
    group: LayerGroup
    cached_tokens: int  # per sequence, in each layer of the group
    bytes_per_token: int  # one layer
    bytes: int  # one layer, all sequences (KV, a recurrent layer's state, or both)
    state_bytes: int = 0  # one layer, all sequences: a recurrent mixer's state


class KVCache(NamedTuple):
    seq: int
    batch: int
    kv_dtype: str
    n_layers: int
    cached_tokens: int  # per sequence, in the layer that caches most: min(seq, W) when all slide
    bytes_per_token: int  # every layer's cache entry for one token (no window binding)
    bytes: int
    groups: tuple[GroupCache, ...]
    state_bytes: int = 0  # the recurrent layers' states (in ``bytes`` too)
    state_dtype: str | None = None

    @property
    def kv_bytes(self) -> int:
        """The attention layers' KV alone."""
        return self.bytes - self.state_bytes

    @property
    def bytes_per_layer(self) -> int:
        """Mean over the layers (layer_groups give each kind's own)."""
        return self.bytes // self.n_layers


def kv_cache(cfg: ModelConfig, run: RunSpec = RunSpec(mode="decode")) -> KVCache:
    """The cache of one model replica (a GPU's share under a layout: ``memory``'s ``kv_cache``)."""
    check_arguments(cfg, run)
    run.one_device("kv_cache")
    if run.mode == "train":
        raise SpecError("mode", "train keeps no KV cache: kv_cache sizes a prefill or a decode step")
    run = run.resolve(cfg)
    groups = []
    state_dtype = run.state_dtype or run.kv_dtype
    for group, block in build(cfg).blocks:
        if group.spec.recurrent:  # a state per sequence, whatever the length, and a shared block's K and V
            state = run.batch * weight_bytes(block.recurrent.state_values, state_dtype)
            per_token = sum(weight_bytes(s.attention.kv_values_per_token, run.kv_dtype) for s in block.shared)
            cached = run.seq if per_token else 0
            groups.append(GroupCache(group, cached, per_token, run.batch * cached * per_token + state, state))
            continue
        per_token = weight_bytes(block.attention.kv_values_per_token, run.kv_dtype)
        cached = group.spec.cached(run.seq)
        state = sum(run.batch * weight_bytes(m.state_values, state_dtype) for m in block.beside)
        groups.append(GroupCache(group, cached, per_token, run.batch * cached * per_token + state, state))
    return of_groups(run.seq, run.batch, run.kv_dtype, groups, state_dtype)


def of_groups(seq: int, batch: int, kv_dtype: str, groups: list[GroupCache], state_dtype: str | None) -> KVCache:
    """The cache of the layers of ``groups`` (every layer's, or a pipeline stage's), their figures summed."""
    return KVCache(seq, batch, kv_dtype, sum(g.group.count for g in groups), max(g.cached_tokens for g in groups),
                   sum(g.bytes_per_token * g.group.count for g in groups), sum(g.bytes * g.group.count for g in groups),
                   tuple(groups), sum(g.state_bytes * g.group.count for g in groups), state_dtype)
