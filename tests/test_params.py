"""Parameter counts: golden totals, component sums, every architecture variant."""

import json
import math

import pytest

from llmcalc.analysis.count.params import count_params
from llmcalc.analysis.load.catalog import bundled_names, load_bundled
from llmcalc.analysis.model.checks import from_dict
from llmcalc.analysis.model.sizes import weight_bytes
from llmcalc.analysis.model.variants import ACTIVATIONS

pytestmark = pytest.mark.unit

# Published totals (DESIGN.md section 2). Sources:
#  GPT-2: HF `openai-community/gpt2*` checkpoints, sum of numel over unique tensors
#    (the 124M/355M/774M/1.5B of Radford et al. 2019);
#  Mistral 7B v0.1: HF model card / safetensors metadata, 7,241,732,096;
#  Mixtral 8x7B: HF safetensors metadata 46,702,792,704; 12.9B active (Jiang et al. 2024);
#  Llama 2 7B: HF safetensors metadata 6,738,415,616; Llama 3 8B: 8,030,261,248;
#  Qwen2.5 0.5B: HF safetensors metadata 494,032,768 (tied head).
GOLDEN = {
    "gpt2-small": (124_439_808, 124_439_808),
    "gpt2-medium": (354_823_168, 354_823_168),
    "gpt2-large": (774_030_080, 774_030_080),
    "gpt2-xl": (1_557_611_200, 1_557_611_200),
    "mistral-7b": (7_241_732_096, 7_241_732_096),
    "mixtral-8x7b": (46_702_792_704, 12_879_925_248),
    "llama-2-7b": (6_738_415_616, 6_738_415_616),
    "llama-3-8b": (8_030_261_248, 8_030_261_248),
    "qwen2.5-0.5b": (494_032_768, 494_032_768),
    # published checkpoint totals (model cards / papers cited in each YAML)
    "gemma-2-9b": (9_241_705_984, 9_241_705_984),
    "olmo-2-7b": (7_298_617_344, 7_298_617_344),
    "pythia-410m": (405_334_016, 405_334_016),
    "llama-3.1-8b": (8_030_261_248, 8_030_261_248),
    "llama-3.1-70b": (70_553_706_496, 70_553_706_496),
    "llama-3.1-405b": (405_853_388_800, 405_853_388_800),
    "qwen3-8b": (8_190_735_360, 8_190_735_360),
    "phi-3-mini": (3_821_079_552, 3_821_079_552),
    "falcon-7b": (6_921_720_704, 6_921_720_704),
    # no published text-only total: transformers' Gemma3ForCausalLM on the same config
    "gemma-3-27b": (27_009_346_304, 27_009_346_304),
    "gemma-3-27b-it": (27_432_406_640, 27_432_406_640),
    "gemma-4-31b": (30_697_345_340, 30_697_345_340),
    # transformers' Gemma4ForCausalLM on 26B-A4B's text_config (the card: 25.2B total, 3.8B active)
    "gemma-4-26b-a4b": (25_233_141_790, 3_822_530_590),
    # transformers' count from the published configs (tests/test_hf.py test_presets_are_their_published_configs):
    # DeepSeek-V3.2 without its multi-token-prediction module; Qwen3.5's language models (the cards: 27B and
    # 397B total, 17B active, with the vision tower)
    "deepseek-v3.2": (671_877_944_064, 38_403_822_336),
    "qwen3.5-27b": (26_895_998_464, 26_895_998_464),
    "qwen3.5-397b-a17b": (396_346_350_336, 17_349_040_896),
    # MoE: the checkpoints' totals (the safetensors tensors; DeepSeek-V3 without its
    # multi-token-prediction layer); the model cards round them, see test_published_rounded_figures
    "qwen3-30b-a3b": (30_532_122_624, 3_353_032_704),
    "deepseek-v3": (671_026_419_200, 37_552_297_472),
    "gpt-oss-20b": (20_914_757_184, 4_187_440_704),
    "gpt-oss-120b": (116_829_156_672, 5_711_982_912),
    "kimi-k2": (1_026_408_232_448, 32_861_500_928),
    # GLM-4.5-Air without its multi-token-prediction layer: the checkpoint's 110,468,824,832 less
    # that layer's 3,616,573,568 (one MoE layer, eh_proj, norms, its copies of embedding and head)
    "glm-4.5-air": (106_852_251_264, 13_424_129_664),
    # GLM-5 without its multi-token-prediction layer: transformers' GlmMoeDsaForCausalLM on the published
    # config.json (hf/glm-5.json) counts the same 743,911,218,432 (the card: 744B total, 40B active)
    "glm-5": (743_911_218_432, 41_784_728_832),
    # Llama 4, the multimodal checkpoints (vision tower, adapter and projector included: active
    # counts them too, the language model's 17,172,894,720 and 17,184,691,200 plus 871,932,416);
    # the checkpoints' safetensors totals, equal to transformers' Llama4ForConditionalGeneration on
    # the same config.json (tests/test_hf_vision.py). The model cards' rounded 109B and 400B total,
    # 17B active: the language model's active parameters, and Maverick's 400B its 400.7B text model
    "llama-4-scout": (108_641_793_536, 18_044_827_136),
    "llama-4-maverick": (401_583_781_376, 18_056_623_616),
    "granite-4.0-h-tiny": (6_939_037_248, 1_465_470_528),  # the checkpoint's count
    "nemotron-nano-9b-v2": (8_888_227_328, 8_888_227_328),  # transformers' count (Hugging Face lists 8.89B)
    # transformers' own count from the published config.json (the card: 80B total, 3B active)
    "qwen3-next-80b-a3b": (79_674_391_296, 3_874_929_408),
    # transformers' own count from the published config.json (hf/kimi-linear-48b-a3b.json; the card: 48B total,
    # 3B active)
    "kimi-linear-48b-a3b": (49_122_681_728, 3_484_459_904),
}

# The MoE model cards' rounded figures, each under its own convention: total and active in
# billions, digits after the point, rounded or truncated (Qwen), and whether "active" leaves out
# the token embedding.
PUBLISHED_ROUNDED = {
    "qwen3-30b-a3b": ("30.5", "3.3", 1, "truncate", False),  # Qwen3-30B-A3B card: 30.5B total, 3.3B activated
    "deepseek-v3": ("671", "37", 0, "round", True),  # DeepSeek-V3 report: 671B total, 37B activated
    "gpt-oss-20b": ("20.91", "3.61", 2, "round", True),  # gpt-oss model card: 20.91B total, 3.61B active
    "gpt-oss-120b": ("116.83", "5.13", 2, "round", True),  # 116.83B total, 5.13B active
    "glm-4.5-air": ("106", "12", 0, "truncate", True),  # GLM-4.5 card: 106B total, 12B active
}


BASE = dict(name="t", vocab_size=1000, context_length=64, d_model=64, n_layers=2, n_heads=4, d_ff=256)


def cfg(**kw):
    return from_dict({**BASE, **kw})


def test_every_bundled_model_has_a_golden_total():
    assert sorted(GOLDEN) == bundled_names()


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_golden_totals(name):
    p = count_params(load_bundled(name))
    assert (p.total, p.active) == GOLDEN[name]
    assert sum(p.components.values()) == p.total
    assert p.embedding + p.non_embedding == p.total


@pytest.mark.parametrize("name", [name for name, (total, active) in GOLDEN.items() if total != active])
def test_active_is_the_total_less_the_experts_a_token_does_not_reach(name):
    """The golden active counts, which no source prints exactly, from the totals and each config's own numbers:
    every MoE layer leaves out E - k routed experts of 3 x d x f weights (gated; 2 x d x f otherwise) and, with
    expert biases, their biases."""
    cfg = load_bundled(name)
    moe = cfg.moe
    d, f, gated = cfg.d_model, moe.expert_d_ff or cfg.d_ff, ACTIVATIONS[cfg.activation].gated
    per_expert = (3 if gated else 2) * d * f + (((2 if gated else 1) * f + d) if moe.expert_bias else 0)
    layers = sum(moe.is_moe_layer(i) for i in range(cfg.n_layers))
    total, active = GOLDEN[name]
    assert active == total - layers * (moe.num_experts - moe.experts_per_token) * per_expert


@pytest.mark.parametrize("name", sorted(PUBLISHED_ROUNDED))
def test_published_rounded_figures(name):
    total, active, digits, how, without_embedding = PUBLISHED_ROUNDED[name]
    model = load_bundled(name)
    p = count_params(model)

    def billions(n: int) -> str:
        scaled = n / 10 ** (9 - digits)
        return f"{(math.floor(scaled) if how == 'truncate' else round(scaled)) / 10 ** digits:.{digits}f}"

    act = p.active - (model.vocab_size * model.d_model if without_embedding else 0)
    assert (billions(p.total), billions(act)) == (total, active)


def test_user_yaml_gpt2_xl_shapes_rmsnorm_rope_untied(tmp_path, run):
    path = tmp_path / "xl.yaml"
    path.write_text("name: xl-variant\nvocab_size: 50257\ncontext_length: 1024\nd_model: 1600\n"
                    "n_layers: 48\nn_heads: 25\nd_ff: 6400\nactivation: gelu\nnorm: rmsnorm\n"
                    "position: rope\n")
    result = run("params", path, "--json")
    assert result.exit_code == 0, result.stderr
    # 48 x (4 d^2 + 2 d f + 2 d) + an untied head and embedding 2 V d + the final norm d
    total = 48 * (4 * 1600**2 + 2 * 1600 * 6400 + 2 * 1600) + 2 * 50257 * 1600 + 1600
    assert json.loads(result.stdout)["total"] == total == 1_635_537_600


def test_mixtral_json(run):
    result = run("params", "mixtral-8x7b", "--json")
    data = json.loads(result.stdout)
    assert (data["total"], data["active"]) == (46_702_792_704, 12_879_925_248)
    assert data["model"] == "mixtral-8x7b" and sum(data["components"].values()) == data["total"]


# Closed forms for each variant against a base model of d=64, L=2, h=4, d_ff=256, V=1000.
d, L, V, ff, ctx = 64, 2, 1000, 256, 64
BASE_TOTAL = V * d + ctx * d + L * (4 * d * d + 2 * d * ff + 2 * 2 * d) + 2 * d + V * d


@pytest.mark.parametrize("kw, delta", [
    ({}, 0),
    ({"tie_embeddings": True}, -V * d),
    ({"lm_head_bias": True}, V),
    ({"tie_embeddings": True, "lm_head_bias": True}, -V * d + V),
    ({"qkv_bias": True}, L * 3 * d),
    ({"out_bias": True}, L * d),
    ({"mlp_bias": True}, L * (ff + d)),
    ({"position": "rope"}, -ctx * d),
    ({"position": "sinusoidal"}, -ctx * d),
    ({"position": "alibi"}, -ctx * d),
    ({"position": "none"}, -ctx * d),
    ({"position": "relative"}, -ctx * d + 32 * 4),
    ({"position": "relative", "relative_buckets": 8}, -ctx * d + 8 * 4),
    ({"norm": "rmsnorm"}, -(2 * L + 1) * d),
    ({"norm_bias": False}, -(2 * L + 1) * d),
    ({"final_norm": False}, -2 * d),
    ({"embedding_norm": True}, 2 * d),
    ({"embedding_norm": True, "norm": "rmsnorm"}, d - (2 * L + 1) * d),
    ({"position_offset": 2}, 2 * d),  # OPT, BioGPT: rows before position 0
    ({"norm_placement": "post"}, 0),
    ({"norm_placement": "sandwich"}, L * 2 * 2 * d),
    ({"parallel_block": True}, -L * 2 * d),
    ({"parallel_block": True, "parallel_norms": 2}, 0),
    ({"parallel_block": True, "norm_placement": "sandwich"}, L * 2 * d),
    ({"qk_norm": True}, L * 2 * 2 * 16),
    ({"qk_norm": True, "norm": "rmsnorm"}, L * 2 * 16 - (2 * L + 1) * d),
    ({"n_kv_heads": 2}, -L * 2 * d * (d // 2)),
    ({"n_kv_heads": 1}, -L * 2 * d * (d - 16)),
    ({"head_dim": 32}, L * 4 * d * (128 - d)),
    ({"activation": "swiglu"}, L * d * ff),
    ({"activation": "geglu", "mlp_bias": True}, L * (d * ff + ff) + L * (ff + d)),
    ({"activation": "relu"}, 0),
    ({"activation": "sqrelu"}, 0),
    ({"activation": "sqreglu"}, L * d * ff),
    ({"sub_norms": True}, L * (d + ff) * 2),  # BitNet: before o (h*hd = d) and down (d_ff), weight and bias
    ({"sub_norms": True, "norm": "rmsnorm"}, L * (d + ff) - (2 * L + 1) * d),
])
def test_variant_closed_forms(kw, delta):
    p = count_params(cfg(**kw))
    assert p.total == BASE_TOTAL + delta
    assert p.active == p.total
    assert sum(p.components.values()) == p.total


def one_layer(p):
    """The per-layer parameters of a model whose layers are all alike."""
    (group, per_layer), = p.groups
    return per_layer


def test_head_dim_not_dividing_d_model():
    p = count_params(cfg(d_model=60, head_dim=16, n_heads=4))
    attn = 60 * 64 + 2 * 60 * 64 + 64 * 60
    layer = one_layer(p)
    assert layer["attention/q"] + layer["attention/k"] + layer["attention/v"] + layer["attention/o"] == attn


def test_moe_total_and_active():
    E, k, s, f = 8, 2, 1, 128
    p = count_params(cfg(activation="swiglu", moe={"num_experts": E, "experts_per_token": k,
                                                  "expert_d_ff": f, "shared_experts": s}))
    expert = 3 * d * f
    layer = one_layer(p)
    assert layer["moe/router"] == d * E
    assert layer["moe/experts"] == E * expert
    assert layer["moe/shared_experts"] == s * expert
    assert "mlp/up" not in layer
    assert p.total - p.active == L * (E - k) * expert


def test_weight_bytes():
    assert [weight_bytes(3, dt) for dt in ("fp32", "bf16", "fp16", "fp8", "int8", "int4")] == \
        [12, 6, 6, 3, 3, 2]


# The new keys against the same base (layernorm with weight and bias: 2 parameters per element;
# h = 4 heads of hd = 16; learned positions ctx * d, dropped by rope).
MLA = {"kv_lora_rank": 8, "qk_nope_head_dim": 4, "qk_rope_head_dim": 2, "v_head_dim": 4}
MHA_ATTN = 4 * d * d
# q: d -> h*(4+2); kv_a: d -> 8+2; its norm over 8; kv_b: 8 -> h*(4+4); o: h*4 -> d
MLA_ATTN = d * 4 * 6 + d * 10 + 2 * 8 + 8 * 4 * 8 + 4 * 4 * d
# q_a: d -> 6, its norm over 6, q_b: 6 -> h*(4+2)
MLA_Q_LORA = d * 6 + 2 * 6 + 6 * 4 * 6 - d * 4 * 6
MOE = {"num_experts": 4, "experts_per_token": 2, "expert_d_ff": 32}
EXPERT = 2 * d * 32  # up and down (gelu)


@pytest.mark.parametrize("kw, delta, inactive", [
    ({"attention_sinks": True}, L * 4, 0),
    ({"attention_gate": True, "qkv_bias": True}, L * (d * 4 * 16 + 3 * 4 * 16), 0),  # the gate has no bias
    ({"activation": "xielu"}, L * 4, 0),  # alpha_p, alpha_n, beta, eps per layer
    ({"attn_logit_softcap": 50, "final_logit_softcap": 30, "embedding_scale": 8.0}, 0, 0),
    ({"sliding_window": 16, "layer_types": ["sliding", "full"]}, 0, 0),
    ({"position": "rope", "rope_layers": [False, True]}, -ctx * d, 0),
    ({"position": "rope", "rotary_fraction": 0.25}, -ctx * d, 0),
    ({"norm_weight": False}, -(2 * L + 1) * d, 0),
    ({"norm_weight": False, "norm_bias": False}, -(2 * L + 1) * 2 * d, 0),
    ({"norm_weight": False, "norm_bias": False, "qk_norm": "full"}, -(2 * L + 1) * 2 * d, 0),
    ({"qk_norm": "head"}, L * 2 * 2 * 16, 0),
    ({"qk_norm": "full"}, L * 2 * (4 * 16 + 4 * 16), 0),
    ({"qk_norm": "full", "n_kv_heads": 2}, L * 2 * (4 * 16 + 2 * 16) - L * 2 * d * 32, 0),
    ({"qk_norm": "full", "norm": "rmsnorm"}, L * (4 * 16 + 4 * 16) - (2 * L + 1) * d, 0),
    ({"norm_placement": "post_branch"}, 0, 0),
    ({"norm_placement": "post_branch", "qk_norm": "head"}, L * 2 * 2 * 16, 0),
    ({"attention": "mla", "mla": MLA}, L * (MLA_ATTN - MHA_ATTN), 0),
    ({"attention": "mla", "mla": {**MLA, "q_lora_rank": 6}}, L * (MLA_ATTN + MLA_Q_LORA - MHA_ATTN), 0),
    ({"attention": "mla", "mla": MLA, "qkv_bias": True, "out_bias": True},  # q and kv_a; o
     L * (MLA_ATTN - MHA_ATTN + 4 * 6 + 10 + d), 0),
    ({"attention": "mla", "mla": {**MLA, "q_lora_rank": 6}, "qkv_bias": True},  # q_a, not q_b; kv_a
     L * (MLA_ATTN + MLA_Q_LORA - MHA_ATTN + 6 + 10), 0),
    ({"attention": "mla", "mla": MLA, "attention_sinks": True}, L * (MLA_ATTN - MHA_ATTN + 4), 0),
    # MoE on every layer, on layer 1 only (first dense layer, or every second layer)
    ({"moe": MOE}, L * (d * 4 + 4 * EXPERT - 2 * d * ff), L * 2 * EXPERT),
    ({"moe": {**MOE, "first_dense_layers": 1}}, d * 4 + 4 * EXPERT - 2 * d * ff, 2 * EXPERT),
    ({"moe": {**MOE, "step": 2}}, d * 4 + 4 * EXPERT - 2 * d * ff, 2 * EXPERT),
    ({"moe": {**MOE, "step": 2}, "mlp_bias": True},  # mlp_bias: the dense layer only
     d * 4 + 4 * EXPERT - 2 * d * ff + (ff + d), 2 * EXPERT),
    ({"moe": {**MOE, "expert_bias": True}}, L * (d * 4 + 4 * (EXPERT + 32 + d) - 2 * d * ff),
     L * 2 * (EXPERT + 32 + d)),
    ({"moe": {**MOE, "router_bias": True}}, L * (d * 4 + 4 + 4 * EXPERT - 2 * d * ff), L * 2 * EXPERT),
    ({"moe": {**MOE, "shared_experts": 2}}, L * (d * 4 + 6 * EXPERT - 2 * d * ff), L * 2 * EXPERT),
    ({"moe": {**MOE, "shared_experts": 2, "shared_expert_d_ff": 16, "shared_expert_gate": True}},
     L * (d * 4 + 4 * EXPERT + 2 * 2 * d * 16 + d - 2 * d * ff), L * 2 * EXPERT),
    ({"moe": {**MOE, "shared_experts": 1, "shared_expert_d_ff": 16, "expert_bias": True}},
     L * (d * 4 + 4 * (EXPERT + 32 + d) + 2 * d * 16 + 16 + d - 2 * d * ff), L * 2 * (EXPERT + 32 + d)),
    ({"moe": {**MOE, "shared_experts": 1}, "activation": "swiglu"},
     L * (d * 4 + 5 * 3 * d * 32 - 2 * d * ff), L * 2 * 3 * d * 32),
])
def test_new_key_closed_forms(kw, delta, inactive):
    p = count_params(cfg(**kw))
    assert p.total == BASE_TOTAL + delta
    assert p.total - p.active == inactive
    assert sum(p.components.values()) == p.total
