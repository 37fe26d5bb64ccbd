"""The reference recurrent block of Griffin (RecurrentGemma's ``RecurrentGemmaRecurrentBlock`` with its
RG-LRU): plain PyTorch, the linear-time scan transformers runs.

Built from ModelConfig alone (``rglru`` mapping). Submodules are the breakdown keys: ``linear_y`` and
``linear_x`` (d -> E), ``conv1d`` (depthwise causal, K taps, over x), ``input_gate`` and
``recurrent_gate`` (block-diagonal: H blocks of w = E / H, a batched matmul each), ``scan`` (no
parameters: the recurrence), ``linear_out`` (E -> d), and the parameter ``recurrent_param`` (E).
Forward, for ``h`` (B, S, d) at positions ``start..start+S-1``::

    y = gelu_tanh(linear_y(h))
    x = conv1d(linear_x(h))                          # causal: padding K-1 from the start, or the K-1 cached inputs
    i, r = sigmoid(input_gate(x)), sigmoid(recurrent_gate(x))
    a = exp(-8 * r * softplus(recurrent_param))
    u = x * i * sqrt(1 - a * a * keep)               # keep: 0 at position 0 (no normalization there), else 1
    h_t = a_t * h_{t-1} + u_t                        # h_start = u_start from position 0, else from the cache
    linear_out(h * y)

The cache (:class:`analysis.verify.cache.KVCache`) holds per rglru layer the last K-1 conv inputs
(B, E, K-1) and the state h (B, E). Everything runs in the activations' dtype.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..model.config import ModelConfig


def rglru_sizes(cfg: ModelConfig) -> tuple[int, int, int]:
    """(E, H, K) from the config alone."""
    m = cfg.rglru
    assert m is not None
    return (cfg.d_model if m.width is None else m.width), (cfg.n_heads if m.n_heads is None else m.n_heads), m.d_conv


class Conv(nn.Module):
    """Depthwise causal conv over (B, E, C) with a bias: ``padding=K-1`` (outputs trimmed to C) from the
    start of a sequence, else over the K-1 cached inputs and the C new ones without padding (C outputs).
    ``state`` (B, E, K-1), when given, is read when the call ``continues`` a sequence, then holds the last
    K-1 inputs (zeros before the sequence). Returns (B, C, E), contiguous."""

    def __init__(self, E: int, K: int):
        super().__init__()
        self.K = K
        self.weight = nn.Parameter(torch.empty(E, 1, K).uniform_(-K ** -0.5, K ** -0.5))
        self.bias = nn.Parameter(torch.zeros(E))

    def forward(self, u: torch.Tensor, state: torch.Tensor | None, continues: bool) -> torch.Tensor:
        C, E = u.shape[-1], u.shape[1]
        past = state.to(u.dtype) if state is not None and continues else None
        if past is None:
            out = F.conv1d(u, self.weight, self.bias, padding=self.K - 1, groups=E)[..., :C]
        else:
            out = F.conv1d(torch.cat([past, u], dim=-1), self.weight, self.bias, groups=E)
        if state is not None:
            before = past if past is not None else torch.zeros_like(state, dtype=u.dtype)
            inputs = torch.cat([before, u], dim=-1)
            state.copy_(inputs[..., inputs.shape[-1] - (self.K - 1):])
        return out.transpose(1, 2).contiguous()


class BlockDiagonal(nn.Module):
    """``sigmoid(x_blk @ weight_blk + bias_blk)`` per block of w channels: one batched matmul."""

    def __init__(self, H: int, w: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(H, w, w) / math.sqrt(w))
        self.bias = nn.Parameter(torch.zeros(H, w))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, S, E = x.shape
        H, w = self.bias.shape
        out = torch.baddbmm(self.bias.unsqueeze(1), x.reshape(B * S, H, w).transpose(0, 1), self.weight)
        return torch.sigmoid(out.transpose(0, 1).reshape(B, S, E))


class Scan(nn.Module):
    """The recurrence, token by token: ``h = a_t * h + u_t`` (``h`` None: the sequence starts)."""

    def forward(self, a: torch.Tensor, u: torch.Tensor, h: torch.Tensor | None):
        hs = []
        for t in range(u.shape[1]):
            h = u[:, t] if h is None else a[:, t] * h + u[:, t]
            hs.append(h)
        return torch.stack(hs, dim=1), h  # (B, S, E), the last state


class RGLRUMixer(nn.Module):
    def __init__(self, cfg: ModelConfig, index: int):
        super().__init__()
        d = cfg.d_model
        E, H, K = rglru_sizes(cfg)
        self.index = index
        self.linear_y = nn.Linear(d, E)
        self.linear_x = nn.Linear(d, E)
        self.conv1d = Conv(E, K)
        self.input_gate = BlockDiagonal(H, E // H)
        self.recurrent_gate = BlockDiagonal(H, E // H)
        # softplus(c) in [0.0005, 0.01]: a = exp(-8 * r * softplus(c)) near 1, as Griffin initializes it
        self.recurrent_param = nn.Parameter(torch.empty(E).uniform_(-7.6, -4.6))
        self.scan = Scan()
        self.linear_out = nn.Linear(E, d)

    def forward(self, h: torch.Tensor, cache=None, start_pos: int = 0) -> torch.Tensor:
        S = h.shape[1]
        states = None if cache is None else cache.tensors[self.index]
        y = F.gelu(self.linear_y(h), approximate="tanh")
        x = self.conv1d(self.linear_x(h).transpose(1, 2), None if states is None else states[0], start_pos > 0)
        i, r = self.input_gate(x), self.recurrent_gate(x)
        a = torch.exp(-8.0 * r * F.softplus(self.recurrent_param))
        keep = (torch.arange(start_pos, start_pos + S, device=h.device) > 0).to(h.dtype).view(1, S, 1)
        u = x * i * torch.sqrt(1 - a * a * keep)
        past = states[1].to(h.dtype) if states is not None and start_pos > 0 else None
        out, last = self.scan(a, u, past)
        if states is not None:
            states[1].copy_(last)
        return self.linear_out(out * y)
