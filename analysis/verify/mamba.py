"""The reference Mamba-1 mixer: a slow, plain-PyTorch selective scan in its recurrent form.

Built from ModelConfig alone (``mamba`` mapping). Submodules are the breakdown keys: ``in_proj``
(d -> 2E: u and the gate z), ``conv1d`` (depthwise causal, K taps), ``x_proj`` (E/H -> R + 2N per head:
dt, B, C), ``dt_proj`` (R -> E/H per head, bias), ``out_proj`` (E -> d), ``scan`` (no parameters: the
recurrence), and the parameters ``A_log`` (E, N) and ``D`` (E). ``H = mamba.heads`` (Zamba v1's
``n_mamba_heads``; 1 otherwise): the channels after the conv split into H heads of E/H, each with its own
x_proj and dt_proj (:class:`HeadLinears`, as transformers' ZambaMambaMixer holds ``x_proj_weight`` (H, R +
2N, E/H) and ``dt_proj_weight`` (H, E/H, R)) and its own dt, B and C. Falcon-Mamba's weightless RMS norms
on dt, B and C are ``norms``; Jamba's (``mixer_norms: weighted``) multiply each by a weight, the parameters
``dt_norm`` (R), ``b_norm`` and ``c_norm`` (N). Forward, for ``x`` (B, S, d)::

    u, z = in_proj(x).chunk(2)
    u = silu(conv1d(u))                          # causal: padding K-1 from the start, or the K cached inputs
    dt_h, B_h, C_h = x_proj_h(u_h).split(R, N, N)   # per head (normed, Falcon-Mamba; and weighted, Jamba)
    dt = softplus(concat_h dt_proj_h(dt_h))
    h_t = exp(dt_t * A) * h_{t-1} + (dt_t * u_t) B_t,  y_t = h_t @ C_t     # A = -exp(A_log); B, C: the head's
    out_proj((y + u * D) * silu(z))

The cache (:class:`analysis.verify.cache.KVCache`) holds per mamba layer the last K conv inputs
(B, E, K) and the state h (B, E, N). Everything runs in the activations' dtype.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..model.config import ModelConfig


def mamba_sizes(cfg: ModelConfig) -> tuple[int, int, int, int]:
    """(E, N, R, K) from the config alone."""
    m = cfg.mamba
    assert m is not None
    rank = m.dt_rank if m.dt_rank is not None else math.ceil(cfg.d_model / 16)
    return m.expand * cfg.d_model, m.d_state, rank, m.d_conv


class CausalConv(nn.Module):
    """Depthwise causal conv over (B, E, C): ``padding=K-1`` (outputs trimmed to C) from the start of a
    sequence, else over the K cached inputs and the C new ones without padding (C + 1 outputs, the
    last C kept). ``state``, a layer's cached conv inputs (B, E, K), is read when the call
    ``continues`` a sequence, then holds the last K inputs (zeros before the sequence)."""

    def __init__(self, E: int, K: int, bias: bool):
        super().__init__()
        self.K = K
        self.weight = nn.Parameter(torch.empty(E, 1, K).uniform_(-K ** -0.5, K ** -0.5))
        self.bias = nn.Parameter(torch.zeros(E)) if bias else None

    def forward(self, u: torch.Tensor, state: torch.Tensor | None = None, continues: bool = False) -> torch.Tensor:
        C, E = u.shape[-1], u.shape[1]
        past = state.to(u.dtype) if state is not None and continues else None
        if past is None:
            out = F.conv1d(u, self.weight, self.bias, padding=self.K - 1, groups=E)[..., :C]
        else:
            out = F.conv1d(torch.cat([past, u], dim=-1), self.weight, self.bias, groups=E)[..., -C:]
        if state is not None:
            before = past if past is not None else torch.zeros_like(state, dtype=u.dtype)
            state.copy_(torch.cat([before, u], dim=-1)[..., -self.K:])
        return out


class Scan(nn.Module):
    """The recurrence, token by token: ``h = dA_t * h + dBu_t``, ``y_t = h @ C_t``, a batched matmul per
    head (its channels' slice of the state and its own C: views, no copy)."""

    def forward(self, dA: torch.Tensor, dBu: torch.Tensor, Cs: list[torch.Tensor], h: torch.Tensor | None):
        ys, width = [], dA.shape[2] // len(Cs)
        for t in range(dA.shape[1]):
            h = dBu[:, t] if h is None else dA[:, t] * h + dBu[:, t]  # (B, E, N)
            heads = [torch.matmul(part, C[:, t].unsqueeze(-1)) for part, C in zip(h.split(width, dim=1), Cs)]
            ys.append(joined(heads, 1))  # (B, E, 1)
        return torch.cat(ys, dim=-1).transpose(1, 2), h  # (B, S, E), the last state


def joined(parts: list[torch.Tensor], dim: int) -> torch.Tensor:
    """The heads' outputs side by side (one head: its own tensor, no copy)."""
    return parts[0] if len(parts) == 1 else torch.cat(parts, dim=dim)


class HeadLinears(nn.Module):
    """H linears ``d_in -> d_out`` side by side, head ``i`` over input ``i``: ``weight`` (H, d_out, d_in) and
    ``bias`` (H, d_out), as transformers' Zamba holds x_proj and dt_proj (one head: Mamba's linear, (d_out, d_in)
    and (d_out), as FSDP then splits them)."""

    def __init__(self, heads: int, d_in: int, d_out: int, bias: bool):
        super().__init__()
        stacked = (heads,) if heads > 1 else ()  # one head: Mamba's nn.Linear, its weight (d_out, d_in)
        self.weight = nn.Parameter(torch.empty(*stacked, d_out, d_in).uniform_(-d_in ** -0.5, d_in ** -0.5))
        self.bias = nn.Parameter(torch.zeros(*stacked, d_out)) if bias else None

    def forward(self, xs: list[torch.Tensor]) -> tuple[torch.Tensor, ...]:  # a tuple: module hooks see tensors
        weights = [self.weight] if self.weight.dim() == 2 else list(self.weight)
        biases = [None] * len(xs) if self.bias is None else [self.bias] if self.bias.dim() == 1 else list(self.bias)
        return tuple(F.linear(x, w, b) for x, w, b in zip(xs, weights, biases))


def rms(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """A weightless RMS norm (Falcon-Mamba's on dt, B and C)."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


class MambaMixer(nn.Module):
    def __init__(self, cfg: ModelConfig, index: int):
        super().__init__()
        E, N, R, K = mamba_sizes(cfg)
        self.index, self.sizes, self.mixer_norms = index, (E, N, R, K), cfg.mamba.mixer_norms
        bias = cfg.mamba.proj_bias
        self.in_proj = nn.Linear(cfg.d_model, 2 * E, bias=bias)
        self.conv1d = CausalConv(E, K, cfg.mamba.conv_bias)
        self.heads = H = cfg.mamba.heads
        self.x_proj = HeadLinears(H, E // H, R + 2 * N, bias=False)
        self.dt_proj = HeadLinears(H, R, E // H, bias=True)
        # S4D-real initialisation (Mamba's): A = -(1..N) per channel, D = 1
        self.A_log = nn.Parameter(torch.log(torch.arange(1, N + 1, dtype=torch.float32)).repeat(E, 1))
        self.D = nn.Parameter(torch.ones(E))
        self.out_proj = nn.Linear(E, cfg.d_model, bias=bias)
        self.scan = Scan()
        if cfg.mamba.mixer_norms == "weighted":  # Jamba: RMS norms with a weight on dt, B and C
            self.dt_norm, self.b_norm, self.c_norm = (nn.Parameter(torch.ones(n)) for n in (R, N, N))

    def forward(self, x: torch.Tensor, cache=None, start_pos: int = 0) -> torch.Tensor:
        E, N, R, _ = self.sizes
        u, z = self.in_proj(x).chunk(2, dim=-1)  # (B, S, E) each, views
        u = u.transpose(1, 2)  # (B, E, S)
        states = None if cache is None else cache.tensors[self.index]
        c = self.conv1d(u, None if states is None else states[0], start_pos > 0)
        u = F.silu(c.transpose(1, 2).clone(memory_format=torch.contiguous_format))  # (B, S, E), laid out by token
        width = E // self.heads
        dts, Bs, Cs = zip(*(p.split([R, N, N], dim=-1) for p in self.x_proj(u.split(width, dim=-1))))
        if self.mixer_norms:  # one head (analysis.model.rules)
            (dt,), (B,), (C,) = dts, Bs, Cs
            dt, B, C = rms(dt), rms(B), rms(C)
            if self.mixer_norms == "weighted":
                dt, B, C = dt * self.dt_norm, B * self.b_norm, C * self.c_norm
            dts, Bs, Cs = (dt,), (B,), (C,)
        dt = F.softplus(joined(self.dt_proj(list(dts)), -1))  # (B, S, E)
        A = -torch.exp(self.A_log)  # (E, N)
        dA = torch.exp(dt.unsqueeze(-1) * A)  # (B, S, E, N)
        dBu = joined([part.unsqueeze(-1) * B.unsqueeze(-2) for part, B in zip((dt * u).split(width, dim=-1), Bs)],
                     2)  # (B, S, E, N)
        h0 = states[1].to(u.dtype) if states is not None and start_pos > 0 else None
        y, h = self.scan(dA, dBu, list(Cs), h0)
        if states is not None:
            states[1].copy_(h)
        y = (y + u * self.D) * F.silu(z)
        return self.out_proj(y)
