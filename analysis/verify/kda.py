"""The reference KDA mixer (Kimi Delta Attention, transformers' ``KimiLinearDeltaAttention``): plain
PyTorch, the chunked rule for a pass over the prompt (as transformers' torch path,
``chunk_kimi_delta_attention``, runs it) and the recurrent step for a decode step.

Built from ModelConfig alone (``kda`` mapping). Sizes: ``H`` heads of ``d`` (q, k and v), ``E = H*d``,
``K`` conv taps, ``Q`` the chunk. Submodules are the breakdown keys: ``q_proj``, ``k_proj``, ``v_proj``
(d_model -> E), ``conv1d`` (depthwise causal, K taps over q, k and v, no bias), ``f_a_proj`` (d_model
-> d) and ``f_b_proj`` (d -> E), the forget gate, ``b_proj`` (d_model -> H), ``g_a_proj`` (d_model ->
d) and ``g_b_proj`` (d -> E), the output gate, ``o_norm`` (the gated RMSNorm, weight d, per head, its
gate through a sigmoid), ``o_proj`` (E -> d_model), ``scan`` (no parameters), and the parameters
``dt_bias`` (E) and ``A_log`` (H). Forward::

    q, k, v = silu(conv1d(cat(q_proj(x), k_proj(x), v_proj(x)))).split(E)   # causal, or the K cached
    g = -exp(A_log) * softplus(f_b_proj(f_a_proj(x)) + dt_bias)   # per head and key channel
    beta = sigmoid(b_proj(x))
    y = scan(l2norm(q) / sqrt(d), l2norm(k), v, g, beta)
    o_proj(o_norm(y, g_b_proj(g_a_proj(x))))      # per head y * rsqrt(mean(y^2) + eps) * w * sigmoid(gate)

The chunked rule (per sequence, head and chunk of Q positions, ``G`` the cumulated decays): the pairwise
decays ``exp(G_i - G_j)`` per key channel (zero above the diagonal), ``A = -sum_c (k*beta)_ic k_jc
decay_ijc`` below the diagonal, inverted in place by forward substitution (``T = (I - A)^-1``, row by row:
elementwise), ``u = T (v*beta)`` and ``w = T (k*beta*exp(G))``; ``intra = sum_c q_ic k_jc decay_ijc`` on
and below the diagonal; then chunk after chunk from the state ``S``: ``v' = u - w S``, ``y = (q*exp(G))
S + intra v'``, ``S = S * exp(G_last) + (k*exp(G_last - G))^T v'``. The step, one token continuing a
sequence: ``S *= exp(g)`` (per key row), ``S += k (beta * (v - k^T S))``, ``y = q^T S``, three batched
matmuls. The cache (:class:`analysis.verify.cache.KVCache`) holds per layer the last K conv inputs (B,
3E, K) and the state (B, H, d, d). Everything runs in the activations' dtype (transformers' rule runs in
fp32).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..model.config import ModelConfig
from .gated_deltanet import GatedNorm, _l2norm, delta_step
from .mamba import CausalConv


def kda_sizes(cfg: ModelConfig) -> tuple[int, int, int, int]:
    """(H, d, K, Q) from the config alone."""
    k = cfg.kda
    assert k is not None
    return k.linear_num_heads, k.linear_head_dim, k.linear_conv_kernel_dim, k.chunk_size


def _pairs(a: torch.Tensor, b: torch.Tensor, decay: torch.Tensor) -> torch.Tensor:
    """``sum_c a_ic b_jc decay_ijc`` over chunks (..., Q, d) and decays (..., Q, Q, d): elementwise, as
    transformers computes it."""
    return (a.unsqueeze(-2) * b.unsqueeze(-3) * decay).sum(-1)


class Rule(nn.Module):
    """The KDA rule: chunked over ``Q`` positions, or one recurrent step (``step``)."""

    def __init__(self, Q: int):
        super().__init__()
        self.Q = Q

    def forward(self, q, k, v, g, beta, h0, step: bool):
        """q, k, v and g (b, S, H, d), beta (b, S, H) -> y (b, S, H, d), the last state."""
        q, k = _l2norm(q), _l2norm(k)
        q = q * q.shape[-1] ** -0.5
        if step:  # one token continuing a cached sequence
            q, k, v, g, beta = q[:, 0], k[:, 0], v[:, 0], g[:, 0], beta[:, 0]  # (b, H, ...)
            return delta_step(q, k, v, torch.exp(g)[..., None], beta, h0)  # a decay per key channel
        b, S, H, d = k.shape
        Q = self.Q
        pad = (-S) % Q
        c = (S + pad) // Q
        # (b, H, S + pad, .), each in a storage of its own (whatever the padding and strides)
        q, k, v, g = (F.pad(t.transpose(1, 2), (0, 0, 0, pad)).clone(memory_format=torch.contiguous_format)
                      for t in (q, k, v, g))
        beta = F.pad(beta.transpose(1, 2), (0, pad)).clone(memory_format=torch.contiguous_format)
        vb, kb = v * beta[..., None], k * beta[..., None]
        q, k, kb, vb, g = (t.reshape(b, H, c, Q, d) for t in (q, k, kb, vb, g))
        g = g.cumsum(dim=-2)
        upper = torch.ones(Q, Q, dtype=torch.bool, device=q.device).triu(1)
        decay = (g.unsqueeze(-2) - g.unsqueeze(-3)).masked_fill(upper[..., None], float("-inf")).exp()
        diagonal = torch.ones(Q, Q, dtype=torch.bool, device=q.device).triu()
        system = -_pairs(kb, k, decay).masked_fill(diagonal, 0)
        for i in range(1, Q):  # forward substitution, in place
            row, sub = system[..., i, :i].clone(), system[..., :i, :i].clone()
            system[..., i, :i] = row + (row.unsqueeze(-1) * sub).sum(-2)
        system = system + torch.eye(Q, dtype=system.dtype, device=q.device)
        growth = g.exp()
        u, w = torch.matmul(system, vb), torch.matmul(system, kb * growth)
        intra = _pairs(q, k, decay).masked_fill(upper, 0)
        q = q * growth
        k = k * (g[..., -1:, :] - g).exp()
        total = g[..., -1, :].exp()[..., None]  # (b, H, c, d, 1): the chunk's decay per key row
        h = torch.zeros(b, H, d, d, dtype=v.dtype, device=v.device) if h0 is None else h0
        ys = []
        for i in range(c):
            v_new = u[:, :, i] - torch.matmul(w[:, :, i], h)
            ys.append(torch.matmul(q[:, :, i], h) + torch.matmul(intra[:, :, i], v_new))
            h = h * total[:, :, i] + torch.matmul(k[:, :, i].transpose(-1, -2), v_new)
        y = torch.cat(ys, dim=2)[:, :, :S]  # (b, H, S, d)
        return y.transpose(1, 2), h


class KDAMixer(nn.Module):
    def __init__(self, cfg: ModelConfig, index: int):
        super().__init__()
        H, d, K, Q = kda_sizes(cfg)
        self.index, self.sizes = index, (H, d)
        m, E = cfg.d_model, H * d
        self.q_proj, self.k_proj, self.v_proj = (nn.Linear(m, E, bias=False) for _ in range(3))
        self.conv1d = CausalConv(3 * E, K, False)
        self.f_a_proj, self.f_b_proj = nn.Linear(m, d, bias=False), nn.Linear(d, E, bias=False)
        self.dt_bias = nn.Parameter(torch.zeros(E))
        self.A_log = nn.Parameter(torch.log(torch.linspace(1, 16, H)))
        self.b_proj = nn.Linear(m, H, bias=False)
        self.g_a_proj, self.g_b_proj = nn.Linear(m, d, bias=False), nn.Linear(d, E, bias=False)
        self.o_norm = GatedNorm(d, act=torch.sigmoid)
        self.o_proj = nn.Linear(E, m, bias=False)
        self.scan = Rule(Q)

    def forward(self, x: torch.Tensor, cache=None, start_pos: int = 0) -> torch.Tensor:
        H, d = self.sizes
        b, S, _ = x.shape
        states = None if cache is None else cache.tensors[self.index]
        mixed = torch.cat([self.q_proj(x), self.k_proj(x), self.v_proj(x)], dim=-1).transpose(1, 2)  # (b, 3E, S)
        c = self.conv1d(mixed, None if states is None else states[0], start_pos > 0)
        mixed = F.silu(c.transpose(1, 2).clone(memory_format=torch.contiguous_format))
        q, k, v = (t.reshape(b, S, H, d) for t in mixed.chunk(3, dim=-1))
        g = F.softplus(self.f_b_proj(self.f_a_proj(x)) + self.dt_bias).reshape(b, S, H, d)
        g = -torch.exp(self.A_log)[:, None] * g  # per head and key channel
        beta = torch.sigmoid(self.b_proj(x))  # (b, S, H)
        h0 = states[1].to(x.dtype) if states is not None and start_pos > 0 else None
        y, h = self.scan(q, k, v, g, beta, h0, h0 is not None and S == 1)
        if states is not None:
            states[1].copy_(h)
        gate = self.g_b_proj(self.g_a_proj(x)).reshape(b, S, H, d)
        return self.o_proj(self.o_norm(y, gate).reshape(b, S, H * d))
