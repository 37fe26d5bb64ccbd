"""Multi-head attention of the reference model, eager or flash, with GQA, qk-norm and RoPE.

Conventions:
- heads: q has ``h = n_heads`` heads, k and v ``g = n_kv_heads``; query head ``i`` reads
  key/value head ``i // (h // g)`` (the ``repeat_interleave`` grouping of Llama / Mistral);
- scale ``1/sqrt(head_size)``; masking and position biases arrive as one additive float
  ``bias`` of shape (1, h or 1, S, S_kv) built once per forward by the model, so eager
  and flash see the same mask and a mask never costs saved activations (an add saves nothing);
- eager materializes the scores in two tiny submodules, ``scores`` (q @ k^T, scaled) and
  ``values`` (probs @ v), so FLOP counters attribute the two matmuls by name; GQA expands
  K/V to ``h`` heads first (the dense matmul FLOPs are ``2*B*h*S*S_kv*hd`` either way);
- flash calls the CPU flash kernel ``aten._scaled_dot_product_flash_attention_for_cpu``
  directly, with native GQA, on the cpu *and* the meta device, because
  ``F.scaled_dot_product_attention`` silently takes the math path (materialized scores,
  different saved tensors and backward FLOPs) on meta. That kernel cannot give a gradient to
  ``attn_mask``, so a learned bias (T5 relative positions) that requires grad goes through
  ``F.scaled_dot_product_attention``, which then picks the math path, as PyTorch itself does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ..config import ModelConfig

from .norms import make_norm


@dataclass
class Context:
    """What every layer's attention needs from the model for one forward call."""

    bias: torch.Tensor | None  # (1, h or 1, S, S_kv) additive; None: plain causal, S_kv == S
    rope: tuple[torch.Tensor, torch.Tensor] | None  # cos, sin (S, hd)
    cache: object | None  # a KVCache
    start_pos: int


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate-half RoPE (GPT-NeoX / Llama): pair dimension ``i`` with ``i + hd/2``."""
    return x * cos + rotate_half(x) * sin  # (B, heads, S, hd)


def repeat_kv(x: torch.Tensor, groups: int) -> torch.Tensor:
    """(B, g, S, hd) -> (B, g*groups, S, hd), each K/V head repeated for its query heads."""
    if groups == 1:
        return x
    B, g, S, hd = x.shape
    return x[:, :, None].expand(B, g, groups, S, hd).reshape(B, g * groups, S, hd)


class Scores(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return (q @ k.transpose(-2, -1)) * self.scale  # (B, h, S, S_kv)


class Values(nn.Module):
    def forward(self, probs: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return probs @ v  # (B, h, S, hd)


class SDPA(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, q, k, v, bias: torch.Tensor | None) -> torch.Tensor:
        learned_bias = bias is not None and bias.requires_grad
        if learned_bias or q.device.type not in ("cpu", "meta"):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=bias, is_causal=bias is None,
                                                  scale=self.scale, enable_gqa=True)
        out, _lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            q, k, v, 0.0, bias is None, attn_mask=bias, scale=self.scale)
        return out  # (B, h, S, hd)


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig, index: int, kind: str = "eager"):
        super().__init__()
        if kind not in ("eager", "flash"):
            raise ValueError(f"attention must be 'eager' or 'flash', got {kind!r}")
        d = cfg.d_model
        self.index, self.kind = index, kind
        self.h, self.g, self.hd = cfg.n_heads, cfg.kv_heads, cfg.head_size
        self.q = nn.Linear(d, cfg.q_width, bias=cfg.qkv_bias)
        self.k = nn.Linear(d, cfg.kv_width, bias=cfg.qkv_bias)
        self.v = nn.Linear(d, cfg.kv_width, bias=cfg.qkv_bias)
        self.o = nn.Linear(cfg.q_width, d, bias=cfg.out_bias)
        if cfg.qk_norm:
            self.q_norm = make_norm(cfg, self.hd)
            self.k_norm = make_norm(cfg, self.hd)
        scale = 1.0 / math.sqrt(self.hd)
        if kind == "eager":
            self.scores, self.values = Scores(scale), Values()
        else:
            self.sdpa = SDPA(scale)

    def forward(self, x: torch.Tensor, ctx: Context) -> torch.Tensor:
        B, S, _ = x.shape
        q = self.q(x).view(B, S, self.h, self.hd)
        k = self.k(x).view(B, S, self.g, self.hd)
        v = self.v(x).view(B, S, self.g, self.hd)
        if hasattr(self, "q_norm"):  # per head, after the projection, before RoPE
            q, k = self.q_norm(q), self.k_norm(k)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # (B, heads, S, hd)
        if ctx.rope is not None:
            q, k = apply_rope(q, *ctx.rope), apply_rope(k, *ctx.rope)
        if ctx.cache is not None:
            k, v = ctx.cache.update(self.index, k, v, ctx.start_pos)  # (B, g, S_kv, hd)
        if self.kind == "eager":
            groups = self.h // self.g
            scores = self.scores(q, repeat_kv(k, groups))  # (B, h, S, S_kv)
            if ctx.bias is not None:
                scores = scores + ctx.bias
            y = self.values(scores.softmax(dim=-1), repeat_kv(v, groups))  # (B, h, S, hd)
        else:
            y = self.sdpa(q, k, v, ctx.bias)  # (B, h, S, hd)
        return self.o(y.transpose(1, 2).reshape(B, S, self.h * self.hd))
