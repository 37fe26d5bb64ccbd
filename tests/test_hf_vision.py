"""Multimodal Hugging Face checkpoints, proven against transformers' own modeling code: the
published config.json of Gemma 3 27B (-it) and Qwen2.5-VL-7B-Instruct give the checkpoints'
published totals, and for every multimodal family the config written by transformers' config class
from a cited checkpoint's hyperparameters gives transformers' state dict in total, for the language
model, the vision tower and the projector."""

from __future__ import annotations

import json
import logging

import pytest
import torch
import transformers

from llmcalc.analysis.count.flops import count_flops
from llmcalc.analysis.count.params import count_params
from llmcalc.analysis.errors import ConfigError
from llmcalc.analysis.load.catalog import load_model, load_path
from llmcalc.analysis.load.hf import unclassified
from llmcalc.analysis.load.hf.vision import MULTIMODAL
from llmcalc.analysis.spec import RunSpec
from llmcalc.analysis.verify import against
from tests.tower import image_flops

pytestmark = pytest.mark.reference

logging.getLogger("transformers").setLevel(logging.ERROR)

# google/gemma-3-27b-it's config.json as published (transformers 4.50's layout)
GEMMA3_27B_IT = {
    "architectures": ["Gemma3ForConditionalGeneration"], "boi_token_index": 255999, "eoi_token_index": 256000,
    "eos_token_id": [1, 106], "image_token_index": 262144, "initializer_range": 0.02, "mm_tokens_per_image": 256,
    "model_type": "gemma3",
    "text_config": {"head_dim": 128, "hidden_size": 5376, "intermediate_size": 21504, "model_type": "gemma3_text",
                    "num_attention_heads": 32, "num_hidden_layers": 62, "num_key_value_heads": 16,
                    "query_pre_attn_scalar": 168, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
                    "sliding_window": 1024},
    "torch_dtype": "bfloat16", "transformers_version": "4.50.0.dev0",
    "vision_config": {"hidden_size": 1152, "image_size": 896, "intermediate_size": 4304,
                      "model_type": "siglip_vision_model", "num_attention_heads": 16, "num_hidden_layers": 27,
                      "patch_size": 14, "vision_use_head": False}}
# Qwen/Qwen2.5-VL-7B-Instruct's config.json as published: the language model's keys at the top level
QWEN2_5_VL_7B = {
    "architectures": ["Qwen2_5_VLForConditionalGeneration"], "attention_dropout": 0.0, "bos_token_id": 151643,
    "eos_token_id": 151645, "vision_start_token_id": 151652, "vision_end_token_id": 151653,
    "vision_token_id": 151654, "image_token_id": 151655, "video_token_id": 151656, "hidden_act": "silu",
    "hidden_size": 3584, "initializer_range": 0.02, "intermediate_size": 18944, "max_position_embeddings": 128000,
    "max_window_layers": 28, "model_type": "qwen2_5_vl", "num_attention_heads": 28, "num_hidden_layers": 28,
    "num_key_value_heads": 4, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 32768,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "transformers_version": "4.41.2", "use_cache": True,
    "use_sliding_window": False,
    "vision_config": {"depth": 32, "hidden_act": "silu", "hidden_size": 1280, "intermediate_size": 3420,
                      "num_heads": 16, "in_chans": 3, "out_hidden_size": 3584, "patch_size": 14,
                      "spatial_merge_size": 2, "spatial_patch_size": 14, "window_size": 112,
                      "fullatt_block_indexes": [7, 15, 23, 31], "tokens_per_second": 2, "temporal_patch_size": 2},
    "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}, "vocab_size": 152064}
# Llama 4's vision model, adapter and projector, the same in Scout and Maverick as published
# (meta-llama/Llama-4-Scout-17B-16E-Instruct and Llama-4-Maverick-17B-128E-Instruct, config.json)
LLAMA4_VISION = {"attention_dropout": 0.0, "hidden_act": "gelu", "hidden_size": 1408, "image_size": 336,
                 "initializer_range": 0.02, "intermediate_size": 5632, "model_type": "llama4_vision_model",
                 "multi_modal_projector_bias": False, "norm_eps": 1e-05, "num_attention_heads": 16, "num_channels": 3,
                 "num_hidden_layers": 34, "patch_size": 14, "pixel_shuffle_ratio": 0.5, "projector_dropout": 0.0,
                 "projector_input_dim": 4096, "projector_output_dim": 4096, "rope_theta": 10000,
                 "vision_feature_layer": -1, "vision_feature_select_strategy": "default", "vision_output_dim": 4096}
_LLAMA4_TEXT = {"attention_bias": False, "attention_chunk_size": 8192, "attention_dropout": 0.0,
                "bos_token_id": 200000, "eos_token_id": [200001, 200007, 200008], "for_llm_compressor": False,
                "head_dim": 128, "hidden_act": "silu", "hidden_size": 5120, "initializer_range": 0.02,
                "intermediate_size": 8192, "intermediate_size_mlp": 16384, "model_type": "llama4_text",
                "num_attention_heads": 40, "num_experts_per_tok": 1, "num_hidden_layers": 48,
                "num_key_value_heads": 8, "output_router_logits": False, "pad_token_id": 200018, "rms_norm_eps": 1e-05,
                "rope_theta": 500000.0, "router_aux_loss_coef": 0.001, "router_jitter_noise": 0.0,
                "torch_dtype": "bfloat16", "use_cache": True, "vocab_size": 202048}
_LLAMA4_TOP = {"architectures": ["Llama4ForConditionalGeneration"], "boi_token_index": 200080,
               "eoi_token_index": 200081, "image_token_index": 200092, "model_type": "llama4",
               "tie_word_embeddings": False, "torch_dtype": "bfloat16", "transformers_version": "4.51.0.dev0"}
# Scout: 16 experts in every layer, every fourth layer NoPE, L2 qk norms, llama3 RoPE scaling
LLAMA4_SCOUT = {**_LLAMA4_TOP, "vision_config": LLAMA4_VISION, "text_config": {
    **_LLAMA4_TEXT, "interleave_moe_layer_step": 1, "max_position_embeddings": 10485760, "num_local_experts": 16,
    "moe_layers": list(range(48)), "no_rope_layers": [int((i + 1) % 4 != 0) for i in range(48)],
    "rope_scaling": {"factor": 16.0, "high_freq_factor": 1.0, "low_freq_factor": 1.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"}, "use_qk_norm": True}}
# Maverick: 128 experts in every second layer (the others dense, intermediate_size_mlp wide), no qk norm
LLAMA4_MAVERICK = {**_LLAMA4_TOP, "vision_config": LLAMA4_VISION, "text_config": {
    **_LLAMA4_TEXT, "interleave_moe_layer_step": 2, "max_position_embeddings": 1048576, "num_local_experts": 128,
    "rope_scaling": None, "use_qk_norm": False}}
# Qwen/Qwen3.5-27B's config.json as published (https://huggingface.co/Qwen/Qwen3.5-27B/blob/main/config.json, quoted
# whole in ModelCloud/GPTQModel's issue thread of 2026-03-19): Gated DeltaNet and gated attention layers, Qwen3-VL's
# tower without DeepStack (its empty deepstack_visual_indexes read by nothing)
QWEN3_5_27B = {
    "architectures": ["Qwen3_5ForConditionalGeneration"], "image_token_id": 248056, "model_type": "qwen3_5",
    "text_config": {
        "attention_bias": False, "attention_dropout": 0.0, "attn_output_gate": True, "dtype": "bfloat16",
        "eos_token_id": 248044, "full_attention_interval": 4, "head_dim": 256, "hidden_act": "silu",
        "hidden_size": 5120, "initializer_range": 0.02, "intermediate_size": 17408,
        "layer_types": ["linear_attention"] * 3 + ["full_attention"], "linear_conv_kernel_dim": 4,
        "linear_key_head_dim": 128, "linear_num_key_heads": 16, "linear_num_value_heads": 48,
        "linear_value_head_dim": 128, "max_position_embeddings": 262144, "mlp_only_layers": [],
        "model_type": "qwen3_5_text", "mtp_num_hidden_layers": 1, "mtp_use_dedicated_embeddings": False,
        "num_attention_heads": 24, "num_hidden_layers": 64, "num_key_value_heads": 4, "rms_norm_eps": 1e-06,
        "use_cache": True, "vocab_size": 248320, "mamba_ssm_dtype": "float32",
        "rope_parameters": {"mrope_interleaved": True, "mrope_section": [11, 11, 10], "rope_type": "default",
                            "rope_theta": 10000000, "partial_rotary_factor": 0.25}},
    "tie_word_embeddings": False, "transformers_version": "4.57.0.dev0", "video_token_id": 248057,
    "vision_config": {"deepstack_visual_indexes": [], "depth": 27, "hidden_act": "gelu_pytorch_tanh",
                      "hidden_size": 1152, "in_channels": 3, "initializer_range": 0.02, "intermediate_size": 4304,
                      "model_type": "qwen3_5", "num_heads": 16, "num_position_embeddings": 2304,
                      "out_hidden_size": 5120, "patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 2},
    "vision_end_token_id": 248054, "vision_start_token_id": 248053}
QWEN3_5_27B["text_config"]["layer_types"] *= 16  # the published file lists all 64

# google/gemma-4-26B-A4B-it's and gemma-4-31B-it's config.json as published, the keys that count: the same vision
# tower (27 layers 1152 wide, 16 heads of 72, pooled 3 x 3, standardized), no audio tower
GEMMA4_VISION = {"model_type": "gemma4_vision", "hidden_size": 1152, "intermediate_size": 4304,
                 "num_hidden_layers": 27, "num_attention_heads": 16, "num_key_value_heads": 16, "head_dim": 72,
                 "patch_size": 16, "pooling_kernel_size": 3, "position_embedding_size": 10240,
                 "default_output_length": 280, "standardize": True, "use_clipped_linears": False,
                 "rms_norm_eps": 1e-06, "hidden_activation": "gelu_pytorch_tanh",
                 "rope_parameters": {"rope_theta": 100.0, "rope_type": "default"}}
_GEMMA4_TEXT = {"model_type": "gemma4_text", "vocab_size": 262144, "head_dim": 256, "global_head_dim": 512,
                "attention_k_eq_v": True, "sliding_window": 1024, "max_position_embeddings": 262144,
                "final_logit_softcapping": 30.0, "hidden_size_per_layer_input": 0, "num_kv_shared_layers": 0,
                "hidden_activation": "gelu_pytorch_tanh", "rms_norm_eps": 1e-06, "tie_word_embeddings": True,
                "rope_parameters": {"full_attention": {"partial_rotary_factor": 0.25, "rope_theta": 1000000.0,
                                                       "rope_type": "proportional"},
                                    "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"}}}
_GEMMA4_TOP = {"architectures": ["Gemma4ForConditionalGeneration"], "model_type": "gemma4", "audio_config": None,
               "boi_token_id": 255999, "eoi_token_id": 258882, "image_token_id": 258880, "video_token_id": 258884,
               "tie_word_embeddings": True, "dtype": "bfloat16", "vision_config": GEMMA4_VISION}
GEMMA4_26B_A4B_IT = {**_GEMMA4_TOP, "text_config": {
    **_GEMMA4_TEXT, "hidden_size": 2816, "intermediate_size": 2112, "num_hidden_layers": 30,
    "num_attention_heads": 16, "num_key_value_heads": 8, "num_global_key_value_heads": 2, "enable_moe_block": True,
    "num_experts": 128, "top_k_experts": 8, "moe_intermediate_size": 704,
    "layer_types": (["sliding_attention"] * 5 + ["full_attention"]) * 5}}
GEMMA4_31B_IT = {**_GEMMA4_TOP, "text_config": {
    **_GEMMA4_TEXT, "hidden_size": 5376, "intermediate_size": 21504, "num_hidden_layers": 60,
    "num_attention_heads": 32, "num_key_value_heads": 16, "num_global_key_value_heads": 4, "enable_moe_block": False,
    "layer_types": (["sliding_attention"] * 5 + ["full_attention"]) * 10}}
# Published config.json files whose checkpoint total is not pinned here: (total, tower, projector) as transformers'
# model counts them. Gemma 4: the language models' 25,233,141,790 and 30,697,345,340 (the presets gemma-4-26b-a4b,
# gemma-4-31b), the tower's 569,550,384 and embed_vision's 1152 x d_model; Qwen3.5-27B: the language model's
# 26,895,998,464 (the preset qwen3.5-27b), Qwen3-VL's large tower and its merger to 5120
TRANSFORMERS_TOTALS = [("gemma-4-26B-A4B-it", GEMMA4_26B_A4B_IT, 25_805_936_206, 569_550_384, 3_244_032),
                       ("gemma-4-31B-it", GEMMA4_31B_IT, 31_273_088_876, 569_550_384, 6_193_152),
                       ("Qwen3.5-27B", QWEN3_5_27B, 27_356_728_560, 415_891_440, 44_838_656)]


@pytest.mark.parametrize("name, raw, total, tower, projector", TRANSFORMERS_TOTALS,
                         ids=[g[0] for g in TRANSFORMERS_TOTALS])
def test_published_config_equals_transformers(tmp_path, name, raw, total, tower, projector):
    path = tmp_path / name / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(raw))
    p = count_params(load_path(path))
    assert (p.total, p.vision_tower, p.projector) == (total, tower, projector)
    config = transformers.AutoConfig.for_model(raw["model_type"], **{k: v for k, v in raw.items() if k != "model_type"})
    assert _check(tmp_path, config) == total


# The checkpoints' totals: the safetensors parameter counts Hugging Face reports for
# meta-llama/Llama-4-Scout-17B-16E-Instruct (BF16 108,641,793,536) and Llama-4-Maverick-17B-128E-Instruct
PUBLISHED = [("gemma-3-27b-it", GEMMA3_27B_IT, 27_432_406_640),
             ("Qwen2.5-VL-7B-Instruct", QWEN2_5_VL_7B, 8_292_166_656),
             ("Llama-4-Scout-17B-16E-Instruct", LLAMA4_SCOUT, 108_641_793_536),
             ("Llama-4-Maverick-17B-128E-Instruct", LLAMA4_MAVERICK, 401_583_781_376)]

# model_type -> (checkpoint, its hyperparameters, written by transformers' config class)
CHECKPOINTS = {
    "gemma3": ("google/gemma-3-4b-it", dict(
        text_config=dict(hidden_size=2560, intermediate_size=10240, num_hidden_layers=34, num_attention_heads=8,
                         num_key_value_heads=4, head_dim=256, sliding_window=1024, query_pre_attn_scalar=256),
        vision_config=dict(hidden_size=1152, image_size=896, intermediate_size=4304, num_attention_heads=16,
                           num_hidden_layers=27, patch_size=14, vision_use_head=False))),
    "llava": ("llava-hf/llava-1.5-7b-hf", dict(
        text_config=dict(model_type="llama", vocab_size=32064, hidden_size=4096, intermediate_size=11008,
                         num_hidden_layers=32, num_attention_heads=32, max_position_embeddings=4096),
        vision_config=dict(hidden_size=1024, intermediate_size=4096, num_hidden_layers=24, num_attention_heads=16,
                           image_size=336, patch_size=14, projection_dim=768),
        vision_feature_layer=-2, image_token_index=32000)),
    "mistral3": ("mistralai/Mistral-Small-3.1-24B-Instruct-2503", dict(
        text_config=dict(model_type="mistral", vocab_size=131072, hidden_size=5120, intermediate_size=32768,
                         num_hidden_layers=40, num_attention_heads=32, num_key_value_heads=8, head_dim=128,
                         max_position_embeddings=131072, sliding_window=None),
        vision_config=dict(hidden_size=1024, intermediate_size=4096, num_hidden_layers=24, num_attention_heads=16,
                           image_size=1540, patch_size=14, hidden_act="silu"),
        spatial_merge_size=2, multimodal_projector_bias=False, tie_word_embeddings=False)),
    "qwen2_5_vl": ("Qwen/Qwen2.5-VL-3B-Instruct", dict(
        text_config=dict(vocab_size=151936, hidden_size=2048, intermediate_size=11008, num_hidden_layers=36,
                         num_attention_heads=16, num_key_value_heads=2, max_window_layers=70),
        vision_config=dict(depth=32, hidden_size=1280, intermediate_size=3420, num_heads=16, out_hidden_size=2048,
                           patch_size=14, spatial_merge_size=2, temporal_patch_size=2),
        tie_word_embeddings=True)),
    "qwen2_vl": ("Qwen/Qwen2-VL-2B-Instruct", dict(
        text_config=dict(vocab_size=151936, hidden_size=1536, intermediate_size=8960, num_hidden_layers=28,
                         num_attention_heads=12, num_key_value_heads=2, max_window_layers=28),
        vision_config=dict(depth=32, embed_dim=1280, hidden_size=1536, mlp_ratio=4, num_heads=16, patch_size=14,
                           spatial_merge_size=2, temporal_patch_size=2, hidden_act="quick_gelu"),
        tie_word_embeddings=True)),
    "idefics3": ("HuggingFaceM4/Idefics3-8B-Llama3", dict(
        text_config=dict(model_type="llama", vocab_size=128259, hidden_size=4096, intermediate_size=14336,
                         num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8),
        vision_config=dict(hidden_size=1152, intermediate_size=4304, num_hidden_layers=27, num_attention_heads=16,
                           image_size=364, patch_size=14),
        scale_factor=2)),
    "smolvlm": ("HuggingFaceTB/SmolVLM-256M-Instruct", dict(
        text_config=dict(model_type="llama", vocab_size=49280, hidden_size=576, intermediate_size=1536,
                         num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3),
        vision_config=dict(hidden_size=768, intermediate_size=3072, num_hidden_layers=12, num_attention_heads=12,
                           image_size=512, patch_size=16),
        scale_factor=4)),
    "llama4": ("meta-llama/Llama-4-Scout-17B-16E-Instruct", dict(
        text_config=dict(hidden_size=5120, intermediate_size=8192, intermediate_size_mlp=16384, num_hidden_layers=48,
                         num_attention_heads=40, num_key_value_heads=8, head_dim=128, vocab_size=202048,
                         num_local_experts=16, num_experts_per_tok=1, interleave_moe_layer_step=1,
                         attention_chunk_size=8192),
        vision_config=dict(hidden_size=1408, intermediate_size=5632, num_hidden_layers=34, num_attention_heads=16,
                           image_size=336, patch_size=14, pixel_shuffle_ratio=0.5, projector_input_dim=4096,
                           projector_output_dim=4096, vision_output_dim=4096))),
}
# Qwen3-VL's tower: 24 layers 1024 wide (2B, 4B) or 27 layers 1152 wide (8B and up, 30B-A3B), patches of 16 x 2 frames,
# a 48 x 48 grid of positions, DeepStack from three layers
_QWEN3_VL_SMALL = dict(depth=24, hidden_size=1024, intermediate_size=4096, num_heads=16, patch_size=16,
                       temporal_patch_size=2, spatial_merge_size=2, num_position_embeddings=2304,
                       deepstack_visual_indexes=[5, 11, 17])
_QWEN3_VL_LARGE = dict(depth=27, hidden_size=1152, intermediate_size=4304, num_heads=16, patch_size=16,
                       temporal_patch_size=2, spatial_merge_size=2, num_position_embeddings=2304)
CHECKPOINTS["qwen3_vl"] = ("Qwen/Qwen3-VL-2B-Instruct", dict(
    text_config=dict(vocab_size=151936, hidden_size=2048, intermediate_size=6144, num_hidden_layers=28,
                     num_attention_heads=16, num_key_value_heads=8, head_dim=128, max_position_embeddings=262144,
                     tie_word_embeddings=True),
    vision_config=dict(_QWEN3_VL_SMALL, out_hidden_size=2048), tie_word_embeddings=True))
CHECKPOINTS["qwen3_vl_moe"] = ("Qwen/Qwen3-VL-30B-A3B-Instruct", dict(
    text_config=dict(vocab_size=151936, hidden_size=2048, intermediate_size=6144, num_hidden_layers=48,
                     num_attention_heads=32, num_key_value_heads=4, head_dim=128, num_experts=128,
                     num_experts_per_tok=8, moe_intermediate_size=768, max_position_embeddings=262144,
                     tie_word_embeddings=False),
    vision_config=dict(_QWEN3_VL_LARGE, out_hidden_size=2048, deepstack_visual_indexes=[8, 16, 24])))
# Qwen3.5's: Qwen3-VL's large tower without DeepStack
CHECKPOINTS["qwen3_5"] = ("Qwen/Qwen3.5-27B", dict(
    text_config={k: v for k, v in QWEN3_5_27B["text_config"].items() if k not in ("model_type", "layer_types")},
    vision_config=dict(_QWEN3_VL_LARGE, out_hidden_size=5120)))
CHECKPOINTS["qwen3_5_moe"] = ("Qwen/Qwen3.5-35B-A3B (Qwen3_5MoeTextConfig's defaults are its shapes)", dict(
    text_config=dict(hidden_size=2048, num_hidden_layers=40, num_attention_heads=16, num_key_value_heads=2,
                     num_experts=256, num_experts_per_tok=8, moe_intermediate_size=512,
                     shared_expert_intermediate_size=512),
    vision_config=dict(_QWEN3_VL_LARGE, out_hidden_size=2048)))
CHECKPOINTS["gemma4"] = ("google/gemma-4-26B-A4B-it", dict(
    text_config={k: v for k, v in GEMMA4_26B_A4B_IT["text_config"].items() if k not in ("model_type", "layer_types")},
    vision_config={k: v for k, v in GEMMA4_VISION.items() if k != "model_type"}))
VARIANTS = [  # branches the checkpoints do not take
    ("llava", "two feature layers, a projector without bias, a tied head",
     dict(vision_feature_layer=[-2, -5], multimodal_projector_bias=False, tie_word_embeddings=True)),
    ("mistral3", "the class's defaults: a tied head, a projector with bias", dict(multimodal_projector_bias=True)),
    ("gemma4", "31B's language model without a vision_config: no tower", dict(
        text_config={k: v for k, v in GEMMA4_31B_IT["text_config"].items() if k != "model_type"})),
    ("gemma3", "the class's defaults, an untied head", dict(tie_word_embeddings=False,
                                                            vision_config=dict(vision_use_head=False))),
    ("llama4", "four by four patches shuffled into one, a head tied by text_config, every second layer MoE", dict(
        tie_word_embeddings=False,  # read by nothing: Llama 4 ties by its language model's flag
        text_config=dict(tie_word_embeddings=True, hidden_size=64, intermediate_size=48, intermediate_size_mlp=96,
                         num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                         vocab_size=1000,
                         num_local_experts=4, interleave_moe_layer_step=2, use_qk_norm=False),
        vision_config=dict(hidden_size=32, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
                           image_size=56, patch_size=7, pixel_shuffle_ratio=0.25, projector_input_dim=40,
                           projector_output_dim=40, vision_output_dim=40))),
]


def _state(model) -> dict:
    """What a checkpoint of ``model`` stores: its state dict (parameters and persistent buffers: Gemma 4's
    layer scalars and its tower's standardization), each storage once, under its first name."""
    out, seen = {}, set()
    for name, t in model.state_dict(keep_vars=True).items():
        if t.untyped_storage()._cdata not in seen:
            seen.add(t.untyped_storage()._cdata)
            out[name] = t
    return out


def _stored(model) -> int:
    return sum(t.numel() for t in _state(model).values())


def _parts(model) -> dict[str, int]:
    """transformers' model by llmcalc's parts: tied weights once, the projector wherever the family
    keeps it (Qwen-VL: the tower's merger, Qwen3-VL's DeepStack mergers; Llama 4: the tower's adapter too; Gemma 4:
    embed_vision)."""
    out = {"vision": 0, "projector": 0, "language model": 0}
    for name, p in _state(model).items():
        if ("multi_modal_projector" in name or ".merger." in name or ".connector." in name
                or ".vision_adapter." in name  # Llama 4: the tower's pixel-shuffle adapter
                or ".embed_vision." in name or ".deepstack_merger_list." in name):
            out["projector"] += p.numel()
        elif "vision_tower" in name or ".visual." in name or ".vision_model." in name \
                or name.startswith("vision_model."):  # Llama 4: the tower at the top level
            out["vision"] += p.numel()
        else:
            out["language model"] += p.numel()
    return out


def _check(tmp_path, config) -> int:
    data = config.to_dict()
    assert unclassified(data) == [], "keys transformers writes that no rule covers"
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    counted = count_params(load_path(path))
    with torch.device("meta"):
        model = transformers.AutoModelForImageTextToText.from_config(config)
    theirs = _parts(model)
    assert (counted.vision_tower, counted.projector, counted.language_model) == \
        (theirs["vision"], theirs["projector"], theirs["language model"])
    assert counted.total == _stored(model)
    return counted.total


@pytest.mark.parametrize("name, raw, published", PUBLISHED, ids=[p[0] for p in PUBLISHED])
def test_published_config_gives_the_published_total(tmp_path, name, raw, published):
    path = tmp_path / name / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(raw))
    cfg = load_path(path)
    assert (cfg.name, count_params(cfg).total) == (name, published)
    config = transformers.AutoConfig.for_model(raw["model_type"], **{k: v for k, v in raw.items()
                                                                     if k != "model_type"})
    assert _check(tmp_path, config) == published


@pytest.mark.parametrize("model_type", sorted(CHECKPOINTS))
def test_family_equals_transformers(tmp_path, model_type):
    _check(tmp_path, transformers.AutoConfig.for_model(model_type, **CHECKPOINTS[model_type][1]))


@pytest.mark.parametrize("model_type, what, hp", VARIANTS, ids=[v[1] for v in VARIANTS])
def test_variant_equals_transformers(tmp_path, model_type, what, hp):
    _check(tmp_path, transformers.AutoConfig.for_model(model_type, **hp))


def test_every_family_is_tested():
    assert set(CHECKPOINTS) == set(MULTIMODAL)


@pytest.mark.parametrize("change, key", [
    ({"vision_config": {**GEMMA3_27B_IT["vision_config"], "vision_use_head": True}}, "vision_config.vision_use_head"),
    ({"text_config": {**GEMMA3_27B_IT["text_config"], "hidden_size": "5376"}}, "text_config.hidden_size"),
    ({"text_config": {**GEMMA3_27B_IT["text_config"], "model_type": "nope"}}, "text_config.model_type"),
    ({"vision_config": [1]}, "vision_config"),
    ({"model_type": "mistral3", "vision_config": {}, "vision_feature_layer": [-1, -2]}, "vision_feature_layer"),
    ({"vision_config": {**GEMMA3_27B_IT["vision_config"], "patch_size": None}}, "vision_config.patch_size"),
])
def test_what_is_not_counted_is_refused_naming_the_key(tmp_path, change, key):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**GEMMA3_27B_IT, **change}))
    with pytest.raises(ConfigError) as err:
        load_path(path)
    assert err.value.key == key


@pytest.mark.parametrize("change, key", [
    ({"pixel_shuffle_ratio": 0.3}, "pixel_shuffle_ratio"),
    ({"intermediate_size": 4096}, "intermediate_size"),
    ({"projector_output_dim": 2048}, "projector_output_dim"),
    ({"vision_output_dim": 7680}, "vision_output_dim"),
])
def test_llama4_adapter_widths_must_chain(tmp_path, change, key):
    """Llama 4's adapter and projector whose widths do not chain (transformers builds them, but no
    image could pass) are refused, naming the key."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**LLAMA4_SCOUT, "vision_config": {**LLAMA4_VISION, **change}}))
    with pytest.raises(ConfigError) as err:
        load_path(path)
    assert err.value.key == "vision_config." + key


def test_qwen_vl_merger_must_reach_the_language_model(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**QWEN2_5_VL_7B, "vision_config": {**QWEN2_5_VL_7B["vision_config"],
                                                                  "out_hidden_size": 2048}}))
    with pytest.raises(ConfigError, match="out_hidden_size"):
        load_path(path)


@pytest.mark.parametrize("model_type", sorted(CHECKPOINTS))
def test_verify_against_transformers(model_type, tmp_path):
    """`verify --against transformers` on each family (2 layers of each model): every check exact,
    every module name mapped (the tower and the projector compared whole)."""
    hp = json.loads(json.dumps(CHECKPOINTS[model_type][1]))
    hp["text_config"]["num_hidden_layers"] = TEXT_DEPTHS.get(model_type, 2)
    _tower_depth(model_type, hp, 2)
    raw = transformers.AutoConfig.for_model(model_type, **hp).to_dict()
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    checks = against.against_transformers(load_model(str(path)), raw, 8, 1, str(path))
    assert [c for c in checks if not c.ok or "unmatched" in c.name] == []
    assert {"transformers/params/vision", "transformers/params/projector"} <= {c.name for c in checks}


# language layers kept: Qwen3.5's first attention layer is the fourth (transformers reads the cached length there)
TEXT_DEPTHS = {"qwen3_5": 4, "qwen3_5_moe": 4}


def _tower_depth(model_type: str, hp: dict, layers: int) -> None:
    """The tower ``layers`` deep (Qwen3-VL's DeepStack reading its first layers)."""
    v = hp["vision_config"]
    v["depth" if model_type.startswith("qwen") else "num_hidden_layers"] = layers
    if "deepstack_visual_indexes" in v:
        v["deepstack_visual_indexes"] = list(range(min(layers, len(v["deepstack_visual_indexes"]))))


def _shallow(model_type: str) -> dict:
    """The family's checkpoint config as transformers writes it, 2 layers of each model deep."""
    hp = json.loads(json.dumps(CHECKPOINTS[model_type][1]))
    hp["text_config"]["num_hidden_layers"] = TEXT_DEPTHS.get(model_type, 2)
    _tower_depth(model_type, hp, 2)
    return transformers.AutoConfig.for_model(model_type, **hp).to_dict()


def _totals(raw: dict, tmp_path) -> tuple:
    """(llmcalc's, transformers') parameter total of ``raw``, or "refused" (by llmcalc, naming a
    key; by transformers, when it cannot build the model or run text through it)."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    try:
        ours = count_params(load_path(path)).total
    except ConfigError:
        ours = "refused"
    return ours, _theirs(raw)


_THEIRS: dict[str, int | str] = {}


def _theirs(raw: dict) -> int | str:
    """transformers' parameter total of ``raw``'s model, or "refused"; once per config as ``build_hf``
    reads it (without the dtype: it builds in fp32): equal configs build equal models."""
    rest = {k: v for k, v in json.loads(json.dumps(raw)).items() if k not in ("model_type", "dtype", "torch_dtype")}
    try:
        key = transformers.CONFIG_MAPPING[raw["model_type"]](**rest).to_json_string(use_diff=False)
    except Exception:  # the config class refuses it: build_hf does, measured below
        key = None
    if key is None or key not in _THEIRS:
        try:
            model = against.build_hf(json.loads(json.dumps(raw)))
            against.measure_kv_bytes(model, 1, 4)
            theirs = _stored(model)
        except Exception:  # transformers refuses to build or run it
            theirs = "refused"
        if key is None:
            return theirs
        _THEIRS[key] = theirs
    return _THEIRS[key]


# What llmcalc refuses though transformers builds it and runs text through it: SigLIP's pooling
# head (Gemma 3's default vision_config has it), a Qwen-VL merger whose output is not the language
# model's width (an image could not join the text), Llama 4 widths that do not chain
REFUSED = {"gemma3": {"vision_config dropped", "vision_config.vision_use_head dropped"},
           "qwen2_vl": {"text_config dropped", "vision_config dropped", "vision_config.hidden_size dropped"},
           "qwen2_5_vl": {"text_config dropped", "vision_config dropped", "vision_config.out_hidden_size dropped"},
           # Llama4VisionConfig's defaults: a tower 768 wide whose adapter takes 5632 (4 x 1408) and a
           # projector from 7680; the adapter's output is 4096
           "llama4": {"vision_config dropped", "vision_config.hidden_size dropped",
                      "vision_config.vision_output_dim dropped"},
           # Qwen3-VL and Qwen3.5: a merger whose out_hidden_size is not the language model's width (the classes'
           # defaults: 3584); DeepStack from layers the (2-layer) tower does not have (the class's default 8, 16, 24:
           # transformers builds their mergers and never runs them)
           "qwen3_vl": {"text_config dropped", "text_config.hidden_size dropped", "vision_config dropped",
                        "vision_config.out_hidden_size dropped", "vision_config.deepstack_visual_indexes dropped"},
           "qwen3_vl_moe": {"vision_config dropped", "vision_config.out_hidden_size dropped",
                            "vision_config.deepstack_visual_indexes dropped"},
           "qwen3_5": {"text_config dropped", "text_config.hidden_size dropped", "vision_config dropped",
                       "vision_config.out_hidden_size dropped"},
           "qwen3_5_moe": {"vision_config dropped", "vision_config.out_hidden_size dropped"},
           # Gemma 4: Gemma4TextConfig's default hidden_size_per_layer_input (256) turns on per-layer embeddings;
           # Gemma4VisionConfig's heads (12 of 64, 12 K/V heads) do not span a 1152-wide tower, nor 16 of 64
           "gemma4": {"text_config dropped", "text_config.hidden_size_per_layer_input dropped",
                      "vision_config.hidden_size dropped", "vision_config.num_attention_heads dropped",
                      "vision_config.head_dim dropped", "vision_config.num_key_value_heads dropped"}}


@pytest.mark.slow
@pytest.mark.parametrize("model_type", sorted(CHECKPOINTS))
def test_left_out_keys_read_as_transformers(model_type, tmp_path):
    """Each key of the top level, of text_config and of vision_config left out: llmcalc reads the
    class's default as transformers does (the same total), or both refuse the config."""
    raw = _shallow(model_type)
    variants = {f"{key} dropped": {k: v for k, v in raw.items() if k != key} for key in raw}
    for nested in ("text_config", "vision_config"):
        for key in raw[nested]:
            if key not in ("model_type", "num_hidden_layers", "depth"):  # the depth: a 2-layer model stays one
                variants[f"{nested}.{key} dropped"] = {**raw, nested: {k: v for k, v in raw[nested].items()
                                                                      if k != key}}
    differ = {name: t for name, data in variants.items() if (t := _totals(data, tmp_path))[0] != t[1]}
    assert {name for name, t in differ.items() if t[0] != "refused"} == set()
    assert set(differ) == REFUSED.get(model_type, set())


# --- images through the tower: llmcalc = the reference (FlopCounterMode) = transformers --------------

def _vision_sums(d: dict) -> dict:
    return {w: sum(v for k, v in d.items() if k.split("/")[0] == w) for w in ("vision", "projector")}


def _small_tower(model_type: str) -> dict:
    """The family's checkpoint config, 1 language layer, 2 tower layers, and (for the families whose
    transformers model cannot run on meta: data-dependent image handling) narrow widths, on the CPU."""
    hp = json.loads(json.dumps(CHECKPOINTS[model_type][1]))
    hp["text_config"]["num_hidden_layers"] = 1
    v = hp["vision_config"]
    _tower_depth(model_type, hp, 2)
    if model_type == "gemma4":  # 4 heads of 16 (below), 2 x 2 pooling, 4 experts: the CPU runs them with weights
        v.update(head_dim=16, num_key_value_heads=4, pooling_kernel_size=2, position_embedding_size=16)
        hp["text_config"].update(num_experts=4, top_k_experts=2, moe_intermediate_size=24, head_dim=16,
                                 global_head_dim=32, num_key_value_heads=2, num_global_key_value_heads=1)
    if model_type not in ON_META:
        v["embed_dim" if model_type == "qwen2_vl" else "hidden_size"] = 64
        v["intermediate_size"] = 96
        v["num_heads" if model_type.startswith("qwen") else "num_attention_heads"] = 4
        hp["text_config"].update(hidden_size=64, intermediate_size=96, num_attention_heads=4, num_key_value_heads=2,
                                 vocab_size=512)
        if model_type != "gemma4":
            hp["text_config"].pop("head_dim", None)
        if model_type == "qwen2_5_vl":
            v.update(out_hidden_size=64, fullatt_block_indexes=[1])  # one windowed layer, one full
        if model_type.startswith("qwen3"):  # heads of 16 for M-RoPE's sections below; the merger to 64
            v["out_hidden_size"] = 64
            hp["text_config"]["head_dim"] = 16
        if model_type.startswith("qwen3_5"):  # narrow Gated DeltaNet layers
            hp["text_config"].update(linear_num_key_heads=2, linear_num_value_heads=4)
        if model_type == "qwen2_vl":
            v["hidden_size"] = 64
        if model_type.startswith("qwen"):
            hp["text_config"]["rope_parameters"] = {"rope_type": "default", "mrope_section": [2, 3, 3],
                                                    "rope_theta": 10000.0}
    return transformers.AutoConfig.for_model(model_type, **hp).to_dict()


ON_META = {"gemma3", "llava"}  # the others index or copy image data transformers cannot do on meta
# a size of each family's: its default, or (Qwen-VL, Pixtral: any multiple of patch x merge) one with
# windows cut by the edge (Qwen2.5-VL: 8 patches a side, windows of 8: 16 windows of 64 patches)
# Gemma 4: 8 x 8 patches, 16 tokens; Qwen3-VL, Qwen3.5: 4 x 4 patches of 16, 4 tokens
IMAGE_SIZES = {"qwen2_vl": 112, "qwen2_5_vl": 224, "mistral3": 56, "gemma4": 128, "qwen3_vl": 64, "qwen3_vl_moe": 64,
               "qwen3_5": 64, "qwen3_5_moe": 64}
IMAGES = sorted(set(CHECKPOINTS) - {"llama4"})  # Llama 4's adapter refuses images (test below)


@pytest.mark.parametrize("model_type", IMAGES)
def test_image_flops_equal_transformers(model_type, tmp_path):
    """Forward and backward matmul FLOPs of the tower and the projector over one image per sequence,
    batch 2 (eager; the backward of the image tokens' sum), against transformers'
    ``get_image_features``. Qwen-VL's 2-D rotary and window reordering are elementwise and a
    permutation: no matmul FLOPs, so the two agree exactly. Mistral 3: transformers' Pixtral runs a
    batch's images as one sequence under a block-diagonal mask (dense scores over every image's
    patches); llmcalc runs each image as its own sequence: one image per call is the same."""
    raw = _small_tower(model_type)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    cfg = load_path(path)
    size = IMAGE_SIZES.get(model_type, cfg.vision.image_size)
    images = 1 if model_type == "mistral3" else 2
    model = against.build_hf(json.loads(json.dumps(raw)), device="meta" if model_type in ON_META else "cpu")
    fwd, bwd = against.measure_image_flops(model, cfg, raw, size, images)
    report = count_flops(cfg, RunSpec("train", 8, images, "eager", images=1, image_size=size))
    assert (_vision_sums(report.forward.matmul), _vision_sums(report.backward.matmul)) == (fwd, bwd)


def test_image_flops_in_closed_form_gemma3_27b(tmp_path):
    """Gemma 3 27B -it, one 896-pixel image: 4,096 patches of 588 values, 27 SigLIP layers over them,
    pooled 4 x 4 into 256 tokens, then one 1152 -> 5376 linear; llmcalc = transformers (meta)."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(GEMMA3_27B_IT))
    cfg = load_path(path)
    n, d, ff, L = 4096, 1152, 4304, 27
    tower = 2 * n * 588 * d + L * (4 * 2 * n * d * d + 2 * 2 * n * d * ff + 2 * 2 * n * n * d)
    projector = 2 * 256 * d * 5376
    report = count_flops(cfg, RunSpec("prefill", 100, 1, images=1))
    assert report.run.seq == 100 + 256 and report.run.text == 100
    assert _vision_sums(report.forward.matmul) == {"vision": tower, "projector": projector}
    assert tower + projector == 5_463_563_304_960
    raw = transformers.AutoConfig.for_model("gemma3", **{k: v for k, v in GEMMA3_27B_IT.items()
                                                         if k != "model_type"}).to_dict()
    fwd, _ = against.measure_image_flops(against.build_hf(raw), cfg, raw, 896, 1)
    assert fwd == {"vision": tower, "projector": projector}


def test_image_flops_in_closed_form_gemma4_26b(tmp_path, run):
    """Gemma 4 26B-A4B -it, one 768-pixel image (its tower takes any multiple of 48 pixels: no default, so
    --image-size is needed): 2,304 patches of 768 values, 27 layers over them, pooled 3 x 3 into 256 tokens by
    transformers' averaging matmul (256 x 2,304 times the patches), one 1152 -> 2816 linear (transformers' equality:
    test_image_flops_equal_transformers, at a small size)."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(GEMMA4_26B_A4B_IT))
    cfg = load_path(path)
    n, d, ff, L = 2304, 1152, 4304, 27
    tower = 2 * n * 768 * d + L * (4 * 2 * n * d * d + 3 * 2 * n * d * ff + 2 * 2 * n * n * d) + 2 * 256 * n * d
    projector = 2 * 256 * d * 2816
    report = count_flops(cfg, RunSpec("prefill", 100, 1, images=1, image_size=768))
    assert report.run.seq == 100 + 256
    assert _vision_sums(report.forward.matmul) == {"vision": tower, "projector": projector}
    assert tower + projector == 3_178_641_752_064
    result = run("flops", path, "--images", "1")
    assert result.exit_code == 2 and "--image-size is needed" in result.stderr
    result = run("flops", path, "--images", "1", "--image-size", "800")
    assert result.exit_code == 2 and "patch_size x pool (16 x 3)" in result.stderr


@pytest.mark.parametrize("model_type", IMAGES)
def test_image_flops_equal_the_reference(model_type, tmp_path):
    """llmcalc's forward and backward matmul FLOPs per key equal FlopCounterMode's on the reference
    tower and projector (analysis/verify/vision.py, built from the config alone), eager attention."""
    raw = _small_tower(model_type)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    cfg = load_path(path)
    analytic, measured, missed = image_flops(cfg, 8, 2, IMAGE_SIZES.get(model_type, cfg.vision.image_size))
    assert analytic == measured
    assert missed == 0  # one image's tokens join the 8 text tokens


def test_llama4_refuses_images(run):
    """Llama 4's vision adapter is not counted for images yet: refused in one line, naming --images."""
    result = run("flops", "llama-4-scout", "--images", "1")
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert "--images" in result.stderr and "hidden_linear" in result.stderr
