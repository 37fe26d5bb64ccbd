"""Zamba's shared transformer blocks (``shared_transformer``), as the reference runs them.

A :class:`SharedBlock` holds one block's weights: the model's MHA over the ``2 d`` wide concatenation of
the layer's input and the embeddings entering layer 0, its output projection back to ``d``, the model's
MLP of width ``shared_transformer.d_ff``, and the norms ``shared_attention`` (``2 d``) and ``shared_mlp``.
Every layer using the block registers these same modules as its own ``attention``, ``mlp`` and
``norm.shared_*`` (deduplicated ``named_parameters`` name them after the first such layer, so their
components are ``attention/q``, ``mlp/up``, ``norm/shared_attention``, ...). A :class:`Use` is what the layer
holds itself: ``shared.proj`` (d -> d) and the adapters ``shared.mlp.adapter.{a,b}`` (d -> r -> the gate's and
up's widths) and, with ``attention_adapters``, ``shared.attention.{q,k,v}_adapter.{a,b}``. A use computes
each adapter's output before the linear it adapts runs (so the adapter saves the shared input first) and
the block adds it to that linear's output, as transformers' Zamba2 adds ``adapter(h)`` to ``q_proj(h)``
and to ``gate_up_proj(h)``. Each use caches its own K and V (``KVCache.shared``)."""

from __future__ import annotations

import dataclasses
from collections import OrderedDict

import torch
from torch import nn

from ..model.config import ModelConfig
from ..model.layers import LayerSpec
from .attention import Attention, LayerContext
from .ffn import MLP
from .norms import make_norm


def shared_spec(cfg: ModelConfig) -> LayerSpec:
    """The shared attention's spec: full causal MHA, rotating q and k under RoPE."""
    return LayerSpec("mha", None, cfg.position == "rope", "dense")


def attention_config(cfg: ModelConfig) -> ModelConfig:
    """The shared attention's config: the model's, over the ``2 d`` wide concatenation."""
    return dataclasses.replace(cfg, d_model=2 * cfg.d_model)


class SharedBlock:
    """One block's weights (module docstring), registered by the layers using it, not by itself; ``extras``
    holds a use's adapter outputs, by the linear they join, until that linear runs."""

    def __init__(self, cfg: ModelConfig, kind: str, selective: bool):
        d = cfg.d_model
        wide = attention_config(cfg)
        self.attention = Attention(wide, -1, shared_spec(cfg), kind)  # its cache: the use's (UseCache)
        self.attention.selective = selective
        self.attention.o = nn.Linear(wide.q_width, d, bias=cfg.out_bias)  # back to the model's width
        self.mlp = MLP(dataclasses.replace(cfg, d_ff=cfg.shared_transformer.d_ff))
        self.norms = {"shared_attention": make_norm(cfg, 2 * d), "shared_mlp": make_norm(cfg, d)}
        self.extras: dict[nn.Module, torch.Tensor] = {}
        for m in (self.attention.q, self.attention.k, getattr(self.attention, "v", None), self.mlp.up,
                  getattr(self.mlp, "gate", None)):
            if m is not None:
                m.register_forward_hook(self._add_extra)

    def _add_extra(self, module: nn.Module, args, out: torch.Tensor) -> torch.Tensor:
        extra = self.extras.pop(module, None)
        return out if extra is None else out + extra


class Use(nn.Module):
    """A layer's own parts for its use of a block (module docstring)."""

    def __init__(self, cfg: ModelConfig, block: SharedBlock):
        super().__init__()
        d, s = cfg.d_model, cfg.shared_transformer
        r = s.adapter_rank
        self.proj = nn.Linear(d, d, bias=False)
        if r:
            mlp = block.mlp
            width = mlp.up.out_features * (2 if hasattr(mlp, "gate") else 1)
            self.mlp = nn.ModuleDict({"adapter": _adapter(d, r, width)})
        if r and s.attention_adapters:
            attn = block.attention
            self.attention = nn.ModuleDict({f"{p}_adapter": _adapter(2 * d, r, getattr(attn, p).out_features)
                                            for p in "qkv" if hasattr(attn, p)})

    def forward(self, block: SharedBlock, norm: nn.ModuleDict, x: torch.Tensor, ctx: LayerContext,
                cache: object | None) -> torch.Tensor:
        """The block's output projected back, which joins the mixer's input."""
        h = norm["shared_attention"](torch.cat([x, ctx.embeddings], dim=-1))  # (B, S, 2d)
        if hasattr(self, "attention"):
            for name, adapter in self.attention.items():
                block.extras[getattr(block.attention, name.removesuffix("_adapter"))] = adapter(h)
        y = block.attention(h, LayerContext(ctx.bias, ctx.rope, cache, ctx.start_pos))
        h = norm["shared_mlp"](y)
        if hasattr(self, "mlp"):
            z = self.mlp["adapter"](h)
            if hasattr(block.mlp, "gate"):  # one adapter on both, as Zamba2's on gate_up_proj: gate first
                block.extras[block.mlp.gate], block.extras[block.mlp.up] = z.chunk(2, dim=-1)
            else:
                block.extras[block.mlp.up] = z
        return self.proj(block.mlp(h))


def _adapter(d_in: int, r: int, d_out: int) -> nn.Sequential:
    return nn.Sequential(OrderedDict(a=nn.Linear(d_in, r, bias=False), b=nn.Linear(r, d_out, bias=False)))


class UseCache:
    """The cache a use's attention updates: the layer's own K and V (``KVCache.shared``)."""

    def __init__(self, cache, layer: int):
        self.cache, self.layer = cache, layer

    def update(self, _index: int, new: tuple[torch.Tensor, ...], start: int) -> tuple[torch.Tensor, ...]:
        return self.cache.update(self.layer, new, start, self.cache.shared[self.layer])
