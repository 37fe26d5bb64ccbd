"""KV cache for inference: per layer one k and one v tensor (B, g, M, hd), M = min(max_tokens, W).

Without a sliding window M = max_tokens and position p lives in slot p. With a window W
the cache is a rolling buffer: position p lives in slot p % M, overwriting p - M, which no
later query can see. Its bytes are exactly ``2*L*B*g*hd*M*itemsize``.

A forward call with C new tokens at positions start..start+C-1 attends to the min(start, M)
cached keys *plus* its own C keys (concatenated, never read back from the buffer), so a
chunk longer than the free space cannot overwrite keys its own earlier queries still need;
the model masks by absolute positions (``past_positions``). The chunk's last min(C, M) keys
are then written. Inference only: call under ``torch.no_grad()``.
"""

from __future__ import annotations

import torch

from ..config import ModelConfig


class KVCache:
    def __init__(self, cfg: ModelConfig, batch: int, max_tokens: int, dtype=torch.float32, device=None):
        self.window = cfg.sliding_window
        self.size = cfg.window(max_tokens)  # slots per layer, M
        shape = (batch, cfg.kv_heads, self.size, cfg.head_size)
        self.k = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(cfg.n_layers)]
        self.v = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(cfg.n_layers)]

    def past_positions(self, start: int, device=None) -> torch.Tensor:
        """Absolute position held by each valid slot, in slot order, before writing ``start``."""
        slots = torch.arange(min(start, self.size), device=device)
        return start - 1 - (start - 1 - slots) % self.size  # (min(start, M),)

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor, start: int):
        """Append k, v (B, g, C, hd) at positions start..; return keys and values to attend to,
        (B, g, min(start, M) + C, hd), ordered as ``past_positions(start)`` then the chunk."""
        C = k.shape[2]
        if self.window is None and start + C > self.size:
            raise ValueError(f"KV cache holds {self.size} tokens, asked to reach {start + C}")
        n = min(start, self.size)
        keys = torch.cat([self.k[layer][:, :, :n].to(k.dtype), k], dim=2)  # before overwriting
        values = torch.cat([self.v[layer][:, :, :n].to(v.dtype), v], dim=2)
        keep = min(C, self.size)
        slots = torch.arange(start + C - keep, start + C, device=k.device) % self.size
        self.k[layer].index_copy_(2, slots, k[:, :, C - keep:].to(self.k[layer].dtype))
        self.v[layer].index_copy_(2, slots, v[:, :, C - keep:].to(self.v[layer].dtype))
        return keys, values


def cache_bytes(cache: KVCache) -> int:
    return sum(t.numel() * t.element_size() for t in cache.k + cache.v)
