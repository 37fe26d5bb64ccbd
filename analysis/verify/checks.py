"""Correctness checks of the reference model on small real tensors (float64, CPU).

Each check takes any ModelConfig, shrinks it with :func:`small_config` (same structure,
tiny sizes) and returns ``(ok, max_abs_diff)``, so the CLI can run them for any model.
"""

from __future__ import annotations

import torch

from ..config import ModelConfig

from .attention import apply_rope
from .cache import KVCache
from .measure import build
from .model import Transformer, rope_tables

TOL = 1e-9


def small_config(cfg: ModelConfig, **changes) -> ModelConfig:
    """The same structure at toy sizes: 2 layers, 4 query heads of 8 (12 when head_dim is
    explicit), MHA when the model is MHA and 4 // min(h/g, 4) KV heads otherwise (GQA stays
    GQA, MQA stays MQA), at most 4 experts, window at most 5."""
    groups = min(cfg.n_heads // cfg.kv_heads, 4)
    small = dict(vocab_size=61, context_length=64, d_model=32, n_layers=2, n_heads=4,
                 n_kv_heads=4 // groups, head_dim=8 if cfg.head_dim is None else 12, d_ff=40, relative_buckets=8,
                 relative_max_distance=16)
    if cfg.sliding_window is not None:
        small["sliding_window"] = min(cfg.sliding_window, 5)
    if cfg.moe is not None:
        E = min(cfg.moe.num_experts, 4)
        small["moe"] = cfg.moe.__class__(E, min(cfg.moe.experts_per_token, E), 24,
                                         min(cfg.moe.shared_experts, 1))
    return cfg.replace(**{**small, **changes})


def _model(cfg: ModelConfig, attention: str = "eager", seed: int = 0) -> Transformer:
    torch.manual_seed(seed)
    model = build(cfg, attention, device="cpu", dtype=torch.float64).eval()
    with torch.no_grad():  # default init leaves norm biases at 0 and scores nearly flat
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return model


def _tokens(cfg: ModelConfig, batch: int = 2, seq: int = 12) -> torch.Tensor:
    return torch.randint(0, cfg.vocab_size, (batch, seq), generator=torch.Generator().manual_seed(1))


def _result(a: torch.Tensor, b: torch.Tensor) -> tuple[bool, float]:
    diff = (a - b).abs().max().item()
    return diff <= TOL, diff


@torch.no_grad()
def _chunked(model: Transformer, tokens: torch.Tensor, chunks: list[int]) -> torch.Tensor:
    """Logits of every position, computing ``chunks`` tokens at a time through a KV cache."""
    cache = KVCache(model.cfg, tokens.shape[0], tokens.shape[1], torch.float64)
    out, start = [], 0
    for c in chunks:
        out.append(model(tokens[:, start:start + c], cache, start))
        start += c
    return torch.cat(out, dim=1)  # (B, S, V)


@torch.no_grad()
def check_cached_decode(cfg: ModelConfig, attention: str = "eager") -> tuple[bool, float]:
    """Prefill 5 tokens, then decode one at a time == one full forward."""
    cfg = small_config(cfg)
    model, tokens = _model(cfg, attention), _tokens(cfg)
    return _result(_chunked(model, tokens, [5] + [1] * 7), model(tokens))


@torch.no_grad()
def check_rolling_buffer(cfg: ModelConfig, attention: str = "eager") -> tuple[bool, float]:
    """Window 3 over 12 tokens: a 3-slot rolling cache, decoding token by token == a full
    forward with the window mask."""
    cfg = small_config(cfg, sliding_window=3)
    model, tokens = _model(cfg, attention), _tokens(cfg)
    return _result(_chunked(model, tokens, [1] * 12), model(tokens))


@torch.no_grad()
def check_chunked_prefill(cfg: ModelConfig, attention: str = "eager") -> tuple[bool, float]:
    """Chunks of 4, 3, 5 (longer than the window of 4 when there is one) == unchunked."""
    cfg = small_config(cfg, sliding_window=4 if cfg.sliding_window else None)
    model, tokens = _model(cfg, attention), _tokens(cfg)
    return _result(_chunked(model, tokens, [4, 3, 5]), model(tokens))


@torch.no_grad()
def check_gqa(cfg: ModelConfig, attention: str = "eager") -> tuple[bool, float]:
    """GQA (2 K/V heads for 4 query heads) == MHA whose K/V heads repeat the GQA heads."""
    gqa_cfg = small_config(cfg, n_kv_heads=2)
    gqa = _model(gqa_cfg, attention)
    mha = build(gqa_cfg.replace(n_kv_heads=4), attention, device="cpu", dtype=torch.float64)
    state = gqa.state_dict()
    for name, t in state.items():
        if name.endswith(("attention.k.weight", "attention.v.weight", "attention.k.bias",
                          "attention.v.bias")):  # rows are (g, hd): repeat each head
            state[name] = t.unflatten(0, (2, -1)).repeat_interleave(2, dim=0).flatten(0, 1)
    mha.load_state_dict(state)
    tokens = _tokens(gqa_cfg)
    return _result(mha(tokens), gqa(tokens))


def check_rope_relative(cfg: ModelConfig) -> tuple[bool, float]:
    """q.k after RoPE at positions (m, n) equals it at (m + s, n + s)."""
    hd = small_config(cfg).head_size
    cos, sin = rope_tables(64, hd, cfg.rope_theta)
    q, k = torch.randn(2, hd, dtype=torch.float64).unbind(0)
    m, n = torch.tensor([3, 10, 20]), torch.tensor([1, 7, 0])
    scores = [(apply_rope(q, cos[m + s], sin[m + s]) * apply_rope(k, cos[n + s], sin[n + s])).sum(-1)
              for s in (0, 5, 30)]
    return _result(torch.stack(scores[1:]), scores[0].expand(2, -1))


@torch.no_grad()
def check_eager_flash(cfg: ModelConfig) -> tuple[bool, float]:
    """Eager and flash attention give the same logits (same weights)."""
    cfg = small_config(cfg)
    eager, flash = _model(cfg, "eager"), _model(cfg, "flash")
    tokens = _tokens(cfg)
    return _result(eager(tokens), flash(tokens))


CHECKS = {
    "cached decode": check_cached_decode,
    "rolling buffer": check_rolling_buffer,
    "chunked prefill": check_chunked_prefill,
    "gqa": check_gqa,
    "rope relative": check_rope_relative,
    "eager == flash": check_eager_flash,
}
