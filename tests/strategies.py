"""Shared test data: hypothesis strategies over every config key, and small variant configs.

Test modules import these from here, never from each other.
"""

from hypothesis import strategies as st

from llmcalc.analysis.config import from_dict

BASE = dict(name="t", vocab_size=61, context_length=64, d_model=32, n_layers=2, n_heads=4, d_ff=40)
VARIANTS = {  # together every config key and value
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
    "moe": {"position": "none", "activation": "sqrelu", "mlp_bias": True, "norm_placement": "sandwich",
            "moe": {"num_experts": 4, "experts_per_token": 2, "expert_d_ff": 24, "shared_experts": 1}},
    "moe-silu": {"position": "rope", "activation": "silu", "n_kv_heads": 2, "sliding_window": 3,
                 "moe": {"num_experts": 3, "experts_per_token": 1}, "norm": "rmsnorm"},
}
CONFIGS = {k: from_dict({**BASE, **v}) for k, v in VARIANTS.items()}


ENUMS = {"activation": ["relu", "gelu", "silu", "sqrelu", "swiglu", "geglu", "reglu"],
         "norm": ["layernorm", "rmsnorm"], "norm_placement": ["pre", "post", "sandwich"],
         "position": ["learned", "sinusoidal", "rope", "alibi", "relative", "none"]}


@st.composite
def valid_configs(draw):
    g = draw(st.integers(1, 4))
    h = g * draw(st.integers(1, 4))
    hd = 2 * draw(st.integers(1, 8))
    raw = {"name": "r", "vocab_size": draw(st.integers(1, 500)), "context_length": draw(st.integers(1, 64)),
           "n_layers": draw(st.integers(1, 3)), "n_heads": h, "n_kv_heads": g,
           "d_ff": draw(st.integers(1, 64))}
    if draw(st.booleans()):
        raw["d_model"] = h * hd
    else:
        raw["d_model"], raw["head_dim"] = draw(st.integers(1, 64)), hd
    for key, choices in ENUMS.items():
        raw[key] = draw(st.sampled_from(choices))
    for key in ("qkv_bias", "out_bias", "mlp_bias", "lm_head_bias", "tie_embeddings", "qk_norm",
                "final_norm", "norm_bias", "parallel_block"):
        raw[key] = draw(st.booleans())
    if raw["parallel_block"]:
        raw["parallel_norms"] = draw(st.sampled_from([1, 2]))
        if raw["norm_placement"] == "post":
            raw["norm_placement"] = "pre"
    if draw(st.booleans()):
        raw["sliding_window"] = draw(st.integers(1, 64))
    raw["rope_theta"] = draw(st.sampled_from([10000, 500000.0, 1e6]))
    raw["relative_buckets"] = draw(st.integers(2, 16))
    raw["relative_max_distance"] = draw(st.integers(raw["relative_buckets"], 64))
    raw["dtype"] = draw(st.sampled_from(["fp32", "fp16", "bf16", "fp8", "int8", "int4"]))
    raw["description"] = draw(st.text(max_size=10))
    if draw(st.booleans()):
        e = draw(st.integers(1, 6))
        raw["moe"] = {"num_experts": e, "experts_per_token": draw(st.integers(1, e)),
                      "expert_d_ff": draw(st.integers(1, 32)), "shared_experts": draw(st.integers(0, 2))}
    return raw


