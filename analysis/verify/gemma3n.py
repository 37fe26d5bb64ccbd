"""Gemma 3n's layers (:mod:`analysis.model.gemma3n`): AltUp (``altup.{router_norm,router,prediction,correction,
predict_mix,scale}``), Laurel (``laurel.{left,right}``, its norm ``norm.laurel``), a layer's per-layer input
(``per_layer.{gate,projection}``, its norm ``norm.per_layer``), the activation sparsity (``mlp.sparsity``), and
the model's per-layer inputs and streams' (un)embedding (:func:`add_model`), as transformers' Gemma3nTextModel
computes them. The streams are one tensor (B, S, N, d), so that the predictions are one batched matmul per
token; a stream is a view of it.
"""

from __future__ import annotations

import math
import statistics

import torch
import torch.nn.functional as F
from torch import nn

from ..model.config import ModelConfig
from .norms import make_norm


def _rms(x: torch.Tensor) -> torch.Tensor:
    return x.square().mean(-1, keepdim=True).clamp_min(1e-5).sqrt()


class Streams(nn.Module):
    """N - 1 linears ``d -> d`` (``altup.embed``, ``altup.unembed``), each output rescaled to the root mean
    square of ``target``."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        n, d = cfg.gemma3n.streams - 1, cfg.d_model
        self.weight = nn.Parameter(torch.empty(n, d, d).normal_(std=d ** -0.5))

    def forward(self, inputs: list[torch.Tensor], target: torch.Tensor) -> list[torch.Tensor]:
        scale = _rms(target)
        return [(lambda y: y * (scale / _rms(y)))(F.linear(x, w)) for x, w in zip(inputs, self.weight)]


class AltUp(nn.Module):
    """A layer's prediction and correction of the N streams (:mod:`analysis.model.gemma3n`)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        g, d = cfg.gemma3n, cfg.d_model
        self.n, self.d = g.streams, d
        self.router_norm = make_norm(cfg, d)
        self.router = nn.Linear(d, g.streams, bias=False)
        self.prediction = nn.Linear(g.streams, g.streams ** 2, bias=False)
        self.correction = nn.Linear(g.streams, g.streams, bias=False)
        self.predict_mix = PredictMix()
        self.scale = nn.Parameter(torch.ones(d))  # built either way, as transformers' correct_output_scale
        self.scaled = g.correct_scale

    def forward(self, x: torch.Tensor, predictions: torch.Tensor | None = None):
        """The predictions from the streams ``x``; with ``predictions``, their correction by the layer's output
        ``x`` (run as the module, so that what they save is AltUp's)."""
        return self.predict(x) if predictions is None else self.correct(predictions, x)

    def route(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.router(self.router_norm(x) * (1 / self.d)))  # (B, S, N)

    def predict(self, streams: torch.Tensor) -> torch.Tensor:
        coefs = self.prediction(self.route(streams[:, :, 0])).unflatten(-1, (self.n, self.n))  # (B, S, N, N)
        return self.predict_mix(coefs, streams) + streams

    def correct(self, predictions: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The corrected streams and stream 0 scaled (the per-layer input's gate reads it)."""
        c = self.correction(self.route(y)) + 1  # (B, S, N)
        corrected = predictions + c.unsqueeze(-1) * (y - predictions[:, :, 0]).unsqueeze(-2)
        # a copy of its own either way (contiguous() returns the view itself where a slice is already contiguous)
        first = corrected[:, :, 0] * self.scale if self.scaled else corrected[:, :, 0].clone()
        return corrected, first


class PredictMix(nn.Module):
    """Each token's N x N coefficients times its N streams."""

    def forward(self, coefs: torch.Tensor, streams: torch.Tensor) -> torch.Tensor:
        return coefs @ streams


class Laurel(nn.Module):
    """``h + norm(right(left(h)))``: a low-rank branch beside the attention."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        r = cfg.gemma3n.laurel_rank
        self.left = nn.Linear(cfg.d_model, r, bias=False)
        self.right = nn.Linear(r, cfg.d_model, bias=False)

    def forward(self, h: torch.Tensor, norm: nn.Module) -> torch.Tensor:
        return h + norm(self.right(self.left(h)))


class PerLayer(nn.Module):
    """``projection(gelu(gate(f)) * input)``: the layer's per-layer input, gated by stream 0."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        p = cfg.gemma3n.per_layer_width
        self.gate = nn.Linear(cfg.d_model, p, bias=False)
        self.projection = nn.Linear(p, cfg.d_model, bias=False)

    def forward(self, f: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
        return self.projection(F.gelu(self.gate(f), approximate="tanh") * inputs)


class Sparsity(nn.Module):
    """The gate's output less its mean and ``z`` standard deviations, through relu (a Gaussian top-k)."""

    def __init__(self, sparsity: float):
        super().__init__()
        self.z = statistics.NormalDist().inv_cdf(sparsity)

    def forward(self, g: torch.Tensor) -> torch.Tensor:
        cutoff = g.mean(-1, keepdim=True) + g.std(-1, keepdim=True, correction=0) * self.z
        return torch.relu(g - cutoff)


def add_layer(block: nn.Module, cfg: ModelConfig, sparse: bool) -> None:
    """A layer's AltUp, Laurel and per-layer input, their norms, and its MLP's sparsity."""
    block.altup, block.laurel, block.per_layer = AltUp(cfg), Laurel(cfg), PerLayer(cfg)
    block.norm.update({"laurel": make_norm(cfg, cfg.d_model), "per_layer": make_norm(cfg, cfg.d_model)})
    if sparse:
        block.mlp.sparsity = Sparsity(cfg.gemma3n.sparsity)


def run_layer(block: nn.Module, streams: torch.Tensor, attn, inputs: torch.Tensor) -> torch.Tensor:
    """One layer over the streams (B, S, N, d); ``attn`` its attention, ``inputs`` its per-layer input."""
    n = block.norm
    predictions = block.altup(streams)
    active = predictions[:, :, 0]
    h = n["attention"](active)
    a = n["attention_post"](attn(h))
    x = (active + a + block.laurel(h, n["laurel"])) * (1 / math.sqrt(2))
    y = x + n["mlp_post"](block.mlp(n["mlp"](x)))
    corrected, first = block.altup(y, predictions)
    z = n["per_layer"](block.per_layer(first, inputs))
    return torch.cat([corrected[:, :, :1], corrected[:, :, 1:] + z.unsqueeze(-2)], dim=2)


def add_model(model: nn.Module, cfg: ModelConfig) -> None:
    """The model's side: the per-layer inputs' table (``embedding.per_layer``), projection
    (``per_layer.model_projection``) and norm (``norm.per_layer_projection``), and the streams' ends
    (``altup.embed``, ``altup.unembed``)."""
    g = cfg.gemma3n
    model.embedding["per_layer"] = nn.Embedding(g.per_layer_vocab, cfg.n_layers * g.per_layer_width)
    model.norm["per_layer_projection"] = make_norm(cfg, g.per_layer_width)
    model.per_layer = nn.ModuleDict({"model_projection": nn.Linear(cfg.d_model, cfg.n_layers * g.per_layer_width,
                                                                   bias=False)})
    model.altup = nn.ModuleDict({"embed": Streams(cfg), "unembed": Streams(cfg)})


def layer_inputs(model: nn.Module, tokens: torch.Tensor, x: torch.Tensor) -> list[torch.Tensor]:
    """Each layer's per-layer input (B, S, p), a tensor of its own; ``x`` the scaled token embeddings."""
    cfg = model.cfg
    g = cfg.gemma3n
    L, p = cfg.n_layers, g.per_layer_width
    ids = torch.where(tokens < g.per_layer_vocab, tokens, 0) if g.per_layer_vocab < cfg.vocab_size else tokens
    own = (model.embedding["per_layer"](ids) * p ** 0.5).unflatten(-1, (L, p))
    projected = (model.per_layer["model_projection"](x) * cfg.d_model ** -0.5).unflatten(-1, (L, p))
    inputs = (model.norm["per_layer_projection"](projected) + own) * 2 ** -0.5
    return [inputs[:, :, i].contiguous() for i in range(L)]


def embed(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """The streams (B, S, N, d): ``x`` and its N - 1 linears."""
    return torch.stack([x, *model.altup["embed"]([x] * (model.cfg.gemma3n.streams - 1), x)], dim=2)


def unembed(model: nn.Module, streams: torch.Tensor) -> torch.Tensor:
    """The streams averaged, streams 1..N-1 through their linears first."""
    first, *rest = (s.contiguous() for s in streams.unbind(2))
    return torch.stack([first, *model.altup["unembed"](rest, first)], dim=2).mean(2)
