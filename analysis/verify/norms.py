"""Norm factory: ``layernorm`` (weight unless ``norm_weight: false``, bias unless
``norm_bias: false``; OLMo 1 has neither) or ``rmsnorm`` (weight unless ``norm_weight: false``,
nanochat's), both with eps 1e-5 over the last dimension.

Both keep, for backward, their input and fp32 per-row statistics (LayerNorm: mean and rstd;
RMSNorm: rstd), as the fused kernels do. ``nn.RMSNorm`` runs a fused kernel only on CUDA; on
cpu and meta it decomposes into ops that also keep an fp32 copy of the input and of the
normalized input (8 extra bytes per element in bf16), an artifact of the decomposition that
no fused implementation pays, so RMSNorm here is :class:`RMSNorm`, which saves what
``aten._fused_rms_norm`` saves on CUDA.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..model.config import ModelConfig


class _RMSNormFunction(torch.autograd.Function):
    """``x * rstd * w`` with ``rstd = 1/sqrt(mean(x^2) + eps)`` computed in at least fp32 (``w``
    None: without a weight)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor | None, eps: float) -> torch.Tensor:
        acc = torch.promote_types(x.dtype, torch.float32)
        if x.is_meta:  # shapes only: the same output and saved tensors without the ~10 elementwise
            # ops, whose meta kernels torch runs in Python (a fifth of verify's time on meta)
            rstd = x.new_empty((*x.shape[:-1], 1), dtype=acc)
            ctx.save_for_backward(x, weight, rstd)
            dtype = x.dtype if weight is None else torch.promote_types(x.dtype, weight.dtype)
            return x.new_empty(x.shape, dtype=dtype)
        xf = x.to(acc)
        rstd = torch.rsqrt(xf.square().mean(-1, keepdim=True) + eps)  # (..., 1)
        ctx.save_for_backward(x, weight, rstd)
        out = (xf * rstd).to(x.dtype)
        return out if weight is None else out * weight

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        x, weight, rstd = ctx.saved_tensors
        if x.is_meta:
            return torch.empty_like(x), None if weight is None else torch.empty_like(weight), None
        xhat = x.to(rstd.dtype) * rstd
        g = grad.to(rstd.dtype)
        gw = g if weight is None else g * weight.to(rstd.dtype)
        dx = rstd * (gw - xhat * (gw * xhat).mean(-1, keepdim=True))
        if weight is None:
            return dx.to(x.dtype), None, None
        dw = (g * xhat).reshape(-1, x.shape[-1]).sum(0)
        return dx.to(x.dtype), dw.to(weight.dtype), None


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float = 1e-5, weight: bool = True):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(size)) if weight else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _RMSNormFunction.apply(x, self.weight, self.eps)


class _L2NormFunction(torch.autograd.Function):
    """``x * rstd`` with ``rstd = 1/sqrt(mean(x^2) + eps)`` in at least fp32: RMSNorm without a weight
    (Llama 4's L2Norm of q and k), keeping the input and rstd."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, eps: float) -> torch.Tensor:
        acc = torch.promote_types(x.dtype, torch.float32)
        if x.is_meta:
            ctx.save_for_backward(x, x.new_empty((*x.shape[:-1], 1), dtype=acc))
            return x.new_empty(x.shape)
        rstd = torch.rsqrt(x.to(acc).square().mean(-1, keepdim=True) + eps)
        ctx.save_for_backward(x, rstd)
        return (x.to(acc) * rstd).to(x.dtype)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        x, rstd = ctx.saved_tensors
        if x.is_meta:
            return torch.empty_like(x), None
        xhat, g = x.to(rstd.dtype) * rstd, grad.to(rstd.dtype)
        return (rstd * (g - xhat * (g * xhat).mean(-1, keepdim=True))).to(x.dtype), None


class L2Norm(nn.Module):
    """A weightless RMSNorm over the last dimension (``qk_norm: l2``), eps 1e-5."""

    def __init__(self, eps: float = 1e-5):
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _L2NormFunction.apply(x, self.eps)


class LayerNorm(nn.Module):
    """LayerNorm whose weight and bias are each optional (``F.layer_norm`` takes either alone;
    ``nn.LayerNorm`` cannot have a bias without a weight)."""

    def __init__(self, size: int, weight: bool = True, bias: bool = True, eps: float = 1e-5):
        super().__init__()
        self.size, self.eps = size, eps
        self.weight = nn.Parameter(torch.ones(size)) if weight else None
        self.bias = nn.Parameter(torch.zeros(size)) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, (self.size,), self.weight, self.bias, self.eps)


def make_norm(cfg: ModelConfig, size: int) -> nn.Module:
    """The model's norm over the last ``size`` values."""
    if cfg.norm == "rmsnorm":
        return RMSNorm(size, eps=1e-5, weight=cfg.norm_weight)
    return LayerNorm(size, weight=cfg.norm_weight, bias=cfg.norm_bias)
