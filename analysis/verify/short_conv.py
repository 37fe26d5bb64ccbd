"""The reference gated short convolution (LFM2's ``Lfm2ShortConv``): plain PyTorch, as transformers'
slow path runs it.

Built from ModelConfig alone (``short_conv`` mapping). Submodules are the breakdown keys: ``in_proj``
(d -> 3d: B, C, x), ``conv1d`` (depthwise causal, L taps, over B*x), ``out_proj`` (d -> d). Forward,
for ``h`` (B, S, d)::

    B, C, x = in_proj(h).transpose(1, 2).chunk(3)   # (B, d, S) each, views
    y = C * conv1d(B * x)                            # causal: padding L-1 from the start, or the L cached inputs
    out_proj(y.transpose(1, 2).contiguous())

The cache (:class:`analysis.verify.cache.KVCache`) holds per short_conv layer the last L conv inputs
(B, d, L). Everything runs in the activations' dtype.
"""

from __future__ import annotations

import torch
from torch import nn

from ..model.config import ModelConfig
from .mamba import CausalConv


def short_conv_sizes(cfg: ModelConfig) -> tuple[int, int]:
    """(d, L) from the config alone."""
    assert cfg.short_conv is not None
    return cfg.d_model, cfg.short_conv.d_conv


class ShortConvMixer(nn.Module):
    def __init__(self, cfg: ModelConfig, index: int):
        super().__init__()
        d, L = short_conv_sizes(cfg)
        self.index = index
        bias = cfg.short_conv.bias
        self.in_proj = nn.Linear(d, 3 * d, bias=bias)
        self.conv1d = CausalConv(d, L, bias)
        self.out_proj = nn.Linear(d, d, bias=bias)

    def forward(self, h: torch.Tensor, cache=None, start_pos: int = 0) -> torch.Tensor:
        B, C, x = self.in_proj(h).transpose(1, 2).chunk(3, dim=1)  # (B, d, S) each
        u = B * x
        states = None if cache is None else cache.tensors[self.index]
        c = self.conv1d(u, None if states is None else states[0], start_pos > 0)
        y = C * c
        return self.out_proj(y.transpose(1, 2).contiguous())
