"""KV cache for inference, one buffer per layer, sized by that layer's own window.

Layer ``i`` (spec from ``analysis.plan.layer_specs``) holds ``M_i`` token slots: ``max_tokens``
for full attention, ``min(max_tokens, W)`` for a sliding window W. What a slot holds depends
on the attention kind:
- ``mha``: k and v, (B, g, M, hd) each;
- a layer reusing an earlier layer's K and V (``kv_shared_layers``): nothing, it reads its source's;
- ``mamba`` (a recurrent layer): its state, not per token: the last K conv inputs (B, E, K) and the
  SSM state (B, E, N), whatever the sequence length;
- ``mla``: the normed KV latent (B, M, kv_lora_rank) and the rotated shared rope key
  (B, 1, M, qk_rope_head_dim), never the decompressed K/V;
- a mixer beside an attention layer's attention (``parallel_mixer``): its state in ``beside``, as a
  recurrent layer keeps it;
- a recurrent layer's use of a shared transformer block (``shared_transformer``): the block's K and V,
  (B, g, M, hd) each of the ``2 d`` wide attention, in ``shared``.
Every tensor has its token axis at -2. Bytes are exactly the sum of those tensors.

Without a window position p lives in slot p. With a window the buffer rolls: position p
lives in slot p % M, overwriting p - M, which no later query can see. A forward call with
C new tokens at positions start..start+C-1 attends to the cached entries it reads *plus*
its own C (concatenated, never read back from the buffer), so a chunk longer than the free
space cannot overwrite keys its own earlier queries still need; the model masks by absolute
positions (``past_positions``). The chunk's last min(C, M) entries are then written.

What a call reads (``read_slots``): a chunk (C > 1) reads every filled slot, min(start, M),
as chunked prefill over a rolling buffer does (llmcalc's memory figure ``min(cached, W) + C``);
a decode step (C = 1) on a sliding layer reads only the W - 1 entries its query can see, so
it attends to ``min(seq, W)`` keys, the analytic decode convention. Inference only: call
under ``torch.no_grad()``.

A chunked layer (attention chunks of C) rolls a buffer of ``min(max_tokens, C)`` slots as a sliding
window of C does, position p in slot p % M; a call at ``start`` reads the slots of its first
query's chunk, positions ``start - start % C`` to ``start - 1`` in order (none when ``start``
opens a chunk), and the mask keeps each query to its own chunk.
"""

from __future__ import annotations

import dataclasses

import torch

from ..model.config import ModelConfig
from ..model.layers import layer_config, layer_specs
from .gated_deltanet import gated_deltanet_sizes
from .kda import kda_sizes
from .lightning import lightning_sizes
from .mamba import mamba_sizes
from .mamba2 import mamba2_sizes
from .rglru import rglru_sizes
from .short_conv import short_conv_sizes


def state_shapes(cfg: ModelConfig, kind: str, batch: int) -> list[tuple[int, ...]]:
    """The state tensors a recurrent mixer of ``kind`` keeps per layer (none for a ``none`` layer)."""
    if kind == "mamba2":  # the last K conv inputs (x, B, C) and the SSM state per head
        E, H, P, N, G, K, _ = mamba2_sizes(cfg)
        return [(batch, E + 2 * G * N, K), (batch, H, P, N)]
    if kind == "short_conv":  # the last L conv inputs (B * x)
        d, L = short_conv_sizes(cfg)
        return [(batch, d, L)]
    if kind == "lightning":  # the decayed K^T V per head
        h, hd, _ = lightning_sizes(cfg)
        return [(batch, h, hd, hd)]
    if kind == "gated_deltanet":  # the last K conv inputs (q, k, v), a dk x dv state per value head
        Hk, Hv, dk, dv, K, _ = gated_deltanet_sizes(cfg)
        return [(batch, 2 * Hk * dk + Hv * dv, K), (batch, Hv, dk, dv)]
    if kind == "kda":  # the last K conv inputs (q, k, v), a d x d state per head
        H, d, K, _ = kda_sizes(cfg)
        return [(batch, 3 * H * d, K), (batch, H, d, d)]
    if kind == "rglru":  # the last K-1 conv inputs and the recurrence's state
        E, _, K = rglru_sizes(cfg)
        return [(batch, E, K - 1), (batch, E)]
    if kind == "mamba":  # the last K conv inputs and the SSM state
        E, N, _, K = mamba_sizes(cfg)
        return [(batch, E, K), (batch, E, N)]
    return []  # no mixer: nothing to cache


class States:
    """The states of the mixers beside attention (``parallel_mixer``), per layer (none where there is no
    such mixer): what such a mixer reads as its cache."""

    def __init__(self, tensors: list[list[torch.Tensor]]):
        self.tensors = tensors


class KVCache:
    def __init__(self, cfg: ModelConfig, batch: int, max_tokens: int, dtype=torch.float32, device=None):
        self.max_tokens = max_tokens
        self.windows = [spec.window for spec in layer_specs(cfg)]
        self.chunks = [spec.chunk for spec in layer_specs(cfg)]  # chunked layers: their chunk C
        self.sizes = [self.slots(w if c is None else c) for w, c in zip(self.windows, self.chunks)]  # M_i per layer
        self.tensors: list[list[torch.Tensor]] = []
        for spec, M in zip(layer_specs(cfg), self.sizes):
            if spec.recurrent:  # a state per sequence
                shapes = state_shapes(cfg, spec.attention, batch)
            elif spec.kv_reuse:  # kv_shared_layers: it reads its source's
                shapes = []
            elif spec.attention == "mla":
                shapes = [(batch, M, cfg.mla.kv_lora_rank), (batch, 1, M, cfg.mla.qk_rope_head_dim)]
                if cfg.dsa is not None and not spec.shared_topk:  # DSA: the indexer's key (not on a shared layer)
                    shapes.append((batch, M, cfg.dsa.head_dim))
            else:
                layer = layer_config(cfg, spec)  # full_head_dim, full_kv_heads: a full layer's own shape
                shapes = [(batch, layer.kv_heads, M, layer.head_size)] * 2
            self.tensors.append([torch.zeros(s, dtype=dtype, device=device) for s in shapes])
        # a layer's use of a shared transformer block (shared_transformer): its own K and V, full attention
        wide = None if cfg.shared_transformer is None else dataclasses.replace(cfg, d_model=2 * cfg.d_model)
        self.shared = [[torch.zeros((batch, wide.kv_heads, max_tokens, wide.head_size), dtype=dtype, device=device)
                        for _ in range(2)] if wide is not None and s.shared else [] for s in layer_specs(cfg)]
        beside = [[] if s.beside is None else state_shapes(layer_config(cfg, s), s.beside, batch)
                  for s in layer_specs(cfg)]
        self.beside = States([[torch.zeros(s, dtype=dtype, device=device) for s in shapes] for shapes in beside])

    def slots(self, window: int | None) -> int:
        """Token slots of a layer with this window: M."""
        return self.max_tokens if window is None else min(self.max_tokens, window)

    def read_slots(self, start: int, window: int | None, chunk: int, device=None) -> torch.Tensor:
        """Slots a call of ``chunk`` tokens at ``start`` reads, in slot order (module docstring)."""
        M = self.slots(window)
        if chunk == 1 and window is not None and start >= window:  # all but the one it cannot see
            drop = start % M
            return torch.cat([torch.arange(drop, device=device), torch.arange(drop + 1, M, device=device)])
        return torch.arange(min(start, M), device=device)

    def past_positions(self, start: int, window: int | None = None, chunk: int = 1, device=None,
                       attention_chunk: int | None = None) -> torch.Tensor:
        """Absolute position held by each slot a call reads, in slot order, before writing ``start``
        (a chunked layer's: those of the first query's chunk, in order)."""
        if attention_chunk is not None:
            return torch.arange(start - start % attention_chunk, start, device=device)
        M = self.slots(window)
        slots = self.read_slots(start, window, chunk, device)
        return start - 1 - (start - 1 - slots) % M  # (slots read,)

    def update(self, layer: int, new: tuple[torch.Tensor, ...], start: int,
               buffers: list[torch.Tensor] | None = None) -> tuple[torch.Tensor, ...]:
        """Append ``new`` (token axis -2, C tokens) at positions start..; return what to attend
        to along axis -2: the slots read (``past_positions``) then the chunk. ``buffers``: the layer's
        others than its own (a shared block's use, ``shared``)."""
        M, C, attention_chunk = self.sizes[layer], new[0].shape[-2], self.chunks[layer]
        if self.windows[layer] is None and attention_chunk is None and start + C > M:
            raise ValueError(f"KV cache holds {M} tokens, asked to reach {start + C}")
        if attention_chunk is None:
            read = self.read_slots(start, self.windows[layer], C, new[0].device)
        else:
            read = self.past_positions(start, device=new[0].device, attention_chunk=attention_chunk) % M
        keep = min(C, M)
        slots = torch.arange(start + C - keep, start + C, device=new[0].device) % M
        out = []
        for buf, t in zip(self.tensors[layer] if buffers is None else buffers, new):
            past = buf.index_select(buf.dim() - 2, read).to(t.dtype)  # before overwriting
            out.append(torch.cat([past, t], dim=-2))
            buf.index_copy_(buf.dim() - 2, slots, t[..., C - keep:, :].to(buf.dtype))
        return tuple(out)


def cache_bytes(cache: KVCache) -> int:
    return sum(t.numel() * t.element_size() for layers in (cache.tensors, cache.beside.tensors, cache.shared)
               for layer in layers for t in layer)
