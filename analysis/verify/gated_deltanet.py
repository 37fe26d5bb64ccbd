"""The reference Gated DeltaNet mixer (transformers' ``Qwen3NextGatedDeltaNet``): plain PyTorch, the chunked
delta rule for a pass over the prompt and the recurrent step for a decode step, as transformers' torch
path (``torch_chunk_gated_delta_rule``, ``torch_recurrent_gated_delta_rule``) runs them.

Built from ModelConfig alone (``gated_deltanet`` mapping). Sizes: ``Hk`` query/key heads of ``dk``, ``Hv``
value heads of ``dv``, ``K`` conv taps, ``Q`` the chunk. Submodules are the breakdown keys: ``in_proj_qkv``
(d -> 2*Hk*dk + Hv*dv), ``in_proj_z`` (d -> Hv*dv), ``in_proj_b`` and ``in_proj_a`` (d -> Hv), ``conv1d``
(depthwise causal, K taps over q, k and v, no bias), ``norm`` (the gated RMSNorm, weight dv, per head),
``out_proj`` (Hv*dv -> d), ``scan`` (no parameters), and the parameters ``dt_bias`` and ``A_log`` (Hv
each). Forward::

    q, k, v = silu(conv1d(in_proj_qkv(x))).split(...)   # causal: padding K-1 from the start, or the K cached
    beta = sigmoid(in_proj_b(x));  g = -exp(A_log) * softplus(in_proj_a(x) + dt_bias)
    y = scan(l2norm(q) / sqrt(dk), l2norm(k), v, g, beta)   # q and k repeated to the Hv value heads
    out_proj(norm(y) * silu(in_proj_z(x)))                # norm: per head y * rsqrt(mean(y^2) + eps) * weight

The chunked rule (per sequence, value head and chunk of Q positions): ``A = (k*beta) k^T * decay`` and
``(q k^T) * decay`` (the decays ``exp(cumsum(g)_i - cumsum(g)_j)``, zero above the diagonal), two
unitriangular solves with A (``v*beta`` and ``k*beta*exp(cumsum)``: u and w), then chunk after chunk from
the state ``S``: ``v' = u - w S``, ``y = (q*exp(cumsum)) S + (q k^T * decay) v'``, ``S = S *
exp(total) + (k*exp(total - cumsum))^T v'``. The step, one token continuing a sequence: ``S *= exp(g)``,
``S += k (beta * (v - k^T S))``, ``y = q^T S``, three batched matmuls. The cache
(:class:`analysis.verify.cache.KVCache`) holds per layer the last K conv inputs (B, 2*Hk*dk + Hv*dv, K)
and the state (B, Hv, dk, dv). Everything runs in the activations' dtype (transformers' rule runs in fp32).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..model.config import ModelConfig
from .mamba import CausalConv


def gated_deltanet_sizes(cfg: ModelConfig) -> tuple[int, int, int, int, int, int]:
    """(Hk, Hv, dk, dv, K, Q) from the config alone."""
    g = cfg.gated_deltanet
    assert g is not None
    return (g.linear_num_key_heads, g.linear_num_value_heads, g.linear_key_head_dim, g.linear_value_head_dim,
            g.linear_conv_kernel_dim, g.chunk_size)


def _l2norm(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    return x * torch.rsqrt((x * x).sum(dim=-1, keepdim=True) + eps)


def delta_step(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, decay: torch.Tensor, beta: torch.Tensor,
               h0: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One token of a delta rule continuing a cached sequence (this module's, and KDA's with a decay per
    channel): q and k (b, H, dk), v (b, H, dv), beta (b, H), the state h0 (b, H, dk, dv) times ``decay``
    (broadcast to it) -> y (b, 1, H, dv), the new state."""
    h = h0 * decay
    delta = (v - torch.matmul(k[..., None, :], h)[..., 0, :]) * beta[..., None]
    h = h + torch.matmul(k[..., :, None], delta[..., None, :])
    return torch.matmul(q[..., None, :], h).transpose(1, 2), h


class Rule(nn.Module):
    """The gated delta rule: chunked over ``Q`` positions, or one recurrent step (``step``)."""

    def __init__(self, Q: int):
        super().__init__()
        self.Q = Q

    def forward(self, q, k, v, g, beta, h0, step: bool):
        """q and k (b, S, H, dk), v (b, S, H, dv), g and beta (b, S, H) -> y (b, S, H, dv), the last state."""
        q, k = _l2norm(q), _l2norm(k)
        q = q * q.shape[-1] ** -0.5
        if step:  # one token continuing a cached sequence
            q, k, v, g, beta = q[:, 0], k[:, 0], v[:, 0], g[:, 0], beta[:, 0]  # (b, H, ...)
            return delta_step(q, k, v, torch.exp(g)[..., None, None], beta, h0)  # a decay per head
        b, S, H, dk = k.shape
        dv, Q = v.shape[-1], self.Q
        pad = (-S) % Q
        c = (S + pad) // Q
        # (b, H, S + pad, .), each in a storage of its own (whatever the padding and strides)
        q, k, v = (F.pad(t.transpose(1, 2), (0, 0, 0, pad)).clone(memory_format=torch.contiguous_format)
                   for t in (q, k, v))
        beta, g = (F.pad(t.transpose(1, 2), (0, pad)).clone(memory_format=torch.contiguous_format) for t in (beta, g))
        vb, kb = v * beta[..., None], k * beta[..., None]
        q, k, kb, vb = (t.reshape(b, H, c, Q, t.shape[-1]) for t in (q, k, kb, vb))
        cum = g.reshape(b, H, c, Q).cumsum(dim=-1)
        upper = torch.ones(Q, Q, dtype=torch.bool, device=q.device).triu(1)
        decay = (cum[..., :, None] - cum[..., None, :]).masked_fill(upper, float("-inf")).exp()
        system = torch.matmul(kb, k.transpose(-1, -2)) * decay
        intra = torch.matmul(q, k.transpose(-1, -2)) * decay
        u = torch.linalg.solve_triangular(system, vb, upper=False, unitriangular=True)
        w = torch.linalg.solve_triangular(system, kb * cum.exp()[..., None], upper=False, unitriangular=True)
        h = torch.zeros(b, H, dk, dv, dtype=v.dtype, device=v.device) if h0 is None else h0
        q = q * cum.exp()[..., None]
        k = k * (cum[..., -1:] - cum).exp()[..., None]
        total = cum[..., -1].exp()[..., None, None]
        ys = []
        for i in range(c):
            v_new = u[:, :, i] - torch.matmul(w[:, :, i], h)
            ys.append(torch.matmul(q[:, :, i], h) + torch.matmul(intra[:, :, i], v_new))
            h = h * total[:, :, i] + torch.matmul(k[:, :, i].transpose(-1, -2), v_new)
        y = torch.cat(ys, dim=2)[:, :, :S]  # (b, H, S, dv)
        return y.transpose(1, 2), h


class GatedNorm(nn.Module):
    """transformers' Qwen3NextRMSNormGated: per head ``x * rsqrt(mean(x^2) + eps) * weight * act(z)``, ``act``
    SiLU (KDA's, KimiLinearRMSNormGated: a sigmoid)."""

    def __init__(self, dv: int, eps: float = 1e-6, act=F.silu):
        super().__init__()
        self.eps, self.act = eps, act
        self.weight = nn.Parameter(torch.ones(dv))

    def forward(self, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        y = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * y * self.act(z)


class GatedDeltaNetMixer(nn.Module):
    def __init__(self, cfg: ModelConfig, index: int):
        super().__init__()
        Hk, Hv, dk, dv, K, Q = gated_deltanet_sizes(cfg)
        self.index, self.sizes = index, (Hk, Hv, dk, dv, K, Q)
        d = cfg.d_model
        self.in_proj_qkv = nn.Linear(d, 2 * Hk * dk + Hv * dv, bias=False)
        self.in_proj_z = nn.Linear(d, Hv * dv, bias=False)
        self.in_proj_b = nn.Linear(d, Hv, bias=False)
        self.in_proj_a = nn.Linear(d, Hv, bias=False)
        self.conv1d = CausalConv(2 * Hk * dk + Hv * dv, K, False)
        self.dt_bias = nn.Parameter(torch.ones(Hv))
        self.A_log = nn.Parameter(torch.log(torch.linspace(1, 4, Hv)))
        self.norm = GatedNorm(dv)
        self.out_proj = nn.Linear(Hv * dv, d, bias=False)
        self.scan = Rule(Q)

    def forward(self, x: torch.Tensor, cache=None, start_pos: int = 0) -> torch.Tensor:
        Hk, Hv, dk, dv, _, _ = self.sizes
        b, S, _ = x.shape
        states = None if cache is None else cache.tensors[self.index]
        mixed = self.in_proj_qkv(x).transpose(1, 2)  # (b, 2*Hk*dk + Hv*dv, S)
        c = self.conv1d(mixed, None if states is None else states[0], start_pos > 0)
        mixed = F.silu(c.transpose(1, 2).clone(memory_format=torch.contiguous_format))
        q, k, v = mixed.split([Hk * dk, Hk * dk, Hv * dv], dim=-1)
        q, k = q.reshape(b, S, Hk, dk), k.reshape(b, S, Hk, dk)
        if Hv != Hk:  # each query/key head serves Hv / Hk consecutive value heads
            q, k = q.repeat_interleave(Hv // Hk, dim=2), k.repeat_interleave(Hv // Hk, dim=2)
        beta = torch.sigmoid(self.in_proj_b(x))
        g = -torch.exp(self.A_log) * F.softplus(self.in_proj_a(x) + self.dt_bias)  # (b, S, Hv)
        h0 = states[1].to(x.dtype) if states is not None and start_pos > 0 else None
        y, h = self.scan(q, k, v.reshape(b, S, Hv, dv), g, beta, h0, h0 is not None and S == 1)
        if states is not None:
            states[1].copy_(h)
        z = self.in_proj_z(x).reshape(b, S, Hv, dv)
        return self.out_proj(self.norm(y, z).reshape(b, S, Hv * dv))
