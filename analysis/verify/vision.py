"""The reference vision tower and projector of a multimodal checkpoint, built from its
``VisionConfig`` alone. Module paths are the breakdown keys: ``vision.patch`` (the patch
convolution, whose stride is its kernel, as a linear over flattened patches), ``vision.class_token``,
``vision.position``, ``vision.norm.{pre,final}``, ``vision.layers.<i>.attention.{q,k,v,o}``,
``vision.layers.<i>.mlp.{up,gate,down}``, ``vision.layers.<i>.norm.{attention,mlp}``, and
``projector.{norm,merge,in,hidden,out}``.

Parameters only: llmcalc counts no image through the tower yet, so the modules have no forward.
"""

from __future__ import annotations

import torch
from torch import nn

from ..model.config import ModelConfig, VisionConfig
from ..model.variants import ACTIVATIONS
from .norms import LayerNorm, RMSNorm


def _norm(kind: str, size: int, bias: bool = True) -> nn.Module:
    return RMSNorm(size) if kind == "rmsnorm" else LayerNorm(size, bias=bias)


class VisionLayer(nn.Module):
    def __init__(self, v: VisionConfig):
        super().__init__()
        d = v.d_model
        self.attention = nn.ModuleDict({p: nn.Linear(d, d, bias=v.out_bias if p == "o" else v.qkv_bias)
                                        for p in "qkvo"})
        mlp = {"up": nn.Linear(d, v.d_ff, bias=v.mlp_bias), "down": nn.Linear(v.d_ff, d, bias=v.mlp_bias)}
        if ACTIVATIONS[v.activation].gated:
            mlp["gate"] = nn.Linear(d, v.d_ff, bias=v.mlp_bias)
        self.mlp = nn.ModuleDict(mlp)
        self.norm = nn.ModuleDict({k: _norm(v.norm, d, v.norm_bias) for k in ("attention", "mlp")})


class VisionTower(nn.Module):
    def __init__(self, v: VisionConfig):
        super().__init__()
        d = v.d_model
        self.patch = nn.Linear(v.channels * v.temporal_patch * v.patch_size ** 2, d, bias=v.patch_bias)
        if v.class_token:
            self.class_token = nn.Parameter(torch.zeros(d))
        if v.position == "learned":
            side = (v.image_size or 0) // v.patch_size
            self.position = nn.Embedding(side * side + int(v.class_token), d)
        self.norm = nn.ModuleDict({k: _norm(v.norm, d, v.norm_bias)
                                   for k, on in (("pre", v.pre_norm), ("final", v.final_norm)) if on})
        self.layers = nn.ModuleList(VisionLayer(v) for _ in range(v.n_layers))


class Projector(nn.Module):
    """Tower width -> ``d_model``: norm, merged patches (their concatenation, or a linear back to the
    tower's width), then one linear or two."""

    def __init__(self, v: VisionConfig, d_model: int):
        super().__init__()
        p, d = v.projector, v.d_model
        if p.norm != "none":
            self.norm = _norm(p.norm, d)
        width = d * p.features * p.merge * p.merge
        if p.merge_linear:
            self.merge = nn.Linear(width, d, bias=False)
            width = d
        if p.hidden is not None:
            self.add_module("in", nn.Linear(width, p.hidden, bias=p.bias))
            width = p.hidden
        if p.hidden_linear and p.hidden is not None:  # Llama 4's vision adapter: hidden -> hidden
            self.hidden = nn.Linear(p.hidden, p.hidden, bias=p.bias)
        self.out = nn.Linear(width, d_model, bias=p.bias)


def add_vision(model: nn.Module, cfg: ModelConfig) -> None:
    """``model.vision`` and ``model.projector``, when ``cfg`` has a vision tower."""
    if cfg.vision is not None:
        model.vision = VisionTower(cfg.vision)
        model.projector = Projector(cfg.vision, cfg.d_model)
