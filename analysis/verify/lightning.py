"""The reference lightning attention (MiniMax's ``MiniMaxLightningAttention``): plain PyTorch, the blocked
form for a pass over the prompt and the recurrent step for a decode step, as transformers runs them.

Built from ModelConfig alone (``lightning`` mapping, the model's ``n_heads`` and ``head_dim``). Sizes:
h heads of hd, ``E = h * hd``, Q the block. Submodules are the breakdown keys: ``qkv_proj`` (d -> 3E),
``norm`` (an RMSNorm over E), ``output_gate`` (d -> E), ``out_proj`` (E -> d), ``attention`` (no
parameters; its decay rates and tables are buffers). Forward, for ``x`` (b, S, d)::

    q, k, v = silu(qkv_proj(x)) per head               # (b, h, S, hd) each, one contiguous copy
    per block of q <= Q positions (decay rate s per head, the state kv carried in, zeros at the start):
        out = ((q K^T) * exp(-s (i - j)) for j <= i) V + (q * exp(-s (i + 1))) kv
        kv  = kv * exp(-s q) + (K * exp(-s (q - 1 - j)))^T V
    a decode step: kv = exp(-s) kv + k^T v;  out = q kv
    out_proj(sigmoid(output_gate(x)) * norm(out))

The rate of head ``i`` of layer ``l`` (of L) is transformers': ``2^(-8(i+1)/h) * (1 - l/(L - 1 + 1e-5) + 1e-5)``.
The cache (:class:`analysis.verify.cache.KVCache`) holds per lightning layer the state kv (b, h, hd, hd).
Everything runs in the activations' dtype.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..model.config import ModelConfig


def lightning_sizes(cfg: ModelConfig) -> tuple[int, int, int]:
    """(h, hd, Q) from the config alone."""
    assert cfg.lightning is not None
    hd = cfg.head_dim if cfg.head_dim is not None else cfg.d_model // cfg.n_heads
    return cfg.n_heads, hd, cfg.lightning.block_size


class RMSNorm(nn.Module):
    """``x * rsqrt(mean(x^2) + eps) * weight`` over the last dimension."""

    def __init__(self, width: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Attention(nn.Module):
    """The decayed linear attention over q, k, v (b, h, S, hd): blocked, or one recurrent step."""

    def __init__(self, h: int, Q: int, index: int, layers: int):
        super().__init__()
        self.Q = Q
        rate = 2 ** (-8 * (torch.arange(h, dtype=torch.float64) + 1) / h)  # float64: the tables agree
        rate = (rate * (1 - index / (layers - 1 + 1e-5) + 1e-5))[:, None, None]  # (h, 1, 1)
        pos = torch.arange(Q, dtype=torch.float64) + 1
        diff = pos[:, None] - pos[None, :]
        self.rate = nn.Buffer(rate)
        self.query_decay = nn.Buffer(torch.exp(-rate * pos[:, None]))  # (h, Q, 1)
        self.key_decay = nn.Buffer(torch.exp(-rate * (Q - pos[:, None])))  # (h, Q, 1)
        self.diagonal_decay = nn.Buffer(torch.exp(torch.where(diff >= 0, -rate * diff, -torch.inf)))  # (h, Q, Q)

    def forward(self, q, k, v, kv, step: bool):
        """-> (out (b, h, S, hd), the state after the pass)."""
        if step:  # one token continuing a cached sequence
            kv = torch.exp(-self.rate) * kv + torch.matmul(k.transpose(-1, -2), v)
            return torch.matmul(q, kv), kv
        S, outs = q.shape[2], []
        for start in range(0, S, self.Q):
            n = min(self.Q, S - start)
            qb, kb, vb = (t[:, :, start:start + n] for t in (q, k, v))
            intra = torch.matmul(torch.matmul(qb, kb.transpose(-1, -2)) * self.diagonal_decay[:, :n, :n], vb)
            inter = torch.matmul(qb * self.query_decay[:, :n], kv)
            outs.append(inter + intra)
            kv = kv * torch.exp(-self.rate * n) + torch.matmul((kb * self.key_decay[:, -n:]).transpose(-1, -2), vb)
        return torch.cat(outs, dim=2), kv


class LightningMixer(nn.Module):
    def __init__(self, cfg: ModelConfig, index: int):
        super().__init__()
        h, hd, Q = lightning_sizes(cfg)
        self.index, self.sizes = index, (h, hd)
        E = h * hd
        self.qkv_proj = nn.Linear(cfg.d_model, 3 * E, bias=False)
        self.attention = Attention(h, Q, index, cfg.n_layers)
        self.norm = RMSNorm(E)
        self.output_gate = nn.Linear(cfg.d_model, E, bias=False)
        self.out_proj = nn.Linear(E, cfg.d_model, bias=False)

    def forward(self, x: torch.Tensor, cache=None, start_pos: int = 0) -> torch.Tensor:
        h, hd = self.sizes
        b, S, _ = x.shape
        qkv = F.silu(self.qkv_proj(x)).view(b, S, h, 3, hd).permute(3, 0, 2, 1, 4).contiguous()
        q, k, v = qkv[0], qkv[1], qkv[2]  # (b, h, S, hd), views of one copy
        states = None if cache is None else cache.tensors[self.index]
        if states is not None and start_pos > 0:
            kv = states[0].to(q.dtype)
        else:
            kv = torch.zeros(b, h, hd, hd, dtype=q.dtype, device=q.device)
        out, kv = self.attention(q, k, v, kv, start_pos > 0 and S == 1)
        if states is not None:
            states[0].copy_(kv)
        out = out.transpose(1, 2).reshape(b, S, h * hd)
        return self.out_proj(torch.sigmoid(self.output_gate(x)) * self.norm(out))
