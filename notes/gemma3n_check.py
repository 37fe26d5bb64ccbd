"""Hand-off check (not for merge): closed forms for Gemma 3n's language model against transformers'
Gemma3nForCausalLM on the meta device: parameters (unique, tied head once), forward matmul FLOPs
(FlopCounterMode, eager attention) and the KV cache of a prefill (DynamicCache)."""

import sys

import torch
from torch.utils.flop_counter import FlopCounterMode
from transformers import DynamicCache, Gemma3nForCausalLM, Gemma3nTextConfig


def closed_params(c) -> int:
    d, L, N, p, r = c.hidden_size, c.num_hidden_layers, c.altup_num_inputs, c.hidden_size_per_layer_input, c.laurel_rank
    h, g, hd = c.num_attention_heads, c.num_key_value_heads, c.head_dim
    total = c.vocab_size * d  # embed_tokens (the head tied)
    total += 0 if c.tie_word_embeddings else c.vocab_size * d
    total += c.vocab_size_per_layer_input * L * p  # embed_tokens_per_layer
    total += d * L * p + p  # per_layer_model_projection, per_layer_projection_norm
    total += 2 * (N - 1) * d * d  # altup_projections, altup_unembed_projections
    total += d  # final norm
    for i, mode in enumerate(c.kv_sharing_modes):
        total += 2 * d * h * hd + hd  # q, o, q_norm
        if mode != "reuse":
            total += 2 * d * g * hd + hd  # k, v, k_norm (v_norm has no weight)
        total += 3 * d * c.intermediate_size[i]  # gate, up, down
        total += 4 * d  # input, post_attention, pre_feedforward, post_feedforward norms
        total += d + N * N + N * N * N + d * N + d  # altup: output scale, correction, prediction, router, router norm
        total += 2 * d * r + d  # laurel: left, right, post norm
        total += 2 * d * p + d  # per_layer_input_gate, per_layer_projection, post_per_layer_input_norm
    return total


def closed_matmul(c, B: int, S: int) -> int:
    """Forward matmul FLOPs of one prefill of S tokens (eager attention: full S x S score and value bmms)."""
    d, L, N, p, r = c.hidden_size, c.num_hidden_layers, c.altup_num_inputs, c.hidden_size_per_layer_input, c.laurel_rank
    h, g, hd, T = c.num_attention_heads, c.num_key_value_heads, c.head_dim, B * S
    f = 2 * T * d * L * p  # per_layer_model_projection
    f += 2 * 2 * (N - 1) * T * d * d  # altup (un)embed projections
    for i, mode in enumerate(c.kv_sharing_modes):
        f += 2 * 2 * T * d * h * hd  # q, o
        f += 0 if mode == "reuse" else 2 * 2 * T * d * g * hd  # k, v
        f += 2 * 2 * B * h * S * S * hd  # scores and values (eager: the whole S x S matrix)
        f += 3 * 2 * T * d * c.intermediate_size[i]
        f += 2 * 2 * T * d * N  # the router, in predict and in correct
        f += 2 * T * N * N * N + 2 * T * N * N  # prediction and correction coefficients
        f += 2 * T * d * N * N  # predict: (d x N) @ (N x N) per token
        f += 2 * 2 * T * d * r  # laurel
        f += 2 * 2 * T * d * p  # per-layer input gate and projection
    return f + 2 * T * d * c.vocab_size  # lm_head


def closed_kv(c, B: int, S: int, bytes_per: int) -> int:
    """K and V of every layer that is no reuser after a prefill of S: S tokens on a full layer, min(S, W - 1) on a
    sliding one (transformers' DynamicCache convention, as analysis/verify/against.py reads it); a reuser none."""
    kept = {"full_attention": S, "sliding_attention": min(S, c.sliding_window - 1)}
    return sum(2 * B * c.num_key_value_heads * c.head_dim * kept[t] * bytes_per
               for t, m in zip(c.layer_types, c.kv_sharing_modes) if m != "reuse")


def check(c, B=1, S=8):
    c._attn_implementation = "eager"
    with torch.device("meta"):
        m = Gemma3nForCausalLM(c).to(torch.bfloat16)
    params = sum(t.numel() for t in m.parameters())
    ids = torch.zeros(B, S, dtype=torch.long, device="meta")
    cache = DynamicCache(config=c)
    with FlopCounterMode(display=False) as fc:
        m(input_ids=ids, past_key_values=cache, use_cache=True)
    flops = fc.get_total_flops()
    logits = m(input_ids=ids).logits
    with FlopCounterMode(display=False) as bc:
        logits.sum().backward()
    assert bc.get_total_flops() == 2 * flops - 0, (bc.get_total_flops(), flops)  # every matmul's two gradients
    kv = sum(t.numel() * t.element_size() for layer in cache.layers for t in (layer.keys, layer.values)
             if t is not None and t.numel())
    print(f"params {params:,} closed {closed_params(c):,}; matmul {flops:,} closed {closed_matmul(c, B, S):,}; "
          f"kv {kv:,} closed {closed_kv(c, B, S, 2):,}")
    return params == closed_params(c) and flops == closed_matmul(c, B, S) and kv == closed_kv(c, B, S, 2)


E2B = dict(hidden_size=2048, num_hidden_layers=30, intermediate_size=[8192] * 30, num_kv_shared_layers=10,
           activation_sparsity_pattern=[0.95] * 10 + [0.0] * 20, vocab_size=262400, vocab_size_per_layer_input=262144,
           hidden_size_per_layer_input=256, laurel_rank=64, altup_num_inputs=4, num_attention_heads=8,
           num_key_value_heads=2, head_dim=256, sliding_window=512, final_logit_softcapping=30.0)
SMALL = dict(hidden_size=64, num_hidden_layers=6, intermediate_size=[96, 128, 96, 64, 128, 96],
             num_kv_shared_layers=2, activation_sparsity_pattern=[0.95, 0.95, 0.0, 0.0, 0.0, 0.0], vocab_size=300,
             vocab_size_per_layer_input=200, hidden_size_per_layer_input=16, laurel_rank=8, altup_num_inputs=3,
             num_attention_heads=4, num_key_value_heads=2, head_dim=16, sliding_window=4,
             layer_types=["sliding_attention", "full_attention"] * 3)
if __name__ == "__main__":
    ok = [check(Gemma3nTextConfig()), check(Gemma3nTextConfig(**E2B)), check(Gemma3nTextConfig(**SMALL), B=2, S=6)]
    sys.exit(0 if all(ok) else 1)
