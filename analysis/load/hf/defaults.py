"""transformers' defaults for the ``config.json`` keys llmcalc reads, per ``model_type``.

A key a ``config.json`` leaves out is read as transformers' config class for that ``model_type``
reads it: with the class's default. Source: transformers 5.23.0,
``models/<family>/configuration_<family>.py``, whose config classes are strict dataclasses
(``dataclasses.fields(LlamaConfig)`` gives each field's default and type), and the legacy keys
their ``__post_init__`` or ``convert_rope_params_to_dict`` read (``sliding_window_pattern``,
``rotary_pct``, ``rope_theta``: the class's ``default_theta``, ...).

A ``null`` is what transformers makes of it. A field typed ``T | None`` (marked :func:`_null`)
takes None, and the mapper reads None as transformers' code does (``num_key_value_heads``: the
head count, ``sliding_window``: no window; or refuses it where that code fails on None, as for
DeepSeek-V3's ``first_k_dense_replace``). Every other key listed refuses null, as transformers
does: its field is typed without None, or the code that reads it fails on None (noted).

Listed per family: the keys its mapper reads, with their defaults (None: the class has no such
field, and transformers derives the value when the key is absent, as ``head_dim`` from
``hidden_size``), and in ``ignored`` the keys llmcalc ignores (they change no count) that
transformers refuses as null. A key not listed reads as None whether absent or null:
transformers accepts None for it, or does not read it.
"""

from __future__ import annotations

from typing import Any, NamedTuple


class Default(NamedTuple):
    value: Any  # what transformers reads for the key when a config.json leaves it out
    nullable: bool  # transformers accepts null for it


def _null(value: Any = None) -> Default:
    """A field typed ``T | None``, default ``value``."""
    return Default(value, True)


def _config(ignored: str = "", **read: Any) -> dict[str, Default]:
    """One family's table: the keys its mapper ``read``, and the names in ``ignored``, with
    ``auto_map`` in every family (PreTrainedConfig iterates it, so null fails)."""
    table = {key: Default(None, False) for key in ("auto_map", *ignored.split())}
    table.update({key: v if isinstance(v, Default) else Default(v, False) for key, v in read.items()})
    return table


_COMMON = "initializer_range use_cache"

DEFAULTS: dict[str, dict[str, Default]] = {
    "gpt2": _config(  # GPT2Config
        f"{_COMMON} resid_pdrop embd_pdrop attn_pdrop layer_norm_epsilon summary_type summary_use_proj "
        "summary_proj_to_labels summary_first_dropout scale_attn_weights scale_attn_by_inverse_layer_idx "
        "reorder_and_upcast_attn",
        vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12, n_inner=_null(),
        activation_function="gelu_new", add_cross_attention=False, tie_word_embeddings=True),
    "gpt_neox": _config(  # GPTNeoXConfig; rotary_pct and rotary_emb_base: its convert_rope_params_to_dict
        f"{_COMMON} attention_dropout hidden_dropout classifier_dropout layer_norm_eps is_decoder",
        vocab_size=50432, hidden_size=6144, num_hidden_layers=44, num_attention_heads=64, intermediate_size=24576,
        hidden_act="gelu", max_position_embeddings=2048, tie_word_embeddings=False, use_parallel_residual=True,
        attention_bias=True, rotary_pct=0.25, rotary_emb_base=10000.0),
    "gptj": _config(  # GPTJConfig
        f"{_COMMON} resid_pdrop embd_pdrop attn_pdrop layer_norm_epsilon",
        vocab_size=50400, n_positions=2048, n_embd=4096, n_layer=28, n_head=16, rotary_dim=64, n_inner=_null(),
        activation_function="gelu_new", tie_word_embeddings=False),
    # FalconConfig; layer_norm_epsilon, hidden_dropout and attention_dropout are typed float | None,
    # but LayerNorm and dropout fail on None
    "falcon": _config(
        f"{_COMMON} layer_norm_epsilon hidden_dropout attention_dropout",
        vocab_size=65024, hidden_size=4544, num_hidden_layers=32, num_attention_heads=71,
        num_ln_in_parallel_attn=_null(), num_kv_heads=_null(), alibi=_null(False),
        new_decoder_architecture=_null(False), multi_query=_null(True), parallel_attn=_null(True),
        bias=_null(False), max_position_embeddings=2048, ffn_hidden_size=_null(), activation=_null("gelu"),
        tie_word_embeddings=True, rope_theta=10000.0),
    "phi": _config(  # PhiConfig; partial_rotary_factor: its __post_init__
        f"{_COMMON} resid_pdrop embd_pdrop layer_norm_eps",
        vocab_size=51200, hidden_size=2048, intermediate_size=8192, num_hidden_layers=24, num_attention_heads=32,
        num_key_value_heads=_null(), head_dim=None, hidden_act="gelu_new", max_position_embeddings=2048,
        tie_word_embeddings=False, qk_layernorm=False, rope_theta=10000.0, partial_rotary_factor=0.5),
    "phi3": _config(  # Phi3Config; partial_rotary_factor: its convert_rope_params_to_dict
        f"{_COMMON} resid_pdrop embd_pdrop attention_dropout original_max_position_embeddings rms_norm_eps",
        vocab_size=32064, hidden_size=3072, intermediate_size=8192, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=_null(), head_dim=None, hidden_act="silu", max_position_embeddings=4096,
        tie_word_embeddings=False, sliding_window=_null(), pad_token_id=_null(32000), rope_theta=10000.0,
        partial_rotary_factor=1.0),
    "llama": _config(  # LlamaConfig
        f"{_COMMON} rms_norm_eps",
        vocab_size=32000, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=_null(), head_dim=_null(), hidden_act="silu", max_position_embeddings=2048,
        tie_word_embeddings=False, attention_bias=False, mlp_bias=False, rope_theta=10000.0),
    "mistral": _config(  # MistralConfig
        f"{_COMMON} rms_norm_eps attention_dropout",
        vocab_size=32000, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=8, head_dim=_null(), hidden_act="silu", max_position_embeddings=131072,
        tie_word_embeddings=False, sliding_window=_null(4096), rope_theta=10000.0),
    "mixtral": _config(  # MixtralConfig
        f"{_COMMON} rms_norm_eps attention_dropout output_router_logits router_aux_loss_coef router_jitter_noise",
        vocab_size=32000, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=8, head_dim=_null(), hidden_act="silu", max_position_embeddings=131072,
        tie_word_embeddings=False, sliding_window=_null(), num_local_experts=8, num_experts_per_tok=2,
        rope_theta=1e6),
    "qwen2": _config(  # Qwen2Config
        f"{_COMMON} rms_norm_eps attention_dropout",
        vocab_size=151936, hidden_size=4096, intermediate_size=22016, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=_null(32), head_dim=None, hidden_act="silu", max_position_embeddings=32768,
        tie_word_embeddings=False, use_sliding_window=False, sliding_window=_null(4096), max_window_layers=28,
        layer_types=_null(), rope_theta=10000.0),
    # Qwen2MoeConfig; num_key_value_heads is typed int | None, but unlike Qwen2 nothing derives None
    "qwen2_moe": _config(
        f"{_COMMON} rms_norm_eps attention_dropout norm_topk_prob output_router_logits router_aux_loss_coef",
        vocab_size=151936, hidden_size=2048, intermediate_size=5632, num_hidden_layers=24, num_attention_heads=16,
        num_key_value_heads=16, head_dim=None, hidden_act="silu", max_position_embeddings=32768,
        tie_word_embeddings=False, use_sliding_window=False, sliding_window=_null(4096), max_window_layers=28,
        layer_types=_null(), qkv_bias=True, num_experts=60, num_experts_per_tok=4, moe_intermediate_size=1408,
        shared_expert_intermediate_size=5632, decoder_sparse_step=1, mlp_only_layers=_null(), rope_theta=10000.0),
    "qwen3": _config(  # Qwen3Config
        f"{_COMMON} rms_norm_eps attention_dropout",
        vocab_size=151936, hidden_size=4096, intermediate_size=22016, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=_null(32), head_dim=128, hidden_act="silu", max_position_embeddings=32768,
        tie_word_embeddings=False, attention_bias=False, use_sliding_window=False, sliding_window=_null(4096),
        max_window_layers=28, layer_types=_null(), rope_theta=10000.0),
    "qwen3_moe": _config(  # Qwen3MoeConfig
        f"{_COMMON} rms_norm_eps attention_dropout norm_topk_prob output_router_logits router_aux_loss_coef",
        vocab_size=151936, hidden_size=2048, intermediate_size=6144, num_hidden_layers=24, num_attention_heads=32,
        num_key_value_heads=4, head_dim=None, hidden_act="silu", max_position_embeddings=32768,
        tie_word_embeddings=False, attention_bias=False, use_sliding_window=False, sliding_window=_null(4096),
        num_experts=128, num_experts_per_tok=8, moe_intermediate_size=768, decoder_sparse_step=1,
        mlp_only_layers=_null(), rope_theta=10000.0),
    "gemma": _config(  # GemmaConfig
        f"{_COMMON} rms_norm_eps attention_dropout",
        vocab_size=256000, hidden_size=3072, intermediate_size=24576, num_hidden_layers=28, num_attention_heads=16,
        num_key_value_heads=16, head_dim=256, hidden_act="gelu_pytorch_tanh", max_position_embeddings=8192,
        tie_word_embeddings=True, attention_bias=False, use_bidirectional_attention=_null(), pad_token_id=_null(0),
        rope_theta=10000.0),
    "gemma2": _config(  # Gemma2Config
        f"{_COMMON} rms_norm_eps query_pre_attn_scalar",
        vocab_size=256000, hidden_size=2304, intermediate_size=9216, num_hidden_layers=26, num_attention_heads=8,
        num_key_value_heads=4, head_dim=256, hidden_activation="gelu_pytorch_tanh", max_position_embeddings=8192,
        tie_word_embeddings=True, attention_bias=False, use_bidirectional_attention=_null(),
        sliding_window=_null(4096), layer_types=_null(), attn_logit_softcapping=_null(50.0),
        final_logit_softcapping=_null(30.0), pad_token_id=_null(0), rope_theta=10000.0),
    # Gemma3TextConfig; sliding_window_pattern: its __post_init__, rope_local_base_freq: its
    # convert_rope_params_to_dict (default_theta {"global": 1e6, "local": 1e4})
    "gemma3_text": _config(
        f"{_COMMON} rms_norm_eps query_pre_attn_scalar",
        vocab_size=262208, hidden_size=2304, intermediate_size=9216, num_hidden_layers=26, num_attention_heads=8,
        num_key_value_heads=4, head_dim=256, hidden_activation="gelu_pytorch_tanh", max_position_embeddings=131072,
        tie_word_embeddings=True, attention_bias=False, use_bidirectional_attention=_null(False),
        sliding_window=_null(4096), layer_types=_null(), sliding_window_pattern=6, attn_logit_softcapping=_null(),
        final_logit_softcapping=_null(), pad_token_id=_null(0), rope_theta=1e6, rope_local_base_freq=10000.0),
    "olmo": _config(  # OlmoConfig
        f"{_COMMON} attention_dropout",
        vocab_size=50304, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=_null(), head_dim=None, hidden_act="silu", max_position_embeddings=2048,
        tie_word_embeddings=False, attention_bias=False, clip_qkv=_null(), pad_token_id=_null(1), rope_theta=10000.0),
    "olmo2": _config(  # Olmo2Config
        f"{_COMMON} attention_dropout rms_norm_eps",
        vocab_size=50304, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=_null(), head_dim=None, hidden_act="silu", max_position_embeddings=2048,
        tie_word_embeddings=False, attention_bias=False, pad_token_id=_null(1), rope_theta=10000.0),
    "stablelm": _config(  # StableLmConfig; partial_rotary_factor: its __post_init__
        f"{_COMMON} layer_norm_eps hidden_dropout attention_dropout",
        vocab_size=50304, hidden_size=2560, intermediate_size=6912, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=32, hidden_act="silu", max_position_embeddings=4096, tie_word_embeddings=False,
        use_qkv_bias=False, qk_layernorm=False, use_parallel_residual=False, rope_theta=10000.0,
        partial_rotary_factor=0.25),
    "starcoder2": _config(  # Starcoder2Config
        f"{_COMMON} norm_epsilon attention_dropout residual_dropout embedding_dropout",
        vocab_size=49152, hidden_size=3072, intermediate_size=12288, num_hidden_layers=30, num_attention_heads=24,
        num_key_value_heads=2, hidden_act="gelu_pytorch_tanh", max_position_embeddings=4096,
        tie_word_embeddings=True, use_bias=True, sliding_window=_null(), rope_theta=10000.0),
    "granite": _config(  # GraniteConfig
        f"{_COMMON} rms_norm_eps attention_dropout residual_multiplier attention_multiplier logits_scaling",
        vocab_size=32000, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=_null(), head_dim=None, hidden_act="silu", max_position_embeddings=2048,
        tie_word_embeddings=False, attention_bias=False, mlp_bias=False, embedding_multiplier=1.0,
        rope_theta=10000.0),
    "smollm3": _config(  # SmolLM3Config
        f"{_COMMON} rms_norm_eps attention_dropout",
        vocab_size=128256, hidden_size=2048, intermediate_size=11008, num_hidden_layers=36, num_attention_heads=16,
        num_key_value_heads=_null(4), head_dim=None, hidden_act="silu", max_position_embeddings=32768,
        tie_word_embeddings=True, attention_bias=False, mlp_bias=False, use_sliding_window=False,
        sliding_window=_null(), layer_types=_null(), no_rope_layers=_null(), no_rope_layer_interval=4,
        pad_token_id=_null(128004), rope_theta=2e6),
    # DeepseekV2Config; topk_method is typed str | None, but its router fails on None
    "deepseek_v2": _config(
        f"{_COMMON} rms_norm_eps output_router_logits routed_scaling_factor topk_method",
        vocab_size=102400, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=_null(), head_dim=_null(), hidden_act="silu", max_position_embeddings=2048,
        tie_word_embeddings=False, attention_bias=False, mlp_bias=False, q_lora_rank=_null(1536), kv_lora_rank=512,
        qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128, n_routed_experts=64,
        num_experts_per_tok=_null(), moe_intermediate_size=1407, n_shared_experts=2, first_k_dense_replace=0,
        rope_theta=10000.0),
    # DeepseekV3Config; n_group and topk_group are typed int | None, but its router fails on None
    "deepseek_v3": _config(
        f"{_COMMON} rms_norm_eps output_router_logits routed_scaling_factor n_group topk_group num_mtp_layers",
        vocab_size=129280, hidden_size=7168, intermediate_size=18432, num_hidden_layers=61, num_attention_heads=128,
        num_key_value_heads=_null(128), hidden_act="silu", max_position_embeddings=4096, tie_word_embeddings=False,
        attention_bias=False, q_lora_rank=_null(1536), kv_lora_rank=512, qk_nope_head_dim=128,
        qk_rope_head_dim=64, v_head_dim=_null(128), n_routed_experts=256, num_experts_per_tok=_null(8),
        moe_intermediate_size=2048, n_shared_experts=1, first_k_dense_replace=_null(3), rope_theta=10000.0),
    "gpt_oss": _config(  # GptOssConfig
        f"{_COMMON} rms_norm_eps attention_dropout swiglu_alpha swiglu_limit router_aux_loss_coef "
        "output_router_logits",
        vocab_size=201088, hidden_size=2880, intermediate_size=2880, num_hidden_layers=36, num_attention_heads=64,
        num_key_value_heads=8, head_dim=64, hidden_act="silu", max_position_embeddings=131072,
        tie_word_embeddings=False, attention_bias=True, sliding_window=_null(128), layer_types=_null(),
        num_local_experts=128, num_experts_per_tok=4, rope_theta=150000.0),
    # -- dense decoders: GLM, ERNIE 4.5, Hunyuan, Seed-OSS, EXAONE 4, OLMo 3, Helium, Arcee, InternLM3, Ministral,
    # IQuest-Coder, Jais 2, CWM
    # Glm4Config; partial_rotary_factor: its __post_init__
    "glm4": _config(
        f"{_COMMON} rms_norm_eps attention_dropout",
        vocab_size=151552, hidden_size=4096, intermediate_size=13696, num_hidden_layers=40, num_attention_heads=32,
        num_key_value_heads=2, head_dim=128, hidden_act="silu", max_position_embeddings=131072,
        tie_word_embeddings=False, attention_bias=True, pad_token_id=_null(151329), rope_theta=10000.0,
        partial_rotary_factor=0.5),
    # GlmConfig; partial_rotary_factor: its __post_init__; num_key_value_heads and head_dim are typed
    # int | None, but its attention fails on None
    "glm": _config(
        f"{_COMMON} rms_norm_eps",
        vocab_size=151552, hidden_size=4096, intermediate_size=13696, num_hidden_layers=40, num_attention_heads=32,
        num_key_value_heads=2, head_dim=128, hidden_act="silu", max_position_embeddings=131072,
        tie_word_embeddings=False, attention_bias=True, pad_token_id=_null(151329), rope_theta=10000.0,
        partial_rotary_factor=0.5),
    "ernie4_5": _config(  # Ernie4_5Config
        "initializer_range rms_norm_eps",
        vocab_size=103424, hidden_size=1024, intermediate_size=3072, num_hidden_layers=18, num_attention_heads=16,
        num_key_value_heads=_null(2), head_dim=_null(128), hidden_act="silu", max_position_embeddings=131072,
        tie_word_embeddings=True, use_bias=_null(False), pad_token_id=_null(0), rope_theta=500000.0),
    # HunYuanDenseV1Config; head_dim is typed int | None, but its attention fails without one
    "hunyuan_v1_dense": _config(
        f"{_COMMON} rms_norm_eps attention_dropout pretraining_tp",
        vocab_size=290943, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=_null(), head_dim=None, hidden_act="silu", max_position_embeddings=2048,
        tie_word_embeddings=False, attention_bias=False, pad_token_id=_null(0), rope_theta=10000.0),
    "seed_oss": _config(  # SeedOssConfig
        f"{_COMMON} rms_norm_eps attention_dropout residual_dropout pretraining_tp",
        vocab_size=155136, hidden_size=4096, intermediate_size=27648, num_hidden_layers=64, num_attention_heads=80,
        num_key_value_heads=_null(8), head_dim=_null(128), hidden_act="silu", max_position_embeddings=524288,
        tie_word_embeddings=False, attention_bias=True, attention_out_bias=False, mlp_bias=False,
        pad_token_id=_null(1), rope_theta=10000.0),
    # Exaone4Config; head_dim is no field: its attention reads it when given (null fails);
    # sliding_window_pattern is typed str | int | None, but its __post_init__ divides by it
    "exaone4": _config(
        f"{_COMMON} rms_norm_eps attention_dropout",
        vocab_size=102400, hidden_size=4096, intermediate_size=16384, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=32, head_dim=None, hidden_act="silu", max_position_embeddings=2048,
        tie_word_embeddings=False, sliding_window=_null(4096), sliding_window_pattern=4, layer_types=_null(),
        rope_theta=10000.0),
    "olmo3": _config(  # Olmo3Config
        f"{_COMMON} attention_dropout rms_norm_eps",
        vocab_size=50304, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=_null(), head_dim=None, hidden_act="silu", max_position_embeddings=2048,
        tie_word_embeddings=False, attention_bias=False, sliding_window=_null(4096), layer_types=_null(),
        pad_token_id=_null(1), rope_theta=500000.0),
    "helium": _config(  # HeliumConfig
        f"{_COMMON} attention_dropout rms_norm_eps",
        vocab_size=48000, hidden_size=2560, intermediate_size=7040, num_hidden_layers=24, num_attention_heads=20,
        num_key_value_heads=20, head_dim=128, hidden_act="silu", max_position_embeddings=4096,
        tie_word_embeddings=False, attention_bias=False, mlp_bias=False, pad_token_id=_null(3), rope_theta=100000.0),
    "arcee": _config(  # ArceeConfig
        f"{_COMMON} attention_dropout rms_norm_eps",
        vocab_size=32000, hidden_size=2560, intermediate_size=18432, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=_null(), head_dim=_null(), hidden_act="relu2", max_position_embeddings=4096,
        tie_word_embeddings=False, attention_bias=False, mlp_bias=False, rope_theta=10000.0),
    # InternLM3Config; qkv_bias and bias: its attribute_map (attention_bias, mlp_bias)
    "internlm3": _config(
        f"{_COMMON} attention_dropout rms_norm_eps",
        vocab_size=128512, hidden_size=4096, intermediate_size=10240, num_hidden_layers=48, num_attention_heads=32,
        num_key_value_heads=_null(2), head_dim=_null(128), hidden_act="silu", max_position_embeddings=32768,
        tie_word_embeddings=False, attention_bias=False, mlp_bias=False, qkv_bias=None, bias=None,
        pad_token_id=_null(2), rope_theta=10000.0),
    # MinistralConfig; head_dim and sliding_window are typed int | None, but its attention and its
    # sliding mask (made whatever the layer types) fail without them
    "ministral": _config(
        f"{_COMMON} attention_dropout rms_norm_eps",
        vocab_size=32000, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=8, head_dim=None, hidden_act="silu", max_position_embeddings=131072,
        tie_word_embeddings=False, sliding_window=4096, layer_types=_null(), rope_theta=10000.0),
    # Ministral3Config; rope_theta: the yarn rope_parameters its __post_init__ writes
    "ministral3": _config(
        f"{_COMMON} attention_dropout rms_norm_eps",
        vocab_size=131072, hidden_size=4096, intermediate_size=14336, num_hidden_layers=34, num_attention_heads=32,
        num_key_value_heads=8, head_dim=128, hidden_act="silu", max_position_embeddings=262144,
        tie_word_embeddings=False, sliding_window=_null(), pad_token_id=_null(11), rope_theta=1e6),
    "iquestcoder": _config(  # IQuestCoderConfig
        f"{_COMMON} attention_dropout rms_norm_eps",
        vocab_size=76800, hidden_size=5120, intermediate_size=27648, num_hidden_layers=80, num_attention_heads=40,
        num_key_value_heads=_null(8), head_dim=_null(128), hidden_act="silu", max_position_embeddings=131072,
        tie_word_embeddings=False, attention_bias=False, mlp_bias=False, rope_theta=10000.0),
    "jais2": _config(  # Jais2Config
        f"{_COMMON} layer_norm_eps",
        vocab_size=150272, hidden_size=3328, intermediate_size=26624, num_hidden_layers=32, num_attention_heads=26,
        num_key_value_heads=_null(), head_dim=_null(), hidden_act="relu2", max_position_embeddings=8192,
        tie_word_embeddings=False, attention_bias=True, mlp_bias=True, rope_theta=10000.0),
    # CwmConfig; rope_theta: the llama3 rope_parameters its __post_init__ writes
    "cwm": _config(
        f"{_COMMON} attention_dropout rms_norm_eps pretraining_tp bos_token_id",
        vocab_size=128256, hidden_size=6144, intermediate_size=21504, num_hidden_layers=64, num_attention_heads=48,
        num_key_value_heads=8, head_dim=128, hidden_act="silu", max_position_embeddings=131072,
        tie_word_embeddings=False, mlp_bias=False, sliding_window=8192, layer_types=_null(), rope_theta=1e6),
    # older decoders, and Cohere
    "gpt_bigcode": _config(  # GPTBigCodeConfig
        f"{_COMMON} resid_pdrop embd_pdrop attn_pdrop layer_norm_epsilon scale_attn_weights attention_softmax_in_fp32 "
        "scale_attention_softmax_in_fp32",
        vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12, n_inner=_null(),
        activation_function="gelu_pytorch_tanh", add_cross_attention=False, multi_query=True,
        tie_word_embeddings=True),
    "codegen": _config(  # CodeGenConfig
        f"{_COMMON} resid_pdrop embd_pdrop attn_pdrop layer_norm_epsilon n_ctx",
        vocab_size=50400, n_positions=2048, n_embd=4096, n_layer=28, n_head=16, rotary_dim=64, n_inner=_null(),
        activation_function="gelu_new", tie_word_embeddings=False),
    "persimmon": _config(  # PersimmonConfig; partial_rotary_factor: its __post_init__
        f"{_COMMON} layer_norm_eps hidden_dropout attention_dropout",
        vocab_size=262144, hidden_size=4096, intermediate_size=16384, num_hidden_layers=36, num_attention_heads=64,
        hidden_act="relu2", max_position_embeddings=16384, tie_word_embeddings=False, qk_layernorm=True,
        rope_theta=10000.0, partial_rotary_factor=0.5),
    # NemotronConfig; num_key_value_heads is typed int | None, but its attention fails on None (also
    # by default); partial_rotary_factor: its __post_init__
    "nemotron": _config(
        f"{_COMMON} norm_eps attention_dropout",
        vocab_size=256000, hidden_size=6144, intermediate_size=24576, num_hidden_layers=32, num_attention_heads=48,
        num_key_value_heads=None, head_dim=_null(), hidden_act="relu2", max_position_embeddings=4096,
        tie_word_embeddings=False, attention_bias=False, mlp_bias=False, rope_theta=10000.0,
        partial_rotary_factor=0.5),
    # CohereConfig; layer_norm_eps and logit_scale are typed float | None, but its LayerNorm and
    # logits fail on None; head_dim is no field, read with getattr (null fails)
    "cohere": _config(
        f"{_COMMON} layer_norm_eps logit_scale",
        vocab_size=256000, hidden_size=8192, intermediate_size=22528, num_hidden_layers=40, num_attention_heads=64,
        num_key_value_heads=_null(), head_dim=None, hidden_act="silu", max_position_embeddings=8192,
        tie_word_embeddings=True, attention_bias=False, use_qk_norm=_null(False), pad_token_id=_null(0),
        rope_theta=500000.0),
    # Cohere2Config; sliding_window_pattern: its __post_init__; head_dim: hidden_size // heads, unless given
    "cohere2": _config(
        f"{_COMMON} layer_norm_eps logit_scale attention_dropout",
        vocab_size=256000, hidden_size=8192, intermediate_size=22528, num_hidden_layers=40, num_attention_heads=64,
        num_key_value_heads=_null(), head_dim=None, hidden_act="silu", max_position_embeddings=8192,
        tie_word_embeddings=True, attention_bias=False, sliding_window=_null(4096), layer_types=_null(),
        sliding_window_pattern=4, pad_token_id=_null(0), rope_theta=10000.0),
    "mpt": _config(  # MptConfig
        f"{_COMMON} resid_pdrop emb_pdrop layer_norm_epsilon learned_pos_emb init_device embedding_fraction "
        "norm_type",
        d_model=2048, n_heads=16, n_layers=24, expansion_ratio=4, max_seq_len=2048, vocab_size=50368,
        attn_config=_null(), no_bias=True, tie_word_embeddings=True),
    "xglm": _config(  # XGLMConfig
        f"{_COMMON} dropout attention_dropout activation_dropout layerdrop init_std decoder_start_token_id",
        vocab_size=256008, max_position_embeddings=2048, d_model=1024, ffn_dim=4096, num_layers=24,
        attention_heads=16, activation_function="gelu", scale_embedding=True, add_cross_attention=False,
        tie_word_embeddings=True, pad_token_id=_null(1)),
    # mixture-of-experts decoders
    # Glm4MoeConfig; partial_rotary_factor: its __post_init__ (a null one is dropped from rope_parameters: whole
    # heads rotate); num_local_experts: an alias of n_routed_experts
    "glm4_moe": _config(
        f"{_COMMON} rms_norm_eps attention_dropout output_router_logits routed_scaling_factor n_group topk_group "
        "norm_topk_prob num_mtp_layers",
        vocab_size=151552, hidden_size=4096, intermediate_size=10944, num_hidden_layers=46, num_attention_heads=96,
        num_key_value_heads=8, head_dim=None, hidden_act="silu", max_position_embeddings=131072,
        tie_word_embeddings=False, attention_bias=False, use_qk_norm=False, moe_intermediate_size=1408,
        num_experts_per_tok=8, n_shared_experts=1, n_routed_experts=128, num_local_experts=None,
        first_k_dense_replace=1, rope_theta=10000.0, partial_rotary_factor=_null(0.5)),
    "olmoe": _config(  # OlmoeConfig; num_local_experts: an alias of num_experts
        f"{_COMMON} rms_norm_eps attention_dropout output_router_logits router_aux_loss_coef norm_topk_prob",
        vocab_size=50304, hidden_size=2048, intermediate_size=2048, num_hidden_layers=16, num_attention_heads=16,
        num_key_value_heads=_null(), head_dim=None, hidden_act="silu", max_position_embeddings=4096,
        tie_word_embeddings=False, attention_bias=False, clip_qkv=_null(), pad_token_id=_null(1),
        num_experts=64, num_local_experts=None, num_experts_per_tok=8, rope_theta=10000.0),
    # GraniteMoeConfig; its multipliers and expert counts are typed T | None, but its code fails on None
    "granitemoe": _config(
        f"{_COMMON} rms_norm_eps residual_multiplier attention_multiplier logits_scaling",
        vocab_size=32000, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=_null(), head_dim=None, hidden_act="silu", max_position_embeddings=2048,
        tie_word_embeddings=False, attention_bias=False, embedding_multiplier=1.0, num_local_experts=8,
        num_experts_per_tok=2, rope_theta=10000.0),
    "granitemoeshared": _config(  # GraniteMoeSharedConfig: GraniteMoe's, and shared_intermediate_size
        f"{_COMMON} rms_norm_eps residual_multiplier attention_multiplier logits_scaling",
        vocab_size=32000, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=_null(), head_dim=None, hidden_act="silu", max_position_embeddings=2048,
        tie_word_embeddings=False, attention_bias=False, embedding_multiplier=1.0, num_local_experts=8,
        num_experts_per_tok=2, shared_intermediate_size=0, rope_theta=10000.0),
    "phimoe": _config(  # PhimoeConfig
        f"{_COMMON} rms_norm_eps attention_dropout output_router_logits router_aux_loss_coef router_jitter_noise "
        "input_jitter_noise",
        vocab_size=32064, hidden_size=4096, intermediate_size=6400, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=8, head_dim=None, hidden_act="silu", max_position_embeddings=131072,
        tie_word_embeddings=False, sliding_window=_null(), attention_bias=False, lm_head_bias=False,
        num_local_experts=16, num_experts_per_tok=2, rope_theta=1e6),
    # Ernie4_5_MoeConfig; num_experts and num_experts_per_tok: aliases of moe_num_experts and moe_k
    "ernie4_5_moe": _config(
        f"{_COMMON} rms_norm_eps moe_norm_min",
        vocab_size=103424, hidden_size=2560, intermediate_size=12288, num_hidden_layers=28, num_attention_heads=20,
        num_key_value_heads=4, head_dim=None, hidden_act="silu", max_position_embeddings=131072,
        tie_word_embeddings=True, use_bias=_null(False), pad_token_id=_null(0), moe_intermediate_size=1536,
        moe_num_experts=64, num_experts=None, moe_k=6, num_experts_per_tok=None, moe_num_shared_experts=2,
        moe_layer_start_index=1, moe_layer_end_index=-1, moe_layer_interval=1, rope_theta=500000.0),
    # HunYuanMoEV1Config; num_local_experts and num_experts_per_tok: aliases of num_experts and moe_topk;
    # head_dim is typed int | None, but its attention fails on None (the default)
    "hunyuan_v1_moe": _config(
        f"{_COMMON} rms_norm_eps attention_dropout output_router_logits pretraining_tp",
        vocab_size=290943, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=_null(), head_dim=None, hidden_act="silu", max_position_embeddings=2048,
        tie_word_embeddings=False, attention_bias=False, pad_token_id=_null(0), num_experts=1,
        num_local_experts=None, moe_topk=1, num_experts_per_tok=None, rope_theta=10000.0),
    # MiniMaxM2Config; num_experts: an alias of num_local_experts; rotary_dim: its convert_rope_params_to_dict
    "minimax_m2": _config(
        f"{_COMMON} rms_norm_eps attention_dropout output_router_logits router_aux_loss_coef router_jitter_noise",
        vocab_size=200064, hidden_size=3072, intermediate_size=1536, num_hidden_layers=62, num_attention_heads=48,
        num_key_value_heads=8, head_dim=128, hidden_act="silu", max_position_embeddings=196608,
        tie_word_embeddings=False, num_local_experts=256, num_experts=None, num_experts_per_tok=8,
        rope_theta=5e6),
    # Dots1Config; num_local_experts: an alias of n_routed_experts; the expert keys are read by MoE layers only;
    "dots1": _config(  # n_group and topk_group are typed int | None, but its router fails on None
        f"{_COMMON} rms_norm_eps routed_scaling_factor n_group topk_group output_router_logits",
        vocab_size=152064, hidden_size=4608, intermediate_size=10944, moe_intermediate_size=1408,
        num_hidden_layers=62, num_attention_heads=32, num_key_value_heads=_null(32), head_dim=None,
        hidden_act="silu", max_position_embeddings=2048, tie_word_embeddings=False, attention_bias=False,
        n_shared_experts=_null(), n_routed_experts=_null(), num_local_experts=None, num_experts_per_tok=_null(),
        first_k_dense_replace=0, sliding_window=_null(4096), max_window_layers=_null(62), layer_types=_null(),
        rope_theta=10000.0),
    "flex_olmo": _config(  # FlexOlmoConfig; num_local_experts: an alias of num_experts
        f"{_COMMON} rms_norm_eps output_router_logits router_aux_loss_coef norm_topk_prob",
        vocab_size=100352, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=_null(), head_dim=None, hidden_act="silu", max_position_embeddings=4096,
        tie_word_embeddings=False, attention_bias=False, pad_token_id=_null(100277), num_experts=7,
        num_local_experts=None, num_experts_per_tok=5, rope_theta=500000.0),
    # -- batch A --
    # GraniteSWAConfig; head_dim is no field, read with getattr (null fails)
    "granite_swa": _config(
        f"{_COMMON} rms_norm_eps attention_dropout residual_multiplier attention_multiplier logits_scaling",
        vocab_size=100352, hidden_size=2560, intermediate_size=8192, num_hidden_layers=24, num_attention_heads=20,
        num_key_value_heads=_null(4), head_dim=None, hidden_act="silu", max_position_embeddings=8192,
        tie_word_embeddings=True, attention_bias=False, mlp_bias=False, embedding_multiplier=1.0,
        sliding_window=_null(128), layer_types=_null(), layer_rope_theta=_null(), rope_theta=10000.0),
    # GraniteMoeSWAConfig: GraniteMoeShared's, with GraniteSWA's windows, sinks and layer_rope_theta
    "granitemoe_swa": _config(
        f"{_COMMON} rms_norm_eps residual_multiplier attention_multiplier logits_scaling",
        vocab_size=32000, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=_null(), head_dim=None, hidden_act="silu", max_position_embeddings=2048,
        tie_word_embeddings=False, attention_bias=False, embedding_multiplier=1.0, num_local_experts=8,
        num_experts_per_tok=2, shared_intermediate_size=0, sliding_window=_null(128), layer_types=_null(),
        layer_rope_theta=_null(), rope_theta=10000.0),
    "vaultgemma": _config(  # VaultGemmaConfig: Gemma2Config's fields but use_bidirectional_attention
        f"{_COMMON} rms_norm_eps query_pre_attn_scalar",
        vocab_size=256000, hidden_size=2304, intermediate_size=9216, num_hidden_layers=26, num_attention_heads=8,
        num_key_value_heads=4, head_dim=256, hidden_activation="gelu_pytorch_tanh", max_position_embeddings=8192,
        tie_word_embeddings=True, attention_bias=False, sliding_window=_null(4096), layer_types=_null(),
        attn_logit_softcapping=_null(50.0), final_logit_softcapping=_null(30.0), pad_token_id=_null(0),
        rope_theta=10000.0),
    # MellumConfig; num_experts: an alias of num_local_experts; rope_theta: its full layers' base
    "mellum": _config(
        f"{_COMMON} rms_norm_eps attention_dropout output_router_logits router_aux_loss_coef norm_topk_prob",
        vocab_size=98304, hidden_size=2304, intermediate_size=7168, num_hidden_layers=28, num_attention_heads=32,
        num_key_value_heads=4, head_dim=128, hidden_act="silu", max_position_embeddings=131072,
        tie_word_embeddings=False, attention_bias=False, sliding_window=_null(1024), layer_types=_null(),
        mlp_layer_types=_null(), moe_intermediate_size=896, num_local_experts=64, num_experts=None,
        num_experts_per_tok=8, rope_theta=500000.0),
    "hyperclovax": _config(  # HyperCLOVAXConfig
        f"{_COMMON} rms_norm_eps attention_dropout residual_multiplier logits_scaling",
        vocab_size=32000, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=_null(), head_dim=_null(), hidden_act="silu", max_position_embeddings=2048,
        tie_word_embeddings=False, attention_bias=False, mlp_bias=False, embedding_multiplier=1.0,
        use_post_norm=True, rope_theta=10000.0),
    "youtu": _config(  # YoutuConfig
        "use_cache rms_norm_eps",
        vocab_size=128256, hidden_size=2048, intermediate_size=6144, num_hidden_layers=32, num_attention_heads=16,
        num_key_value_heads=16, hidden_act="silu", max_position_embeddings=131072, tie_word_embeddings=True,
        attention_bias=False, q_lora_rank=_null(1536), kv_lora_rank=512, qk_nope_head_dim=128,
        qk_rope_head_dim=64, v_head_dim=_null(128), rope_theta=10000.0),
    # SolarOpenConfig; num_local_experts: an alias of n_routed_experts
    "solar_open": _config(
        f"{_COMMON} rms_norm_eps attention_dropout output_router_logits routed_scaling_factor n_group topk_group "
        "norm_topk_prob",
        vocab_size=196608, hidden_size=4096, num_hidden_layers=48, num_attention_heads=64, num_key_value_heads=8,
        head_dim=128, hidden_act="silu", max_position_embeddings=131072, tie_word_embeddings=False,
        attention_bias=False, moe_intermediate_size=1280, num_experts_per_tok=8, n_shared_experts=1,
        n_routed_experts=128, num_local_experts=None, rope_theta=1e6),
    # Cohere2MoeConfig; first_k_dense_replace: its __post_init__ (without layer_types or
    # mlp_layer_types); rms_norm_eps None: LayerNorms
    "cohere2_moe": _config(
        f"{_COMMON} layer_norm_eps logit_scale attention_dropout output_router_logits norm_topk_prob "
        "shared_expert_combination_strategy expert_selection_fn",
        vocab_size=256000, hidden_size=8192, intermediate_size=22528, num_hidden_layers=40, num_attention_heads=64,
        num_key_value_heads=_null(), head_dim=128, hidden_act="silu", max_position_embeddings=8192,
        tie_word_embeddings=True, attention_bias=False, sliding_window=_null(4096), layer_types=_null(),
        mlp_layer_types=_null(), sliding_window_pattern=4, prefix_dense_sliding_window_pattern=1,
        first_k_dense_replace=0, prefix_dense_intermediate_size=_null(), rms_norm_eps=_null(), num_experts=8,
        num_experts_per_tok=2, num_shared_experts=0, pad_token_id=_null(0), rope_theta=10000.0),
    # ExaoneMoeConfig; head_dim is no field: its attention reads it when given (null fails);
    # sliding_window_pattern is read only to derive a missing layer_types
    "exaone_moe": _config(
        f"{_COMMON} rms_norm_eps attention_dropout output_router_logits norm_topk_prob routed_scaling_factor "
        "n_group topk_group",
        vocab_size=102400, hidden_size=4096, intermediate_size=16384, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=32, head_dim=None, hidden_act="silu", max_position_embeddings=2048,
        tie_word_embeddings=False, sliding_window=4096, sliding_window_pattern=_null(4), layer_types=_null(),
        mlp_layer_types=_null(), first_k_dense_replace=1, moe_intermediate_size=1024, num_experts=64,
        num_experts_per_tok=8, num_shared_experts=1, pad_token_id=_null(0), rope_theta=10000.0),
    # Glm4MoeLiteConfig; num_local_experts and head_dim: aliases of n_routed_experts and qk_rope_head_dim
    "glm4_moe_lite": _config(
        f"{_COMMON} rms_norm_eps attention_dropout output_router_logits routed_scaling_factor n_group topk_group "
        "norm_topk_prob pretraining_tp rope_interleave",
        vocab_size=154880, hidden_size=2048, intermediate_size=10240, moe_intermediate_size=1536,
        num_hidden_layers=47, num_attention_heads=20, num_key_value_heads=20, n_shared_experts=1,
        n_routed_experts=64, num_local_experts=None, num_experts_per_tok=4, kv_lora_rank=512,
        q_lora_rank=_null(768), head_dim=None, qk_rope_head_dim=64, v_head_dim=256, qk_nope_head_dim=192,
        hidden_act="silu", max_position_embeddings=202752, tie_word_embeddings=False, mlp_layer_types=_null(),
        attention_bias=False, rope_theta=10000.0),
    "minicpm3": _config(  # MiniCPM3Config; v_head_dim None: hidden_size // heads
        f"{_COMMON} rms_norm_eps",
        vocab_size=73448, hidden_size=2560, intermediate_size=6400, num_hidden_layers=62, num_attention_heads=40,
        num_key_value_heads=_null(40), hidden_act="silu", max_position_embeddings=32768, tie_word_embeddings=True,
        attention_bias=False, mlp_bias=False, kv_lora_rank=256, q_lora_rank=_null(768), qk_nope_head_dim=64,
        qk_rope_head_dim=32, v_head_dim=_null(), scale_emb=12, rope_theta=10000.0),
    # -- batch B
    "flint": _config(  # FlintConfig; mlp_only_layers None: [0, 1] (its __post_init__)
        f"{_COMMON} rms_norm_eps attention_dropout norm_topk_prob output_router_logits router_aux_loss_coef",
        vocab_size=150144, hidden_size=2048, intermediate_size=6144, num_hidden_layers=49, num_attention_heads=32,
        num_key_value_heads=4, head_dim=128, hidden_act="silu", max_position_embeddings=262144,
        tie_word_embeddings=False, attention_bias=False, sliding_window=513, layer_types=_null(), num_experts=256,
        num_experts_per_tok=6, moe_intermediate_size=512, shared_expert_intermediate_size=1024,
        decoder_sparse_step=1, mlp_only_layers=_null([0, 1]), rope_theta=10000.0),
    "kolibri1": _config(  # Kolibri1Config; num_local_experts: num_experts's name in its attribute_map
        f"{_COMMON} rms_norm_eps attention_dropout norm_topk_prob output_router_logits",
        vocab_size=128000, hidden_size=2560, num_hidden_layers=50, num_attention_heads=48, num_key_value_heads=4,
        head_dim=128, hidden_act="silu", max_position_embeddings=262144, tie_word_embeddings=False,
        sliding_window=_null(513), layer_types=_null(), moe_intermediate_size=512, num_experts=384,
        num_local_experts=None, num_experts_per_tok=6, shared_expert_intermediate_size=512, rope_theta=10000.0),
    # CohereCompassTextConfig; head_dim: not a field, overwritten by its __post_init__; sliding_window
    # is typed int | None, but its forward fails on None
    "cohere_compass_text": _config(
        f"{_COMMON} layer_norm_eps attention_dropout",
        vocab_size=256000, hidden_size=8192, intermediate_size=22528, num_hidden_layers=40, num_attention_heads=64,
        num_key_value_heads=_null(), head_dim=_null(), hidden_act="silu", max_position_embeddings=8192,
        tie_word_embeddings=True, attention_bias=False, sliding_window=4096, layer_types=_null(),
        pad_token_id=_null(0), rope_parameters=_null()),
    "aria_text": _config(  # AriaTextConfig
        f"{_COMMON} rms_norm_eps",
        vocab_size=32000, hidden_size=4096, intermediate_size=4096, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=_null(), head_dim=_null(), hidden_act="silu", max_position_embeddings=2048,
        tie_word_embeddings=False, attention_bias=False, mlp_bias=False, pad_token_id=_null(2), moe_num_experts=8,
        moe_topk=2, moe_num_shared_experts=2, rope_theta=10000.0),
    # HYV3Config; num_local_experts: an alias of num_experts; num_experts, num_experts_per_tok and
    # num_shared_experts are typed int | None, but its MoE layers fail on None
    "hy_v3": _config(
        f"{_COMMON} rms_norm_eps attention_dropout router_scaling_factor enable_moe_fp32_combine "
        "output_router_logits",
        vocab_size=120832, hidden_size=4096, intermediate_size=13312, num_hidden_layers=80, num_attention_heads=64,
        num_key_value_heads=8, head_dim=128, hidden_act="silu", max_position_embeddings=131072,
        tie_word_embeddings=False, attention_bias=False, mlp_bias=False, num_experts=_null(192),
        num_local_experts=None, num_experts_per_tok=_null(8), num_shared_experts=_null(1),
        moe_intermediate_size=1536, mlp_layer_types=_null(), rope_theta=11158840.0),
    "ctrl": _config(  # CTRLConfig
        f"{_COMMON} resid_pdrop embd_pdrop layer_norm_epsilon",
        vocab_size=246534, n_positions=256, n_embd=1280, dff=8192, n_layer=48, n_head=16, tie_word_embeddings=True),
    # AfmoeConfig; head_dim, num_dense_layers, num_experts, num_experts_per_tok, num_shared_experts,
    # global_attn_every_n_layers and sliding_window are typed int | None, but its layers (or, for
    # sliding_window, its forward, which always builds the sliding mask) fail on None
    "afmoe": _config(
        f"{_COMMON} rms_norm_eps output_router_logits route_scale",
        vocab_size=200192, hidden_size=2048, intermediate_size=6144, moe_intermediate_size=1408,
        num_hidden_layers=32, num_dense_layers=_null(1), num_attention_heads=16, num_key_value_heads=_null(),
        head_dim=_null(128), hidden_act="silu", max_position_embeddings=16384, tie_word_embeddings=False,
        num_experts=_null(64), num_experts_per_tok=_null(6), num_shared_experts=_null(2),
        global_attn_every_n_layers=_null(4), sliding_window=_null(1024), layer_types=_null(),
        mup_enabled=_null(False), attention_bias=False, rope_theta=10000.0),
    # xIELU. ApertusConfig: no head_dim field (its attention takes one a config.json gives);
    # rope_theta: its default_theta
    "apertus": _config(
        f"{_COMMON} rms_norm_eps attention_dropout",
        vocab_size=131072, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=_null(), head_dim=None, hidden_act="xielu", max_position_embeddings=65536,
        tie_word_embeddings=False, attention_bias=False, pad_token_id=_null(3), rope_theta=12000000.0),
    # -- embedding_norm
    "bloom": _config(  # BloomConfig; n_embed (its __post_init__), num_hidden_layers and num_attention_heads
        # (its attribute_map) are aliases with no default, read as given
        f"{_COMMON} layer_norm_epsilon hidden_dropout attention_dropout pretraining_tp slow_but_exact "
        "apply_residual_connection_post_layernorm",
        vocab_size=250880, hidden_size=64, n_layer=2, n_head=8, tie_word_embeddings=True),
    # -- chunked attention
    "llama4_text": _config(  # Llama4TextConfig; rope_theta: its default_theta
        f"{_COMMON} rms_norm_eps attention_dropout router_aux_loss_coef router_jitter_noise output_router_logits "
        "floor_scale attn_scale",
        vocab_size=202048, hidden_size=5120, intermediate_size=8192, intermediate_size_mlp=16384,
        num_hidden_layers=48, num_attention_heads=40, num_key_value_heads=8, head_dim=128, hidden_act="silu",
        max_position_embeddings=131072, tie_word_embeddings=False, num_experts_per_tok=1, num_local_experts=16,
        moe_layers=_null(), interleave_moe_layer_step=1, use_qk_norm=True, no_rope_layers=_null(),
        no_rope_layer_interval=4, attention_chunk_size=_null(8192), layer_types=_null(),
        attn_temperature_tuning=True, attention_bias=False, pad_token_id=_null(), rope_theta=500000.0),
    # the families the harness had left out
    "gpt_neo": _config(  # GPTNeoConfig; num_hidden_layers and num_attention_heads: aliases (its attribute_map)
        f"{_COMMON} resid_dropout embed_dropout attention_dropout classifier_dropout layer_norm_epsilon",
        vocab_size=50257, max_position_embeddings=2048, hidden_size=2048, num_layers=24, attention_types=_null(),
        num_heads=16, intermediate_size=_null(), window_size=256, activation_function="gelu_new",
        tie_word_embeddings=True),
    # DbrxConfig; d_model, n_heads and n_layers are typed int | None, but its model fails on None;
    # resid_pdrop (float | None) fails in its forward; emb_pdrop is read by nothing
    "dbrx": _config(
        f"{_COMMON} resid_pdrop",
        d_model=2048, n_heads=16, n_layers=24, max_seq_len=_null(2048), vocab_size=32000, attn_config=_null(),
        ffn_config=_null(), tie_word_embeddings=False, rope_parameters=_null(), rope_theta=10000.0),
    "dbrx_attn": _config(  # DbrxAttentionConfig (DBRX's attn_config); rope_theta: no field, needed present
        "attn_pdrop", clip_qkv=_null(), kv_n_heads=1, rope_theta=_null()),
    "dbrx_ffn": _config(  # DbrxFFNConfig (DBRX's ffn_config); hidden_size: overwritten by d_model
        "hidden_size moe_loss_weight", ffn_act_fn=_null(), ffn_hidden_size=3584, moe_num_experts=4, moe_top_k=1,
        moe_jitter_eps=_null(), moe_normalize_expert_weights=_null(1.0)),
    "openai-gpt": _config(  # OpenAIGPTConfig
        f"{_COMMON} resid_pdrop embd_pdrop attn_pdrop layer_norm_epsilon summary_type summary_use_proj "
        "summary_proj_to_labels summary_first_dropout",
        vocab_size=40478, n_positions=512, n_embd=768, n_layer=12, n_head=12, afn="gelu", tie_word_embeddings=True),
    "nanochat": _config(  # NanoChatConfig; head_dim: no field, read with getattr
        f"{_COMMON} attention_dropout rms_norm_eps",
        vocab_size=50304, hidden_size=768, intermediate_size=8192, num_hidden_layers=12, num_attention_heads=6,
        num_key_value_heads=_null(), head_dim=None, max_position_embeddings=2048, hidden_act="relu2",
        rope_parameters=_null(), rope_theta=10000.0, final_logit_softcapping=_null(15.0), attention_bias=False,
        tie_word_embeddings=False, pad_token_id=_null(1)),
    # -- position_offset
    "opt": _config(  # OPTConfig; word_embed_proj_dim None: hidden_size (its __post_init__)
        f"{_COMMON} dropout attention_dropout layerdrop init_std",
        vocab_size=50272, hidden_size=768, num_hidden_layers=12, ffn_dim=3072, max_position_embeddings=2048,
        num_attention_heads=12, activation_function="relu", do_layer_norm_before=True,
        _remove_final_layer_norm=False, word_embed_proj_dim=_null(), enable_bias=True,
        layer_norm_elementwise_affine=True, tie_word_embeddings=True, pad_token_id=_null(1)),
    "biogpt": _config(  # BioGptConfig
        f"{_COMMON} hidden_dropout_prob attention_probs_dropout_prob layer_norm_eps layerdrop activation_dropout",
        vocab_size=42384, hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096,
        hidden_act="gelu", max_position_embeddings=1024, scale_embedding=True, tie_word_embeddings=True,
        pad_token_id=_null(1)),
    # -- the Mamba-1 mixer. MambaConfig, FalconMambaConfig (time_step_rank "auto": ceil(hidden_size / 16))
    "mamba": _config(
        f"{_COMMON} layer_norm_epsilon residual_in_fp32 time_step_scale time_step_min time_step_max "
        "time_step_init_scheme time_step_floor rescale_prenorm_residual use_mambapy use_associative_scan",
        vocab_size=50280, hidden_size=768, state_size=16, num_hidden_layers=32, expand=2, conv_kernel=4,
        use_bias=False, use_conv_bias=True, hidden_act="silu", time_step_rank="auto", tie_word_embeddings=True),
    # -- sub_norms (BitNet)
    "bitnet": _config(  # BitNetConfig; head_dim: no field, read with getattr
        f"{_COMMON} rms_norm_eps",
        vocab_size=128256, hidden_size=2560, intermediate_size=6912, num_hidden_layers=30, num_attention_heads=20,
        num_key_value_heads=_null(5), head_dim=None, hidden_act="relu2", max_position_embeddings=2048,
        rope_parameters=_null(), rope_theta=500000.0, attention_bias=False, tie_word_embeddings=False,
        pad_token_id=_null()),
    "jamba": _config(  # JambaConfig; head_dim: not a field, read when given (JambaAttention's getattr)
        f"{_COMMON} rms_norm_eps attention_dropout output_router_logits router_aux_loss_coef use_mamba_kernels "
        "use_mambapy use_associative_scan",
        vocab_size=65536, tie_word_embeddings=False, hidden_size=4096, intermediate_size=14336,
        num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8, head_dim=_null(), hidden_act="silu",
        max_position_embeddings=262144, num_experts_per_tok=2, num_experts=16, num_local_experts=None,
        expert_layer_period=2, expert_layer_offset=1, attn_layer_period=8, attn_layer_offset=4, mamba_d_state=16,
        mamba_d_conv=4, mamba_expand=2, mamba_dt_rank="auto", mamba_conv_bias=True, mamba_proj_bias=False),
}
DEFAULTS["falcon_mamba"] = {**DEFAULTS["mamba"], "mixer_rms_eps": Default(1e-6, False)}
# -- the Mamba-2 mixer. Mamba2Config (its defaults: Mamba-Codestral-7B's shapes)
DEFAULTS["mamba2"] = _config(
    f"{_COMMON} layer_norm_epsilon time_step_rank time_step_min time_step_max time_step_floor time_step_limit "
    "rescale_prenorm_residual residual_in_fp32",
    num_heads=128, head_dim=64, vocab_size=32768, hidden_size=4096, state_size=128, num_hidden_layers=64, expand=2,
    conv_kernel=4, n_groups=8, use_bias=False, use_conv_bias=True, hidden_act="silu", chunk_size=256,
    tie_word_embeddings=False)
# mamba_d_head null: their validate_architecture multiplies it (fails); time_step_limit null: their
# mixer indexes it (fails)
_MAMBA2_KEYS = dict(mamba_n_heads=_null(128), mamba_d_head="auto", mamba_n_groups=_null(1),
                    mamba_d_state=_null(256), mamba_d_conv=_null(4), mamba_expand=_null(2),
                    mamba_chunk_size=_null(256), mamba_conv_bias=_null(True), mamba_proj_bias=_null(False))
DEFAULTS["bamba"] = _config(  # BambaConfig (its __post_init__ sets partial_rotary_factor 0.5)
    f"{_COMMON} rms_norm_eps time_step_limit",
    vocab_size=128000, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
    num_key_value_heads=_null(8), head_dim=None, hidden_act="silu", max_position_embeddings=262144,
    tie_word_embeddings=False, attention_bias=False, mlp_bias=False, attn_layer_indices=_null(),
    partial_rotary_factor=0.5, **_MAMBA2_KEYS)
DEFAULTS["granitemoehybrid"] = _config(  # GraniteMoeHybridConfig (embedding_multiplier null: its model
    # multiplies the embeddings by it, which fails)
    f"{_COMMON} rms_norm_eps residual_multiplier attention_multiplier logits_scaling time_step_limit",
    vocab_size=32000, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
    num_key_value_heads=_null(), head_dim=None, hidden_act="silu", max_position_embeddings=2048,
    tie_word_embeddings=False, attention_bias=False, embedding_multiplier=1.0, num_local_experts=_null(8),
    num_experts_per_tok=_null(2), shared_intermediate_size=1024, position_embedding_type=_null(),
    layer_types=_null(), rope_theta=10000.0, **_MAMBA2_KEYS)
# -- gated short convolutions. Lfm2Config (tie_embedding and block_ff_dim: legacy keys its __post_init__
# pops; head_dim: not a field, read when given, as Lfm2Attention's getattr)
DEFAULTS["lfm2"] = _config(
    f"{_COMMON} norm_eps",
    vocab_size=65536, hidden_size=2560, intermediate_size=12288, num_hidden_layers=32, num_attention_heads=32,
    num_key_value_heads=8, max_position_embeddings=128000, tie_word_embeddings=True, conv_bias=False,
    conv_L_cache=3, block_multiple_of=256, block_ffn_dim_multiplier=1.0, block_auto_adjust_ff_dim=True,
    full_attn_idxs=_null(), layer_types=_null(), rope_theta=1e6, head_dim=_null())
DEFAULTS["lfm2_moe"] = _config(  # Lfm2MoeConfig; tie_embedding: a legacy alias of tie_word_embeddings
    f"{_COMMON} norm_eps output_router_logits routed_scaling_factor norm_topk_prob",
    vocab_size=65536, hidden_size=2048, intermediate_size=7168, moe_intermediate_size=1792, num_hidden_layers=32,
    num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=128000, tie_word_embeddings=True,
    conv_bias=False, conv_L_cache=3, num_dense_layers=2, num_experts_per_tok=4, num_experts=32,
    use_expert_bias=True, layer_types=_null(), rope_theta=1e6, head_dim=_null())
# multimodal checkpoints (analysis.load.hf.vision): the top level, the language model only they
# hold, and the vision towers
DEFAULTS.update({
    "gemma3": _config(  # Gemma3Config
        "initializer_range", text_config=_null(), vision_config=_null(), tie_word_embeddings=_null(True),
        mm_tokens_per_image=_null(256), boi_token_index=_null(255999), eoi_token_index=_null(256000),
        image_token_index=_null(262144)),
    "llava": _config(  # LlavaConfig
        "image_token_index image_seq_length projector_hidden_act vision_feature_select_strategy",
        text_config=_null(), vision_config=_null(), tie_word_embeddings=False, vision_feature_layer=-2,
        multimodal_projector_bias=True),
    "mistral3": _config(  # Mistral3Config
        "image_token_index projector_hidden_act", text_config=_null(), vision_config=_null(), tie_word_embeddings=True,
        vision_feature_layer=-1, multimodal_projector_bias=False, spatial_merge_size=2),
    "qwen2_5_vl": _config(  # Qwen2_5_VLConfig
        "image_token_id video_token_id vision_start_token_id vision_end_token_id", text_config=_null(),
        vision_config=_null(), tie_word_embeddings=False),
    "qwen2_5_vl_text": _config(  # Qwen2_5_VLTextConfig
        f"{_COMMON} rms_norm_eps",
        vocab_size=152064, hidden_size=8192, intermediate_size=29568, num_hidden_layers=80, num_attention_heads=64,
        num_key_value_heads=_null(8), head_dim=None, hidden_act="silu", max_position_embeddings=32768,
        tie_word_embeddings=_null(), use_sliding_window=_null(False), sliding_window=_null(4096),
        max_window_layers=_null(80), layer_types=_null(), attention_dropout=_null(0.0), rope_theta=1000000.0),
    "qwen2_vl": _config(  # Qwen2VLConfig
        "image_token_id video_token_id vision_start_token_id vision_end_token_id", text_config=_null(),
        vision_config=_null(), tie_word_embeddings=False),
    "qwen2_vl_text": _config(  # Qwen2VLTextConfig
        f"{_COMMON} rms_norm_eps attention_dropout",
        vocab_size=152064, hidden_size=8192, intermediate_size=29568, num_hidden_layers=80, num_attention_heads=64,
        num_key_value_heads=8, head_dim=None, hidden_act="silu", max_position_embeddings=32768,
        tie_word_embeddings=_null(), use_sliding_window=_null(False), sliding_window=_null(4096),
        max_window_layers=_null(80), layer_types=_null(), rope_theta=1000000.0),
    "qwen2_vl_vision": _config(  # Qwen2VLVisionConfig
        "initializer_range", depth=32, embed_dim=1280, hidden_size=3584, hidden_act="quick_gelu", mlp_ratio=4,
        num_heads=16, in_channels=3, patch_size=14, spatial_merge_size=2, temporal_patch_size=2,
        rope_parameters=_null()),
    "idefics3": _config(  # Idefics3Config (SmolVLMConfig is the same)
        "image_token_id use_cache _pad_token_id", text_config=_null(), vision_config=_null(),
        tie_word_embeddings=False, scale_factor=2),
    "idefics3_vision": _config(  # Idefics3VisionConfig (SmolVLMVisionConfig is the same)
        "layer_norm_eps attention_dropout initializer_range", hidden_size=1152, intermediate_size=3072,
        num_hidden_layers=12, num_attention_heads=16, num_channels=3, image_size=224, patch_size=32,
        hidden_act="gelu_pytorch_tanh"),
    "siglip_vision_model": _config(  # SiglipVisionConfig
        "layer_norm_eps attention_dropout", hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
        num_attention_heads=12, num_channels=3, image_size=224, patch_size=16, hidden_act="gelu_pytorch_tanh",
        vision_use_head=True),
    "clip_vision_model": _config(  # CLIPVisionConfig
        "layer_norm_eps initializer_range initializer_factor", hidden_size=768, intermediate_size=3072,
        projection_dim=512, num_hidden_layers=12, num_attention_heads=12, num_channels=3, image_size=_null(224),
        patch_size=_null(32), hidden_act="quick_gelu", attention_dropout=_null(0.0)),
    "pixtral": _config(  # PixtralVisionConfig
        "initializer_range attention_dropout", hidden_size=1024, intermediate_size=4096, num_hidden_layers=24,
        num_attention_heads=16, num_channels=3, image_size=1024, patch_size=16, hidden_act="gelu",
        rope_parameters=_null(), head_dim=_null()),
    "qwen2_5_vl_vision": _config(  # Qwen2_5_VLVisionConfig
        "initializer_range", depth=32, hidden_size=3584, hidden_act="silu", intermediate_size=3420, num_heads=16,
        in_channels=3, patch_size=14, spatial_merge_size=2, temporal_patch_size=2, tokens_per_second=4,
        window_size=112, out_hidden_size=3584, fullatt_block_indexes=(7, 15, 23, 31), rope_parameters=_null()),
    # -- Llama 4 (Llama4Config; the tower: Llama4VisionConfig, whose class is fixed)
    "llama4": _config(
        "boi_token_index eoi_token_index image_token_index", text_config=_null(), vision_config=_null(),
        tie_word_embeddings=False),
    # -- Qwen3-VL and Qwen3.5 (Qwen3VLConfig, Qwen3VLMoeConfig, Qwen3_5Config, Qwen3_5MoeConfig; their towers'
    # classes fixed; Qwen3.5's without deepstack_visual_indexes)
    **{kind: _config("initializer_range image_token_id video_token_id vision_start_token_id vision_end_token_id",
                     text_config=_null(), vision_config=_null(), tie_word_embeddings=False)
       for kind in ("qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe")},
    **{kind: _config("initializer_range", depth=27, hidden_size=1152, hidden_act="gelu_pytorch_tanh",
                     intermediate_size=4304, num_heads=16, in_channels=3, patch_size=16, spatial_merge_size=2,
                     temporal_patch_size=2, out_hidden_size=3584, num_position_embeddings=2304, rope_parameters=_null(),
                     **({"deepstack_visual_indexes": (8, 16, 24)} if kind.startswith("qwen3_vl") else {}))
       for kind in ("qwen3_vl_vision", "qwen3_vl_moe_vision", "qwen3_5_vision", "qwen3_5_moe_vision")},
    # Qwen3VLTextConfig, Qwen3VLMoeTextConfig: their language models (only inside the checkpoint)
    "qwen3_vl_text": _config(
        f"{_COMMON} rms_norm_eps attention_dropout",
        vocab_size=151936, hidden_size=4096, intermediate_size=22016, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=_null(32), head_dim=128, hidden_act="silu", max_position_embeddings=128000,
        attention_bias=False, rope_parameters=_null(), rope_theta=500000.0),
    "qwen3_vl_moe_text": _config(
        f"{_COMMON} rms_norm_eps attention_dropout output_router_logits router_aux_loss_coef",
        vocab_size=151936, hidden_size=2048, intermediate_size=5632, num_hidden_layers=24, num_attention_heads=16,
        num_key_value_heads=16, head_dim=_null(), hidden_act="silu", max_position_embeddings=128000,
        tie_word_embeddings=True, attention_bias=False, decoder_sparse_step=1, moe_intermediate_size=1408,
        num_experts_per_tok=4, num_experts=60, mlp_only_layers=_null(), rope_parameters=_null(), rope_theta=500000.0),
    # -- Gemma 4 (Gemma4Config: vision_config and audio_config optional sub-configs; the tower: Gemma4VisionConfig)
    "gemma4": _config(
        "initializer_range", text_config=_null(), vision_config=_null(), audio_config=_null(),
        tie_word_embeddings=True),
    "gemma4_vision": _config(
        "initializer_range rms_norm_eps", hidden_size=768, intermediate_size=3072, num_hidden_layers=16,
        num_attention_heads=12, num_key_value_heads=12, head_dim=64, hidden_activation="gelu_pytorch_tanh",
        max_position_embeddings=131072, attention_bias=_null(False), rope_parameters=_null(), pooling_kernel_size=3,
        patch_size=16, position_embedding_size=10240, use_clipped_linears=False, standardize=False),
    "llama4_vision_model": _config(
        "hidden_act norm_eps vision_feature_select_strategy initializer_range multi_modal_projector_bias "
        "projector_dropout attention_dropout", hidden_size=768, num_hidden_layers=34, num_attention_heads=16,
        num_channels=3, intermediate_size=5632, vision_output_dim=7680, image_size=448, patch_size=14,
        pixel_shuffle_ratio=0.5, projector_input_dim=4096, projector_output_dim=4096, rope_parameters=_null()),
})
# A multimodal config's sub-config left out (or null) is the family's own default one (the
# init_kwargs of its config class's sub_configs_defaults), not its class's defaults
SUBCONFIGS: dict[str, dict[str, dict[str, Any]]] = {
    "llava": {"vision_config": dict(intermediate_size=4096, hidden_size=1024, patch_size=14, image_size=336,
                                    num_hidden_layers=24, num_attention_heads=16, projection_dim=768)},
    "mistral3": {
        "text_config": dict(head_dim=128, hidden_act="silu", hidden_size=5120, intermediate_size=32768,
                            max_position_embeddings=131072, num_attention_heads=32, num_hidden_layers=40,
                            num_key_value_heads=8, sliding_window=None, vocab_size=131072),
        "vision_config": dict(intermediate_size=4096, hidden_size=1024, patch_size=14, image_size=1540,
                              num_hidden_layers=24, num_attention_heads=16, head_dim=64, hidden_act="gelu")},
}
# -- lightning attention. MiniMaxConfig (its *_alpha_factor and *_beta_factor scale values only)
DEFAULTS["minimax"] = _config(
    f"{_COMMON} rms_norm_eps attention_dropout output_router_logits router_aux_loss_coef router_jitter_noise "
    "full_attn_alpha_factor full_attn_beta_factor linear_attn_alpha_factor linear_attn_beta_factor "
    "mlp_alpha_factor mlp_beta_factor",
    vocab_size=32000, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
    num_key_value_heads=8, head_dim=_null(), hidden_act="silu", max_position_embeddings=131072,
    tie_word_embeddings=False, sliding_window=_null(), num_local_experts=8, num_experts_per_tok=2,
    rope_theta=1e6, layer_types=_null(), block_size=256)
# RecurrentGemmaConfig: block_types null fails its __post_init__ (list(None)); partial_rotary_factor: its
# __post_init__'s default; head_dim and final_w_init_variance_scale: its __post_init__ overwrites them
DEFAULTS["recurrent_gemma"] = _config(
    "use_cache rms_norm_eps attention_dropout w_init_variance_scale",
    vocab_size=256000, hidden_size=2560, intermediate_size=7680, num_hidden_layers=26, num_attention_heads=10,
    lru_width=_null(), attention_window_size=2048, conv1d_width=4, logits_soft_cap=30.0,
    hidden_activation="gelu_pytorch_tanh", block_types=("recurrent", "recurrent", "attention"),
    num_key_value_heads=_null(), attention_bias=False, tie_word_embeddings=True, rope_theta=10000.0,
    partial_rotary_factor=0.5, rope_parameters=_null(), head_dim=_null(), final_w_init_variance_scale=_null())
DEFAULTS["gpt-sw3"] = DEFAULTS["gpt2"]
DEFAULTS["smolvlm"] = DEFAULTS["idefics3"]  # GPT-SW3 is built by GPT-2's classes (GPT2Config)

__all__ = ["DEFAULTS", "SUBCONFIGS", "Default"]
# -- layers of one sublayer each. NemotronHConfig (layers_block_type null: its __post_init__ reads
# hybrid_override_pattern or sets its default; moe_latent_size null: no latent projections)
DEFAULTS["nemotron_h"] = _config(
    f"{_COMMON} layer_norm_epsilon time_step_min time_step_max time_step_limit time_step_floor "
    "mamba_ssm_cache_dtype residual_in_fp32 rescale_prenorm_residual n_shared_experts moe_shared_expert_overlap "
    "routed_scaling_factor n_group topk_group norm_topk_prob num_nextn_predict_layers expand use_mamba_kernels "
    "num_logits_to_keep attention_bias attention_dropout hidden_dropout mamba_proj_bias output_router_logits",
    vocab_size=131072, hidden_size=4096, layers_block_type=_null(), hybrid_override_pattern=_null(),
    num_hidden_layers=_null(), tie_word_embeddings=False, num_attention_heads=32, num_key_value_heads=_null(8),
    head_dim=128, max_position_embeddings=4096, intermediate_size=21504, mlp_hidden_act="relu2", mlp_bias=False,
    ssm_state_size=128, mamba_num_heads=128, mamba_head_dim=64, mamba_hidden_act="silu", n_groups=8,
    conv_kernel=4, use_conv_bias=True, chunk_size=128, use_bias=False, n_routed_experts=8, num_experts_per_tok=2,
    moe_intermediate_size=7688, moe_shared_expert_intermediate_size=7688, moe_latent_size=_null(),
    sliding_window=_null(), mtp_layers_block_type=_null())
# -- Gated DeltaNet (analysis.load.hf.gated_deltanet): Qwen3NextConfig, Qwen3_5TextConfig, Qwen3_5MoeTextConfig
_GDN = dict(linear_conv_kernel_dim=4, linear_key_head_dim=128, linear_value_head_dim=128, linear_num_key_heads=16,
            linear_num_value_heads=32, layer_types=_null(), full_attention_interval=4, head_dim=256,
            hidden_act="silu", attention_bias=False, tie_word_embeddings=False, max_position_embeddings=32768,
            partial_rotary_factor=_null(0.25), rope_theta=10000.0)
DEFAULTS["qwen3_next"] = _config(
    f"{_COMMON} rms_norm_eps attention_dropout norm_topk_prob output_router_logits router_aux_loss_coef",
    vocab_size=151936, hidden_size=2048, intermediate_size=5632, num_hidden_layers=48, num_attention_heads=16,
    num_key_value_heads=2, decoder_sparse_step=1, moe_intermediate_size=512, shared_expert_intermediate_size=512,
    num_experts_per_tok=10, num_experts=512, mlp_only_layers=_null(), **_GDN)
DEFAULTS["qwen3_5_text"] = _config(
    f"{_COMMON} rms_norm_eps attention_dropout",
    vocab_size=248320, hidden_size=4096, intermediate_size=12288, num_hidden_layers=32, num_attention_heads=16,
    num_key_value_heads=4, **_GDN)
DEFAULTS["qwen3_5_moe_text"] = _config(
    f"{_COMMON} rms_norm_eps attention_dropout output_router_logits router_aux_loss_coef",
    vocab_size=248320, hidden_size=2048, num_hidden_layers=40, num_attention_heads=16, num_key_value_heads=2,
    moe_intermediate_size=512, shared_expert_intermediate_size=512, num_experts_per_tok=8, num_experts=256, **_GDN)
# -- DeepSeek Sparse Attention (analysis.load.hf.dsa): DeepseekV32Config, GlmMoeDsaConfig (its subclass:
# indexer_types null, and without index_topk_pattern, index_topk_freq and index_skip_topk_offset, which
# its __post_init__ reads only where given, every layer runs its indexer); q_lora_rank and the
# index_* sizes are typed int (the indexer reads the low-rank query); head_dim: pointed at
# qk_rope_head_dim by its __post_init__ (ignored)
_DSA_IGNORED = (f"{_COMMON} rms_norm_eps attention_dropout output_router_logits routed_scaling_factor n_group "
                "topk_group norm_topk_prob mlp_bias head_dim")
_DSA = dict(num_key_value_heads=128, hidden_act="silu", tie_word_embeddings=False, attention_bias=False,
            kv_lora_rank=512, qk_rope_head_dim=64, n_shared_experts=1, n_routed_experts=256, num_local_experts=None,
            num_experts_per_tok=8, moe_intermediate_size=2048, first_k_dense_replace=3, mlp_layer_types=_null(),
            layer_types=_null(), index_head_dim=128, index_topk=2048, rope_theta=10000.0)
DEFAULTS["deepseek_v32"] = _config(
    _DSA_IGNORED, **_DSA, vocab_size=129280, hidden_size=7168, intermediate_size=18432, num_hidden_layers=61,
    num_attention_heads=128, q_lora_rank=1536, qk_nope_head_dim=128, v_head_dim=128, index_n_heads=64,
    max_position_embeddings=163840)
DEFAULTS["glm_moe_dsa"] = _config(
    _DSA_IGNORED, **{**_DSA, "num_key_value_heads": 64}, vocab_size=154880, hidden_size=6144,
    intermediate_size=12288, num_hidden_layers=78, num_attention_heads=64, q_lora_rank=2048, qk_nope_head_dim=192,
    v_head_dim=256, index_n_heads=32, max_position_embeddings=202752, indexer_types=_null())
# Gemma4TextConfig; global_head_dim and num_global_key_value_heads: its __post_init__ (kwargs it turns into
# per_layer_config; a null global_head_dim fails it); hidden_size_per_layer_input 256: per-layer embeddings on
# (refused by the mapper)
DEFAULTS["gemma4_text"] = _config(
    f"{_COMMON} rms_norm_eps",
    vocab_size=262144, hidden_size=2304, intermediate_size=9216, num_hidden_layers=30, num_attention_heads=8,
    num_key_value_heads=4, head_dim=256, hidden_activation="gelu_pytorch_tanh", max_position_embeddings=131072,
    tie_word_embeddings=True, attention_bias=False, sliding_window=512, layer_types=_null(),
    final_logit_softcapping=_null(), use_bidirectional_attention=_null(), pad_token_id=_null(0),
    rope_parameters=_null(), vocab_size_per_layer_input=262144, hidden_size_per_layer_input=256,
    attention_k_eq_v=False, num_kv_shared_layers=0, enable_moe_block=False, use_double_wide_mlp=False,
    num_experts=_null(), top_k_experts=_null(), moe_intermediate_size=_null(), global_head_dim=512,
    num_global_key_value_heads=_null(), per_layer_config=_null())
# Gemma3nTextConfig; intermediate_size: a value or a list per layer, activation_sparsity_pattern: a list per layer
# (its __post_init__; null: the first 10 layers of more than 10 sparse at 0.95); layer_types: its __post_init__
DEFAULTS["gemma3n_text"] = _config(
    f"{_COMMON} rms_norm_eps altup_active_idx altup_coef_clip", attention_dropout=_null(0.0),
    vocab_size=262400, hidden_size=2048, intermediate_size=16384, num_hidden_layers=35, num_attention_heads=8,
    num_key_value_heads=2, head_dim=256, hidden_activation="gelu_pytorch_tanh", max_position_embeddings=32768,
    tie_word_embeddings=True, attention_bias=False, sliding_window=512, layer_types=_null(),
    final_logit_softcapping=30.0, pad_token_id=_null(0), rope_parameters=_null(), vocab_size_per_layer_input=262144,
    hidden_size_per_layer_input=256, altup_correct_scale=True, altup_num_inputs=4, num_kv_shared_layers=15,
    laurel_rank=64, activation_sparsity_pattern=_null())
# LongcatFlashConfig; num_hidden_layers: a property setting num_layers to half (null fails it); head_dim sizes
# the RoPE tables; qk_head_dim: None is qk_nope_head_dim + qk_rope_head_dim (its __post_init__); rope_theta:
# its default_theta
DEFAULTS["longcat_flash"] = _config(
    f"{_COMMON} rms_norm_eps attention_dropout output_router_logits routed_scaling_factor num_hidden_layers",
    vocab_size=131072, hidden_size=6144, num_layers=28, num_attention_heads=64, num_key_value_heads=_null(),
    hidden_act="silu", max_position_embeddings=131072, tie_word_embeddings=False, rope_parameters=_null(),
    attention_bias=False, ffn_hidden_size=12288, q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128,
    qk_rope_head_dim=64, head_dim=64, v_head_dim=128, qk_head_dim=_null(), moe_topk=12, n_routed_experts=512,
    zero_expert_num=256, expert_ffn_hidden_size=2048, rope_theta=10000000.0)
# HYV4Config; its __post_init__ sets num_key_value_heads to the heads and head_dim to qk_rope_head_dim (both
# ignored) and defaults mlp_layer_types, layer_types and indexer_types (typed list | None)
DEFAULTS["hy_v4"] = _config(
    f"{_COMMON} rms_norm_eps attention_dropout output_router_logits routed_scaling_factor n_group topk_group "
    "norm_topk_prob head_dim num_key_value_heads hc_magnitude hc_eps learnable_sink_init swiglu_limit",
    vocab_size=120832, hidden_size=2816, intermediate_size=6912, moe_intermediate_size=768, num_hidden_layers=34,
    num_attention_heads=32, hidden_act="silu", max_position_embeddings=262144, pad_token_id=_null(120002),
    tie_word_embeddings=False, attention_bias=False, n_routed_experts=256, num_local_experts=None,
    n_shared_experts=1, num_experts_per_tok=8, q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=192,
    qk_rope_head_dim=64, v_head_dim=256, mlp_layer_types=_null(), layer_types=_null(), index_topk=2048,
    index_head_dim=128, index_n_heads=16, indexer_types=_null(), hc_mult=4, rope_parameters=_null(),
    rope_theta=10000.0)

# Gemma4UnifiedTextConfig: Gemma4TextConfig without the per-layer-embedding and MoE fields, a window of 1024,
# a context of 262,144 and use_bidirectional_attention "vision"
DEFAULTS["gemma4_unified_text"] = {k: v for k, v in DEFAULTS["gemma4_text"].items() if k not in (
    "vocab_size_per_layer_input", "hidden_size_per_layer_input", "enable_moe_block", "num_experts", "top_k_experts",
    "moe_intermediate_size")} | _config(sliding_window=1024, max_position_embeddings=262144,
                                         use_bidirectional_attention=_null("vision"))
# -- KDA (analysis.load.hf.kda): KimiLinearConfig. Its attribute_map names (num_experts, num_experts_per_token,
# num_shared_experts, model_max_length, num_expert_group, moe_renormalize) read as the fields they stand for
# (a null model_max_length: no bound; a null moe_renormalize: false); num_experts_per_tok is typed int | None
# (a given num_experts_per_token wins over its null); topk_group and v_head_dim are typed int | None too, but
# its model fails on None; linear_attn_config and first_k_dense_replace are kwargs its __post_init__ reads (a
# null linear_attn_config fails there, a null first_k_dense_replace where no mlp_layer_types replaces it)
_KIMI_EXPERTS = dict(num_local_experts=256, num_experts=256, num_experts_per_tok=_null(8), num_experts_per_token=8,
                     n_shared_experts=1, num_shared_experts=1)
DEFAULTS["kimi_linear"] = _config(
    f"{_COMMON} rms_norm_eps output_router_logits routed_scaling_factor n_group num_expert_group topk_group "
    "norm_topk_prob",
    vocab_size=163840, hidden_size=2304, intermediate_size=9216, moe_intermediate_size=1024, num_hidden_layers=27,
    num_attention_heads=32, num_key_value_heads=_null(32), kv_lora_rank=512, q_lora_rank=_null(),
    qk_rope_head_dim=64, v_head_dim=128, qk_nope_head_dim=128, hidden_act="silu", max_position_embeddings=1048576,
    model_max_length=_null(1048576), tie_word_embeddings=False, attention_bias=False, mlp_layer_types=_null(),
    layer_types=_null(), linear_head_dim=128, linear_num_heads=32, linear_conv_kernel_dim=4, linear_attn_config={},
    first_k_dense_replace=_null(1), pad_token_id=_null(163839), **_KIMI_EXPERTS)
# FalconH1Config (head_dim: not a field, read where given, as FalconH1Attention's getattr; layer_types: its
# attribute_map points it at a property without a setter, so given or null it fails; key_multiplier, the
# attention and SSM in and out multipliers and time_step_limit are typed ... | None, but its model multiplies
# by them or indexes it; use_cache may be null)
DEFAULTS["falcon_h1"] = _config(
    "initializer_range rms_norm_eps key_multiplier attention_in_multiplier attention_out_multiplier "
    "ssm_in_multiplier ssm_out_multiplier lm_head_multiplier embedding_multiplier time_step_limit",
    vocab_size=128000, tie_word_embeddings=False, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
    num_attention_heads=32, num_key_value_heads=_null(8), head_dim=None, hidden_act="silu",
    max_position_embeddings=8192, attention_bias=False, mlp_bias=False, mamba_d_ssm=_null(1024),
    mamba_n_heads=_null(128), mamba_d_head=_null("auto"), mamba_n_groups=_null(1), mamba_d_state=_null(256),
    mamba_d_conv=_null(4), mamba_expand=_null(2), mamba_chunk_size=_null(256), mamba_conv_bias=_null(True),
    mamba_proj_bias=_null(False), mamba_rms_norm=_null(False), projectors_bias=_null(False), layer_types=None,
    rope_parameters=_null(), rope_theta=10000.0)
# OlmoHybridConfig (its __post_init__ derives the linear_* sizes and layer_types from a null; head_dim: not a
# field, read where given, as Olmo3Attention's getattr; initializer_range: validated in [0, 1])
DEFAULTS["olmo_hybrid"] = _config(
    f"{_COMMON} rms_norm_eps linear_a_log_min linear_a_log_max linear_dt_min linear_dt_max linear_dt_init_floor "
    "linear_allow_neg_eigval",
    vocab_size=100352, hidden_size=3840, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=30,
    num_key_value_heads=_null(), head_dim=None, hidden_act="silu", max_position_embeddings=65536,
    tie_word_embeddings=False, attention_bias=False, pad_token_id=_null(100277), rope_parameters=_null(),
    rope_theta=10000.0, layer_types=_null(), linear_num_key_heads=_null(), linear_num_value_heads=_null(),
    linear_key_head_dim=_null(), linear_value_head_dim=_null(), linear_conv_kernel_dim=4)
# ZambaConfig (Zyphra/Zamba-7B-v1's shapes; its __post_init__ derives attention_hidden_size, attention_head_dim,
# mamba_dt_rank "auto" and layers_block_type from a null or absent key; head_dim and layer_types: its attribute_map
# names for attention_head_dim and layers_block_type, set after __post_init__, so a null head_dim fails the model)
DEFAULTS["zamba"] = _config(
    f"{_COMMON} rms_norm_eps attention_dropout time_step_min time_step_max time_step_floor use_mamba_kernels "
    "use_associative_scan num_logits_to_keep",
    vocab_size=32000, tie_word_embeddings=True, hidden_size=3712, attention_hidden_size=_null(),
    intermediate_size=14848, num_hidden_layers=76, num_attention_heads=16, attention_head_dim=_null(), head_dim=None,
    num_key_value_heads=16, n_mamba_heads=2, hidden_act="gelu", hidden_mamba_act="silu", pad_token_id=_null(0),
    max_position_embeddings=4096, attn_layer_period=6, attn_layer_offset=4, mamba_d_state=16, mamba_d_conv=4,
    mamba_expand=2, mamba_dt_rank="auto", mamba_conv_bias=True, mamba_proj_bias=False, layers_block_type=_null(),
    layer_types=None)
# Zamba2Config (its __post_init__ derives intermediate_size, num_key_value_heads and layers_block_type from a null,
# and overwrites head_dim: analysis.load.hf.zamba)
DEFAULTS["zamba2"] = _config(
    f"{_COMMON} rms_norm_eps attention_dropout time_step_min time_step_max time_step_floor use_mamba_kernels "
    "use_conv_bias use_mem_eff_path num_logits_to_keep",
    vocab_size=32000, max_position_embeddings=4096, hidden_size=2560, num_hidden_layers=54,
    layers_block_type=_null(), mamba_d_state=64, mamba_d_conv=4, mamba_expand=2, mamba_ngroups=1, n_mamba_heads=8,
    chunk_size=256, add_bias_linear=False, intermediate_size=_null(), hidden_act="gelu", num_attention_heads=32,
    num_key_value_heads=_null(), num_mem_blocks=1, use_shared_attention_adapter=False, adapter_rank=128,
    use_mem_rope=False, rope_parameters=_null(), rope_theta=10000.0, pad_token_id=_null(0),
    use_long_context=False, tie_word_embeddings=True)
