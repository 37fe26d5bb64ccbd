"""Multimodal Hugging Face checkpoints, proven against transformers' own modeling code: the
published config.json of Gemma 3 27B (-it) and Qwen2.5-VL-7B-Instruct give the checkpoints'
published totals, and for every multimodal family the config written by transformers' config class
from a cited checkpoint's hyperparameters gives transformers' state dict in total, for the language
model, the vision tower and the projector."""

from __future__ import annotations

import json
import logging

import pytest

from llmcalc.analysis.count.flops import count_flops
from llmcalc.analysis.count.params import count_params
from llmcalc.analysis.errors import ConfigError
from llmcalc.analysis.load.catalog import load_model, load_path
from llmcalc.analysis.load.hf import unclassified
from llmcalc.analysis.load.hf.vision import MULTIMODAL
from llmcalc.analysis.spec import RunSpec

pytestmark = pytest.mark.reference

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
against = pytest.importorskip("llmcalc.analysis.verify.against")
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
VARIANTS = [  # branches the checkpoints do not take
    ("llava", "two feature layers, a projector without bias, a tied head",
     dict(vision_feature_layer=[-2, -5], multimodal_projector_bias=False, tie_word_embeddings=True)),
    ("mistral3", "the class's defaults: a tied head, a projector with bias", dict(multimodal_projector_bias=True)),
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


def _stored(params) -> int:
    return sum(p.numel() for p in params)


def _parts(model) -> dict[str, int]:
    """transformers' model by llmcalc's parts: tied weights once, the projector wherever the family
    keeps it (Qwen-VL: the tower's merger; Llama 4: the tower's adapter too)."""
    out = {"vision": 0, "projector": 0, "language model": 0}
    for name, p in model.named_parameters():  # each shared tensor once, under its first name
        if ("multi_modal_projector" in name or ".merger." in name or ".connector." in name
                or ".vision_adapter." in name):  # Llama 4: the tower's pixel-shuffle adapter
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
    assert counted.total == _stored(model.parameters())
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
    hp["text_config"]["num_hidden_layers"] = 2
    hp["vision_config"]["depth" if model_type.startswith("qwen") else "num_hidden_layers"] = 2
    raw = transformers.AutoConfig.for_model(model_type, **hp).to_dict()
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    checks = against.against_transformers(load_model(str(path)), raw, 8, 1, str(path))
    assert [c for c in checks if not c.ok or "unmatched" in c.name] == []
    assert {"transformers/params/vision", "transformers/params/projector"} <= {c.name for c in checks}


def _shallow(model_type: str) -> dict:
    """The family's checkpoint config as transformers writes it, 2 layers of each model deep."""
    hp = json.loads(json.dumps(CHECKPOINTS[model_type][1]))
    hp["text_config"]["num_hidden_layers"] = 2
    hp["vision_config"]["depth" if model_type.startswith("qwen") else "num_hidden_layers"] = 2
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
            theirs = _stored(model.parameters())
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
                      "vision_config.vision_output_dim dropped"}}


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
    v["depth" if model_type.startswith("qwen") else "num_hidden_layers"] = 2
    if model_type not in ON_META:
        v["embed_dim" if model_type == "qwen2_vl" else "hidden_size"] = 64
        v["intermediate_size"] = 96
        v["num_heads" if model_type.startswith("qwen") else "num_attention_heads"] = 4
        hp["text_config"].update(hidden_size=64, intermediate_size=96, num_attention_heads=4, num_key_value_heads=2,
                                 vocab_size=512)
        hp["text_config"].pop("head_dim", None)
        if model_type == "qwen2_5_vl":
            v.update(out_hidden_size=64, fullatt_block_indexes=[1])  # one windowed layer, one full
        if model_type == "qwen2_vl":
            v["hidden_size"] = 64
        if model_type.startswith("qwen"):
            hp["text_config"]["rope_parameters"] = {"rope_type": "default", "mrope_section": [2, 3, 3],
                                                    "rope_theta": 10000.0}
    return transformers.AutoConfig.for_model(model_type, **hp).to_dict()


ON_META = {"gemma3", "llava"}  # the others index or copy image data transformers cannot do on meta
# a size of each family's: its default, or (Qwen-VL, Pixtral: any multiple of patch x merge) one with
# windows cut by the edge (Qwen2.5-VL: 8 patches a side, windows of 8: 16 windows of 64 patches)
IMAGE_SIZES = {"qwen2_vl": 112, "qwen2_5_vl": 224, "mistral3": 56}
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


@pytest.mark.parametrize("model_type", IMAGES)
def test_image_flops_equal_the_reference(model_type, tmp_path):
    """llmcalc's forward and backward matmul FLOPs per key equal FlopCounterMode's on the reference
    tower and projector (analysis/verify/vision.py, built from the config alone), eager attention."""
    from llmcalc.analysis.verify.measure import ModuleScope, _Counter, build
    from llmcalc.analysis.verify.vision import image_features

    raw = _small_tower(model_type)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    cfg = load_path(path)
    v, size = cfg.vision, IMAGE_SIZES.get(model_type, cfg.vision.image_size)
    model = build(cfg)
    with ModuleScope(model) as scope:
        with _Counter(scope) as fwd:
            tokens = image_features(model, torch.zeros(2, v.channels * v.temporal_patch, size, size, device="meta"))
        loss = tokens.sum()
    with _Counter(scope) as bwd:
        loss.backward()
    report = count_flops(cfg, RunSpec("train", 8, 2, "eager", images=1, image_size=size))
    keep = ("vision/", "projector/")
    assert {k: n for k, n in report.forward.matmul.items() if k.startswith(keep)} == fwd.result()
    assert {k: n for k, n in report.backward.matmul.items() if k.startswith(keep)} == bwd.result()
    assert tokens.shape[1] == report.run.seq - 8  # one image's tokens join the 8 text tokens


def test_llama4_refuses_images(run):
    """Llama 4's vision adapter is not counted for images yet: refused in one line, naming --images."""
    result = run("flops", "llama-4-scout", "--images", "1")
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert "--images" in result.stderr and "hidden_linear" in result.stderr
