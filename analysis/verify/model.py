"""The reference transformer, built from a ModelConfig alone.

Module paths are the breakdown keys of ``analysis.layout`` (``layers.<i>.`` dropped, '.'
read as '/'): ``embedding.token``, ``embedding.position``, ``layers.<i>.attention.{q,k,v,o}``,
``attention.{q_norm,k_norm}``, ``attention.{scores,values}`` (eager) or ``attention.sdpa``
(flash), ``mlp.{up,gate,down}`` or ``moe.{router,experts,shared_experts}``,
``layers.<i>.norm.{attention,mlp,attention_post,mlp_post}``, ``norm.final``, ``lm_head``.

Conventions:
- positions: ``learned`` and ``sinusoidal`` (Vaswani: sin on even, cos on odd dimensions)
  are added to the token embeddings; ``rope`` rotates q and k (rotate-half, base
  ``rope_theta``); ``alibi`` adds ``-slope_h * (i - j)`` to the scores (Press et al. slopes);
  ``relative`` adds a learned T5 bias from unidirectional buckets of ``i - j``, one table
  (relative_buckets, n_heads) shared by all layers. Tables are float64 buffers, computed once
  and cast to the activations' dtype when used; none is a parameter.
- masking: query at absolute position i sees key j iff ``i - W < j <= i``; the mask and
  position biases are one additive bias built once per forward and shared by all layers.
- blocks follow the docstring of ``analysis.layout`` exactly.
- a tied LM head *is* ``embedding.token.weight``; the embedding is registered first, so
  deduplicated ``named_parameters`` name it ``embedding.token.weight``.
- ``logits="last"`` keeps only the last position before the final norm (norms act per
  token, so the result is the same) and the LM head.
- ``recompute=True`` (full activation recomputation) runs each block under
  ``torch.utils.checkpoint.checkpoint(use_reentrant=False)``: backward recomputes the block,
  every op of it (early stop off), so the forward keeps only what the checkpoint saves, its
  tensor arguments (the block input
  and the Context's mask and RoPE tables, passed as arguments so they are saved like the
  input rather than kept alive by reference, unseen by saved-tensor hooks).
"""

from __future__ import annotations

import dataclasses
import math

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint, set_checkpoint_early_stop

from ..config import ModelConfig
from ..layout import layer_norms

from .attention import Attention, Context
from .ffn import MLP, MoE
from .norms import make_norm


def sinusoid_table(n: int, d: int) -> torch.Tensor:
    pos = torch.arange(n, dtype=torch.float64)[:, None]
    freq = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # (ceil(d/2),)
    table = torch.zeros(n, d, dtype=torch.float64)
    table[:, 0::2] = torch.sin(pos * freq)
    table[:, 1::2] = torch.cos(pos * freq[: d // 2])
    return table  # (n, d)


def rope_tables(n: int, hd: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    inv_freq = theta ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)  # (hd/2,)
    angles = torch.arange(n, dtype=torch.float64)[:, None] * inv_freq
    angles = torch.cat([angles, angles], dim=-1)  # (n, hd), rotate-half layout
    return angles.cos(), angles.sin()


def alibi_slopes(h: int) -> torch.Tensor:
    """Press et al.: geometric 2^(-8/n) for a power of two n, else interleave from 2n."""
    def geometric(n):
        return [2.0 ** (-8.0 * (i + 1) / n) for i in range(n)]

    m = 2 ** math.floor(math.log2(h))
    slopes = geometric(m) + geometric(2 * m)[0::2][: h - m]
    return torch.tensor(slopes, dtype=torch.float64)  # (h,)


def relative_bucket(distance: torch.Tensor, buckets: int, max_distance: int) -> torch.Tensor:
    """T5 unidirectional buckets of ``distance = i - j >= 0`` (future keys are masked anyway):
    half the buckets exact, the rest log-spaced up to ``max_distance``."""
    n = distance.clamp(min=0)
    exact = buckets // 2
    log_ratio = torch.log(n.double().clamp(min=1) / exact) / math.log(max_distance / exact)
    large = (exact + log_ratio * (buckets - exact)).long()
    return torch.where(n < exact, n, large).clamp(0, buckets - 1)


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig, index: int, attention: str, routing: str,
                 recompute: bool = False):
        super().__init__()
        self.placement, self.parallel, self.recompute = cfg.norm_placement, cfg.parallel_block, recompute
        self.attention = Attention(cfg, index, attention)
        if cfg.moe is not None:
            self.moe = MoE(cfg, routing)
        else:
            self.mlp = MLP(cfg)
        self.norm = nn.ModuleDict({n.key.split("/")[1]: make_norm(cfg, n.size)
                                   for n in layer_norms(cfg) if n.key.startswith("norm/")})

    def forward(self, x: torch.Tensor, ctx: Context) -> torch.Tensor:
        if not self.recompute:
            return self.run(x, ctx)

        # the Context's tensors go in as arguments, so the checkpoint saves them like x
        # (visible to saved-tensor hooks) instead of keeping them alive by reference
        def run(x, bias, *rope):
            return self.run(x, dataclasses.replace(ctx, bias=bias, rope=rope or None))

        # no dropout: nothing random to replay, so the RNG state need not be stashed.
        # Early stop would skip recomputing ops whose outputs backward does not need (the
        # block's last matmul); off, backward reruns the whole block, the convention of
        # "full recomputation adds one forward" that the analytic FLOPs state.
        with set_checkpoint_early_stop(False):
            return checkpoint(run, x, ctx.bias, *(ctx.rope or ()), use_reentrant=False,
                              preserve_rng_state=False)

    def run(self, x: torch.Tensor, ctx: Context) -> torch.Tensor:
        n = self.norm
        ffn = self.moe if hasattr(self, "moe") else self.mlp

        def attn(h):
            return self.attention(h, ctx)

        if self.placement == "post":
            x = n["attention"](x + attn(x))
            return n["mlp"](x + ffn(x))

        def branch(f, key, h):  # sandwich: a post norm on the branch output
            y = f(h)
            return n[key + "_post"](y) if self.placement == "sandwich" else y

        if self.parallel:
            h = n["attention"](x)
            h_mlp = n["mlp"](x) if "mlp" in n else h  # parallel_norms 1: one shared norm
            return x + branch(attn, "attention", h) + branch(ffn, "mlp", h_mlp)
        x = x + branch(attn, "attention", n["attention"](x))
        return x + branch(ffn, "mlp", n["mlp"](x))


class Transformer(nn.Module):
    def __init__(self, cfg: ModelConfig, attention: str = "eager", routing: str = "auto",
                 recompute: bool = False):
        super().__init__()
        self.cfg, self.kind = cfg, attention
        d, V, ctx_len = cfg.d_model, cfg.vocab_size, cfg.context_length
        embedding = {"token": nn.Embedding(V, d)}
        if cfg.position == "learned":
            embedding["position"] = nn.Embedding(ctx_len, d)
        elif cfg.position == "relative":
            embedding["position"] = nn.Embedding(cfg.relative_buckets, cfg.n_heads)
        self.embedding = nn.ModuleDict(embedding)
        if cfg.position == "sinusoidal":
            self.register_buffer("sinusoid", sinusoid_table(ctx_len, d), persistent=False)
        elif cfg.position == "rope":
            cos, sin = rope_tables(ctx_len, cfg.head_size, cfg.rope_theta)
            self.register_buffer("rope_cos", cos, persistent=False)
            self.register_buffer("rope_sin", sin, persistent=False)
        elif cfg.position == "alibi":
            self.register_buffer("alibi", alibi_slopes(cfg.n_heads), persistent=False)
        self.layers = nn.ModuleList(Block(cfg, i, attention, routing, recompute) for i in range(cfg.n_layers))
        self.norm = nn.ModuleDict({"final": make_norm(cfg, d)} if cfg.final_norm else {})
        self.lm_head = nn.Linear(d, V, bias=cfg.lm_head_bias)
        if cfg.tie_embeddings:
            self.lm_head.weight = self.embedding["token"].weight

    def attention_bias(self, qpos: torch.Tensor, kpos: torch.Tensor, dtype) -> torch.Tensor | None:
        """Additive (1, h or 1, S, S_kv) mask plus position bias; None when flash can use its
        own causal flag (plain causal, keys = queries, window not binding)."""
        cfg, W = self.cfg, self.cfg.sliding_window
        plain = (cfg.position not in ("alibi", "relative") and kpos is qpos
                 and (W is None or W >= len(qpos)))
        if self.kind == "flash" and plain:
            return None
        distance = qpos[:, None] - kpos[None, :]  # (S, S_kv), i - j
        allowed = distance >= 0
        if W is not None:
            allowed &= distance < W
        bias = torch.zeros(allowed.shape, dtype=dtype, device=qpos.device)
        bias = bias.masked_fill(~allowed, float("-inf"))[None, None]  # (1, 1, S, S_kv)
        if cfg.position == "alibi":
            bias = bias - self.alibi.to(dtype)[None, :, None, None] * distance.to(dtype)  # (1, h, S, S_kv)
        elif cfg.position == "relative":
            buckets = relative_bucket(distance, cfg.relative_buckets, cfg.relative_max_distance)
            bias = bias + self.embedding["position"](buckets).permute(2, 0, 1)[None]  # (1, h, S, S_kv)
        return bias

    def forward(self, tokens: torch.Tensor, cache=None, start_pos: int = 0, logits: str = "all"):
        B, S = tokens.shape
        x = self.embedding["token"](tokens)  # (B, S, d)
        qpos = torch.arange(start_pos, start_pos + S, device=tokens.device)
        if self.cfg.position == "learned":
            x = x + self.embedding["position"](qpos)
        elif self.cfg.position == "sinusoidal":
            x = x + self.sinusoid[qpos].to(x.dtype)
        rope = None
        if self.cfg.position == "rope":
            rope = self.rope_cos[qpos].to(x.dtype), self.rope_sin[qpos].to(x.dtype)  # (S, hd)
        kpos = qpos
        if cache is not None and start_pos > 0:
            kpos = torch.cat([cache.past_positions(start_pos, tokens.device), qpos])
        ctx = Context(self.attention_bias(qpos, kpos, x.dtype), rope, cache, start_pos)
        for layer in self.layers:
            x = layer(x, ctx)
        if logits == "last":
            x = x[:, -1:]
        if "final" in self.norm:
            x = self.norm["final"](x)
        return self.lm_head(x)  # (B, S or 1, V)
