"""Shared test data: hypothesis strategies over every config key, and small variant configs.

Test modules import these from here, never from each other.
"""

from hypothesis import strategies as st

from llmcalc.analysis.errors import ConfigError
from llmcalc.analysis.model.checks import from_dict
from llmcalc.analysis.model.config import REQUIRED
from llmcalc.analysis.model.formats import FORMATS, WEIGHT_FORMATS
from llmcalc.analysis.model.mamba import MIXER_NORMS
from llmcalc.analysis.model.variants import ACTIVATIONS, NORMS
from llmcalc.analysis.model.vision import VISION_ACTIVATIONS, VISION_NORM_PLACEMENTS, VISION_POSITIONS

BASE = dict(name="t", vocab_size=61, context_length=64, d_model=32, n_layers=2, n_heads=4, d_ff=40)
VARIANTS = {  # together every config key and value
    "llava": {"position": "rope", "norm": "rmsnorm", "activation": "swiglu",
              "vision": {"n_layers": 2, "d_model": 16, "n_heads": 4, "d_ff": 24, "patch_size": 2, "image_size": 8,
                         "class_token": True, "patch_bias": False, "pre_norm": True, "norm_bias": False,
                         "projector": {"features": 2, "hidden": 32, "bias": True}}},
    "qwen-vl": {"position": "rope", "norm": "rmsnorm", "activation": "swiglu", "qkv_bias": True,
                "vision": {"n_layers": 2, "d_model": 16, "n_heads": 4, "d_ff": 24, "patch_size": 2, "temporal_patch": 2,
                           "activation": "swiglu", "norm": "rmsnorm", "position": "rope", "patch_bias": False,
                           "final_norm": False,
                           "projector": {"norm": "rmsnorm", "merge": 2, "hidden": 64, "bias": True}}},
    # Gemma 4's tower: a 2-D position table beside 2-D RoPE, per-head q/k/v norms, sandwich norms, its pooler
    "gemma4-vl": {"position": "rope", "norm": "rmsnorm", "activation": "geglu", "tie_embeddings": True,
                  "vision": {"n_layers": 2, "d_model": 16, "n_heads": 4, "d_ff": 24, "patch_size": 2,
                             "activation": "geglu", "norm": "rmsnorm", "position": "rope", "position_table": 8,
                             "qk_norm": True, "v_norm": True, "norm_placement": "sandwich", "patch_bias": False,
                             "qkv_bias": False, "out_bias": False, "mlp_bias": False, "final_norm": False,
                             "pool": 2, "standardize": True, "projector": {"norm": "rmsnorm", "norm_weight": False}}},
    "gpt": {"qkv_bias": True, "out_bias": True, "mlp_bias": True, "tie_embeddings": True},
    "post": {"position": "sinusoidal", "activation": "relu", "norm_placement": "post",
             "lm_head_bias": True, "tie_embeddings": True, "norm_bias": False},
    "llama": {"position": "rope", "norm": "rmsnorm", "activation": "swiglu", "n_kv_heads": 2,
              "sliding_window": 5, "qk_norm": True, "final_norm": False, "rope_theta": 500000},
    "neox": {"position": "alibi", "activation": "geglu", "norm_placement": "sandwich",
             "parallel_block": True, "parallel_norms": 2, "qk_norm": True, "n_heads": 8},
    "gptj": {"position": "relative", "activation": "reglu", "parallel_block": True,
             "parallel_norms": 1, "n_kv_heads": 1, "head_dim": 12, "relative_buckets": 16,
             "relative_max_distance": 32},
    "moe": {"position": "none", "activation": "sqrelu", "norm_placement": "sandwich",
            "moe": {"num_experts": 4, "experts_per_token": 2, "expert_d_ff": 24, "shared_experts": 1}},
    "moe-silu": {"position": "rope", "activation": "silu", "n_kv_heads": 2, "sliding_window": 3,
                 "moe": {"num_experts": 3, "experts_per_token": 1}, "norm": "rmsnorm"},
    "gemma2": {"position": "rope", "norm": "rmsnorm", "activation": "geglu", "norm_placement": "sandwich",
               "head_dim": 16, "n_kv_heads": 2, "sliding_window": 4, "layer_types": ["sliding", "full"],
               "attn_logit_softcap": 50.0, "final_logit_softcap": 30.0, "embedding_scale": 5.65,
               "tie_embeddings": True},
    "deepseek": {"attention": "mla", "position": "rope", "norm": "rmsnorm", "activation": "swiglu",
                 "n_layers": 3, "mla": {"q_lora_rank": 16, "kv_lora_rank": 12, "qk_nope_head_dim": 8,
                                        "qk_rope_head_dim": 4, "v_head_dim": 6},
                 "moe": {"num_experts": 4, "experts_per_token": 2, "expert_d_ff": 16, "shared_experts": 1,
                         "first_dense_layers": 1}},
    "deepseek-lite": {"attention": "mla", "position": "rope", "norm": "rmsnorm", "activation": "swiglu",
                      "sliding_window": 3, "mla": {"kv_lora_rank": 16, "qk_nope_head_dim": 8,
                                                   "qk_rope_head_dim": 4, "v_head_dim": 8},
                      "moe": {"num_experts": 3, "experts_per_token": 1, "shared_experts": 2,
                              "first_dense_layers": 1}},
    "dsa": {"attention": "mla", "position": "rope", "norm": "rmsnorm", "activation": "swiglu", "n_layers": 2,
            "mla": {"q_lora_rank": 16, "kv_lora_rank": 12, "qk_nope_head_dim": 8, "qk_rope_head_dim": 4,
                    "v_head_dim": 6}, "dsa": {"n_heads": 3, "head_dim": 6, "topk": 3}},
    "longcat": {"attention": "mla", "position": "rope", "norm": "rmsnorm", "activation": "swiglu", "n_layers": 4,
                "mla": {"q_lora_rank": 16, "kv_lora_rank": 12, "qk_nope_head_dim": 8, "qk_rope_head_dim": 4,
                        "v_head_dim": 6},
                "moe": {"num_experts": 4, "experts_per_token": 3, "expert_d_ff": 16, "zero_experts": 2,
                        "router_bias": True, "shortcut": True}},
    "hyper": {"attention": "mla", "position": "rope", "norm": "rmsnorm", "activation": "swiglu", "n_layers": 2,
              "mla": {"q_lora_rank": 16, "kv_lora_rank": 12, "qk_nope_head_dim": 8, "qk_rope_head_dim": 4,
                      "v_head_dim": 6},
              "moe": {"num_experts": 4, "experts_per_token": 2, "expert_d_ff": 16, "shared_experts": 1},
              "hyper": {"streams": 4, "sinkhorn_iters": 3}},
    "hyper-independent": {"position": "rope", "norm": "rmsnorm", "activation": "swiglu", "n_kv_heads": 2,
                          "hyper": {"streams": 3, "mix": False}},
    "gpt-oss": {"position": "rope", "norm": "rmsnorm", "activation": "swiglu", "n_kv_heads": 2,
                "attention_sinks": True, "qkv_bias": True, "out_bias": True, "sliding_window": 4,
                "layer_types": ["sliding", "full"],
                "moe": {"num_experts": 4, "experts_per_token": 2, "router_bias": True, "expert_bias": True}},
    "qwen2-moe": {"position": "rope", "norm": "rmsnorm", "activation": "swiglu", "qkv_bias": True,
                  "moe": {"num_experts": 4, "experts_per_token": 2, "expert_d_ff": 16, "shared_experts": 1,
                          "shared_expert_d_ff": 48, "shared_expert_gate": True, "step": 2}},
    "olmo2": {"position": "rope", "norm": "rmsnorm", "activation": "swiglu", "norm_placement": "post_branch",
              "qk_norm": "full", "n_kv_heads": 2},
    "olmo": {"position": "rope", "activation": "swiglu", "norm_weight": False, "norm_bias": False},
    "neox-partial": {"position": "rope", "rotary_fraction": 0.25, "parallel_block": True, "parallel_norms": 2,
                     "qkv_bias": True, "mlp_bias": True},
    "smollm3": {"position": "rope", "norm": "rmsnorm", "activation": "swiglu", "n_kv_heads": 2, "n_layers": 4,
                "rope_layers": [True, True, True, False]},
    "afmoe": {"position": "rope", "norm": "rmsnorm", "activation": "swiglu", "n_kv_heads": 2, "n_layers": 3,
              "attention_gate": True, "qk_norm": "head", "norm_placement": "sandwich", "sliding_window": 4,
              "layer_types": ["sliding", "sliding", "full"], "rope_layers": [True, True, False],
              "moe": {"num_experts": 4, "experts_per_token": 2, "expert_d_ff": 16, "shared_experts": 1,
                      "shared_expert_d_ff": 32, "first_dense_layers": 1, "router_bias": True}},
    "apertus": {"position": "rope", "norm": "rmsnorm", "activation": "xielu", "n_kv_heads": 2, "qk_norm": True},
    "bloom": {"position": "alibi", "embedding_norm": True, "qkv_bias": True, "out_bias": True, "mlp_bias": True,
              "tie_embeddings": True},
    "llama4": {"position": "rope", "norm": "rmsnorm", "activation": "swiglu", "n_kv_heads": 2, "n_layers": 4,
               "qk_norm": "l2", "rope_layers": [True, True, True, False], "attn_temperature_tuning": True,
               "attention_chunk": 3, "layer_types": ["chunked", "chunked", "chunked", "full"],
               "moe": {"num_experts": 4, "experts_per_token": 1, "expert_d_ff": 16, "shared_experts": 1,
                       "step": 2}},
    # Gemma 4 26B-A4B: a dense MLP beside the experts in every layer
    "gemma4-moe": {"position": "rope", "norm": "rmsnorm", "activation": "geglu", "n_kv_heads": 2, "n_layers": 2,
                   "head_dim": 8, "qk_norm": "head", "v_norm": True, "norm_placement": "sandwich",
                   "sliding_window": 4, "layer_types": ["sliding", "full"], "full_head_dim": 16, "full_kv_heads": 1,
                   "full_k_eq_v": True, "embedding_scale": 5.65, "final_logit_softcap": 30, "tie_embeddings": True,
                   "layer_scalar": True, "moe": {"num_experts": 4, "experts_per_token": 2, "expert_d_ff": 16,
                                                 "beside_mlp": True}},
    # Gemma 4: full layers of their own head size and K/V heads whose values are the keys' projection
    "gemma4": {"position": "rope", "norm": "rmsnorm", "activation": "geglu", "n_kv_heads": 2, "n_layers": 3,
               "head_dim": 8, "qk_norm": "head", "v_norm": True, "norm_placement": "sandwich", "sliding_window": 4,
               "layer_types": ["sliding", "sliding", "full"], "full_head_dim": 16, "full_kv_heads": 1,
               "full_k_eq_v": True, "embedding_scale": 5.65, "final_logit_softcap": 30, "tie_embeddings": True,
               "layer_scalar": True},
    # Gemma 3n's KV sharing: the last 3 layers (sliding, sliding, full) attend to layers 1's and 2's K/V
    "kv-sharing": {"position": "rope", "norm": "rmsnorm", "activation": "geglu", "n_kv_heads": 2, "n_layers": 6,
                   "head_dim": 8, "qk_norm": "head", "v_norm": True, "norm_placement": "sandwich", "sliding_window": 4,
                   "layer_types": ["sliding", "sliding", "full"], "kv_shared_layers": 3, "embedding_scale": 5.65,
                   "final_logit_softcap": 30, "tie_embeddings": True},
    # Gemma 3n's layers: three streams, Laurel, per-layer inputs (ids past their table), a sparse FFN layer
    "gemma3n": {"position": "rope", "norm": "rmsnorm", "activation": "geglu", "n_kv_heads": 2, "n_layers": 4,
                "head_dim": 8, "qk_norm": "head", "v_norm": True, "norm_placement": "sandwich", "sliding_window": 4,
                "layer_types": ["sliding", "full"], "kv_shared_layers": 2, "embedding_scale": 5.65,
                "final_logit_softcap": 30, "tie_embeddings": True,
                "gemma3n": {"streams": 3, "laurel_rank": 4, "per_layer_width": 8, "per_layer_vocab": 40,
                            "sparse_layers": [True, False, False, False], "sparsity": 0.9}},
    # two streams, no scale of stream 0, no sparse layer (where gemma3n.sparsity applies to nothing)
    "gemma3n-dense": {"position": "rope", "norm": "rmsnorm", "activation": "geglu", "n_layers": 2,
                      "norm_placement": "sandwich", "qk_norm": "head",
                      "gemma3n": {"streams": 2, "laurel_rank": 3, "per_layer_width": 4, "per_layer_vocab": 1000,
                                  "correct_scale": False}},
    "k-eq-v": {"position": "rope", "norm": "rmsnorm", "activation": "swiglu", "n_kv_heads": 2, "k_eq_v": True,
               "v_norm": True, "qk_norm": "head"},  # every layer's values are its keys' projection, normed per head
    "opt": {"position": "learned", "position_offset": 2, "activation": "relu", "qkv_bias": True, "out_bias": True,
            "mlp_bias": True, "tie_embeddings": True},
    "mamba": {"position": "none", "norm": "rmsnorm", "d_ff": 0, "layer_types": ["mamba"], "tie_embeddings": True,
              "mamba": {"d_state": 4, "d_conv": 3, "expand": 2, "dt_rank": 5, "conv_bias": True, "proj_bias": True,
                        "mixer_norms": True}},
    # Mamba-2 beside attention (Bamba, Granite 4.0-H), an FFN in every layer; chunks of 4 so that 7 and 9
    # tokens span several, padded
    "mamba2": {"position": "rope", "norm": "rmsnorm", "activation": "swiglu", "n_kv_heads": 2, "n_layers": 3,
               "layer_types": ["mamba2", "full", "mamba2"],
               "mamba2": {"d_state": 4, "d_conv": 3, "expand": 2, "n_heads": 4, "head_dim": 6, "n_groups": 2,
                          "conv_bias": False, "proj_bias": True, "chunk_size": 4}},
    # LFM2: gated short convolutions beside attention with q/k norms, a SwiGLU FFN in every layer; biases on
    "short_conv": {"position": "rope", "norm": "rmsnorm", "activation": "swiglu", "n_kv_heads": 2, "n_layers": 3,
                   "layer_types": ["short_conv", "full", "short_conv"], "qk_norm": "head", "tie_embeddings": True,
                   "short_conv": {"d_conv": 3, "bias": True}},
    # Nemotron-H: one sublayer per layer: a Mamba-2 mixer, attention, an MLP or a MoE alone (relu^2, non-gated)
    "nemotron_h": {"position": "none", "norm": "rmsnorm", "activation": "sqrelu", "n_kv_heads": 2, "n_layers": 5,
                   "layer_types": ["mamba2", "none", "full", "none", "mamba2"],
                   "ffn_layers": [False, True, False, True, False],
                   "moe": {"num_experts": 4, "experts_per_token": 2, "expert_d_ff": 16, "shared_experts": 1,
                           "shared_expert_d_ff": 24, "step": 4},
                   "mamba2": {"d_state": 4, "d_conv": 3, "n_heads": 4, "head_dim": 6, "n_groups": 2,
                              "chunk_size": 4}},
    # MiniMax: lightning attention beside GQA attention, MoE in every layer; blocks of 4 so that 7 and 9 tokens
    # span several, the last one partial; head_dim other than d_model / n_heads
    "lightning": {"position": "rope", "norm": "rmsnorm", "activation": "swiglu", "n_kv_heads": 2, "n_layers": 3,
                  "head_dim": 6, "layer_types": ["lightning", "lightning", "full"],
                  "moe": {"num_experts": 4, "experts_per_token": 2}, "lightning": {"block_size": 4}},
    # Qwen3-Next: Gated DeltaNet beside gated attention with q/k norms and partial RoPE, MoE with a gated
    # shared expert; value heads twice the key heads; chunks of 4 so that 7 and 9 tokens span several, padded
    "gated_deltanet": {"position": "rope", "norm": "rmsnorm", "activation": "swiglu", "n_kv_heads": 2, "n_layers": 3,
                       "layer_types": ["gated_deltanet", "full", "gated_deltanet"], "qk_norm": "head",
                       "attention_gate": True, "rotary_fraction": 0.5,
                       "moe": {"num_experts": 4, "experts_per_token": 2, "expert_d_ff": 16, "shared_experts": 1,
                               "shared_expert_d_ff": 24, "shared_expert_gate": True},
                       "gated_deltanet": {"linear_num_key_heads": 2, "linear_num_value_heads": 4,
                                          "linear_key_head_dim": 6, "linear_value_head_dim": 5,
                                          "linear_conv_kernel_dim": 3, "chunk_size": 4}},
    # RecurrentGemma: two rglru layers (4 gate blocks) around a sliding-window attention layer with partial
    # rotary, biases on the MLP and the attention's output, a gated GELU MLP, logit soft-cap, scaled embeddings
    "rglru": {"position": "rope", "norm": "rmsnorm", "activation": "geglu", "n_kv_heads": 1, "n_layers": 3,
              "layer_types": ["rglru", "rglru", "sliding"], "sliding_window": 4, "rotary_fraction": 0.5,
              "out_bias": True, "mlp_bias": True, "tie_embeddings": True, "final_logit_softcap": 30.0,
              "embedding_scale": 5.65, "rglru": {"width": 24, "d_conv": 3, "n_heads": 4}},
    # Kimi Linear: KDA beside MLA without positions, a dense layer then MoE with a shared expert and the router's
    # bias; chunks of 4 so that 7 and 9 tokens span several, padded
    "kda": {"attention": "mla", "position": "none", "norm": "rmsnorm", "activation": "swiglu", "n_layers": 3,
            "layer_types": ["kda", "full", "kda"],
            "mla": {"kv_lora_rank": 12, "qk_nope_head_dim": 8, "qk_rope_head_dim": 4, "v_head_dim": 6},
            "moe": {"num_experts": 4, "experts_per_token": 2, "expert_d_ff": 16, "shared_experts": 1,
                    "first_dense_layers": 1, "router_bias": True},
            "kda": {"linear_num_heads": 2, "linear_head_dim": 5, "linear_conv_kernel_dim": 3, "chunk_size": 4}},
    # Falcon-H1: a Mamba-2 mixer beside every layer's GQA attention (its output gated, not normed; out_proj's
    # bias apart from in_proj's), a SwiGLU MLP with biases; chunks of 4 so that 7 and 9 tokens span several
    "falcon_h1": {"position": "rope", "norm": "rmsnorm", "activation": "swiglu", "n_kv_heads": 2, "head_dim": 6,
                  "mlp_bias": True, "qkv_bias": True, "parallel_mixer": "mamba2",
                  "mamba2": {"d_state": 4, "d_conv": 3, "n_heads": 4, "head_dim": 6, "n_groups": 2, "chunk_size": 4,
                             "norm": False, "proj_bias": True, "out_proj_bias": False}},
    # OLMo Hybrid: Gated DeltaNet layers pre-norm beside OLMo 3's attention layers, post-norm with q/k norms over the
    # whole projections; no positions (the release's)
    "olmo_hybrid": {"position": "none", "norm": "rmsnorm", "activation": "swiglu", "n_kv_heads": 2, "n_layers": 4,
                    "norm_placement": "post_branch", "recurrent_norm_placement": "pre", "qk_norm": "full",
                    "layer_types": ["gated_deltanet", "gated_deltanet", "gated_deltanet", "full"],
                    "gated_deltanet": {"linear_num_key_heads": 2, "linear_num_value_heads": 2, "linear_key_head_dim": 3,
                                       "linear_value_head_dim": 6, "chunk_size": 4}},
    # Zamba2: Mamba-2 layers, two of four after a shared transformer block (two blocks used in turn, RoPE, GQA,
    # adapters of rank 3 on the MLP, q, k and v) over the layer's input and the embeddings; no FFN of their own
    "zamba2": {"position": "rope", "norm": "rmsnorm", "activation": "geglu", "n_kv_heads": 2, "n_layers": 4, "d_ff": 0,
               "layer_types": ["mamba2"], "mlp_bias": True, "tie_embeddings": True,
               "mamba2": {"d_state": 4, "d_conv": 3, "n_heads": 4, "head_dim": 6, "n_groups": 2, "chunk_size": 4},
               "shared_transformer": {"layers": [1, 2, 3], "d_ff": 24, "blocks": 2, "adapter_rank": 3,
                                      "attention_adapters": True}},
    # Zamba (v1): Mamba-1 layers of two heads (x_proj and dt_proj per head), one shared block without adapters
    # (GQA, no positions) before two of three layers; a non-gated MLP (Zamba's is gated GELU)
    "zamba": {"position": "none", "norm": "rmsnorm", "activation": "gelu", "n_kv_heads": 2, "n_layers": 3, "d_ff": 0,
              "layer_types": ["mamba"], "tie_embeddings": True,
              "mamba": {"d_state": 4, "d_conv": 3, "expand": 2, "dt_rank": 3, "heads": 2},
              "shared_transformer": {"layers": [0, 2], "d_ff": 24}},
    "bitnet": {"position": "rope", "norm": "rmsnorm", "activation": "sqreglu", "n_kv_heads": 2, "sub_norms": True,
               "tie_embeddings": True},
    # Jamba: mamba layers (weighted mixer norms) and a NoPE attention layer, MoE every second layer
    "jamba": {"position": "none", "norm": "rmsnorm", "activation": "swiglu", "n_kv_heads": 2, "n_layers": 4,
              "layer_types": ["mamba", "mamba", "full", "mamba"], "moe": {"num_experts": 4, "experts_per_token": 2,
                                                                          "step": 2},
              "mamba": {"d_state": 4, "d_conv": 3, "expand": 2, "dt_rank": 5, "mixer_norms": "weighted"}},
}
CONFIGS = {k: from_dict({**BASE, **v}) for k, v in VARIANTS.items()}


ENUMS = {"activation": ["relu", "gelu", "silu", "sqrelu", "swiglu", "geglu", "reglu", "xielu", "sqreglu"],
         "norm": ["layernorm", "rmsnorm"], "norm_placement": ["pre", "post", "sandwich", "post_branch"],
         "position": ["learned", "sinusoidal", "rope", "alibi", "relative", "none"]}
QK_NORMS = [False, True, "none", "head", "full", "l2"]  # true is "head", false is "none"
QUANT_SKIPS = ["lm_head", "attention"]  # linears every model has (a tied head too: nothing to skip)


_ABSENT = object()


def _maybe(draw, strategy):
    """Either leave the key out (its default) or draw it (``null`` included)."""
    return draw(st.one_of(st.none(), strategy)) if draw(st.booleans()) else _ABSENT


def _put(raw, key, value):
    if value is not _ABSENT:
        raw[key] = value


@st.composite
def _moe(draw, n_layers):
    """Every MoE key, with at least one MoE layer (validation demands one): the last layer
    ``i`` with ``(i + 1) % step == 0`` is MoE unless ``first_dense_layers`` passes it."""
    e = draw(st.integers(1, 6))
    moe = {"num_experts": e, "experts_per_token": draw(st.integers(1, e))}

    if draw(st.booleans()):
        moe["expert_d_ff"] = draw(st.integers(1, 32))
    shared = draw(st.integers(0, 2))
    if shared or draw(st.booleans()):
        moe["shared_experts"] = shared
    if shared:
        if draw(st.booleans()):
            moe["shared_expert_d_ff"] = draw(st.integers(1, 32))
        if draw(st.booleans()):
            moe["shared_expert_gate"] = draw(st.booleans())
    step = draw(st.integers(1, n_layers))
    last_moe = (n_layers // step) * step - 1
    if step > 1 or draw(st.booleans()):
        moe["step"] = step
    if draw(st.booleans()):
        moe["first_dense_layers"] = draw(st.integers(0, last_moe))
    for key in ("router_bias", "expert_bias"):
        if draw(st.booleans()):
            moe[key] = draw(st.booleans())
    return moe


def _longcat_moe(draw, raw, attention_only):
    """LongCat-Flash's MoE: identity experts (a whole share of real ones per token) and, on attention layers, the
    shortcut: pairs of sequential pre-norm layers, the MoE beside every even one's MLP."""
    moe = raw["moe"]
    e, z = moe["num_experts"], draw(st.integers(0, 3))
    moe["zero_experts"] = z
    moe["experts_per_token"] = draw(st.sampled_from([k for k in range(1, e + z + 1) if k * e % (e + z) == 0]))
    if not attention_only:
        return
    moe["shortcut"] = draw(st.booleans())
    if moe["shortcut"]:
        raw["moe"] = {k: v for k, v in moe.items() if k not in ("step", "first_dense_layers")}
        raw["n_layers"] += raw["n_layers"] % 2
        raw.update(norm_placement="pre", parallel_block=False, layer_scalar=False)
        for key in ("ffn_layers", "parallel_norms"):
            raw.pop(key, None)


def _gemma3n(draw, raw):
    """Gemma 3n's layers: sequential sandwich RMSNorm layers of MHA and a dense GeGLU MLP in every layer."""
    raw.update(norm="rmsnorm", norm_placement="sandwich", parallel_block=False, activation="geglu",
               layer_scalar=False, d_ff=max(raw["d_ff"], 8))
    for key in ("ffn_layers", "parallel_norms", "norm_bias", "sub_norms", "moe"):
        raw.pop(key, None)
    g = {"streams": draw(st.integers(2, 3)), "laurel_rank": draw(st.integers(1, 6)),
         "per_layer_width": draw(st.integers(1, 8)), "per_layer_vocab": draw(st.integers(1, raw["vocab_size"] + 4))}
    if draw(st.booleans()):
        g["correct_scale"] = draw(st.booleans())
    if draw(st.booleans()):
        g["sparse_layers"] = draw(st.lists(st.booleans(), min_size=1, max_size=3))
        if True in g["sparse_layers"]:
            g["sparsity"] = draw(st.sampled_from([0.5, 0.8]))
    raw["gemma3n"] = g


def _hyper(draw, raw):
    """Hyper-connections (DeepSeek V4's mixed streams, Hy4's independent ones) on sequential pre-norm layers."""
    if (raw.get("moe") or {}).get("shortcut") or (raw.get("moe") or {}).get("beside_mlp"):
        return
    raw["hyper"] = {"streams": draw(st.integers(2, 4))}
    if draw(st.booleans()):
        raw["hyper"]["mix"] = draw(st.booleans())
    if raw["hyper"].get("mix", True) and draw(st.booleans()):
        raw["hyper"]["sinkhorn_iters"] = draw(st.integers(1, 4))
    raw.update(norm_placement="pre", parallel_block=False, layer_scalar=False)
    raw.pop("parallel_norms", None)


@st.composite
def _mla(draw, rope):
    even = st.integers(1, 4).map(lambda n: 2 * n)
    mla = {"kv_lora_rank": draw(st.integers(1, 16)), "qk_nope_head_dim": draw(st.integers(1, 8)),
           "qk_rope_head_dim": draw(even if rope else st.integers(1, 8)),
           "v_head_dim": draw(st.integers(1, 8))}
    if draw(st.booleans()):  # absent or null: a full-rank query projection
        mla["q_lora_rank"] = draw(st.one_of(st.none(), st.integers(1, 16)))
    return mla


@st.composite
def _vision(draw):
    """A tiny vision tower and projector, each key drawn or left at its default."""
    heads, patch, merge = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 2))
    v = {"n_layers": draw(st.integers(1, 2)), "d_model": heads * draw(st.integers(1, 4)), "n_heads": heads,
         "d_ff": draw(st.integers(1, 16)), "patch_size": patch, "image_size": merge * draw(st.integers(1, 3)) * patch,
         "channels": draw(st.integers(1, 3)), "temporal_patch": draw(st.integers(1, 2)),
         "activation": draw(st.sampled_from(VISION_ACTIVATIONS)), "norm": draw(st.sampled_from(NORMS)),
         "position": draw(st.sampled_from(VISION_POSITIONS))}
    for key in ("class_token", "patch_bias", "qkv_bias", "out_bias", "mlp_bias", "pre_norm", "final_norm",
                "qk_norm", "v_norm"):
        v[key] = draw(st.booleans())
    v["norm_placement"] = draw(st.sampled_from(VISION_NORM_PLACEMENTS))
    if v["position"] == "rope" and draw(st.booleans()):  # Gemma 4's 2-D table, or Qwen3-VL's grid, beside 2-D RoPE
        key = draw(st.sampled_from(["position_table", "position_grid"]))
        v[key] = draw(st.integers(1, 4) if key == "position_table" else st.integers(1, 16))
    if v["norm"] == "layernorm":
        v["norm_bias"] = draw(st.booleans())
    p = {"norm": draw(st.sampled_from(["none", *NORMS])), "features": draw(st.integers(1, 2)), "merge": merge,
         "hidden": draw(st.one_of(st.none(), st.integers(1, 16))), "bias": draw(st.booleans()),
         "norm_weight": draw(st.booleans())}
    if merge > 1:
        p["merge_linear"] = draw(st.booleans())
    if p["hidden"] is not None:
        p["hidden_linear"] = draw(st.booleans())
    for d, required in ((v, ("n_layers", "d_model", "n_heads", "d_ff", "patch_size")), (p, ())):
        for key in draw(st.lists(st.sampled_from([k for k in d if k not in required]), unique=True)):
            del d[key]
    if "merge" not in p:  # merged patches (merge 1) cannot be merged back
        p.pop("merge_linear", None)
    if v.get("position", "learned") == "learned":  # the tables go with RoPE
        v.pop("position_table", None)
        v.pop("position_grid", None)
    if p.get("hidden") is None:  # a linear hidden -> hidden needs a hidden width
        p.pop("hidden_linear", None)
    if v.get("position", "learned") == "learned" and "image_size" not in v:  # a row per patch of it
        v["image_size"] = p.get("merge", 1) * patch
    # the keys for images: windows (whole merged patches), pooling (dividing the patches a side), the
    # class token kept, layers no feature reads
    if draw(st.booleans()):
        v["window"] = p.get("merge", 1) * draw(st.integers(1, 2))
        if draw(st.booleans()):
            v["full_layers"] = draw(st.lists(st.integers(0, 2), min_size=1, max_size=2))
    side = v["image_size"] // patch if "image_size" in v else None
    if side is not None and draw(st.booleans()):
        p["pool"] = draw(st.sampled_from([k for k in (1, 2) if side % k == 0]))
    if v.get("class_token") and p.get("pool", 1) == 1 and p.get("merge", 1) == 1 and draw(st.booleans()):
        p["class_token"] = draw(st.booleans())  # joins the patches as they are
    if draw(st.booleans()):
        p["unread_layers"] = draw(st.integers(0, v["n_layers"] - 1))
    plain = (not v.get("class_token") and p.get("features", 1) == 1 and p.get("pool", 1) == 1
             and not p.get("unread_layers") and not p.get("class_token"))
    if plain and not p.get("merge_linear") and not p.get("hidden_linear") and draw(st.booleans()):
        p["deepstack"] = draw(st.lists(st.integers(0, v["n_layers"] - 1), min_size=1, max_size=2, unique=True))
    alone = plain and p.get("merge", 1) == 1 and "deepstack" not in p
    if alone and draw(st.booleans()):  # Gemma 4's pooler over the last layer's patches, maybe standardized
        v["pool"] = draw(st.integers(1, 3))
        v["standardize"] = draw(st.booleans())
    v["projector"] = p
    return v


@st.composite
def vision_configs(draw):
    """A small language model with a random vision tower and projector (every vision key drawn)."""
    return from_dict({**BASE, "position": "rope", "vision": draw(_vision())})


def _mamba(draw, raw) -> dict:
    """Every Mamba-1 key; heads (Zamba v1's) where they divide the width and the mixer has no norms."""
    mixer = {k: draw(v) for k, v in (("d_state", st.integers(1, 8)), ("d_conv", st.integers(1, 4)),
                                     ("expand", st.integers(1, 2)), ("dt_rank", st.integers(1, 6)),
                                     ("conv_bias", st.booleans()), ("proj_bias", st.booleans()),
                                     ("mixer_norms", st.sampled_from(MIXER_NORMS)))
             if draw(st.booleans())}
    heads = draw(st.sampled_from([1, 2, 4]))
    if not mixer.get("mixer_norms") and (mixer.get("expand", 2) * raw["d_model"]) % heads == 0 and \
            (heads > 1 or draw(st.booleans())):
        mixer["heads"] = heads
    return mixer


def _mamba2(draw, raw) -> dict:
    heads, groups = draw(st.sampled_from([(1, 1), (2, 1), (2, 2), (4, 2)]))
    mixer = {k: draw(v) for k, v in (("d_state", st.integers(1, 6)), ("d_conv", st.integers(1, 4)),
                                      ("conv_bias", st.booleans()), ("proj_bias", st.booleans()),
                                      ("chunk_size", st.integers(1, 8)), ("norm", st.booleans()),
                                      ("out_proj_bias", st.booleans())) if draw(st.booleans())}
    mixer.update(n_heads=heads, n_groups=groups)
    if draw(st.booleans()):  # else its default, 64
        mixer["head_dim"] = draw(st.integers(1, 6))
    if draw(st.booleans()):  # the heads from expand * d_model / head_dim
        mixer.pop("n_heads")
        mixer.pop("n_groups")
        mixer["head_dim"] = raw["d_model"]
        if draw(st.booleans()):
            mixer["expand"] = 1
    return mixer


def _short_conv(draw, raw) -> dict:
    return {k: draw(v) for k, v in (("d_conv", st.integers(1, 4)), ("bias", st.booleans())) if draw(st.booleans())}


def _lightning(draw, raw) -> dict:
    """Lightning heads are the model's MHA heads: an MLA model turns MHA, with a head_dim of its own."""
    if raw.get("attention") == "mla":
        raw["attention"] = "mha"
        raw.pop("mla", None)
        raw.pop("dsa", None)
        raw["head_dim"] = draw(st.sampled_from([2, 4, 6]))
    return {"block_size": draw(st.integers(1, 8))} if draw(st.booleans()) else {}


def _gated_deltanet(draw, raw) -> dict:
    heads = draw(st.sampled_from([None, (1, 1), (1, 2), (2, 2), (2, 4)]))  # None: their defaults, 16 and 32
    mixer = {k: draw(v) for k, v in (("linear_key_head_dim", st.integers(1, 6)),
                                      ("linear_value_head_dim", st.integers(1, 6)),
                                      ("linear_conv_kernel_dim", st.integers(1, 4)), ("chunk_size", st.integers(1, 8)))
             if draw(st.booleans())}
    return mixer if heads is None else {**mixer, "linear_num_key_heads": heads[0], "linear_num_value_heads": heads[1]}


RECURRENT_MAPPINGS = {"mamba": _mamba, "mamba2": _mamba2, "short_conv": _short_conv}  # layer kind -> its keys
RECURRENT_MAPPINGS["lightning"] = _lightning
RECURRENT_MAPPINGS["gated_deltanet"] = _gated_deltanet


def _rglru(draw, raw) -> dict:
    heads = draw(st.integers(1, 3))
    mixer = {"width": heads * draw(st.integers(2, 4)), "n_heads": heads}  # blocks of 2 channels or more
    if draw(st.booleans()):
        mixer["d_conv"] = draw(st.integers(1, 4))
    if raw["d_model"] % raw["n_heads"] == 0 and raw["d_model"] > raw["n_heads"] and draw(st.booleans()):
        del mixer["width"], mixer["n_heads"]  # d_model wide, the model's heads
    elif raw["d_model"] % heads == 0 and raw["d_model"] > heads and draw(st.booleans()):  # d_model wide
        del mixer["width"]
    return mixer


RECURRENT_MAPPINGS["rglru"] = _rglru


def _kda(draw, raw) -> dict:
    return {k: draw(v) for k, v in (("linear_num_heads", st.integers(1, 3)), ("linear_head_dim", st.integers(1, 6)),
                                    ("linear_conv_kernel_dim", st.integers(1, 4)), ("chunk_size", st.integers(1, 8)))
            if draw(st.booleans())}


RECURRENT_MAPPINGS["kda"] = _kda


def _recurrent_layers(draw, raw, kind: str):
    """Layers of a recurrent ``kind`` (every one, or mixed into the layer types), its mapping, maybe no
    FFN (d_ff 0)."""
    raw["layer_types"] = draw(st.sampled_from([[kind], [kind, *(raw.get("layer_types") or [])]]))  # layer 0: one
    if "sliding" not in raw["layer_types"]:
        raw.pop("sliding_window", None)
    if "chunked" not in raw["layer_types"]:
        raw.pop("attention_chunk", None)
    raw[kind] = RECURRENT_MAPPINGS[kind](draw, raw)
    if draw(st.booleans()):  # their own norm placement (OLMo Hybrid); Gemma 4's experts beside the MLP: pre or sandwich
        beside = (raw.get("moe") or {}).get("beside_mlp")
        raw["recurrent_norm_placement"] = draw(st.sampled_from(["pre", "sandwich"] if beside
                                                               else list(ENUMS["norm_placement"])))
    raw["parallel_block"] = False
    raw.pop("parallel_norms", None)
    raw.pop("sub_norms", None)  # dense attention layers only
    attends = any(t != kind for t in raw["layer_types"][:raw["n_layers"]])
    if not attends and "attention" in (raw.get("quant_skip") or ()):  # no attention linear to skip
        raw["quant_skip"] = ["lm_head"]
    if not attends and raw.get("qk_norm") == "l2":  # on RoPE layers: none here
        raw.pop("qk_norm")
    if not attends:  # keys as values and the value norm act in attention
        raw.pop("k_eq_v", None)
        raw.pop("v_norm", None)
    if "full" not in raw["layer_types"][:raw["n_layers"]]:  # a full layer's own shape needs one
        for key in ("full_head_dim", "full_kv_heads", "full_k_eq_v"):
            raw.pop(key, None)
    if not attends and raw["position"] in ("rope", "alibi", "relative"):
        raw["position"] = "none"
        for key in ("rope_theta", "rope_layers", "rotary_fraction", "relative_buckets", "relative_max_distance"):
            raw.pop(key, None)
    if draw(st.booleans()):  # no FFN in any layer
        raw["d_ff"] = 0
        for key in ("moe", "activation", "mlp_bias"):
            raw.pop(key, None)


def _parallel_mixer(draw, raw, kind: str):
    """A recurrent mixer of ``kind`` beside every attention layer's attention (Falcon-H1), with its mapping,
    where some layer attends."""
    types = (raw.get("layer_types") or ["full"])[:raw["n_layers"]]
    if all(t in RECURRENT_MAPPINGS or t == "none" for t in types):
        return
    if kind not in raw:
        raw[kind] = RECURRENT_MAPPINGS[kind](draw, raw)
    raw["parallel_mixer"] = kind
    raw["parallel_block"] = False
    raw.pop("parallel_norms", None)
    raw.pop("sub_norms", None)  # dense attention layers only


def _single_sublayers(draw, raw):
    """Nemotron-H's layers: FFN-only ones (``none``: no mixer) among the others, and ``ffn_layers`` taking
    the FFN from some mixer layers; when that breaks a rule (MoE or dense layers left with no FFN), every
    layer keeps its FFN."""
    raw["layer_types"] = [*raw["layer_types"], "none"]
    raw["ffn_layers"] = [t == "none" or draw(st.booleans()) for t in raw["layer_types"]]
    try:
        from_dict(raw)
    except ConfigError:
        raw["ffn_layers"] = [True]


def _shared_transformer(draw, raw):
    """Zamba's shared transformer blocks before some recurrent layers, which then have no FFN (nor any layer), are
    pre-norm and whose attention is MHA with RoPE or no position inside it."""
    types = [raw["layer_types"][i % len(raw["layer_types"])] for i in range(raw["n_layers"])]
    uses = [i for i, t in enumerate(types) if t in RECURRENT_MAPPINGS]
    if not uses or raw.get("attention") == "mla" or "none" in types:
        return
    raw["d_ff"] = 0
    for key in ("moe", "ffn_layers"):
        raw.pop(key, None)
    if raw.get("recurrent_norm_placement", "pre") != "pre":
        raw["recurrent_norm_placement"] = "pre"
    elif "recurrent_norm_placement" not in raw:
        raw["norm_placement"] = "pre"
    if raw["position"] in ("alibi", "relative"):
        raw["position"] = "none"
        for key in ("relative_buckets", "relative_max_distance"):
            raw.pop(key, None)
    layers = draw(st.lists(st.sampled_from(uses), min_size=1, unique=True).map(sorted))
    shared = {"layers": layers, "d_ff": draw(st.integers(1, 32))}
    if draw(st.booleans()):
        shared["blocks"] = draw(st.integers(1, len(layers)))
    if draw(st.booleans()):
        shared["adapter_rank"] = draw(st.integers(1, 3))  # 0 is the default: left out
    if shared.get("adapter_rank"):
        shared["attention_adapters"] = draw(st.booleans())
    raw["shared_transformer"] = shared
    raw["activation"] = draw(st.sampled_from(ENUMS["activation"]))  # the shared MLP's
    raw["mlp_bias"] = draw(st.booleans())


@st.composite
def valid_configs(draw, layouts: bool = False, recurrent: bool = True):
    """Raw config mappings over every ModelConfig key and value (test_config checks the
    coverage); sizes stay tiny, since verify tests build these on the meta device. With `layouts`,
    only what parallel layouts accept: no dense MLP beside the experts, LongCat-Flash's MoE, hyper-connections
    or shared transformer block (sharding.check_layout refuses them), so no test filters out most draws;
    without `recurrent`, no recurrent mixer (tensor and context parallelism and LoRA refuse them)."""
    n_layers = draw(st.integers(1, 4))
    raw = {"name": "r", "vocab_size": draw(st.integers(1, 500)), "context_length": draw(st.integers(1, 64)),
           "n_layers": n_layers, "d_ff": draw(st.integers(1, 64))}
    for key, choices in ENUMS.items():
        raw[key] = draw(st.sampled_from(choices))
    if draw(st.booleans()):  # RoPE carries the most keys (rope_layers, rotary_fraction, MLA's rope key)
        raw["position"] = "rope"
    raw["embedding_norm"] = draw(st.booleans())
    rope = raw["position"] == "rope"
    mla = draw(st.integers(0, 3)) == 0
    if mla:
        raw["attention"] = "mla"
        raw["n_heads"] = draw(st.integers(1, 4))
        raw["d_model"] = draw(st.integers(1, 48))
        raw["mla"] = draw(_mla(rope))
        if rope and draw(st.booleans()):  # DSA's indexer, on the low-rank query
            raw["mla"]["q_lora_rank"] = raw["mla"].get("q_lora_rank") or draw(st.integers(1, 16))
            raw["dsa"] = {"n_heads": draw(st.integers(1, 4)), "topk": draw(st.integers(1, 8)),
                          "head_dim": raw["mla"]["qk_rope_head_dim"] + draw(st.integers(0, 4))}
        raw["attention_gate"] = draw(st.booleans())  # Hy4's on MLA
    else:
        if draw(st.booleans()):
            raw["attention"] = "mha"
        g = draw(st.integers(1, 4))
        h = g * draw(st.integers(1, 4))
        hd = 2 * draw(st.integers(1, 8))
        raw["n_heads"], raw["n_kv_heads"] = h, g
        if draw(st.booleans()):
            raw["d_model"] = h * hd
        else:
            raw["d_model"], raw["head_dim"] = draw(st.integers(1, 64)), hd
        raw["qk_norm"] = draw(st.sampled_from(QK_NORMS))
        if raw["qk_norm"] == "l2" and not (rope and raw["norm"] == "rmsnorm"):  # l2: RMSNorm on RoPE layers
            raw["qk_norm"] = "head"
        raw["attention_gate"] = draw(st.booleans())
        raw["sub_norms"] = draw(st.booleans())  # BitNet: dense layers only (no moe, below)
        if rope and draw(st.booleans()):
            # rotated dims int(hd * f) must be even and > 0
            rotated = 2 * draw(st.integers(1, hd // 2))
            f = rotated / hd
            raw["rotary_fraction"] = f if int(hd * f) == rotated else 1.0
    for key in ("qkv_bias", "out_bias", "lm_head_bias", "tie_embeddings", "final_norm", "parallel_block",
                "attention_sinks"):
        raw[key] = draw(st.booleans())
    raw["norm_weight"] = draw(st.booleans())
    if raw["norm"] == "layernorm":  # the key of the norm's bias applies to it alone
        raw["norm_bias"] = draw(st.booleans())
    if raw["parallel_block"]:
        raw["parallel_norms"] = draw(st.sampled_from([1, 2]))
        if raw["norm_placement"] in ("post", "post_branch"):
            raw["norm_placement"] = draw(st.sampled_from(["pre", "sandwich"]))
    if draw(st.booleans()):
        raw["sliding_window"] = draw(st.one_of(st.integers(1, 12), st.integers(1, 64)))  # mostly binding
    if draw(st.booleans()):
        kinds = ["full", "sliding"] if "sliding_window" in raw else ["full"]
        if draw(st.booleans()):  # chunked attention (Llama 4)
            raw["attention_chunk"] = draw(st.integers(1, 12))
            kinds.append("chunked")
        raw["layer_types"] = draw(st.lists(st.sampled_from(kinds), min_size=1, max_size=3))
        if "sliding_window" in raw and "sliding" not in raw["layer_types"]:  # a window some layer uses
            raw["layer_types"].append("sliding")
        if "attention_chunk" in raw and "chunked" not in raw["layer_types"]:
            raw["layer_types"].append("chunked")
    if rope and draw(st.booleans()):
        raw["rope_layers"] = draw(st.lists(st.booleans(), min_size=1, max_size=3))
        if raw.get("qk_norm") == "l2" and True not in raw["rope_layers"]:  # a RoPE layer to norm
            raw["rope_layers"].append(True)
    if raw.get("attention") != "mla" and (not rope or False in raw.get("rope_layers", [True])):
        raw["attn_temperature_tuning"] = draw(st.booleans())  # applies to layers without RoPE
    if raw.get("attention") != "mla":  # Gemma 4: keys as values, a norm over values, full layers' own shape
        keys_as_values = raw.get("qk_norm") == "head"  # with v_norm: the form llmcalc models (rules.py)
        raw["k_eq_v"] = keys_as_values and draw(st.booleans())
        raw["v_norm"] = raw["k_eq_v"] or draw(st.booleans())
        raw["layer_scalar"] = draw(st.booleans())
        types = raw.get("layer_types") or (["sliding"] if "sliding_window" in raw else ["full"])
        if "full" in types[:n_layers] and draw(st.booleans()):
            h, hd = raw["n_heads"], raw.get("head_dim") or raw["d_model"] // raw["n_heads"]
            raw["full_k_eq_v"] = keys_as_values and draw(st.booleans())
            raw["v_norm"] = raw["v_norm"] or raw["full_k_eq_v"]
            raw["full_kv_heads"] = draw(st.sampled_from([k for k in range(1, h + 1) if h % k == 0]))
            full_hd = draw(st.sampled_from([hd, 2 * hd, 4 * hd]))
            rotated = int(full_hd * raw.get("rotary_fraction", 1.0))
            if not rope or (rotated and rotated % 2 == 0):
                raw["full_head_dim"] = full_hd
    if rope:
        raw["rope_theta"] = draw(st.sampled_from([10000, 500000.0, 1e6]))
    if raw["position"] == "relative":
        raw["relative_buckets"] = draw(st.integers(2, 16))
        raw["relative_max_distance"] = draw(st.integers(raw["relative_buckets"], 64))
    for key in ("attn_logit_softcap", "final_logit_softcap", "embedding_scale"):
        _put(raw, key, _maybe(draw, st.sampled_from([0.5, 5.65, 30, 50.0])))
    # a plain dtype or a format: every one of the 18 values gets drawn
    raw["dtype"] = draw(st.sampled_from(["fp32", "fp16", "bf16", "fp8", "int8", "int4", *WEIGHT_FORMATS]))
    if raw["dtype"] in WEIGHT_FORMATS:  # a format's group size and the linears it leaves unquantized
        if FORMATS[raw["dtype"]].group > 1:  # the others have no group to size
            _put(raw, "quant_group_size", _maybe(draw, st.integers(1, 80)))
        _put(raw, "quant_skip", _maybe(draw, st.lists(st.sampled_from(QUANT_SKIPS), min_size=1, max_size=2)))
    # any text but control characters, which validation refuses
    raw["description"] = draw(st.text(st.characters(exclude_categories=("Cc",)), max_size=10))
    if draw(st.booleans()) and not ACTIVATIONS[raw["activation"]].scalars \
            and not raw.get("sub_norms"):  # xIELU and sub-norms: dense MLPs only
        raw["moe"] = draw(_moe(n_layers))
    elif draw(st.integers(0, 4)) == 0:
        raw["moe"] = None
    if raw.get("moe") is not None:  # sub_norms applies to dense models only, whatever its value
        raw.pop("sub_norms", None)
        if raw["norm_placement"] in ("pre", "sandwich") and not raw["parallel_block"] and not layouts:  # Gemma 4
            raw["moe"]["beside_mlp"] = draw(st.booleans())
    if draw(st.booleans()):
        raw["vision"] = draw(_vision())
    moe = raw.get("moe")
    if moe is None or moe.get("first_dense_layers", 0) or moe.get("step", 1) > 1 or moe.get("beside_mlp"):
        # a dense MLP layer
        raw["mlp_bias"] = draw(st.booleans())
    if raw["position"] == "learned" and draw(st.booleans()):  # rows before position 0 (OPT, BioGPT)
        raw["position_offset"] = draw(st.integers(0, 3))
    # recurrent layers in one config of 14 for each recurrent kind, alone or beside attention ones, with or
    # without FFN
    mixer = draw(st.integers(0, 13))
    if not recurrent or ("dsa" in raw and raw["position"] == "rope"):  # DSA kept: attention layers only
        mixer = len(RECURRENT_MAPPINGS)
    if mixer < len(RECURRENT_MAPPINGS):
        kind = list(RECURRENT_MAPPINGS)[mixer]
        # 0: beside attention alone (Falcon-H1); 1: in layers of its own too; else in layers of its own
        beside = min(draw(st.integers(0, 3)), 2)
        if beside:
            _recurrent_layers(draw, raw, kind)
            if raw["d_ff"] and draw(st.booleans()):  # layers of one sublayer each (Nemotron-H)
                _single_sublayers(draw, raw)
        if beside < 2:
            _parallel_mixer(draw, raw, kind)
        if beside and not layouts and draw(st.booleans()):
            _shared_transformer(draw, raw)
    if "dsa" in raw and (raw["position"] != "rope" or mixer < len(RECURRENT_MAPPINGS)):  # RoPE, attention
        raw.pop("dsa")
    if "dsa" in raw:  # DSA: full causal layers only, without soft-capping
        for key in ("sliding_window", "attention_chunk", "attn_logit_softcap"):
            raw.pop(key, None)
        if raw.get("layer_types"):
            raw["layer_types"] = [t for t in raw["layer_types"] if t not in ("sliding", "chunked")] or ["full"]
    if raw.get("moe") is not None and not raw["moe"].get("beside_mlp") and not layouts \
            and draw(st.booleans()):  # LongCat-Flash's
        _longcat_moe(draw, raw, mixer >= len(RECURRENT_MAPPINGS))
    if mixer >= len(RECURRENT_MAPPINGS) and not layouts and draw(st.integers(0, 3)) == 0:
        _hyper(draw, raw)
    if raw.get("attention") != "mla" and mixer >= len(RECURRENT_MAPPINGS) and "hyper" not in raw \
            and raw.get("qk_norm") != "l2" and "rope_layers" not in raw and not layouts \
            and draw(st.integers(0, 2)) == 0:  # Gemma 3n's shared tail
        types = raw.get("layer_types") or (["sliding"] if "sliding_window" in raw else ["full"])
        n = raw["n_layers"]
        kinds = [types[i % len(types)] for i in range(n)]
        tails = [k for k in range(1, n) if set(kinds[n - k:]) <= set(kinds[:n - k])]  # a source for each span
        if tails:
            raw["kv_shared_layers"] = draw(st.sampled_from(tails))
    if raw.get("attention") != "mla" and mixer >= len(RECURRENT_MAPPINGS) and "hyper" not in raw \
            and not layouts and not (raw.get("moe") or {}).get("shortcut") and raw.get("d_ff") \
            and draw(st.integers(0, 3)) == 0:  # Gemma 3n's layers
        _gemma3n(draw, raw)
    if "dsa" in raw and draw(st.booleans()):  # layers reusing the previous indexer's top-k (Hy4); layer 0 indexes
        raw["dsa"]["shared"] = [False] + draw(st.lists(st.booleans(), min_size=1, max_size=3))
    # leave some keys at their defaults: drop each chosen key unless the config then breaks a rule
    optional = [k for k in raw if k not in REQUIRED]
    for key in draw(st.lists(st.sampled_from(optional), unique=True)):
        value = raw.pop(key)
        try:
            from_dict(raw)
        except ConfigError:
            raw[key] = value
    return raw
