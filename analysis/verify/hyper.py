"""Hyper-connections (:mod:`analysis.model.hyper`): the coefficients of one branch (``hyper.attention``,
``hyper.mlp``) or of the final collapse (``hyper.head``), and the expansion and mix after a branch
(``hyper.<branch>_mix``), as transformers' DeepseekV4HyperConnection (``mix``) and HYV4HyperConnection compute
them, in the activations' dtype.

The coefficients are one autograd function (what a fused kernel computes): a weightless RMS norm over
the streams' ``N*d`` values, the linear ``fn`` (``N*d -> R``), then ``pre = sigmoid(m * s0 + b) + eps``,
``post = 2 * sigmoid(m * s1 + b)`` and with mix ``comb = softmax(m * s2 + b) + eps`` made doubly
stochastic by Sinkhorn's iterations (columns, then rows and columns). It keeps the streams, the norm's
fp32 statistic and the R linear outputs, and in backward recomputes the activations (elementwise)
to differentiate them: its matmuls are the forward's and the two gradients', ``2*T*N*d*R`` each.
"""

from __future__ import annotations

import torch
from torch import nn

from ..model.config import ModelConfig

EPS = 1e-6  # hc_eps


def _activations(mixes, base, scale, n: int, mix: bool, iters: int, head: bool):
    """(pre, post, comb) from the linear's outputs (the head: pre alone)."""
    if head:
        return (torch.sigmoid(mixes * scale[0] + base) + EPS,)
    pre = torch.sigmoid(mixes[..., :n] * scale[0] + base[:n]) + EPS
    post = 2 * torch.sigmoid(mixes[..., n:2 * n] * scale[1] + base[n:2 * n])
    if not mix:
        return pre, post
    comb = torch.softmax(mixes[..., 2 * n:].unflatten(-1, (n, n)) * scale[2] + base[2 * n:].view(n, n), -1) + EPS
    comb = comb / (comb.sum(-2, keepdim=True) + EPS)
    for _ in range(iters - 1):
        comb = comb / (comb.sum(-1, keepdim=True) + EPS)
        comb = comb / (comb.sum(-2, keepdim=True) + EPS)
    return pre, post, comb


class _Coefficients(torch.autograd.Function):
    """x (..., N, d) -> (pre, post[, comb]) (module docstring)."""

    @staticmethod
    def forward(ctx, x, fn, base, scale, mix: bool, iters: int, head: bool):
        n = x.shape[-2]
        flat = x.flatten(-2)  # (..., N*d), a view of the streams
        acc = torch.promote_types(x.dtype, torch.float32)
        rstd = torch.rsqrt(flat.to(acc).square().mean(-1, keepdim=True) + 1e-5)  # (..., 1)
        mixes = (flat.to(acc) * rstd).to(x.dtype) @ fn.t()  # (..., R)
        ctx.save_for_backward(x, rstd, mixes, fn, base, scale)
        ctx.options = (mix, iters, head)
        if x.is_meta:  # shapes only: Sinkhorn's elementwise iterations need no running
            outs = [mixes.new_empty(*mixes.shape[:-1], n)] * (1 if head else 2)
            return tuple(o.clone() for o in outs) + ((mixes.new_empty(*mixes.shape[:-1], n, n),) if mix else ())
        return _activations(mixes, base, scale, n, mix, iters, head)

    @staticmethod
    def backward(ctx, *grads):
        x, rstd, mixes, fn, base, scale = ctx.saved_tensors
        mix, iters, head = ctx.options
        flat = x.flatten(-2)
        normed = (flat.to(rstd.dtype) * rstd).to(x.dtype)
        if x.is_meta:
            dmixes, dbase, dscale = torch.empty_like(mixes), torch.empty_like(base), torch.empty_like(scale)
        else:
            with torch.enable_grad():
                inputs = [t.detach().requires_grad_() for t in (mixes, base, scale)]
                outs = _activations(*inputs, x.shape[-2], mix, iters, head)
                dmixes, dbase, dscale = torch.autograd.grad(outs, inputs, grads)
        dfn = dmixes.reshape(-1, mixes.shape[-1]).t() @ normed.reshape(-1, flat.shape[-1])  # (R, N*d)
        g = (dmixes @ fn).to(rstd.dtype)  # (..., N*d): the gradient of the normed streams
        xhat = flat.to(rstd.dtype) * rstd
        dflat = rstd * (g - xhat * (g * xhat).mean(-1, keepdim=True))
        return dflat.to(x.dtype).view_as(x), dfn, dbase, dscale, None, None, None


class HyperConnection(nn.Module):
    """One branch's coefficients (``head``: the final collapse's), then the collapse ``sum_i pre_i X_i``:
    returns (the collapsed input, post, comb or None)."""

    def __init__(self, cfg: ModelConfig, head: bool = False):
        super().__init__()
        h = cfg.hyper
        n, self.mix, self.iters, self.head = h.streams, h.mix and not head, h.sinkhorn_iters, head
        rows = n if head else (2 + n) * n if h.mix else 2 * n
        self.fn = nn.Parameter(torch.empty(rows, n * cfg.d_model).normal_(std=(n * cfg.d_model) ** -0.5))
        self.base = nn.Parameter(torch.zeros(rows))
        self.scale = nn.Parameter(torch.ones(1 if head else 3 if h.mix else 2))

    def forward(self, x: torch.Tensor):
        pre, *rest = _Coefficients.apply(x, self.fn, self.base, self.scale, self.mix, self.iters, self.head)
        collapsed = (pre.unsqueeze(-1) * x).sum(-2)  # (..., d)
        return collapsed, *rest, *[None] * (2 - len(rest))


class Mix(nn.Module):
    """After a branch: the streams ``post_i * y + (comb^T X)_i``, or ``post_i * y + X_i`` without mix."""

    def forward(self, post: torch.Tensor, comb: torch.Tensor | None, y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        out = post.unsqueeze(-1) * y.unsqueeze(-2)  # (..., N, d)
        return out + (x if comb is None else comb.transpose(-1, -2) @ x)
