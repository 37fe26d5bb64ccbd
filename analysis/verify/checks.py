"""Correctness checks of the reference model on small real tensors (float64, CPU).

Each check takes any ModelConfig, shrinks it with :func:`small_config` (same structure,
tiny sizes) and returns ``(ok, max_abs_diff)``, so the CLI can run them for any model;
:func:`applicable` names the checks that apply to a model.
"""

from __future__ import annotations

import dataclasses
import itertools

import torch

from ..model.config import RECURRENT_TYPES, ModelConfig
from .attention import apply_rope
from .cache import KVCache
from .measure import build, training_loss
from .model import Transformer, rope_dims, rope_tables

TOL = 1e-9


def _small_head(cfg: ModelConfig) -> int:
    """8 (12 when head_dim is explicit); with partial rotary the smallest even size from there
    whose rotated share is even and non-zero, so RoPE stays partial."""
    hd = 8 if cfg.head_dim is None else 12
    if cfg.position == "rope" and cfg.rotary_fraction < 1:
        while int(hd * cfg.rotary_fraction) % 2 or int(hd * cfg.rotary_fraction) == 0:
            hd += 2
    return hd


def small_config(cfg: ModelConfig, **changes) -> ModelConfig:
    """The same structure at toy sizes: enough layers for every cyclic pattern (``layer_types``,
    ``rope_layers``) and the first MoE layer (at least 2), 4 query heads, MHA when the model is
    MHA and 4 // min(h/g, 4) KV heads otherwise (GQA stays GQA, MQA stays MQA), MLA with its
    low-rank query when it has one and value heads equal to score heads when they are, at
    most 4 experts (same first dense layers, step, shared experts capped at 1, gate, biases; with identity
    experts 4 real, 2 identity and 3 choices), every shared transformer block used twice at most (by the
    recurrent layers of a new ``layer_types``), at most one pattern of layers reusing K/V after a whole one,
    window at most 5, soft-caps at most 2 (so that they bend the logits); a vision tower of 2
    layers."""
    layers = [2, len(cfg.layer_types or ()), len(cfg.rope_layers or ())]
    if cfg.shared_transformer is not None:  # every block used (twice at most), its MLP 24 wide, adapters of rank <= 4
        st = cfg.shared_transformer
        uses = st.layers[:2 * st.blocks]
        if "layer_types" in changes:  # as many uses, moved to the new pattern's recurrent layers
            types = changes["layer_types"]
            recurrent = (i for i in itertools.count() if types[i % len(types)] in RECURRENT_TYPES
                         and types[i % len(types)] != "none")
            uses = tuple(itertools.islice(recurrent, len(uses)))
        layers.append(1 + uses[-1])
        changes.setdefault("shared_transformer", dataclasses.replace(
            st, layers=uses, d_ff=24, adapter_rank=min(st.adapter_rank, 4)))
    if cfg.moe is not None:
        layers.append(1 + next(i for i in range(cfg.n_layers) if cfg.moe.is_moe_layer(i)))
    if cfg.kv_shared_layers:  # a shared tail of at most one pattern, after a whole pattern of sources
        pattern = len(cfg.layer_types or ("full",))
        changes.setdefault("kv_shared_layers", min(cfg.kv_shared_layers, pattern))
        layers.append(pattern + changes["kv_shared_layers"])
    small = dict(vocab_size=61, context_length=64, d_model=32, n_layers=max(layers), n_heads=4, d_ff=40,
                 relative_buckets=8, relative_max_distance=16)
    if cfg.attention == "mla":
        m = cfg.mla
        same = m.v_head_dim == m.qk_nope_head_dim + m.qk_rope_head_dim
        small["mla"] = dataclasses.replace(m, q_lora_rank=None if m.q_lora_rank is None else 16,
                                           kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=4,
                                           v_head_dim=12 if same else 6)
    else:
        groups = min(cfg.n_heads // cfg.kv_heads, 4)
        small.update(n_kv_heads=4 // groups, head_dim=_small_head(cfg))
        if cfg.full_head_dim is not None:  # full layers keep a head size of their own: twice the others'
            small["full_head_dim"] = 2 * small["head_dim"]
        if cfg.full_kv_heads is not None:  # as many K/V heads as the other layers (check_gqa varies both)
            small["full_kv_heads"] = changes.get("n_kv_heads", small["n_kv_heads"])
    if cfg.sliding_window is not None:
        small["sliding_window"] = min(cfg.sliding_window, 5)
    if cfg.attention_chunk is not None:
        small["attention_chunk"] = min(cfg.attention_chunk, 3)
    if cfg.d_ff == 0:  # no FFN stays no FFN
        small["d_ff"] = 0
    if cfg.mamba is not None:  # E = 2 * 32, N 4, R 4 when given, K at most 4
        small["mamba"] = dataclasses.replace(cfg.mamba, d_state=4, d_conv=min(cfg.mamba.d_conv, 4), expand=2,
                                             dt_rank=None if cfg.mamba.dt_rank is None else 4)
    if cfg.lightning is not None:  # blocks of at most 5: several blocks, the last one partial, in 12 tokens
        small["lightning"] = dataclasses.replace(cfg.lightning, block_size=min(cfg.lightning.block_size, 5))
    for key in ("attn_logit_softcap", "final_logit_softcap"):
        if getattr(cfg, key) is not None:
            small[key] = min(getattr(cfg, key), 2.0)
    if cfg.moe is not None:
        moe = cfg.moe
        E = min(moe.num_experts, 4)
        small["moe"] = dataclasses.replace(
            moe, num_experts=E, experts_per_token=min(moe.experts_per_token, E), expert_d_ff=24,
            shared_experts=min(moe.shared_experts, 1),
            shared_expert_d_ff=None if moe.shared_expert_d_ff is None else 20)
        if moe.zero_experts:  # 4 real and 2 identity experts, 3 choices: 2 of them real
            small["moe"] = dataclasses.replace(small["moe"], num_experts=4, zero_experts=2, experts_per_token=3)
    if cfg.vision is not None:  # 2 layers, 4 heads, 4 x 4 patches of 2 (merged as the model merges)
        v = cfg.vision
        merge = v.projector.merge
        deepstack = v.projector.deepstack and tuple(range(min(2, len(v.projector.deepstack))))  # of its 2 layers
        small["vision"] = dataclasses.replace(
            v, n_layers=2, d_model=16, n_heads=4, d_ff=24, patch_size=2, image_size=v.image_size and 2 * 4 * merge,
            projector=dataclasses.replace(v.projector, hidden=None if v.projector.hidden is None else 20,
                                          deepstack=deepstack))
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
    """Window 3 over 12 tokens, sliding and full layers mixed (the model's own ``layer_types``
    when it mixes them, else alternating): 3-slot rolling caches on the sliding layers, full
    caches on the others; decoding token by token == a full forward with each layer's mask."""
    types = cfg.layer_types if cfg.layer_types and len(set(cfg.layer_types)) == 2 else ("sliding", "full")
    if cfg.has_mamba and "mamba" not in types:  # mamba layers stay, beside sliding and full ones
        types = ("mamba", "sliding", "full")
    if cfg.has_mamba2 and "mamba2" not in types:  # likewise mamba2 layers
        types = ("mamba2", "sliding", "full")
    if cfg.has_short_conv and "short_conv" not in types:  # likewise short_conv layers
        types = ("short_conv", "sliding", "full")
    if cfg.has_lightning and "lightning" not in types:  # likewise lightning layers
        types = ("lightning", "sliding", "full")
    if cfg.has_gated_deltanet and "gated_deltanet" not in types:  # likewise gated_deltanet layers
        types = ("gated_deltanet", "sliding", "full")
    if cfg.has_rglru and "rglru" not in types:  # likewise rglru layers
        types = ("rglru", "sliding", "full")
    if cfg.has_kda and "kda" not in types:  # likewise kda layers
        types = ("kda", "sliding", "full")
    cfg = small_config(cfg, sliding_window=3, layer_types=types, dsa=None)  # DSA: full layers only
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
    full = {} if cfg.full_kv_heads is None else {"full_kv_heads": 4}
    mha = build(gqa_cfg.replace(n_kv_heads=4, **full), attention, device="cpu", dtype=torch.float64)
    state = gqa.state_dict()
    for name, t in state.items():
        if not name.startswith("layers."):  # a vision tower's attention is not the language model's
            continue
        if name.endswith(("attention.k.weight", "attention.v.weight", "attention.k.bias", "attention.v.bias",
                          "k_adapter.b.weight", "v_adapter.b.weight")):  # rows are (g, hd): repeat each head
            state[name] = t.unflatten(0, (2, -1)).repeat_interleave(2, dim=0).flatten(0, 1)
        elif name.endswith("attention.k_norm.weight") and cfg.qk_norm == "full":  # over g*hd
            state[name] = t.unflatten(0, (2, -1)).repeat_interleave(2, dim=0).flatten(0, 1)
    mha.load_state_dict(state)
    tokens = _tokens(gqa_cfg)
    return _result(mha(tokens), gqa(tokens))


def check_rope_relative(cfg: ModelConfig) -> tuple[bool, float]:
    """q.k after RoPE at positions (m, n) equals it at (m + s, n + s), over a whole head
    whose first ``rotary dims`` rotate (partial rotary: the rest pass through)."""
    small = small_config(cfg)
    hd = small.mla.qk_rope_head_dim if small.attention == "mla" else small.head_size
    cos, sin = rope_tables(64, rope_dims(small), cfg.rope_theta)
    q, k = torch.randn(2, hd, dtype=torch.float64, generator=torch.Generator().manual_seed(2)).unbind(0)
    m, n = torch.tensor([3, 10, 20]), torch.tensor([1, 7, 0])
    q, k = q.expand(len(m), hd), k.expand(len(n), hd)  # one row per position pair
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


def check_flash_gradients(cfg: ModelConfig) -> tuple[bool, float]:
    """Flash attention (the aten kernel, or the reference flash Function with sinks,
    soft-capping or MLA's value heads) gives the parameters the same gradients as eager."""
    cfg = small_config(cfg)
    tokens = _tokens(cfg)
    grads = []
    for kind in ("eager", "flash"):
        model = _model(cfg, kind)
        training_loss(model(tokens), tokens).backward()
        grads.append({name: p.grad for name, p in model.named_parameters()
                      # no image runs through the tower; DSA's indexer has no gradient
                      if not name.startswith(("vision.", "projector.")) and p.grad is not None})
    diff = max((grads[0][n] - grads[1][n]).abs().max().item() for n in grads[0])
    return diff <= TOL, diff


CHECKS = {
    "cached decode": check_cached_decode,
    "rolling buffer": check_rolling_buffer,
    "chunked prefill": check_chunked_prefill,
    "gqa": check_gqa,
    "rope relative": check_rope_relative,
    "eager == flash": check_eager_flash,
    "flash gradients": check_flash_gradients,
}


def applicable(cfg: ModelConfig) -> dict:
    """The real-tensor checks that apply to ``cfg``, by the name ``verify`` reports."""
    tests = {"cached decode == full forward": check_cached_decode,
             "rolling buffer == window masks (sliding and full layers)": check_rolling_buffer,
             "chunked prefill == unchunked": check_chunked_prefill}
    if cfg.attention == "mha":
        tests["GQA == MHA with repeated K/V"] = check_gqa
    tests["eager == flash"] = check_eager_flash
    tests["flash gradients == eager gradients"] = check_flash_gradients
    if cfg.position == "rope":
        tests["RoPE scores depend on relative position only"] = check_rope_relative
    return tests
