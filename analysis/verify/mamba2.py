"""The reference Mamba-2 (SSD) mixer: plain PyTorch, the chunked scan for a pass over the prompt and the
recurrent step for a decode step, as transformers' slow path (``torch_forward``) runs them.

Built from ModelConfig alone (``mamba2`` mapping). Sizes: ``E = H * P`` channels (H heads of P),
N the state, G groups of B and C, K conv taps, Q the chunk. Submodules are the breakdown keys:
``in_proj`` (d -> 2E + 2GN + H: z, x, B, C, dt), ``conv1d`` (depthwise causal, K taps over x, B and C:
``E + 2GN`` channels), ``norm`` (the gated RMSNorm, weight E, over G groups; without ``mamba2.norm`` none,
the output only gated), ``out_proj`` (E -> d),
``scan`` (no parameters), and the parameters ``dt_bias``, ``A_log`` and ``D`` (H each). Forward::

    z, xBC, dt = in_proj(x).split(E, E + 2GN, H)
    x, B, C = silu(conv1d(xBC)).split(E, GN, GN)     # causal: padding K-1 from the start, or the K cached
    dt = softplus(dt + dt_bias);  A = -exp(A_log)
    y = scan(x, dt, A, B, C)                          # chunked (Q), or one recurrent step
    out_proj(norm((y + x * D) * silu(z)))             # norm: per group x * rsqrt(mean(x^2) + eps), * weight

The chunked scan (per chunk of Q positions, b batch, c chunks, l and s positions, h heads, p head dims,
n state): ``G = einsum(C, B)`` (b,c,l,s,h), ``Y_diag = einsum(G * L, x*dt)`` with ``L`` the decay
``exp(segsum(dt*A))`` masked causal; the chunk states ``einsum(B * decay, x*dt)`` (b,c,h,p,n); the state
passing ``einsum(exp(segsum(chunk decays)), [h0, states])`` over ``c + 1`` chunks; ``Y_off =
einsum(C, states) * exp(cumsum)``. The step: ``h = exp(dt*A) * h + (dt*x) B``, ``y = h @ C`` (a batched
matmul). The cache (:class:`analysis.verify.cache.KVCache`) holds per mamba2 layer the last K conv inputs
(B, E + 2GN, K) and the state h (B, H, P, N). Everything runs in the activations' dtype.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..model.config import ModelConfig
from .mamba import CausalConv


def mamba2_sizes(cfg: ModelConfig) -> tuple[int, int, int, int, int, int, int]:
    """(E, H, P, N, G, K, Q) from the config alone."""
    m = cfg.mamba2
    assert m is not None
    H = m.n_heads if m.n_heads is not None else m.expand * cfg.d_model // m.head_dim
    return H * m.head_dim, H, m.head_dim, m.d_state, m.n_groups, m.d_conv, m.chunk_size


def _own(t: torch.Tensor) -> torch.Tensor:
    """A contiguous copy in a storage of its own (whatever the strides: what backward keeps is then plain)."""
    return t.clone(memory_format=torch.contiguous_format)


def _segsum(s: torch.Tensor) -> torch.Tensor:
    """From cumulated sums ``s``: ``out[..., i, j] = s[i] - s[j]`` for ``j <= i``, -inf above."""
    n = s.shape[-1]
    diff = s[..., :, None] - s[..., None, :]
    upper = ~torch.tril(torch.ones(n, n, dtype=torch.bool, device=s.device))
    return diff.masked_fill(upper, -torch.inf)


class Scan(nn.Module):
    """The SSD scan: chunked over ``Q`` positions, or one recurrent step (``step``)."""

    def __init__(self, Q: int):
        super().__init__()
        self.Q = Q

    def forward(self, x, dt, A, B, C, h0, step: bool):
        """x (b, S, H, P), dt (b, S, H), A (H,), B and C (b, S, H, N) -> y (b, S, H, P), the last state."""
        if step:  # one token continuing a cached sequence
            dA = torch.exp(dt[:, 0] * A)  # (b, H)
            dBx = (dt[:, 0, :, None] * B[:, 0])[:, :, None, :] * x[:, 0, :, :, None]  # (b, H, P, N)
            h = h0 * dA[:, :, None, None] + dBx
            b, H, P, N = h.shape
            y = torch.bmm(h.reshape(b * H, P, N), C[:, 0].reshape(b * H, N, 1))
            return y.view(b, 1, H, P), h
        b, S, H, P = x.shape
        N, Q = B.shape[-1], self.Q
        pad = (-S) % Q
        c = (S + pad) // Q
        xdt = x * dt[..., None]
        a = dt * A  # (b, S, H)

        def chunks(t):  # (b, S, H, k) -> (b, c, H, Q, k), its own storage
            t = F.pad(t, (0, 0, 0, 0, 0, pad)) if pad else t
            return _own(t.reshape(b, c, Q, H, t.shape[-1]).transpose(2, 3))

        X, Bc, Cc = chunks(xdt), chunks(B), chunks(C)
        a = F.pad(a, (0, 0, 0, pad)) if pad else a
        acum = torch.cumsum(a.reshape(b, c, Q, H).transpose(2, 3), dim=-1)  # (b, c, H, Q)
        L = torch.exp(_segsum(acum))  # (b, c, H, Q, Q)
        y_diag = torch.matmul(torch.matmul(Cc, Bc.transpose(-1, -2)) * L, X)  # (C B^T * L) x
        decay = torch.exp(acum[..., -1:] - acum)
        states = torch.matmul((Bc * decay[..., None]).transpose(-1, -2), X)  # (b, c, H, N, P)
        states = _own(states.transpose(1, 2)).reshape(b, H, c, N * P)
        first = torch.zeros_like(states[:, :, :1]) if h0 is None else h0.transpose(-1, -2).reshape(b, H, 1, N * P)
        # (b, H, c + 1): the chunks' decays, cumulated
        ends = torch.cumsum(F.pad(acum[..., -1].transpose(1, 2), (1, 0)), dim=-1)
        passed = torch.matmul(torch.exp(_segsum(ends)), torch.cat([first, states], dim=2))  # (b, H, c + 1, NP)
        starts = _own(passed[:, :, :-1].reshape(b, H, c, N, P).transpose(1, 2))  # (b, c, H, N, P)
        y_off = torch.matmul(Cc, starts) * torch.exp(acum)[..., None]
        y = (y_diag + y_off).transpose(2, 3).reshape(b, c * Q, H, P)[:, :S]
        return y, passed[:, :, -1].reshape(b, H, N, P).transpose(-1, -2)


class GatedNorm(nn.Module):
    """transformers' MambaRMSNormGated: ``x * silu(z)``, RMS-normed per group of ``E / G``, times a weight."""

    def __init__(self, E: int, G: int, eps: float = 1e-6):
        super().__init__()
        self.G, self.eps = G, eps
        self.weight = nn.Parameter(torch.ones(E))

    def forward(self, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        h = y * F.silu(z)
        g = h.view(*h.shape[:-1], self.G, -1)
        g = g * torch.rsqrt(g.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * g.view(h.shape)


class Mamba2Mixer(nn.Module):
    def __init__(self, cfg: ModelConfig, index: int):
        super().__init__()
        E, H, P, N, G, K, Q = mamba2_sizes(cfg)
        self.index, self.sizes = index, (E, H, P, N, G, K, Q)
        m = cfg.mamba2
        self.in_proj = nn.Linear(cfg.d_model, 2 * E + 2 * G * N + H, bias=m.proj_bias)
        self.conv1d = CausalConv(E + 2 * G * N, K, cfg.mamba2.conv_bias)
        self.dt_bias = nn.Parameter(torch.zeros(H))
        self.A_log = nn.Parameter(torch.log(torch.arange(1, H + 1, dtype=torch.float32)))
        self.D = nn.Parameter(torch.ones(H))
        if m.norm:  # else the output is only gated (Falcon-H1's default)
            self.norm = GatedNorm(E, G)
        self.out_proj = nn.Linear(E, cfg.d_model, bias=m.proj_bias if m.out_proj_bias is None else m.out_proj_bias)
        self.scan = Scan(Q)

    def forward(self, x: torch.Tensor, cache=None, start_pos: int = 0) -> torch.Tensor:
        E, H, P, N, G, _, _ = self.sizes
        b, S, _ = x.shape
        z, xBC, dt = self.in_proj(x).split([E, E + 2 * G * N, H], dim=-1)  # views
        xBC = xBC.transpose(1, 2)  # (b, E + 2GN, S)
        states = None if cache is None else cache.tensors[self.index]
        c = self.conv1d(xBC, None if states is None else states[0], start_pos > 0)
        xBC = F.silu(c.transpose(1, 2).clone(memory_format=torch.contiguous_format))  # (b, S, E + 2GN)
        u, Bm, Cm = xBC.split([E, G * N, G * N], dim=-1)
        dt = F.softplus(dt + self.dt_bias)  # (b, S, H)
        A = -torch.exp(self.A_log)  # (H,)
        Bm = Bm.reshape(b, S, G, N).repeat_interleave(H // G, dim=2)  # (b, S, H, N)
        Cm = Cm.reshape(b, S, G, N).repeat_interleave(H // G, dim=2)
        h0 = states[1].to(u.dtype) if states is not None and start_pos > 0 else None
        y, h = self.scan(u.reshape(b, S, H, P), dt, A, Bm, Cm, h0, h0 is not None and S == 1)
        if states is not None:
            states[1].copy_(h)
        y = (y + u.reshape(b, S, H, P) * self.D[:, None]).reshape(b, S, E)
        return self.out_proj(self.norm(y, z) if hasattr(self, "norm") else y * F.silu(z))
