"""Hugging Face config.json, proven against transformers' own modeling code.

For every supported ``model_type`` the config is written by transformers' own config class
with the published hyperparameters of a real checkpoint (cited beside each), read by llmcalc,
and llmcalc's parameter count must equal the numel of the state dict of transformers' model
built on the meta device (what a checkpoint stores): in total, for the embedding and the LM
head, and layer by layer. And every key of every shipped config.json, left out or null, reads
as transformers reads it.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging

import pytest
import torch
import transformers

from llmcalc.analysis.count.params import count_params
from llmcalc.analysis.errors import ConfigError
from llmcalc.analysis.load.catalog import HF_DIR, from_json, load_bundled, load_path
from llmcalc.analysis.load.hf import MAPPERS, from_hf_config, unclassified
from llmcalc.analysis.model.layers import layer_plan
from llmcalc.analysis.verify import against

pytestmark = pytest.mark.reference

logging.getLogger("transformers").setLevel(logging.ERROR)

# model_type -> (checkpoint, published hyperparameters, the published parameter total or None).
# The totals are the checkpoints' own (safetensors) counts.
CHECKPOINTS: dict[str, tuple[str, dict, int | None]] = {
    "gpt2": ("openai-community/gpt2", dict(
        vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12), 124_439_808),
    "gpt_neox": ("EleutherAI/pythia-410m", dict(
        vocab_size=50304, hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
        intermediate_size=4096, max_position_embeddings=2048, hidden_act="gelu", use_parallel_residual=True,
        rope_parameters=dict(rope_type="default", rope_theta=10000.0, partial_rotary_factor=0.25),
        tie_word_embeddings=False), 405_334_016),
    "gptj": ("EleutherAI/gpt-j-6b", dict(
        vocab_size=50400, n_positions=2048, n_embd=4096, n_layer=28, n_head=16, rotary_dim=64,
        activation_function="gelu_new", tie_word_embeddings=False), None),  # model card: 6,053,381,344 (see README)
    "falcon": ("tiiuae/falcon-7b", dict(
        vocab_size=65024, hidden_size=4544, num_hidden_layers=32, num_attention_heads=71, multi_query=True,
        parallel_attn=True, bias=False, alibi=False, new_decoder_architecture=False,
        max_position_embeddings=2048), 6_921_720_704),
    "phi": ("microsoft/phi-2", dict(
        vocab_size=51200, hidden_size=2560, intermediate_size=10240, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=32, max_position_embeddings=2048, hidden_act="gelu_new",
        rope_parameters=dict(rope_type="default", rope_theta=10000.0, partial_rotary_factor=0.4),
        tie_word_embeddings=False), 2_779_683_840),
    "phi3": ("microsoft/Phi-3-mini-4k-instruct", dict(
        vocab_size=32064, hidden_size=3072, intermediate_size=8192, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=32, max_position_embeddings=4096, original_max_position_embeddings=4096,
        sliding_window=2047, tie_word_embeddings=False, pad_token_id=32000, bos_token_id=1, eos_token_id=32000),
        3_821_079_552),
    "llama": ("meta-llama/Llama-3.1-8B", dict(
        vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=8, max_position_embeddings=131072,
        rope_parameters=dict(rope_type="llama3", rope_theta=500000.0, factor=8.0, low_freq_factor=1.0,
                             high_freq_factor=4.0, original_max_position_embeddings=8192),
        tie_word_embeddings=False, bos_token_id=128000, eos_token_id=128001), 8_030_261_248),
    "mistral": ("mistralai/Mistral-7B-v0.1", dict(
        vocab_size=32000, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=8, max_position_embeddings=32768, sliding_window=4096, tie_word_embeddings=False),
        7_241_732_096),
    "mixtral": ("mistralai/Mixtral-8x7B-v0.1", dict(
        vocab_size=32000, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=8, max_position_embeddings=32768, num_local_experts=8, num_experts_per_tok=2,
        rope_parameters=dict(rope_type="default", rope_theta=1e6), tie_word_embeddings=False), 46_702_792_704),
    "qwen2": ("Qwen/Qwen2.5-0.5B", dict(
        vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
        num_key_value_heads=2, max_position_embeddings=32768, use_sliding_window=False, sliding_window=32768,
        max_window_layers=24, rope_parameters=dict(rope_type="default", rope_theta=1e6),
        tie_word_embeddings=True), 494_032_768),
    "qwen2_moe": ("Qwen/Qwen1.5-MoE-A2.7B", dict(
        vocab_size=151936, hidden_size=2048, intermediate_size=5632, num_hidden_layers=24, num_attention_heads=16,
        num_key_value_heads=16, max_position_embeddings=8192, num_experts=60, num_experts_per_tok=4,
        moe_intermediate_size=1408, shared_expert_intermediate_size=5632, decoder_sparse_step=1,
        tie_word_embeddings=False), 14_315_784_192),
    "qwen3": ("Qwen/Qwen3-0.6B", dict(
        vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16,
        num_key_value_heads=8, head_dim=128, max_position_embeddings=40960,
        rope_parameters=dict(rope_type="default", rope_theta=1e6), tie_word_embeddings=True), 596_049_920),
    "qwen3_moe": ("Qwen/Qwen3-30B-A3B", dict(
        vocab_size=151936, hidden_size=2048, intermediate_size=6144, moe_intermediate_size=768,
        num_hidden_layers=48, num_attention_heads=32, num_key_value_heads=4, head_dim=128, num_experts=128,
        num_experts_per_tok=8, max_position_embeddings=40960, norm_topk_prob=True,
        rope_parameters=dict(rope_type="default", rope_theta=1e6), tie_word_embeddings=False), 30_532_122_624),
    "gemma": ("google/gemma-2b", dict(
        vocab_size=256000, hidden_size=2048, intermediate_size=16384, num_hidden_layers=18, num_attention_heads=8,
        num_key_value_heads=1, head_dim=256, max_position_embeddings=8192), 2_506_172_416),
    "gemma2": ("google/gemma-2-9b", dict(
        vocab_size=256000, hidden_size=3584, intermediate_size=14336, num_hidden_layers=42, num_attention_heads=16,
        num_key_value_heads=8, head_dim=256, max_position_embeddings=8192, sliding_window=4096,
        query_pre_attn_scalar=256, attn_logit_softcapping=50.0, final_logit_softcapping=30.0), 9_241_705_984),
    "gemma3_text": ("google/gemma-3-1b-pt", dict(
        vocab_size=262144, hidden_size=1152, intermediate_size=6912, num_hidden_layers=26, num_attention_heads=4,
        num_key_value_heads=1, head_dim=256, max_position_embeddings=32768, sliding_window=512,
        query_pre_attn_scalar=256), 999_885_952),
    "olmo": ("allenai/OLMo-1B-hf", dict(
        vocab_size=50304, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=16,
        num_key_value_heads=16, max_position_embeddings=2048, tie_word_embeddings=True), 1_176_764_416),
    "olmo2": ("allenai/OLMo-2-1124-7B", dict(
        vocab_size=100352, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=32, max_position_embeddings=4096,
        rope_parameters=dict(rope_type="default", rope_theta=500000.0), tie_word_embeddings=False),
        7_298_617_344),
    "stablelm": ("stabilityai/stablelm-2-1_6b", dict(
        vocab_size=100352, hidden_size=2048, intermediate_size=5632, num_hidden_layers=24, num_attention_heads=32,
        num_key_value_heads=32, max_position_embeddings=4096, use_qkv_bias=True,
        rope_parameters=dict(rope_type="default", rope_theta=10000.0, partial_rotary_factor=0.25),
        tie_word_embeddings=False), 1_644_515_328),
    "starcoder2": ("bigcode/starcoder2-3b", dict(
        vocab_size=49152, hidden_size=3072, intermediate_size=12288, num_hidden_layers=30, num_attention_heads=24,
        num_key_value_heads=2, max_position_embeddings=16384, sliding_window=4096, use_bias=True,
        rope_parameters=dict(rope_type="default", rope_theta=999999.4420358813), tie_word_embeddings=True),
        3_030_371_328),
    "granite": ("ibm-granite/granite-3.0-2b-base", dict(
        vocab_size=49155, hidden_size=2048, intermediate_size=8192, num_hidden_layers=40, num_attention_heads=32,
        num_key_value_heads=8, max_position_embeddings=4096, embedding_multiplier=12.0, residual_multiplier=0.22,
        attention_multiplier=0.015625, logits_scaling=8.0, tie_word_embeddings=True,
        pad_token_id=0, bos_token_id=0, eos_token_id=0), None),  # published total not pinned here
    "smollm3": ("HuggingFaceTB/SmolLM3-3B", dict(
        vocab_size=128256, hidden_size=2048, intermediate_size=11008, num_hidden_layers=36, num_attention_heads=16,
        num_key_value_heads=4, max_position_embeddings=65536, no_rope_layer_interval=4,
        rope_parameters=dict(rope_type="default", rope_theta=5e6), tie_word_embeddings=True,
        pad_token_id=128004, bos_token_id=128000, eos_token_id=128001), 3_075_098_624),
    "deepseek_v2": ("deepseek-ai/DeepSeek-V2-Lite", dict(
        vocab_size=102400, hidden_size=2048, intermediate_size=10944, moe_intermediate_size=1408,
        num_hidden_layers=27, num_attention_heads=16, num_key_value_heads=16, n_routed_experts=64,
        n_shared_experts=2, num_experts_per_tok=6, first_k_dense_replace=1, kv_lora_rank=512, q_lora_rank=None,
        qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128, max_position_embeddings=163840,
        tie_word_embeddings=False, bos_token_id=100000, eos_token_id=100001), 15_706_484_224),
    # the router's e_score_correction_bias (256 per MoE layer) is a buffer in transformers, in the
    # checkpoint and in its state dict: counted (the 671B is without the multi-token-prediction layer)
    "deepseek_v3": ("deepseek-ai/DeepSeek-V3", dict(
        vocab_size=129280, hidden_size=7168, intermediate_size=18432, moe_intermediate_size=2048,
        num_hidden_layers=61, num_attention_heads=128, num_key_value_heads=128, n_routed_experts=256,
        n_shared_experts=1, num_experts_per_tok=8, first_k_dense_replace=3, n_group=8, topk_group=4,
        q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128,
        max_position_embeddings=163840, tie_word_embeddings=False, bos_token_id=0, eos_token_id=1),
        671_026_419_200),
    "gpt_oss": ("openai/gpt-oss-20b", dict(
        vocab_size=201088, hidden_size=2880, intermediate_size=2880, num_hidden_layers=24, num_attention_heads=64,
        num_key_value_heads=8, head_dim=64, num_local_experts=32, num_experts_per_tok=4, sliding_window=128,
        max_position_embeddings=131072, tie_word_embeddings=False), 20_914_757_184),
    # -- dense decoders; None: the hyperparameters are the defaults of transformers' config class,
    # whose docstring names the checkpoint
    "glm4": ("zai-org/GLM-4-9B-0414", dict(
        vocab_size=151552, hidden_size=4096, intermediate_size=13696, num_hidden_layers=40, num_attention_heads=32,
        num_key_value_heads=2, head_dim=128, attention_bias=True, max_position_embeddings=32768,
        rope_parameters=dict(rope_type="default", rope_theta=10000.0, partial_rotary_factor=0.5),
        tie_word_embeddings=False), None),
    "glm": ("THUDM/glm-4-9b-chat-hf", dict(
        vocab_size=151552, hidden_size=4096, intermediate_size=13696, num_hidden_layers=40, num_attention_heads=32,
        num_key_value_heads=2, head_dim=128, attention_bias=True, max_position_embeddings=131072,
        tie_word_embeddings=False), None),
    "ernie4_5": ("baidu/ERNIE-4.5-0.3B-PT", dict(
        vocab_size=103424, hidden_size=1024, intermediate_size=3072, num_hidden_layers=18, num_attention_heads=16,
        num_key_value_heads=2, head_dim=128, use_bias=False, max_position_embeddings=131072,
        rope_parameters=dict(rope_type="default", rope_theta=500000.0), tie_word_embeddings=True), None),
    "hunyuan_v1_dense": ("tencent/Hunyuan-7B-Instruct (HunYuanDenseV1Config's defaults)", dict(
        vocab_size=290943, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
        head_dim=128, max_position_embeddings=2048, tie_word_embeddings=False), None),
    "seed_oss": ("ByteDance-Seed/Seed-OSS-36B-Instruct", dict(
        vocab_size=155136, hidden_size=5120, intermediate_size=27648, num_hidden_layers=64, num_attention_heads=80,
        num_key_value_heads=8, head_dim=128, attention_bias=True, attention_out_bias=False, mlp_bias=False,
        max_position_embeddings=524288, tie_word_embeddings=False), None),
    "exaone4": ("LGAI-EXAONE/EXAONE-4.0-32B (Exaone4Config's defaults)", dict(
        vocab_size=102400, hidden_size=4096, intermediate_size=16384, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=32, max_position_embeddings=2048, sliding_window=4096, sliding_window_pattern=4,
        tie_word_embeddings=False), None),
    "olmo3": ("allenai/Olmo-3-7B-Instruct (Olmo3Config's defaults)", dict(
        vocab_size=50304, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
        max_position_embeddings=2048, sliding_window=4096, tie_word_embeddings=False), None),
    "helium": ("kyutai/helium-1-preview (HeliumConfig's defaults)", dict(
        vocab_size=48000, hidden_size=2560, intermediate_size=7040, num_hidden_layers=24, num_attention_heads=20,
        num_key_value_heads=20, head_dim=128, max_position_embeddings=4096, tie_word_embeddings=False), None),
    "arcee": ("arcee-ai/AFM-4.5B (ArceeConfig's defaults)", dict(
        vocab_size=32000, hidden_size=2560, intermediate_size=18432, num_hidden_layers=32, num_attention_heads=32,
        hidden_act="relu2", max_position_embeddings=4096, tie_word_embeddings=False), None),
    "internlm3": ("internlm/internlm3-8b-instruct", dict(
        vocab_size=128512, hidden_size=4096, intermediate_size=10240, num_hidden_layers=48, num_attention_heads=32,
        num_key_value_heads=2, head_dim=128, max_position_embeddings=32768, tie_word_embeddings=False), None),
    "ministral": ("mistralai/Ministral-8B-Instruct-2410 (MinistralConfig's defaults)", dict(
        vocab_size=32000, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=8, head_dim=128, max_position_embeddings=131072, sliding_window=4096,
        tie_word_embeddings=False),
        None),
    "ministral3": ("mistralai/Ministral-3-8B-Base-2512 (Ministral3Config's defaults)", dict(
        vocab_size=131072, hidden_size=4096, intermediate_size=14336, num_hidden_layers=34, num_attention_heads=32,
        num_key_value_heads=8, head_dim=128, max_position_embeddings=262144, tie_word_embeddings=False), None),
    "iquestcoder": ("IQuestLab/IQuest-Coder-V1-40B-Instruct (IQuestCoderConfig's defaults)", dict(
        vocab_size=76800, hidden_size=5120, intermediate_size=27648, num_hidden_layers=80, num_attention_heads=40,
        num_key_value_heads=8, head_dim=128, max_position_embeddings=131072, tie_word_embeddings=False), None),
    "jais2": ("inceptionai/Jais-2-8B-Chat (Jais2Config's defaults)", dict(
        vocab_size=150272, hidden_size=3328, intermediate_size=26624, num_hidden_layers=32, num_attention_heads=26,
        hidden_act="relu2", max_position_embeddings=8192, tie_word_embeddings=False), None),
    "cwm": ("facebook/cwm (CwmConfig's defaults)", dict(
        vocab_size=128256, hidden_size=6144, intermediate_size=21504, num_hidden_layers=64, num_attention_heads=48,
        num_key_value_heads=8, head_dim=128, max_position_embeddings=131072, sliding_window=8192,
        tie_word_embeddings=False), None),
    # older decoders, and Cohere
    "gpt_bigcode": ("bigcode/gpt_bigcode-santacoder", dict(
        vocab_size=49280, n_positions=2048, n_embd=2048, n_layer=24, n_head=16, n_inner=8192, multi_query=True,
        activation_function="gelu_fast"), None),  # published total not pinned here
    "codegen": ("Salesforce/codegen-350M-mono", dict(
        vocab_size=51200, n_positions=2048, n_ctx=2048, n_embd=1024, n_layer=20, n_head=16, rotary_dim=32,
        activation_function="gelu_new", tie_word_embeddings=False), None),  # published total not pinned here
    "persimmon": ("adept/persimmon-8b-base", dict(
        vocab_size=262144, hidden_size=4096, intermediate_size=16384, num_hidden_layers=36, num_attention_heads=64,
        max_position_embeddings=16384, hidden_act="relu2", qk_layernorm=True,
        rope_parameters=dict(rope_type="default", rope_theta=25000.0, partial_rotary_factor=0.5),
        tie_word_embeddings=False), None),  # published total not pinned here
    "nemotron": ("nvidia/Minitron-4B-Base", dict(
        vocab_size=256000, hidden_size=3072, intermediate_size=9216, num_hidden_layers=32, num_attention_heads=24,
        num_key_value_heads=8, head_dim=128, max_position_embeddings=4096, hidden_act="relu2",
        rope_parameters=dict(rope_type="default", rope_theta=10000.0, partial_rotary_factor=0.5),
        tie_word_embeddings=False), None),  # published total not pinned here
    "cohere": ("CohereForAI/c4ai-command-r-v01", dict(
        vocab_size=256000, hidden_size=8192, intermediate_size=22528, num_hidden_layers=40, num_attention_heads=64,
        num_key_value_heads=64, max_position_embeddings=8192, logit_scale=0.0625, use_qk_norm=False,
        rope_parameters=dict(rope_type="default", rope_theta=8000000.0), tie_word_embeddings=True),
        None),  # published total not pinned here
    "cohere2": ("CohereForAI/c4ai-command-r7b-12-2024", dict(
        vocab_size=256000, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=8, max_position_embeddings=8192, sliding_window=4096, sliding_window_pattern=4,
        logit_scale=0.25, rope_parameters=dict(rope_type="default", rope_theta=50000.0),
        tie_word_embeddings=True), None),  # published total not pinned here
    "mpt": ("mosaicml/mpt-7b", dict(
        d_model=4096, n_heads=32, n_layers=32, expansion_ratio=4, max_seq_len=2048, vocab_size=50432,
        no_bias=True, learned_pos_emb=True, attn_config=dict(alibi=True, attn_type="multihead_attention")),
        None),  # published total not pinned here
    "xglm": ("facebook/xglm-564M", dict(
        vocab_size=256008, max_position_embeddings=2048, d_model=1024, ffn_dim=4096, num_layers=24,
        attention_heads=16, activation_function="gelu", scale_embedding=True), None),  # published total not pinned here
    # mixture-of-experts decoders
    # GLM-4.5-Air without its multi-token-prediction layer (transformers does not build it): the
    # checkpoint's own count includes it
    "glm4_moe": ("zai-org/GLM-4.5-Air", dict(
        vocab_size=151552, hidden_size=4096, intermediate_size=10944, moe_intermediate_size=1408,
        num_hidden_layers=46, num_attention_heads=96, num_key_value_heads=8, head_dim=128, n_routed_experts=128,
        n_shared_experts=1, num_experts_per_tok=8, first_k_dense_replace=1, attention_bias=True, use_qk_norm=False,
        rope_parameters=dict(rope_type="default", rope_theta=1e6, partial_rotary_factor=0.5),
        max_position_embeddings=131072, num_nextn_predict_layers=1, tie_word_embeddings=False), None),
    "olmoe": ("allenai/OLMoE-1B-7B-0924", dict(
        vocab_size=50304, hidden_size=2048, intermediate_size=1024, num_hidden_layers=16, num_attention_heads=16,
        num_key_value_heads=16, num_experts=64, num_experts_per_tok=8, max_position_embeddings=4096,
        clip_qkv=None, tie_word_embeddings=False, pad_token_id=1, eos_token_id=50279), 6_919_161_856),
    "granitemoe": ("ibm-granite/granite-3.0-1b-a400m-base", dict(
        vocab_size=49155, hidden_size=1024, intermediate_size=512, num_hidden_layers=24, num_attention_heads=16,
        num_key_value_heads=8, num_local_experts=32, num_experts_per_tok=8, max_position_embeddings=4096,
        embedding_multiplier=12.0, residual_multiplier=0.22, attention_multiplier=0.015625, logits_scaling=6.0,
        tie_word_embeddings=True, pad_token_id=0, bos_token_id=0, eos_token_id=0), None),
    # its published shapes are not pinned here: GraniteMoeShared's class defaults with a shared MLP
    "granitemoeshared": ("ibm-research/moe-7b-1b-active-shared-experts", dict(
        vocab_size=32000, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
        num_local_experts=8, num_experts_per_tok=2, shared_intermediate_size=1024), None),
    "phimoe": ("microsoft/Phi-3.5-MoE-instruct", dict(
        vocab_size=32064, hidden_size=4096, intermediate_size=6400, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=8, num_local_experts=16, num_experts_per_tok=2, max_position_embeddings=131072,
        sliding_window=131072, attention_bias=True, lm_head_bias=True, tie_word_embeddings=False,
        rope_parameters=dict(rope_type="default", rope_theta=10000.0)), None),  # model card: 41.9B
    "ernie4_5_moe": ("baidu/ERNIE-4.5-21B-A3B-PT", dict(
        vocab_size=103424, hidden_size=2560, intermediate_size=12288, moe_intermediate_size=1536,
        num_hidden_layers=28, num_attention_heads=20, num_key_value_heads=4, head_dim=128, moe_num_experts=64,
        moe_k=6, moe_num_shared_experts=2, moe_layer_start_index=1, moe_layer_end_index=27, moe_layer_interval=1,
        max_position_embeddings=131072, rope_parameters=dict(rope_type="default", rope_theta=500000.0),
        use_bias=False, tie_word_embeddings=True), None),
    # transformers reads intermediate_size for its experts and its one shared MLP (the checkpoint's
    # moe_intermediate_size and num_shared_expert lists, all 3072 and 1, belong to its remote code)
    "hunyuan_v1_moe": ("tencent/Hunyuan-A13B-Instruct", dict(
        vocab_size=128167, hidden_size=4096, intermediate_size=3072, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=8, head_dim=128, num_experts=64, moe_topk=[8] * 32, max_position_embeddings=32768,
        tie_word_embeddings=True), None),
    "minimax_m2": ("MiniMaxAI/MiniMax-M2", dict(
        vocab_size=200064, hidden_size=3072, intermediate_size=1536, num_hidden_layers=62, num_attention_heads=48,
        num_key_value_heads=8, head_dim=128, rotary_dim=64, num_local_experts=256, num_experts_per_tok=8,
        max_position_embeddings=196608, tie_word_embeddings=False), None),
    "dots1": ("rednote-hilab/dots.llm1.base", dict(
        vocab_size=152064, hidden_size=4096, intermediate_size=10944, moe_intermediate_size=1408,
        num_hidden_layers=62, num_attention_heads=32, num_key_value_heads=32, n_routed_experts=128,
        n_shared_experts=2, num_experts_per_tok=6, first_k_dense_replace=1, max_position_embeddings=32768,
        rope_parameters=dict(rope_type="default", rope_theta=1e7), tie_word_embeddings=False), None),
    # FlexOlmoConfig's defaults are this checkpoint's shapes
    "flex_olmo": ("allenai/FlexOlmo-7x7B-1T", dict(
        vocab_size=100352, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=32, num_experts=7, num_experts_per_tok=5, max_position_embeddings=4096,
        rope_parameters=dict(rope_type="default", rope_theta=500000.0), tie_word_embeddings=False), None),
    # -- batch A: the hyperparameters are the defaults of transformers' config class, whose docstring
    # names the checkpoint (GPT-SW3 has no config class of its own: GPT-2's)
    "gpt-sw3": ("AI-Sweden-Models/gpt-sw3 (GPT2Config's defaults)", dict(
        vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12), 124_439_808),
    "granite_swa": ("ibm-granite/granite-swash-2b (GraniteSWAConfig's defaults)", dict(
        vocab_size=100352, hidden_size=2560, intermediate_size=8192, num_hidden_layers=24, num_attention_heads=20,
        num_key_value_heads=4, max_position_embeddings=8192, sliding_window=128, tie_word_embeddings=True), None),
    "granitemoe_swa": ("ibm-granite/granite-swash-3b-a600m (GraniteMoeSWAConfig's defaults)", dict(
        vocab_size=32000, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
        num_local_experts=8, num_experts_per_tok=2, max_position_embeddings=2048, sliding_window=128), None),
    "vaultgemma": ("google/vaultgemma-1b (VaultGemmaConfig's defaults)", dict(
        vocab_size=256000, hidden_size=2304, intermediate_size=9216, num_hidden_layers=26, num_attention_heads=8,
        num_key_value_heads=4, head_dim=256, max_position_embeddings=8192, sliding_window=4096,
        query_pre_attn_scalar=256), None),
    "mellum": ("JetBrains/Mellum2-12B-A2.5B-Base (MellumConfig's defaults)", dict(
        vocab_size=98304, hidden_size=2304, intermediate_size=7168, moe_intermediate_size=896, num_hidden_layers=28,
        num_attention_heads=32, num_key_value_heads=4, head_dim=128, num_experts=64, num_experts_per_tok=8,
        max_position_embeddings=131072), None),
    "hyperclovax": ("naver-hyperclovax/HyperCLOVAX-SEED-Think-14B (HyperCLOVAXConfig's defaults)", dict(
        vocab_size=32000, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
        max_position_embeddings=2048, use_post_norm=True), None),
    "youtu": ("tencent/Youtu-LLM-2B (YoutuConfig's defaults)", dict(
        vocab_size=128256, hidden_size=2048, intermediate_size=6144, num_hidden_layers=32, num_attention_heads=16,
        num_key_value_heads=16, kv_lora_rank=512, q_lora_rank=1536, qk_rope_head_dim=64, qk_nope_head_dim=128,
        v_head_dim=128, max_position_embeddings=131072, tie_word_embeddings=True), None),
    "solar_open": ("upstage/Solar-Open-100B (SolarOpenConfig's defaults)", dict(
        vocab_size=196608, hidden_size=4096, moe_intermediate_size=1280, num_hidden_layers=48, num_attention_heads=64,
        num_key_value_heads=8, head_dim=128, n_routed_experts=128, n_shared_experts=1, num_experts_per_tok=8,
        max_position_embeddings=131072), None),
    "cohere2_moe": ("CohereLabs/command-a-plus-05-2026 (Cohere2MoeConfig's defaults)", dict(
        vocab_size=256000, hidden_size=8192, intermediate_size=22528, num_hidden_layers=40, num_attention_heads=64,
        head_dim=128, num_experts=8, num_experts_per_tok=2, max_position_embeddings=8192, sliding_window=4096,
        sliding_window_pattern=4, logit_scale=0.0625), None),
    "exaone_moe": ("LGAI-EXAONE/K-EXAONE-236B-A23B (ExaoneMoeConfig's defaults)", dict(
        vocab_size=102400, hidden_size=4096, intermediate_size=16384, moe_intermediate_size=1024,
        num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=32, num_experts=64, num_experts_per_tok=8,
        num_shared_experts=1, first_k_dense_replace=1, max_position_embeddings=2048, sliding_window=4096,
        sliding_window_pattern=4), None),
    "glm4_moe_lite": ("Glm4MoeLiteConfig's defaults (its docstring names zai-org/GLM-4.5, of glm4_moe)", dict(
        vocab_size=154880, hidden_size=2048, intermediate_size=10240, moe_intermediate_size=1536,
        num_hidden_layers=47, num_attention_heads=20, num_key_value_heads=20, n_routed_experts=64,
        n_shared_experts=1, num_experts_per_tok=4, kv_lora_rank=512, q_lora_rank=768, qk_rope_head_dim=64,
        qk_nope_head_dim=192, v_head_dim=256, max_position_embeddings=202752), None),
    "minicpm3": ("openbmb/MiniCPM3-4B (MiniCPM3Config's defaults)", dict(
        vocab_size=73448, hidden_size=2560, intermediate_size=6400, num_hidden_layers=62, num_attention_heads=40,
        num_key_value_heads=40, kv_lora_rank=256, q_lora_rank=768, qk_nope_head_dim=64, qk_rope_head_dim=32,
        max_position_embeddings=32768, scale_emb=12, tie_word_embeddings=True), None),
    # -- batch B; None: the hyperparameters are the defaults of transformers' config class, whose
    # docstring names the checkpoint
    "flint": ("RecursiveSI/flint (FlintConfig's defaults)", dict(
        vocab_size=150144, hidden_size=2048, intermediate_size=6144, num_hidden_layers=49, num_attention_heads=32,
        num_key_value_heads=4, head_dim=128, sliding_window=513, num_experts=256, num_experts_per_tok=6,
        moe_intermediate_size=512, shared_expert_intermediate_size=1024, max_position_embeddings=262144,
        tie_word_embeddings=False), None),
    "kolibri1": ("Aleph-Alpha/Kolibri-1 (Kolibri1Config's defaults)", dict(
        vocab_size=128000, hidden_size=2560, num_hidden_layers=50, num_attention_heads=48, num_key_value_heads=4,
        head_dim=128, sliding_window=513, num_experts=384, num_experts_per_tok=6, moe_intermediate_size=512,
        shared_expert_intermediate_size=512, max_position_embeddings=262144, tie_word_embeddings=False), None),
    "cohere_compass_text": ("CohereLabs/North-Micro-Vision-Instruct (CohereCompassTextConfig's defaults)", dict(
        vocab_size=256000, hidden_size=8192, intermediate_size=22528, num_hidden_layers=40, num_attention_heads=64,
        max_position_embeddings=8192, rope_parameters=dict(full_attention=dict(rope_type="default", rope_theta=1e4)),
        tie_word_embeddings=True), None),
    "aria_text": ("rhymes-ai/Aria (AriaTextConfig's defaults)", dict(
        vocab_size=32000, hidden_size=4096, intermediate_size=4096, num_hidden_layers=32, num_attention_heads=32,
        moe_num_experts=8, moe_topk=2, moe_num_shared_experts=2, max_position_embeddings=2048,
        tie_word_embeddings=False), None),
    "hy_v3": ("tencent/Hy3-preview (HYV3Config's defaults)", dict(
        vocab_size=120832, hidden_size=4096, intermediate_size=13312, num_hidden_layers=80, num_attention_heads=64,
        num_key_value_heads=8, head_dim=128, num_experts=192, num_experts_per_tok=8, num_shared_experts=1,
        moe_intermediate_size=1536, max_position_embeddings=131072, tie_word_embeddings=False), None),
    "ctrl": ("Salesforce/ctrl", dict(
        vocab_size=246534, n_positions=256, n_embd=1280, dff=8192, n_layer=48, n_head=16), None),
    # the attention output gate
    "afmoe": ("AfmoeConfig's defaults (its docstring names arcee-ai/Trinity-Mini)", dict(
        vocab_size=200192, hidden_size=2048, intermediate_size=6144, moe_intermediate_size=1408,
        num_hidden_layers=32, num_dense_layers=1, num_attention_heads=16, num_key_value_heads=16, head_dim=128,
        num_experts=64, num_experts_per_tok=6, num_shared_experts=2, global_attn_every_n_layers=4,
        sliding_window=1024, max_position_embeddings=16384, tie_word_embeddings=False), None),
    # xIELU; the published total (8.05B on the model page) is not confirmed to the parameter
    "apertus": ("swiss-ai/Apertus-8B-2509", dict(
        vocab_size=131072, hidden_size=4096, intermediate_size=21504, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=8, hidden_act="xielu", max_position_embeddings=65536, tie_word_embeddings=False,
        qk_norm=True, post_norm=False, mlp_bias=False), None),
    # embedding_norm
    "bloom": ("bigscience/bloom-560m", dict(
        vocab_size=250880, hidden_size=1024, n_layer=24, n_head=16, tie_word_embeddings=True), 559_214_592),
    # chunked attention: Scout's text_config (its vision tower is not modeled)
    "llama4_text": ("meta-llama/Llama-4-Scout-17B-16E (text_config)", dict(
        vocab_size=202048, hidden_size=5120, intermediate_size=8192, intermediate_size_mlp=16384,
        num_hidden_layers=48, num_attention_heads=40, num_key_value_heads=8, head_dim=128, num_local_experts=16,
        num_experts_per_tok=1, interleave_moe_layer_step=1, use_qk_norm=True, attention_chunk_size=8192,
        max_position_embeddings=10485760, pad_token_id=200018, tie_word_embeddings=False,
        rope_parameters=dict(rope_type="llama3", rope_theta=500000.0, factor=16.0, low_freq_factor=1.0,
                             high_freq_factor=1.0, original_max_position_embeddings=8192)), None),
    # the families the harness had left out
    "gpt_neo": ("EleutherAI/gpt-neo-125m", dict(
        vocab_size=50257, hidden_size=768, num_layers=12, num_heads=12, max_position_embeddings=2048,
        attention_types=[[["global", "local"], 6]], window_size=256), 125_198_592),
    "dbrx": ("databricks/dbrx-instruct", dict(
        vocab_size=100352, d_model=6144, n_heads=48, n_layers=40, max_seq_len=32768,
        attn_config=dict(clip_qkv=8, kv_n_heads=8, rope_theta=500000),
        ffn_config=dict(ffn_act_fn=dict(name="silu"), ffn_hidden_size=10752, moe_num_experts=16, moe_top_k=4),
        tie_word_embeddings=False), 131_596_523_520),
    "openai-gpt": ("openai-community/openai-gpt", dict(
        vocab_size=40478, n_positions=512, n_embd=768, n_layer=12, n_head=12, afn="gelu"), 116_534_784),
    "nanochat": ("NanoChatConfig's defaults (its docstring names karpathy/nanochat-d32)", dict(
        vocab_size=50304, hidden_size=768, intermediate_size=8192, num_hidden_layers=12, num_attention_heads=6,
        max_position_embeddings=2048, final_logit_softcapping=15.0, tie_word_embeddings=False), None),
    # position_offset
    "opt": ("facebook/opt-125m", dict(
        vocab_size=50272, hidden_size=768, num_hidden_layers=12, ffn_dim=3072, num_attention_heads=12,
        word_embed_proj_dim=768, max_position_embeddings=2048, do_layer_norm_before=True), 125_239_296),
    "biogpt": ("microsoft/biogpt", dict(
        vocab_size=42384, hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096,
        hidden_act="gelu", max_position_embeddings=1024, scale_embedding=True), None),
    # the Mamba-1 mixer (129,135,360: transformers' own count of mamba-130m's config)
    "mamba": ("state-spaces/mamba-130m-hf", dict(
        vocab_size=50280, hidden_size=768, num_hidden_layers=24, state_size=16, expand=2, conv_kernel=4,
        time_step_rank=48, tie_word_embeddings=True), 129_135_360),
    "falcon_mamba": ("tiiuae/falcon-mamba-7b", dict(
        vocab_size=65024, hidden_size=4096, num_hidden_layers=64, state_size=16, expand=2, conv_kernel=4,
        time_step_rank=256, use_bias=False, use_conv_bias=True, tie_word_embeddings=False, mixer_rms_eps=1e-6),
        None),
    # the Mamba-2 mixer (published config.json values; totals: transformers' own count)
    "mamba2": ("mistralai/Mamba-Codestral-7B-v0.1", dict(
        vocab_size=32768, hidden_size=4096, num_hidden_layers=64, num_heads=128, head_dim=64, n_groups=8,
        state_size=128, expand=2, conv_kernel=4, chunk_size=256, tie_word_embeddings=False), None),
    "bamba": ("ibm-ai-platform/Bamba-9B", dict(
        vocab_size=128256, hidden_size=4096, num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
        intermediate_size=14336, attn_layer_indices=[9, 18, 27], mamba_n_heads=128, mamba_d_head=64,
        mamba_n_groups=1, mamba_d_state=128, mamba_expand=2, tie_word_embeddings=False), None),
    "granitemoehybrid": ("ibm-granite/granite-4.0-h-tiny", dict(
        vocab_size=100352, hidden_size=1536, num_hidden_layers=40, num_attention_heads=12, num_key_value_heads=4,
        intermediate_size=512, shared_intermediate_size=1024, num_local_experts=64, num_experts_per_tok=6,
        layer_types=["attention" if i in (5, 15, 25, 35) else "mamba" for i in range(40)], mamba_n_heads=48,
        mamba_d_head=64, mamba_n_groups=1, mamba_d_state=128, mamba_expand=2, position_embedding_type="nope",
        tie_word_embeddings=True), 6_939_037_248),  # its safetensors count
    # lightning attention, softmax attention after every 7 lightning layers, MoE in every layer (the model
    # card's hyperparameters: 80 layers, 64 heads of 128, 8 KV heads, 32 experts of 9216, top-2, hidden 6144,
    # vocab 200,064, RoPE base 1e7; block_size 256, transformers' default). 456,089,655,296: transformers'
    # own count without the decay tables it derives from the config (against.DERIVED_BUFFERS); the card's
    # 456B (rounded: not pinned)
    "minimax": ("MiniMaxAI/MiniMax-Text-01-hf", dict(
        vocab_size=200064, hidden_size=6144, intermediate_size=9216, num_hidden_layers=80, num_attention_heads=64,
        num_key_value_heads=8, head_dim=128, num_local_experts=32, num_experts_per_tok=2, hidden_act="silu",
        max_position_embeddings=10240000, rope_parameters=dict(rope_type="default", rope_theta=10000000.0),
        block_size=256, tie_word_embeddings=False,
        layer_types=["full_attention" if (i + 1) % 8 == 0 else "linear_attention" for i in range(80)]), None),
    # gated short convolutions and attention (published config.json values, its FFN 12288 -> 8192 by
    # block_auto_adjust_ff_dim; 1,170,340,608: transformers' own count, the card's 1.2B)
    "lfm2": ("LiquidAI/LFM2-1.2B", dict(
        vocab_size=65536, hidden_size=2048, num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8,
        intermediate_size=12288, block_multiple_of=256, block_ffn_dim_multiplier=1.0, block_auto_adjust_ff_dim=True,
        full_attn_idxs=[2, 5, 8, 10, 12, 14], conv_L_cache=3, conv_bias=False, max_position_embeddings=128000,
        norm_eps=1e-5, rope_parameters=dict(rope_type="default", rope_theta=1000000.0), tie_word_embeddings=True),
        1_170_340_608),
    # LFM2's layers with experts (published config.json values; the total: transformers' own count)
    "lfm2_moe": ("LiquidAI/LFM2-8B-A1B", dict(
        vocab_size=65536, hidden_size=2048, intermediate_size=7168, moe_intermediate_size=1792, num_hidden_layers=24,
        num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=128000, conv_bias=False,
        conv_L_cache=3, num_dense_layers=2, num_experts=32, num_experts_per_tok=4, use_expert_bias=True,
        layer_types=["full_attention" if i in (2, 6, 10, 14, 18, 21) else "conv" for i in range(24)],
        rope_parameters=dict(rope_type="default", rope_theta=1000000.0)), None),
    # Gated DeltaNet and gated attention, MoE with a gated shared expert (published config.json values;
    # the card's "80B total, 3B activated" is rounded: None; its MTP layer transformers does not build)
    "qwen3_next": ("Qwen/Qwen3-Next-80B-A3B-Instruct", dict(
        vocab_size=151936, hidden_size=2048, intermediate_size=5120, num_hidden_layers=48, num_attention_heads=16,
        num_key_value_heads=2, head_dim=256, full_attention_interval=4, linear_conv_kernel_dim=4,
        linear_key_head_dim=128, linear_num_key_heads=16, linear_num_value_heads=32, linear_value_head_dim=128,
        max_position_embeddings=262144, mlp_only_layers=[], moe_intermediate_size=512, num_experts=512,
        num_experts_per_tok=10, decoder_sparse_step=1, shared_expert_intermediate_size=512,
        partial_rotary_factor=0.25, rope_theta=10000000, tie_word_embeddings=False), None),
    # Qwen3.5-27B's language model (its text_config; the checkpoint is multimodal, qwen3_5)
    "qwen3_5_text": ("Qwen/Qwen3.5-27B", dict(
        vocab_size=248320, hidden_size=5120, intermediate_size=17408, num_hidden_layers=64, num_attention_heads=24,
        num_key_value_heads=4, head_dim=256, full_attention_interval=4, linear_conv_kernel_dim=4,
        linear_key_head_dim=128, linear_num_key_heads=16, linear_num_value_heads=48, linear_value_head_dim=128,
        max_position_embeddings=262144, tie_word_embeddings=False,
        rope_parameters=dict(rope_type="default", rope_theta=10000000, partial_rotary_factor=0.25)), None),
    # Qwen3.5-35B-A3B's language model (its text_config; the checkpoint is multimodal, qwen3_5_moe)
    "qwen3_5_moe_text": ("Qwen/Qwen3.5-35B-A3B", dict(
        vocab_size=248320, hidden_size=2048, num_hidden_layers=40, num_attention_heads=16, num_key_value_heads=2,
        head_dim=256, full_attention_interval=4, linear_conv_kernel_dim=4, linear_key_head_dim=128,
        linear_num_key_heads=16, linear_num_value_heads=32, linear_value_head_dim=128, num_experts=256,
        num_experts_per_tok=8, moe_intermediate_size=512, shared_expert_intermediate_size=512,
        max_position_embeddings=262144, tie_word_embeddings=False,
        rope_parameters=dict(rope_type="default", rope_theta=10000000, partial_rotary_factor=0.25)), None),
    # Griffin's RG-LRU recurrent blocks and local attention, two to one (google/recurrentgemma-2b's published
    # config.json values: intermediate_size 15360, the MLP's two branches of 7680; head_dim 256 from
    # hidden_size / heads; transformers 5 reads block_types, its default, not the file's _block_types).
    # The model card gives 2.7B; transformers' own count 2,682,862,080 is checked here
    "recurrent_gemma": ("google/recurrentgemma-2b", dict(
        vocab_size=256000, hidden_size=2560, intermediate_size=15360, num_hidden_layers=26, num_attention_heads=10,
        num_key_value_heads=1, lru_width=2560, attention_window_size=2048, conv1d_width=4, logits_soft_cap=30.0,
        hidden_activation="gelu_pytorch_tanh", attention_bias=False,
        block_types=["recurrent", "recurrent", "attention"],
        rope_parameters=dict(rope_type="default", rope_theta=10000.0, partial_rotary_factor=0.5)), None),
    # KDA layers and NoPE MLA layers (linear_attn_config's 1-based lists), a dense layer, then 256 experts and a
    # shared one (published config.json values, with its attribute_map names). The card's "48B total, 3B
    # activated" is rounded: None; transformers' own count is 49,122,681,728
    "kimi_linear": ("moonshotai/Kimi-Linear-48B-A3B-Instruct", dict(
        vocab_size=163840, hidden_size=2304, intermediate_size=9216, num_hidden_layers=27, num_attention_heads=32,
        num_key_value_heads=32, q_lora_rank=None, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64,
        v_head_dim=128, moe_intermediate_size=1024, num_experts=256, num_experts_per_token=8, num_shared_experts=1,
        first_k_dense_replace=1, model_max_length=1048576, tie_word_embeddings=False, hidden_act="silu",
        linear_attn_config=dict(full_attn_layers=[4, 8, 12, 16, 20, 24, 27], head_dim=128, num_heads=32,
                                short_conv_kernel_size=4,
                                kda_layers=[i for i in range(1, 28) if i % 4 and i != 27])), None),
    # attention (GQA, head_dim 128 of hidden_size 3072 / 12 heads) and a Mamba-2 mixer side by side in every layer
    # (published config.json values; the muP multipliers change no count); no published total
    "falcon_h1": ("tiiuae/Falcon-H1-7B-Instruct", dict(
        vocab_size=130048, hidden_size=3072, intermediate_size=12288, num_hidden_layers=44, num_attention_heads=12,
        num_key_value_heads=2, head_dim=128, max_position_embeddings=262144, tie_word_embeddings=False,
        mamba_d_ssm=3072, mamba_n_heads=24, mamba_d_head=128, mamba_d_state=256, mamba_n_groups=1, mamba_d_conv=4,
        mamba_expand=2, mamba_chunk_size=128), None),
    # Mamba-2 layers, nine of 54 after a shared transformer block with an adapter of rank 128 on its gated GELU MLP:
    # Zamba2Config's defaults, a "Zamba2-2.7B style configuration" by its docstring (one block, no attention
    # adapters: the published file was not found); no published total
    "zamba2": ("Zamba2Config's defaults (Zyphra/Zamba2-2.7B style)", {}, None),
    # Mamba-1 layers of two heads, 13 of 76 after one shared transformer block (layer 2, then every sixth from 7),
    # gated GELU MLP, no positions: ZambaConfig's defaults, Zyphra/Zamba-7B-v1 by its docstring (the published file
    # was not found); 7,232,490,496 as transformers counts it, no published total (the card's "7B")
    "zamba": ("ZambaConfig's defaults (Zyphra/Zamba-7B-v1)", dict(
        vocab_size=32000, hidden_size=3712, intermediate_size=14848, num_hidden_layers=76, num_attention_heads=16,
        num_key_value_heads=16, n_mamba_heads=2, attn_layer_period=6, attn_layer_offset=4, mamba_d_state=16,
        mamba_d_conv=4, mamba_expand=2, mamba_dt_rank="auto", max_position_embeddings=4096,
        tie_word_embeddings=True), None),
    # Gated DeltaNet layers (pre-norm) and OLMo 3 attention layers (post-norm, q/k norms over the whole projections),
    # every fourth, no positions (rope_theta null): OlmoHybridConfig's defaults, which its docstring gives as this
    # checkpoint's; no published total
    "olmo_hybrid": ("allenai/Olmo-Hybrid-7B", dict(
        vocab_size=100352, hidden_size=3840, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=30,
        max_position_embeddings=65536, linear_conv_kernel_dim=4, linear_allow_neg_eigval=True,
        rope_parameters=dict(rope_theta=None), tie_word_embeddings=False), None),
    # sub_norms (BitNet): the unpacked model transformers builds from the config (its quantization_config,
    # packed ternary weights, left out: llmcalc refuses it)
    "bitnet": ("microsoft/bitnet-b1.58-2B-4T", dict(
        vocab_size=128256, hidden_size=2560, intermediate_size=6912, num_hidden_layers=30, num_attention_heads=20,
        num_key_value_heads=5, hidden_act="relu2", max_position_embeddings=4096,
        rope_parameters=dict(rope_type="default", rope_theta=500000.0), tie_word_embeddings=True), None),
    # attention, Mamba-1 (weighted norms on dt, B, C) and MoE layers; the model card gives 52B (51,570,323,328
    # here, as transformers counts it): not pinned to the parameter
    "jamba": ("ai21labs/AI21-Jamba-1.5-Mini", dict(
        vocab_size=65536, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=8, num_experts=16, num_experts_per_tok=2, attn_layer_period=8, attn_layer_offset=4,
        expert_layer_period=2, expert_layer_offset=1, mamba_d_state=16, mamba_d_conv=4, mamba_expand=2,
        mamba_dt_rank=256, mamba_conv_bias=True, mamba_proj_bias=False, max_position_embeddings=262144,
        tie_word_embeddings=False), None),
    # layers of one sublayer each: Mamba-2 (M), attention (*) and relu^2 MLP (-) layers (published config.json
    # values); Hugging Face lists 8.89B parameters (8,888,227,328 here, as transformers counts it): not pinned
    "nemotron_h": ("nvidia/NVIDIA-Nemotron-Nano-9B-v2", dict(
        vocab_size=131072, hidden_size=4480, intermediate_size=15680, num_attention_heads=40, num_key_value_heads=8,
        head_dim=128, max_position_embeddings=131072, mamba_num_heads=128, mamba_head_dim=80, n_groups=8,
        ssm_state_size=128, conv_kernel=4, chunk_size=128, mlp_hidden_act="relu2", tie_word_embeddings=False,
        hybrid_override_pattern="M-M-M-MM-M-M-M*-M-M-M*-M-M-M-M*-M-M-M-M*-M-MM-M-M-M-M-M-"), None),
    # DeepSeek Sparse Attention: MLA with a lightning indexer (published config.json values). DeepSeek-V3.2's
    # checkpoint adds its multi-token-prediction layer (not built by transformers): not pinned
    "deepseek_v32": ("deepseek-ai/DeepSeek-V3.2", dict(
        vocab_size=129280, hidden_size=7168, intermediate_size=18432, moe_intermediate_size=2048,
        num_hidden_layers=61, num_attention_heads=128, num_key_value_heads=128, n_routed_experts=256,
        n_shared_experts=1, num_experts_per_tok=8, first_k_dense_replace=3, n_group=8, topk_group=4,
        q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128,
        index_n_heads=64, index_head_dim=128, index_topk=2048, max_position_embeddings=163840,
        tie_word_embeddings=False, bos_token_id=0, eos_token_id=1), None),
    # GLM-5: every layer runs its indexer (no indexer_types, index_topk_freq); its checkpoint adds the
    # multi-token-prediction layer: not pinned
    "glm_moe_dsa": ("zai-org/GLM-5", dict(
        vocab_size=154880, hidden_size=6144, intermediate_size=12288, moe_intermediate_size=2048,
        num_hidden_layers=78, num_attention_heads=64, num_key_value_heads=64, n_routed_experts=256,
        n_shared_experts=1, num_experts_per_tok=8, first_k_dense_replace=3, n_group=1, topk_group=1,
        q_lora_rank=2048, kv_lora_rank=512, qk_nope_head_dim=192, qk_rope_head_dim=64, v_head_dim=256,
        index_n_heads=32, index_head_dim=128, index_topk=2048, max_position_embeddings=202752,
        rope_parameters=dict(rope_type="default", rope_theta=1000000), tie_word_embeddings=False,
        pad_token_id=154820, eos_token_id=[154820, 154827, 154829]), None),
    # the language model of the multimodal checkpoint (its text_config; a vision tower beside it): 30,697,345,340 as
    # transformers counts it, the preset gemma-4-31b; the checkpoint's own total includes the tower: not pinned
    # Gemma3nTextConfig's defaults: google/gemma-3n-E4B's text geometry (35 layers, the last 15 reading earlier
    # K/V); the total is transformers' (docs/huggingface.md), the E4B checkpoint's text weights
    "gemma3n_text": ("Gemma3nTextConfig() (google/gemma-3n-E4B's text geometry)", dict(), 6_835_235_568),
    "gemma4_text": ("google/gemma-4-31B-it (text_config)", dict(
        vocab_size=262144, hidden_size=5376, intermediate_size=21504, num_hidden_layers=60, num_attention_heads=32,
        num_key_value_heads=16, head_dim=256, global_head_dim=512, num_global_key_value_heads=4,
        attention_k_eq_v=True, sliding_window=1024, max_position_embeddings=262144, final_logit_softcapping=30.0,
        hidden_size_per_layer_input=0, num_kv_shared_layers=0, enable_moe_block=False), None),
    # DeepSeek-V3.2's layers with an output gate, sinks, shared indexer layers (layer 0 and every fourth from layer 1
    # index: 21 of 78) and 4 independent hyper-connection streams; a dense first layer, then 256 experts, top 8, a
    # shared one (published config.json values; its legacy layer type; num_key_value_heads 8, which transformers
    # sets to the heads). The checkpoint adds its multi-token-prediction layer: not pinned
    "hy_v4": ("tencent/Hy4-preview", dict(
        vocab_size=120832, hidden_size=6144, intermediate_size=18432, moe_intermediate_size=2048, num_hidden_layers=78,
        num_attention_heads=64, num_key_value_heads=8, n_routed_experts=256, n_shared_experts=1, num_experts_per_tok=8,
        q_lora_rank=2048, kv_lora_rank=512, qk_nope_head_dim=192, qk_rope_head_dim=64, v_head_dim=256,
        index_topk=2048, index_head_dim=128, index_n_heads=32, hc_mult=4, max_position_embeddings=1048576,
        layer_types=["deepseek_sparse_attention"] * 78,
        rope_parameters=dict(rope_type="default", rope_theta=10000000.0), tie_word_embeddings=False), None),
    # 28 layers of two MLA sublayers each and a shortcut MoE of 512 experts and 256 identity ones, top 12 (8 real
    # under llmcalc's convention): 560,664,980,480 (transformers' 741B counts gate_up_proj rows for the identity
    # experts, which the checkpoint does not store); "560B" published, its checkpoint adds the MTP layer: not pinned
    "longcat_flash": ("meituan-longcat/LongCat-Flash-Chat (LongcatFlashConfig's defaults)", dict(
        vocab_size=131072, hidden_size=6144, num_layers=28, num_attention_heads=64, ffn_hidden_size=12288,
        q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, head_dim=64, v_head_dim=128,
        n_routed_experts=512, zero_expert_num=256, moe_topk=12, expert_ffn_hidden_size=2048,
        max_position_embeddings=131072, tie_word_embeddings=False), None),

    # Gemma 4 12B's language model, the text_config of google/gemma-4-12B's published config.json (the multimodal
    # gemma4_unified): 11,907,350,320 as transformers counts it; the checkpoint's own total includes its vision and
    # audio embedders: not pinned. Its keys for per-layer embeddings and experts are no fields of the class
    "gemma4_unified_text": ("google/gemma-4-12B (text_config)", dict(
        vocab_size=262144, hidden_size=3840, intermediate_size=15360, num_hidden_layers=48, num_attention_heads=16,
        num_key_value_heads=8, head_dim=256, global_head_dim=512, num_global_key_value_heads=1, attention_k_eq_v=True,
        sliding_window=1024, max_position_embeddings=262144, final_logit_softcapping=30.0,
        use_bidirectional_attention="vision", hidden_size_per_layer_input=0, vocab_size_per_layer_input=262144,
        num_kv_shared_layers=0, enable_moe_block=False, use_double_wide_mlp=False, tie_word_embeddings=True), None),
}

# Gemma 4 26B-A4B's language model, the text_config of google/gemma-4-26B-A4B-it
GEMMA4_26B = dict(
    vocab_size=262144, hidden_size=2816, intermediate_size=2112, num_hidden_layers=30, num_attention_heads=16,
    num_key_value_heads=8, head_dim=256, global_head_dim=512, num_global_key_value_heads=2, attention_k_eq_v=True,
    sliding_window=1024, max_position_embeddings=262144, final_logit_softcapping=30.0, hidden_size_per_layer_input=0,
    num_kv_shared_layers=0, enable_moe_block=True, num_experts=128, top_k_experts=8, moe_intermediate_size=704)

# Variants that exercise other branches of a mapper: (model_type, checkpoint, hyperparameters).
VARIANTS = [
    ("falcon", "tiiuae/falcon-40b", dict(
        vocab_size=65024, hidden_size=8192, num_hidden_layers=60, num_attention_heads=128, num_kv_heads=8,
        new_decoder_architecture=True, parallel_attn=True, bias=False, alibi=False, max_position_embeddings=2048)),
    ("falcon", "tiiuae/falcon-rw-1b", dict(
        vocab_size=50304, hidden_size=2048, num_hidden_layers=24, num_attention_heads=32, multi_query=False,
        parallel_attn=False, bias=True, alibi=True, max_position_embeddings=2048)),
    ("gpt_neox", "EleutherAI/gpt-neox-20b (sequential residual, as a variant)", dict(
        vocab_size=50432, hidden_size=6144, num_hidden_layers=4, num_attention_heads=64, intermediate_size=24576,
        use_parallel_residual=False, attention_bias=False, max_position_embeddings=2048)),
    ("phi", "microsoft/phi-2 with qk_layernorm", dict(
        vocab_size=51200, hidden_size=2560, intermediate_size=10240, num_hidden_layers=2, num_attention_heads=32,
        qk_layernorm=True)),
    ("qwen2", "Qwen/Qwen2-7B with its sliding window switched on", dict(
        vocab_size=152064, hidden_size=3584, intermediate_size=18944, num_hidden_layers=28, num_attention_heads=28,
        num_key_value_heads=4, use_sliding_window=True, sliding_window=4096, max_window_layers=20)),
    ("qwen2_moe", "Qwen/Qwen1.5-MoE-A2.7B, every second layer sparse after two dense", dict(
        vocab_size=151936, hidden_size=2048, intermediate_size=5632, num_hidden_layers=8, num_attention_heads=16,
        num_experts=60, num_experts_per_tok=4, moe_intermediate_size=1408, shared_expert_intermediate_size=5632,
        decoder_sparse_step=2, mlp_only_layers=[0, 1])),
    ("llama", "meta-llama/Llama-2-7b with attention and MLP biases", dict(
        vocab_size=32000, hidden_size=4096, intermediate_size=11008, num_hidden_layers=2, num_attention_heads=32,
        attention_bias=True, mlp_bias=True)),
    ("stablelm", "stabilityai/stablelm-3b-4e1t, parallel residual as a variant", dict(
        vocab_size=50304, hidden_size=2560, intermediate_size=6912, num_hidden_layers=4, num_attention_heads=32,
        use_parallel_residual=True)),
    ("smollm3", "HuggingFaceTB/SmolLM3-3B with sliding windows on its NoPE layers", dict(
        vocab_size=128256, hidden_size=2048, intermediate_size=11008, num_hidden_layers=8, num_attention_heads=16,
        num_key_value_heads=4, use_sliding_window=True, sliding_window=4096)),
    ("gemma3_text", "google/gemma-3-27b-pt (text)", dict(
        vocab_size=262208, hidden_size=5376, intermediate_size=21504, num_hidden_layers=62, num_attention_heads=32,
        num_key_value_heads=16, head_dim=128, sliding_window=1024, query_pre_attn_scalar=168)),
    # -- dense decoders
    ("ernie4_5", "baidu/ERNIE-4.5-0.3B-PT with use_bias", dict(
        vocab_size=103424, hidden_size=1024, intermediate_size=3072, num_hidden_layers=2, num_attention_heads=16,
        num_key_value_heads=2, use_bias=True)),
    ("seed_oss", "ByteDance-Seed/Seed-OSS-36B with o_proj and MLP biases", dict(
        vocab_size=155136, hidden_size=5120, intermediate_size=27648, num_hidden_layers=2, num_attention_heads=80,
        num_key_value_heads=8, head_dim=128, attention_out_bias=True, mlp_bias=True)),
    ("exaone4", "LGAI-EXAONE/EXAONE-4.0 without a window: every layer full, with RoPE", dict(
        vocab_size=102400, hidden_size=2048, intermediate_size=4096, num_hidden_layers=4, num_attention_heads=32,
        num_key_value_heads=8, sliding_window=None, layer_types=["full_attention"] * 4)),
    ("internlm3", "internlm/internlm3-8b-instruct with qkv_bias and bias", dict(
        vocab_size=128512, hidden_size=4096, intermediate_size=10240, num_hidden_layers=2, num_attention_heads=32,
        num_key_value_heads=2, head_dim=128, qkv_bias=True, bias=True)),
    ("ministral", "mistralai/Ministral-8B-Instruct-2410, alternating full and sliding layers", dict(
        vocab_size=131072, hidden_size=4096, intermediate_size=12288, num_hidden_layers=4, num_attention_heads=32,
        num_key_value_heads=8, head_dim=128, sliding_window=32768,
        layer_types=["full_attention", "sliding_attention", "sliding_attention", "sliding_attention"])),
    ("ministral3", "mistralai/Ministral-3-8B-Base-2512 with a sliding window", dict(
        vocab_size=131072, hidden_size=4096, intermediate_size=14336, num_hidden_layers=2, num_attention_heads=32,
        num_key_value_heads=8, head_dim=128, sliding_window=4096)),
    ("arcee", "arcee-ai/AFM-4.5B with MLP biases, GQA", dict(
        vocab_size=128004, hidden_size=2560, intermediate_size=18432, num_hidden_layers=2, num_attention_heads=20,
        num_key_value_heads=4, mlp_bias=True)),
    ("gpt_bigcode", "bigcode/gpt_bigcode-santacoder without multi_query, as a variant", dict(
        vocab_size=49280, n_positions=2048, n_embd=2048, n_layer=2, n_head=16, n_inner=8192, multi_query=False)),
    ("persimmon", "adept/persimmon-8b-base without qk_layernorm, as a variant", dict(
        vocab_size=262144, hidden_size=4096, intermediate_size=16384, num_hidden_layers=2, num_attention_heads=64,
        qk_layernorm=False)),
    ("nemotron", "nvidia/Minitron-4B-Base with attention and MLP biases, as a variant", dict(
        vocab_size=256000, hidden_size=3072, intermediate_size=9216, num_hidden_layers=2, num_attention_heads=24,
        num_key_value_heads=8, head_dim=128, attention_bias=True, mlp_bias=True)),
    ("cohere2", "CohereForAI/c4ai-command-r7b-12-2024 with every layer full (NoPE), as a variant", dict(
        vocab_size=256000, hidden_size=4096, intermediate_size=14336, num_hidden_layers=4, num_attention_heads=32,
        num_key_value_heads=8, layer_types=["full_attention"] * 4)),
    # mixture-of-experts decoders
    ("glm4_moe", "zai-org/GLM-4.5 (qk norms, three dense layers)", dict(
        vocab_size=151552, hidden_size=5120, intermediate_size=12288, moe_intermediate_size=1536,
        num_hidden_layers=5, num_attention_heads=96, num_key_value_heads=8, head_dim=128, n_routed_experts=160,
        n_shared_experts=1, num_experts_per_tok=8, first_k_dense_replace=3, attention_bias=True, use_qk_norm=True)),
    ("ernie4_5_moe", "baidu/ERNIE-4.5-21B-A3B-PT, every second layer MoE, no shared experts, biases", dict(
        vocab_size=103424, hidden_size=2560, intermediate_size=12288, moe_intermediate_size=1536,
        num_hidden_layers=6, num_attention_heads=20, num_key_value_heads=4, head_dim=128, moe_num_experts=64,
        moe_k=6, moe_num_shared_experts=0, moe_layer_start_index=1, moe_layer_interval=2, use_bias=True)),
    ("dots1", "rednote-hilab/dots.llm1.base, layers 2 on sliding", dict(
        vocab_size=152064, hidden_size=4096, intermediate_size=10944, moe_intermediate_size=1408,
        num_hidden_layers=4, num_attention_heads=32, n_routed_experts=128, n_shared_experts=2,
        num_experts_per_tok=6, first_k_dense_replace=1, sliding_window=4096, max_window_layers=2)),
    # -- batch A
    ("granite_swa", "ibm-granite/granite-swash-2b, the full layers NoPE (layer_rope_theta 0)", dict(
        vocab_size=100352, hidden_size=2560, intermediate_size=8192, num_hidden_layers=4, num_attention_heads=20,
        num_key_value_heads=4, layer_rope_theta=[0, 10000.0, 10000.0, 10000.0])),
    ("granite_swa", "ibm-granite/granite-swash-2b, every layer NoPE and full", dict(
        vocab_size=100352, hidden_size=2560, intermediate_size=8192, num_hidden_layers=2, num_attention_heads=20,
        num_key_value_heads=4, layer_rope_theta=[0, 0], layer_types=["full_attention"] * 2)),
    ("granitemoe_swa", "ibm-granite/granite-swash-3b-a600m with a shared MLP and NoPE layers", dict(
        vocab_size=32000, hidden_size=1024, intermediate_size=512, num_hidden_layers=4, num_attention_heads=16,
        num_key_value_heads=8, num_local_experts=8, num_experts_per_tok=2, shared_intermediate_size=1024,
        layer_rope_theta=[0, 1e4, 1e4, 1e4])),
    ("vaultgemma", "google/vaultgemma-1b: every layer full", dict(
        vocab_size=256000, hidden_size=1152, intermediate_size=6912, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=4, head_dim=256, layer_types=["full_attention"] * 2)),
    ("mellum", "JetBrains/Mellum2-12B-A2.5B-Base, a dense first layer and alternating windows", dict(
        vocab_size=98304, hidden_size=2304, intermediate_size=7168, moe_intermediate_size=896, num_hidden_layers=4,
        num_attention_heads=32, num_key_value_heads=4, head_dim=128, num_experts=64, num_experts_per_tok=8,
        mlp_layer_types=["dense", "sparse", "sparse", "sparse"], sliding_window=1024,
        layer_types=["sliding_attention", "full_attention"] * 2)),
    ("hyperclovax", "naver-hyperclovax/HyperCLOVAX-SEED-Think-14B without use_post_norm", dict(
        vocab_size=32000, hidden_size=4096, intermediate_size=11008, num_hidden_layers=2, num_attention_heads=32,
        use_post_norm=False)),
    ("cohere2_moe", "CohereLabs/command-a-plus-05-2026, two dense RoPE layers first, shared experts, RMSNorm", dict(
        vocab_size=256000, hidden_size=1024, intermediate_size=2048, num_hidden_layers=6, num_attention_heads=8,
        num_key_value_heads=2, head_dim=128, num_experts=8, num_experts_per_tok=2, num_shared_experts=2,
        first_k_dense_replace=2, prefix_dense_intermediate_size=4096, rms_norm_eps=1e-5)),
    ("cohere2_moe", "CohereLabs/command-a-plus-05-2026, two dense layers with their own windows", dict(
        vocab_size=256000, hidden_size=1024, intermediate_size=2048, num_hidden_layers=6, num_attention_heads=8,
        head_dim=128, num_experts=8, num_experts_per_tok=2, first_k_dense_replace=2,
        prefix_dense_sliding_window_pattern=2)),
    ("exaone_moe", "LGAI-EXAONE/K-EXAONE-236B-A23B, two dense layers from mlp_layer_types, no shared expert", dict(
        vocab_size=102400, hidden_size=4096, intermediate_size=16384, moe_intermediate_size=1024,
        num_hidden_layers=4, num_attention_heads=32, num_key_value_heads=8, num_experts=64, num_experts_per_tok=8,
        num_shared_experts=0, mlp_layer_types=["dense", "dense", "sparse", "sparse"])),
    ("glm4_moe_lite", "Glm4MoeLiteConfig's defaults, queries without the low-rank path, three dense layers", dict(
        vocab_size=154880, hidden_size=2048, intermediate_size=10240, moe_intermediate_size=1536,
        num_hidden_layers=4, num_attention_heads=20, num_key_value_heads=20, n_routed_experts=64,
        n_shared_experts=1, num_experts_per_tok=4, q_lora_rank=None, mlp_layer_types=["dense"] * 3 + ["sparse"])),
    ("minicpm3", "openbmb/MiniCPM3-4B with v_head_dim and MLP biases", dict(
        vocab_size=73448, hidden_size=2560, intermediate_size=6400, num_hidden_layers=2, num_attention_heads=40,
        v_head_dim=96, mlp_bias=True, scale_emb=1)),
    # batch B
    ("flint", "RecursiveSI/flint, every second layer sparse after one dense, no shared expert, biases", dict(
        vocab_size=150144, hidden_size=2048, intermediate_size=6144, num_hidden_layers=7, num_attention_heads=32,
        num_key_value_heads=4, num_experts=16, num_experts_per_tok=2, shared_expert_intermediate_size=0,
        decoder_sparse_step=2, mlp_only_layers=[0], attention_bias=True)),
    ("kolibri1", "Aleph-Alpha/Kolibri-1 without a window: every layer full, with RoPE", dict(
        vocab_size=128000, hidden_size=2560, num_hidden_layers=3, num_attention_heads=48, num_experts=16,
        sliding_window=None, layer_types=["full_attention"] * 3)),
    ("cohere_compass_text", "CohereLabs/North-Micro-Vision-Instruct, three sliding layers then a full NoPE one", dict(
        vocab_size=256000, hidden_size=4096, intermediate_size=14336, num_hidden_layers=4, num_attention_heads=32,
        num_key_value_heads=8, layer_types=["sliding_attention"] * 3 + ["full_attention"],
        rope_parameters=dict(sliding_attention=dict(rope_type="default", rope_theta=5e4), full_attention=None))),
    ("aria_text", "rhymes-ai/Aria without shared experts, GQA, attention biases", dict(
        vocab_size=32000, hidden_size=2560, intermediate_size=1664, num_hidden_layers=2, num_attention_heads=20,
        num_key_value_heads=4, moe_num_experts=8, moe_topk=2, moe_num_shared_experts=0, attention_bias=True)),
    ("hy_v3", "tencent/Hy3-preview, two dense then every second layer sparse, no shared experts", dict(
        vocab_size=120832, hidden_size=1024, intermediate_size=4096, num_hidden_layers=7, num_attention_heads=8,
        num_key_value_heads=2, head_dim=128, num_experts=16, num_experts_per_tok=2, num_shared_experts=0,
        moe_intermediate_size=512, mlp_layer_types=["dense"] * 3 + ["sparse", "dense"] * 2, attention_bias=True)),
    ("afmoe", "AfmoeConfig with biased attention, mup_enabled, every layer full (NoPE), no shared experts", dict(
        vocab_size=1000, hidden_size=256, intermediate_size=512, moe_intermediate_size=64, num_hidden_layers=3,
        num_dense_layers=1, num_attention_heads=4, num_key_value_heads=2, head_dim=32, num_experts=8,
        num_experts_per_tok=2, num_shared_experts=0, global_attn_every_n_layers=1, sliding_window=16,
        attention_bias=True, mup_enabled=True)),
    ("afmoe", "AfmoeConfig with every layer dense, from layer_types", dict(
        vocab_size=1000, hidden_size=256, intermediate_size=512, num_hidden_layers=3, num_dense_layers=3,
        num_attention_heads=4, head_dim=64, sliding_window=16,
        layer_types=["sliding_attention", "full_attention", "sliding_attention"])),
    ("ctrl", "Salesforce/ctrl with an untied LM head", dict(
        vocab_size=246534, n_positions=256, n_embd=1280, dff=8192, n_layer=2, n_head=16, tie_word_embeddings=False)),
    ("apertus", "swiss-ai/Apertus-70B-2509's shape, two layers, attention biases, head_dim given", dict(
        vocab_size=131072, hidden_size=8192, intermediate_size=43008, num_hidden_layers=2, num_attention_heads=64,
        num_key_value_heads=8, head_dim=128, attention_bias=True)),
    ("apertus", "swiss-ai/Apertus-8B-2509 with relu2 instead of xIELU, as a variant", dict(
        vocab_size=131072, hidden_size=4096, intermediate_size=21504, num_hidden_layers=2, num_attention_heads=32,
        num_key_value_heads=8, hidden_act="relu2")),
    ("llama4_text", "meta-llama/Llama-4-Maverick-17B-128E (text_config): MoE every second layer", dict(
        vocab_size=202048, hidden_size=5120, intermediate_size=8192, intermediate_size_mlp=16384,
        num_hidden_layers=48, num_attention_heads=40, num_key_value_heads=8, head_dim=128, num_local_experts=128,
        num_experts_per_tok=1, interleave_moe_layer_step=2, use_qk_norm=False, attention_chunk_size=8192,
        max_position_embeddings=1048576, pad_token_id=200018, tie_word_embeddings=False)),
    # the families the harness had left out
    ("gpt_neo", "EleutherAI/gpt-neo-1.3B's shape, two layers, every layer local, intermediate_size given", dict(
        vocab_size=50257, hidden_size=2048, num_layers=2, num_heads=16, attention_types=[[["local"], 2]],
        intermediate_size=4096)),
    ("gpt_neo", "EleutherAI/gpt-neo-125m, every layer global", dict(
        vocab_size=50257, hidden_size=768, num_layers=2, num_heads=12, attention_types=[[["global"], 2]])),
    ("dbrx", "databricks/dbrx-instruct, two layers, GeLU experts, the head's class defaults", dict(
        vocab_size=100352, d_model=6144, n_heads=48, n_layers=2, attn_config=dict(kv_n_heads=8, rope_theta=5e5),
        ffn_config=dict(ffn_act_fn=dict(name="gelu"), ffn_hidden_size=10752, moe_num_experts=16, moe_top_k=4))),
    ("openai-gpt", "openai-community/openai-gpt with relu and an untied head", dict(
        vocab_size=40478, n_positions=512, n_embd=768, n_layer=2, n_head=12, afn="relu", tie_word_embeddings=False)),
    ("nanochat", "NanoChatConfig with biased attention, GQA, a head_dim, no softcap", dict(
        vocab_size=50304, hidden_size=768, intermediate_size=3072, num_hidden_layers=2, num_attention_heads=6,
        num_key_value_heads=2, head_dim=64, attention_bias=True, final_logit_softcapping=None)),
    ("opt", "facebook/opt-350m's post-norm layers (no final norm), without its projection pair", dict(
        vocab_size=50272, hidden_size=1024, num_hidden_layers=2, ffn_dim=4096, num_attention_heads=16,
        max_position_embeddings=2048, do_layer_norm_before=False)),
    ("opt", "OPTConfig without biases, affine norms or the final norm, untied", dict(
        vocab_size=50272, hidden_size=768, num_hidden_layers=2, ffn_dim=3072, num_attention_heads=12,
        enable_bias=False, layer_norm_elementwise_affine=False, _remove_final_layer_norm=True,
        tie_word_embeddings=False)),
    ("biogpt", "microsoft/biogpt unscaled, untied", dict(
        vocab_size=42384, hidden_size=1024, num_hidden_layers=2, num_attention_heads=16, intermediate_size=4096,
        scale_embedding=False, tie_word_embeddings=False)),
    ("bitnet", "BitNetConfig with biased attention, a head_dim, untied", dict(
        vocab_size=1024, hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=8,
        num_key_value_heads=4, head_dim=32, attention_bias=True, tie_word_embeddings=False)),
    ("jamba", "JambaConfig: attention every 3rd layer at offset 1, every layer MoE, dt rank auto, projection "
              "biases, no conv bias", dict(
        vocab_size=1000, hidden_size=96, intermediate_size=64, num_hidden_layers=4, num_attention_heads=6,
        num_key_value_heads=2, num_experts=4, num_experts_per_tok=2, attn_layer_period=3, attn_layer_offset=1,
        expert_layer_period=1, expert_layer_offset=0, mamba_dt_rank="auto", mamba_proj_bias=True,
        mamba_conv_bias=False, mamba_d_state=8, mamba_d_conv=3, mamba_expand=3)),
    ("jamba", "JambaConfig with one expert (every FFN dense), every layer attending", dict(
        vocab_size=1000, hidden_size=64, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=4, num_experts=1, attn_layer_period=1, attn_layer_offset=0, tie_word_embeddings=True)),
    ("lfm2", "LFM2 (legacy block_ff_dim and tie_embedding, a multiplier that rounds, biases, as a variant)", dict(
        vocab_size=1000, hidden_size=256, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=2,
        block_ff_dim=1000, block_multiple_of=48, block_ffn_dim_multiplier=1.3, block_auto_adjust_ff_dim=True,
        layer_types=["conv", "full_attention", "conv", "conv"], conv_L_cache=4, conv_bias=True,
        tie_embedding=False)),
    # Nemotron 3 Nano: Mamba-2, attention and MoE layers (128 relu^2 experts, top 6, a shared one); 31.6B
    # published, 31,577,940,288 here
    ("nemotron_h", "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", dict(
        vocab_size=131072, hidden_size=2688, intermediate_size=1856, num_attention_heads=32, num_key_value_heads=2,
        head_dim=128, max_position_embeddings=262144, mamba_num_heads=64, mamba_head_dim=64, n_groups=8,
        ssm_state_size=128, conv_kernel=4, chunk_size=128, n_routed_experts=128, num_experts_per_tok=6,
        moe_intermediate_size=1856, moe_shared_expert_intermediate_size=3712, tie_word_embeddings=False,
        hybrid_override_pattern="MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME")),
    ("falcon_h1", "Falcon-H1 (the mixer's gated RMSNorm in 2 groups, every bias, its width from mamba_expand, "
     "head dims auto)", dict(
         vocab_size=1000, hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
         num_key_value_heads=2, mamba_d_ssm=None, mamba_expand=2, mamba_n_heads=8, mamba_d_head="auto",
         mamba_n_groups=2, mamba_d_state=16, mamba_rms_norm=True, mamba_proj_bias=True, projectors_bias=False,
         mamba_conv_bias=False, attention_bias=True, mlp_bias=True)),
    ("olmo_hybrid", "OLMo Hybrid (RoPE, a head_dim, GQA, biased attention, value heads twice the key heads, tied)",
     dict(vocab_size=1000, hidden_size=256, intermediate_size=512, num_hidden_layers=4, num_attention_heads=4,
          num_key_value_heads=2, head_dim=48, attention_bias=True, linear_num_key_heads=2, linear_num_value_heads=4,
          linear_key_head_dim=24, linear_value_head_dim=40, tie_word_embeddings=True,
          layer_types=["linear_attention", "full_attention", "linear_attention", "full_attention"],
          rope_parameters=dict(rope_type="default", rope_theta=500000.0), pad_token_id=1)),
    ("recurrent_gemma", "RecurrentGemma (a narrower RG-LRU, biased q/k/v, GQA, one recurrent block per attention one)",
     dict(vocab_size=1000, hidden_size=256, intermediate_size=600, num_hidden_layers=4, num_attention_heads=8,
          num_key_value_heads=2, lru_width=192, attention_window_size=16, conv1d_width=3, attention_bias=True,
          block_types=["recurrent", "attention"])),
    # the experts beside every layer's MLP (moe.beside_mlp): 25,233,141,790 as transformers counts it, the preset
    # gemma-4-26b-a4b (the card: 25.2B total, 3.8B active)
    ("gemma4_text", "google/gemma-4-26B-A4B-it (text_config)", GEMMA4_26B),
    ("zamba2", "Zamba2 (two blocks over three hybrid layers, adapters on q, k and v, RoPE, biases, groups, untied "
               "head)", dict(
         vocab_size=1000, hidden_size=64, num_hidden_layers=5, num_attention_heads=4, n_mamba_heads=4, mamba_ngroups=2,
         layers_block_type=["mamba", "hybrid", "mamba", "hybrid", "hybrid"], num_mem_blocks=2,
         use_shared_attention_adapter=True, adapter_rank=8, use_mem_rope=True, add_bias_linear=True,
         intermediate_size=96, mamba_d_state=16, chunk_size=4, hidden_act="gelu_pytorch_tanh")),
    ("zamba", "Zamba (one Mamba head, untied with one hybrid layer, GQA, head_dim, a dt rank, biased projections)",
     dict(vocab_size=1000, hidden_size=64, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
          head_dim=20, intermediate_size=96, n_mamba_heads=1, mamba_d_state=8, mamba_dt_rank=6, mamba_proj_bias=True,
          mamba_conv_bias=False, tie_word_embeddings=False)),
    ("zamba", "Zamba (four Mamba heads, the block used by three layers, SiLU)", dict(
         vocab_size=1000, hidden_size=64, num_hidden_layers=7, num_attention_heads=4, num_key_value_heads=4,
         intermediate_size=96, n_mamba_heads=4, mamba_d_state=8, attn_layer_period=2, attn_layer_offset=1,
         hidden_act="silu")),
    ("zamba", "Zamba (no hybrid layer, untied: Mamba-1 layers of two heads alone)", dict(
         vocab_size=1000, hidden_size=64, num_hidden_layers=3, layers_block_type=["mamba"] * 3, n_mamba_heads=2,
         tie_word_embeddings=False)),
    ("zamba2", "Zamba2 (a block per hybrid layer, untied; GQA, SwiGLU, the MLP adapter alone)", dict(
         vocab_size=1000, hidden_size=64, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
         n_mamba_heads=4, layers_block_type=["hybrid", "mamba", "hybrid"], num_mem_blocks=3, hidden_act="silu",
         tie_word_embeddings=False, mamba_d_state=16)),
]


def _config(model_type: str, hp: dict):
    return transformers.AutoConfig.for_model(model_type, **hp)


def _transformers_model(cfg):
    with torch.device("meta"):
        return transformers.AutoModelForCausalLM.from_config(cfg)


def _layers(model, n: int):
    return next(m for m in model.modules() if isinstance(m, torch.nn.ModuleList) and len(m) == n)


def _write(tmp_path, data: dict, name: str = "config.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def _stored(module) -> int:
    """numel of what a checkpoint of ``module`` stores: its state dict (parameters and
    persistent buffers), each storage once (tied weights once), without the gate_up_proj rows
    transformers allocates for LongCat-Flash's identity experts (no checkpoint stores them)."""
    tensors = {t.untyped_storage()._cdata: t for k, t in module.state_dict(keep_vars=True).items()
               if k.rpartition(".")[2] not in against.DERIVED_BUFFERS}  # MiniMax's decay tables: not learned
    return sum(t.numel() for t in tensors.values()) - against.phantom_params(module)


# transformers' decoder layers that hold several of llmcalc's (LongCat-Flash: two sublayers each)
SUBLAYERS = {"longcat_flash": 2}


def _check_against(tmp_path, model_type: str, hp: dict) -> int:
    """llmcalc equals transformers in total, embedding, LM head and layer by layer; returns the total."""
    cfg = _config(model_type, hp)
    data = {**cfg.to_dict(), "model_type": model_type}  # GPT-SW3's class writes "gpt2"
    assert unclassified(data) == [], "keys transformers writes that no rule covers"
    ours = load_path(_write(tmp_path, data))
    counted = count_params(ours)
    model = _transformers_model(cfg)
    total = _stored(model)
    assert counted.total == total

    emb = model.get_input_embeddings().weight.numel()
    assert counted.components["embedding/token"] == emb
    head = model.get_output_embeddings()
    tied = head.weight is model.get_input_embeddings().weight
    head_params = (0 if tied else head.weight.numel()) + (head.bias.numel() if head.bias is not None else 0)
    assert counted.components.get("lm_head", 0) == head_params

    per = SUBLAYERS.get(model_type, 1)
    layers = _layers(model, ours.n_layers // per)
    want = [0] * ours.n_layers
    for group, per_layer in counted.groups:
        for i in group.layers:
            want[i] = sum(per_layer.values())
    for i, layer in enumerate(layers):
        assert _own(layer, i) == sum(want[i * per:(i + 1) * per]), f"layer {i}"
    return total


def _own(layer, i: int) -> int:
    """numel of what layer ``i`` stores as its own: Zamba2's hybrid layers hold the shared block they use (counted
    once per block by llmcalc, in the model's components) and, in the block's adapter lists, the adapters of
    every use of that block; the layer's own are its use's (index ``i`` among the hybrid layers). Zamba's hold
    their block as ``shared_transf``, without adapters."""
    if hasattr(layer, "shared_transf"):
        return sum(t.numel() for k, t in layer.state_dict().items() if not k.startswith("shared_transf."))
    shared = getattr(layer, "shared_transformer", None)
    if shared is None:
        return _stored(layer)
    use = str(shared.feed_forward.layer_dic[i])

    def own(key: str) -> bool:
        return not key.startswith("shared_transformer.") or (
            "adapter_list." in key and key.split("adapter_list.")[1].split(".")[0] == use)

    return sum(t.numel() for k, t in layer.state_dict().items() if own(k))


@pytest.mark.parametrize("model_type", sorted(CHECKPOINTS))
def test_params_equal_transformers(tmp_path, model_type):
    _, hp, published = CHECKPOINTS[model_type]
    total = _check_against(tmp_path, model_type, hp)
    if published is not None:
        assert total == published


@pytest.mark.parametrize("model_type, checkpoint, hp", VARIANTS, ids=[v[1] for v in VARIANTS])
def test_variants_equal_transformers(tmp_path, model_type, checkpoint, hp):
    _check_against(tmp_path, model_type, hp)


def test_every_mapper_is_tested():
    assert set(CHECKPOINTS) == set(MAPPERS)


def _v4_layout(data: dict) -> dict:
    """The transformers 4 layout: rope_theta / partial_rotary_factor / rope_scaling at the top level,
    no layer_types (derived from sliding_window and the family's rule)."""
    out = {k: v for k, v in data.items() if k not in ("rope_parameters", "layer_types", "dtype")}
    rope = dict(data.get("rope_parameters") or {})
    if "full_attention" in rope:  # Gemma 3: rope_theta for the full layers, rope_local_base_freq for the others
        out["rope_local_base_freq"] = rope["sliding_attention"]["rope_theta"]
        rope = dict(rope["full_attention"])
    out["rope_theta"] = rope.pop("rope_theta", 10000.0)
    if "partial_rotary_factor" in rope:
        out["partial_rotary_factor"] = rope.pop("partial_rotary_factor")
    if rope.get("rope_type", "default") != "default":
        out["rope_scaling"] = rope
    out["torch_dtype"] = "bfloat16"
    return out


@pytest.mark.parametrize("model_type, checkpoint, hp", [
    ("llama", *CHECKPOINTS["llama"][:2]), ("qwen2", *CHECKPOINTS["qwen2"][:2]),
    ("gemma2", *CHECKPOINTS["gemma2"][:2]), ("phi", *CHECKPOINTS["phi"][:2]),
    ("stablelm", *CHECKPOINTS["stablelm"][:2]), ("gpt_oss", *CHECKPOINTS["gpt_oss"][:2]),
    ("qwen2", *VARIANTS[4][1:]), ("smollm3", *VARIANTS[8][1:]), ("gemma3_text", *VARIANTS[9][1:]),
    ("cohere2", *CHECKPOINTS["cohere2"][:2]),
])
def test_transformers_4_layout_reads_the_same(model_type, checkpoint, hp):
    v5 = _config(model_type, hp).to_dict()
    v4 = _v4_layout(v5)
    assert "rope_parameters" not in v4 and "layer_types" not in v4
    assert from_hf_config(v4, "config.json") == from_hf_config(v5, "config.json")


def test_transformers_4_neox_rotary_pct(tmp_path):
    v5 = _config("gpt_neox", CHECKPOINTS["gpt_neox"][1]).to_dict()
    v4 = _v4_layout(v5)
    v4["rotary_pct"] = v4.pop("partial_rotary_factor")
    v4["rotary_emb_base"] = v4.pop("rope_theta")
    assert from_hf_config(v4, "config.json") == from_hf_config(v5, "config.json")


def test_mapped_keys():
    """What a few families map to (the keys a reader would look for)."""
    qwen = from_hf_config(_config("qwen2", VARIANTS[4][2]).to_dict(), "config.json")
    assert (qwen["sliding_window"], qwen["layer_types"][:21]) == (4096, ["full"] * 20 + ["sliding"])
    gemma3 = from_hf_config(_config("gemma3_text", CHECKPOINTS["gemma3_text"][1]).to_dict(), "config.json")
    assert gemma3["layer_types"] == ["sliding"] * 5 + ["full"] and gemma3["qk_norm"] == "head"
    smol = from_hf_config(_config("smollm3", CHECKPOINTS["smollm3"][1]).to_dict(), "config.json")
    assert smol["rope_layers"] == [True, True, True, False]
    neox = from_hf_config(_config("gpt_neox", CHECKPOINTS["gpt_neox"][1]).to_dict(), "config.json")
    assert neox["rotary_fraction"] == 0.25 and neox["parallel_norms"] == 2
    v3 = load_path_dict("deepseek_v3")
    assert [g.spec.ffn for g in layer_plan(v3)] == ["dense", "moe"]


def load_path_dict(model_type: str):
    from llmcalc.analysis.model.checks import from_dict

    return from_dict(from_hf_config(_config(model_type, CHECKPOINTS[model_type][1]).to_dict(), "config.json"))


# -- rejections: exit 2, one line, naming the field ------------------------------------

LLAMA = dict(model_type="llama", vocab_size=32000, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
             num_attention_heads=4, max_position_embeddings=128)


@pytest.mark.parametrize("changes, message", [
    ({"model_type": "no_such_model"}, "key 'model_type': unsupported Hugging Face model_type 'no_such_model'"),
    ({"model_type": "qwen2", "layer_types": ["full_attention", "linear_attention"]},
     "key 'layer_types': unsupported layer type 'linear_attention'"),
    ({"layers_block_type": ["attention", "mamba"]}, "key 'layers_block_type': hybrid or state-space layers: modeled "
     "for model_type granitemoehybrid, nemotron_h, zamba, zamba2 only, not 'llama'"),
    ({"attention_chunk_size": 8192},
     "key 'attention_chunk_size': chunked-attention layers: modeled for model_type llama4_text only, not 'llama'"),
    ({"quantization_config": {"quant_method": "hqq"}},
     "key 'quantization_config.quant_method': 'hqq' is not a format llmcalc sizes"),
    ({"quantization_config": {"quant_method": "awq", "bits": 8}}, "key 'quantization_config.bits': awq stores 4 bits"),
    ({"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 64]}},
     "key 'quantization_config.weight_block_size': must be a square block"),
    ({"quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.conv"]}},
     "key 'quantization_config.modules_to_not_convert': cannot map module 'model.layers.*.conv'"),
    ({"model_type": "stablelm", "qk_layernorm": True}, "key 'qk_layernorm': True is not supported"),
    ({"model_type": "deepseek_v3", "moe_layer_freq": 2}, "key 'moe_layer_freq': must be 1"),
    ({"dtype": "float8_e4m3fn"}, "key 'dtype': unsupported dtype 'float8_e4m3fn'"),
    ({"model_type": "qwen2_moe", "mlp_only_layers": [3]}, "key 'mlp_only_layers': only a leading run"),
    ({"model_type": "cohere", "use_qk_norm": True}, "key 'use_qk_norm': True is not supported"),
    ({"model_type": "mpt", "expansion_ratio": 8}, "key 'expansion_ratio': transformers' MPT builds"),
    ({"model_type": "opt", "word_embed_proj_dim": 32}, "key 'word_embed_proj_dim': a projection of the embeddings"),
    ({"model_type": "bitnet", "head_dim": 32}, "key 'head_dim': the heads must span hidden_size"),
    ({"model_type": "bitnet", "quantization_config": {"quant_method": "bitnet"}},
     "key 'quantization_config.quant_method': 'bitnet' is not a format llmcalc sizes"),
    ({"model_type": "jamba", "expert_layer_period": 4, "expert_layer_offset": 1},
     "key 'expert_layer_offset': MoE layers i % 4 == 1 are not modeled"),
    ({"model_type": "jamba", "hidden_act": "gelu"}, "key 'hidden_act': the mamba mixer is counted with SiLU"),
    # Zamba2: adapters of 2 * hidden_size on k and v need every head a key-value head (transformers fails otherwise);
    # untied, transformers gives each hybrid layer its own copy of the block
    ({"model_type": "zamba2", "layers_block_type": ["hybrid", "mamba"], "use_shared_attention_adapter": True,
      "num_key_value_heads": 2}, "key 'num_key_value_heads': the k and v adapters output 2 * hidden_size (128)"),
    ({"model_type": "zamba2", "layers_block_type": ["hybrid", "hybrid"], "tie_word_embeddings": False},
     "key 'tie_word_embeddings': false leaves each of the 2 hybrid layers its own copy"),
    ({"model_type": "zamba2", "layers_block_type": ["hybrid", "hybrid", "mamba"]},
     "key 'layers_block_type': must list num_hidden_layers (2) layers, got 3"),
    # Zamba: the same tie; a concatenation other than 2 * hidden_size (transformers builds it, then cannot run it);
    # heads that do not divide the mixer's width (its config refuses them); the conv's activation; its default layer
    # list (three layers at least); tied, one hybrid layer (transformers' tie mapping fails)
    ({"model_type": "zamba", "layers_block_type": ["hybrid", "hybrid"], "tie_word_embeddings": False},
     "key 'tie_word_embeddings': false leaves each of the 2 hybrid layers its own copy"),
    ({"model_type": "zamba", "layer_types": ["mamba", "hybrid"], "attention_hidden_size": 96},
     "key 'attention_hidden_size': must be 2 * hidden_size (128)"),
    ({"model_type": "zamba", "layers_block_type": ["mamba", "mamba"], "n_mamba_heads": 3},
     "key 'n_mamba_heads': must divide mamba_expand * hidden_size (128), got 3"),
    ({"model_type": "zamba", "layers_block_type": ["mamba", "mamba"], "hidden_mamba_act": "gelu"},
     "key 'hidden_mamba_act': the mamba mixer is counted with SiLU"),
    ({"model_type": "zamba"}, "key 'layers_block_type': must list num_hidden_layers (2) layers, got 3"),
    ({"model_type": "zamba", "layer_types": ["mamba", "hybrid"]}, "key 'tie_word_embeddings': true with one hybrid"),
])
def test_rejected_fields_exit_2(tmp_path, run, changes, message):
    data = {**LLAMA, **changes}
    if data["model_type"] == "deepseek_v3":
        data.update(n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, kv_lora_rank=16,
                    qk_nope_head_dim=8, qk_rope_head_dim=8, v_head_dim=8)
    if data["model_type"] == "qwen2_moe":
        data.update(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32)
    if data["model_type"] == "zamba":  # its class's default (16) for LLAMA's 4 heads
        data["num_key_value_heads"] = 4
    result = run("params", _write(tmp_path, data))
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.stderr
    assert message in result.stderr


def test_ignored_fields_change_nothing():
    base = from_hf_config(dict(LLAMA), "config.json")
    noisy = {**LLAMA, "rope_scaling": {"rope_type": "yarn", "factor": 4.0}, "attention_dropout": 0.1,
             "initializer_range": 0.5, "bos_token_id": 7, "pretraining_tp": 2, "custom_remote_field": 3}
    assert from_hf_config(noisy, "config.json") == base
    assert unclassified(noisy) == ["custom_remote_field"]


# -- what a config.json leaves out or sets to null: transformers' reading ----------------------

SHIPPED = sorted(HF_DIR.glob("*.json"))
# The families no shipped config.json is of: their checkpoints' hyperparameters (CHECKPOINTS)
OTHERS = sorted(set(CHECKPOINTS) - {json.loads(p.read_text())["model_type"] for p in SHIPPED})
# Layers kept, per model_type: every kind of layer the config has (2: alternating windows, a dense
# layer and a MoE one), Gemma 3's five sliding layers and a full one, DeepSeek-V3's three dense
# layers and a MoE one, SmolLM3's three RoPE layers and a NoPE one, Command R7B's (and Command A
# MoE's) three sliding layers and a full NoPE one, K-EXAONE's dense layer and sliding and full MoE
# ones, Flint's dense layers and a MoE one, Kolibri's.
DEPTHS = {"gemma3_text": 6, "deepseek_v3": 4, "smollm3": 4, "cohere2": 4, "cohere2_moe": 4, "exaone_moe": 4,
          "flint": 4, "kolibri1": 5, "afmoe": 4}
# Jamba: two mamba layers, dense and MoE, twice, then its first attention layer (transformers' Jamba cannot
# run a cache of mamba layers only)
DEPTHS["jamba"] = 5
# Granite 4.0-H: the same (its first attention layer is the sixth); Bamba: its first attention layer
# (the tenth), so that its attention keys are read by a layer that attends
DEPTHS.update(granitemoehybrid=6, bamba=10)
# LFM2: its first attention layer is the third (transformers' cache needs one to read the cached length)
DEPTHS["lfm2"] = 3
DEPTHS["lfm2_moe"] = 3  # its first attention layer, index 2, and an MoE one
DEPTHS["minimax"] = 8  # its first softmax-attention layer is the eighth
# Qwen3-Next and Qwen3.5: their first attention layer is the fourth (transformers reads the cached length there)
DEPTHS.update(qwen3_next=4, qwen3_5_text=4, qwen3_5_moe_text=4)
DEPTHS.update(deepseek_v32=4, glm_moe_dsa=4)  # three dense layers and a MoE one, as DeepSeek-V3
DEPTHS["hy_v4"] = 3  # its dense layer, an indexed MoE layer and its first shared-indexer one
DEPTHS["recurrent_gemma"] = 3  # two recurrent blocks and its first attention layer
# Kimi Linear: three KDA layers (a dense one, two MoE), its first MLA layer, and the class default's (the fifth)
DEPTHS["kimi_linear"] = 5
# Nemotron-H (its depth is its hybrid_override_pattern's length, cut to match): Mamba-2 and MLP layers up to its
# first attention layer, the fifteenth
DEPTHS["nemotron_h"] = 15
DEPTHS["zamba"] = 8  # its first two hybrid layers, the third and the eighth (tied, transformers builds no fewer)


def _shallow(raw: dict) -> dict:
    """``raw`` at most its DEPTHS deep (``layer_types`` cut to match): every key read the same
    way in a fraction of the time; a dropped depth is the class's default depth."""
    out = copy.deepcopy(raw)
    depth = DEPTHS.get(raw["model_type"], 2)
    for key in ("num_hidden_layers", "n_layer", "n_layers", "num_layers"):
        if key in out:
            out[key] = min(out[key], depth)
    if isinstance(out.get("layer_types"), list):
        out["layer_types"] = out["layer_types"][:depth]
    if isinstance(out.get("hybrid_override_pattern"), str):
        out["hybrid_override_pattern"] = out["hybrid_override_pattern"][:depth]
    if raw["model_type"] == "gpt_neo":  # its attention_types must expand to its depth: one global, one local
        out["attention_types"] = [[["global", "local"], 1]]
    linear = out.get("linear_attn_config")
    if isinstance(linear, dict):  # Kimi Linear's 1-based layer lists, cut to match
        for key in ("full_attn_layers", "kda_layers"):
            if isinstance(linear.get(key), list):
                linear[key] = [i for i in linear[key] if i <= depth]
    return out


def _figures(data: dict) -> tuple:
    """(llmcalc's, transformers') parameter total and KV-cache bytes after a prefill past every
    window either side has, or "refused"."""
    try:
        ours = from_json(copy.deepcopy(data), "config.json")
    except ConfigError:  # any other exception fails the test
        ours = None
    config = _transformers_config(data)
    windows = [g.spec.window or 0 for g in layer_plan(ours)] if ours else []
    prefill = max([8, getattr(config, "sliding_window", None) or 0, *windows]) + 3
    theirs = "refused" if config is None else _measured(data, config, prefill)
    kv = against.transformers_kv_bytes(ours, 1, prefill, model_type=data["model_type"]) if ours else 0
    mine = "refused" if ours is None else (count_params(ours).total, kv)
    return mine, theirs


def _transformers_config(data: dict):
    """transformers' config of ``data`` as ``build_hf`` reads it (without the dtype: it builds in
    fp32), or None where the config class refuses it. A copy: transformers writes into the
    nested mappings it is given (rope_scaling). The class called on the dict, as ``from_dict``
    without keyword arguments calls it (which then formats the whole config for a log line)."""
    rest = {k: v for k, v in copy.deepcopy(data).items() if k not in ("model_type", "dtype", "torch_dtype")}
    try:
        return transformers.CONFIG_MAPPING[data["model_type"]](**rest)
    except Exception:
        return None


_MEASURED: dict[tuple[str, int], tuple | str] = {}


def _measured(data: dict, config, prefill: int) -> tuple | str:
    """The parameters and the KV-cache bytes of transformers' model of ``data``, or "refused"
    when it cannot be built or run; once per config (equal configs build equal models) and prefill."""
    key = (config.to_json_string(use_diff=False), prefill)  # every field: no default config built to diff
    if key not in _MEASURED:
        try:  # with real weights on the CPU where it cannot run on meta (at SMALL's size)
            device = "cpu" if data["model_type"] in against.NOT_ON_META else "meta"
            model = against.build_hf(copy.deepcopy(data), device=device)
            model.config.return_dict = True  # None packs the outputs in a tuple: the same model
            _MEASURED[key] = (_stored(model), against.measure_kv_bytes(model, 1, prefill))
        except Exception:  # transformers refuses to build or run it
            _MEASURED[key] = "refused"
    return _MEASURED[key]


def _differ(raw: dict) -> dict:
    """The variants of ``raw`` where llmcalc and transformers differ: ``raw`` itself (which both
    must count), each of its keys left out, and each of its keys and of the fields of
    transformers' config class set to null."""
    mine, theirs = _figures(raw)
    assert mine == theirs and mine != "refused"
    fields = [f.name for f in dataclasses.fields(transformers.CONFIG_MAPPING[raw["model_type"]])]
    variants = {f"{key} dropped": {k: v for k, v in raw.items() if k != key} for key in raw}
    variants.update({f"{key} null": {**raw, key: None} for key in [*raw, *fields]})
    return {name: figures for name, data in variants.items() if (figures := _figures(data))[0] != figures[1]}


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_dropped_and_null_keys_read_as_transformers(path):
    """Each key of a shipped config.json left out, and set to null (and each field of the config
    class): llmcalc's parameter total and KV-cache bytes equal those of transformers' model built
    from the same dict, or both refuse it."""
    assert _differ(_shallow(json.loads(path.read_text()))) == {}


# DBRX's model runs (for its KV cache) with real weights on the CPU: its checkpoint's shapes at a
# small size
SMALL = {"dbrx": dict(vocab_size=1000, d_model=64, n_heads=4, n_layers=2, max_seq_len=32768,
                      attn_config=dict(clip_qkv=8, kv_n_heads=2, rope_theta=500000),
                      ffn_config=dict(ffn_hidden_size=96, moe_num_experts=4, moe_top_k=2))}
# LongCat-Flash's likewise (its experts loop over the experts a batch routes to): 4 experts and 2 identity ones, 3
# choices (2 real)
SMALL["longcat_flash"] = dict(vocab_size=1000, hidden_size=64, num_layers=2, num_attention_heads=4, ffn_hidden_size=96,
                              q_lora_rank=32, kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=8, head_dim=8,
                              v_head_dim=8, n_routed_experts=4, zero_expert_num=2, moe_topk=3,
                              expert_ffn_hidden_size=32, max_position_embeddings=64)


# the one difference llmcalc keeps: Nemotron-H's class default blocks (Mamba-2, MoE, attention, MLP) put an MLP
# layer where llmcalc's MoE step (every second layer, from the first MoE one) has a MoE one: refused, named
REFUSED_DEFAULTS = {"nemotron_h": {"hybrid_override_pattern dropped": ("refused", (2_137_412_872, 5_529_600))}}
# Gemma 4: its class default hidden_size_per_layer_input (256) turns on the per-layer embeddings of E2B/E4B,
# refused, named
REFUSED_DEFAULTS["gemma4_text"] = {"hidden_size_per_layer_input dropped": ("refused", (2_564_746_754, 50_348_032))}
# LongCat-Flash: with the class default of either expert count (512 experts, 256 identity ones) a token's share of
# real experts, 3 * 512 / 514 or 3 * 4 / 260, is not whole: llmcalc refuses it, naming moe.zero_experts
REFUSED_DEFAULTS["longcat_flash"] = {"n_routed_experts dropped": ("refused", (6_595_588, 4_224)),
                                     "zero_expert_num dropped": ("refused", (320_264, 4_224))}


@pytest.mark.parametrize("model_type", OTHERS)
def test_other_families_read_absent_and_null_keys_as_transformers(model_type):
    """The same for the families no config.json is shipped of, from their checkpoint's
    hyperparameters (SMALL's for DBRX)."""
    hp = SMALL.get(model_type, CHECKPOINTS[model_type][1])
    assert _differ(_shallow({"model_type": model_type, **hp})) == REFUSED_DEFAULTS.get(model_type, {})


def test_nemotron_h_reads_the_legacy_block_names_as_transformers():
    """Nemotron 3 Ultra's config.json lists "mamba" and "attention" in layers_block_type, the names transformers
    renames in every config (configuration_utils._LEGACY_LAYER_TYPE_REMAP): read as linear_attention and
    full_attention, the parameters transformers' model has."""
    legacy = dict(model_type="nemotron_h", vocab_size=1000, hidden_size=64, intermediate_size=96,
                  num_attention_heads=4, num_key_value_heads=2, head_dim=16, mamba_num_heads=4, mamba_head_dim=16,
                  n_groups=2, ssm_state_size=16, conv_kernel=4, chunk_size=16, n_routed_experts=4,
                  num_experts_per_tok=2, moe_intermediate_size=32, moe_shared_expert_intermediate_size=64,
                  layers_block_type=["mamba", "moe", "attention", "moe"])
    renamed = {**legacy, "layers_block_type": ["linear_attention", "moe", "full_attention", "moe"]}
    ours = count_params(from_json(copy.deepcopy(legacy), "config.json")).total
    assert ours == count_params(from_json(renamed, "config.json")).total == _stored(against.build_hf(legacy))


@pytest.mark.parametrize("attn, experts", [((8, 4), (2, 1)), ((3, 0), (1, 0)), ((4, 3), (3, 2)), ((1, 0), (2, 1)),
                                           ((5, 2), (2, 1))])
def test_jamba_layer_pattern_is_transformers(attn, experts):
    """Jamba's periods and offsets: llmcalc's layer plan is transformers' ``layers_block_type`` and
    ``layers_num_experts``, layer by layer."""
    config = transformers.JambaConfig(num_hidden_layers=11, hidden_size=64, intermediate_size=32,
                                      num_attention_heads=4, num_key_value_heads=2, num_experts=4, vocab_size=100,
                                      attn_layer_period=attn[0], attn_layer_offset=attn[1],
                                      expert_layer_period=experts[0], expert_layer_offset=experts[1])
    cfg = from_hf_config(config.to_dict(), "config.json")
    from llmcalc.analysis.model.checks import from_dict
    from llmcalc.analysis.model.layers import layer_specs

    specs = layer_specs(from_dict(cfg))
    assert ["mamba" if s.recurrent else "attention" for s in specs] == config.layers_block_type
    assert ["moe" if n > 1 else "dense" for n in config.layers_num_experts] == [s.ffn for s in specs]


@pytest.mark.parametrize("changes, key", [
    ({"indexer_types": ["full", "shared", "full", "full"]}, "indexer_types"),
    ({"index_topk_pattern": "FFSF"}, "index_topk_pattern"),
    ({"index_topk_freq": 2, "index_skip_topk_offset": 1}, "index_topk_freq"),  # GLM-5.2's IndexShare schedule
])
def test_glm5_shared_indexer_layers_exit_2(tmp_path, run, changes, key):
    """GLM-MoE-DSA layers that reuse the previous layer's top-k ("shared": no indexer of their own, no
    indexer key cached) are not modeled: refused in one line naming the key that makes them; GLM-5's
    published config has none (every layer "full", transformers' default)."""
    data = {**_config("glm_moe_dsa", {**CHECKPOINTS["glm_moe_dsa"][1], "num_hidden_layers": 4}).to_dict(),
            "indexer_types": None, **changes}
    result = run("params", _write(tmp_path, data))
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.stderr
    assert f"key '{key}'" in result.stderr and "'shared'" in result.stderr
    kept = {k: v for k, v in data.items() if k not in changes}  # without them: every layer its own indexer
    assert from_hf_config(kept, "config.json")["dsa"] == {"n_heads": 32, "head_dim": 128, "topk": 2048}


GEMMA4 = dict(model_type="gemma4_text", vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=6,
              num_attention_heads=4, num_key_value_heads=2, head_dim=16, hidden_size_per_layer_input=0)


@pytest.mark.parametrize("changes, key", [
    ({"hidden_size_per_layer_input": 256}, "hidden_size_per_layer_input"),  # the class default: E2B/E4B's
    ({"num_kv_shared_layers": 2}, "num_kv_shared_layers"),
    ({"enable_moe_block": True}, "num_experts"),  # the class has no default for it
    ({"use_bidirectional_attention": "all"}, "use_bidirectional_attention"),
    ({"per_layer_config": {"0": {"head_dim": 32}}}, "per_layer_config"),  # a sliding layer
    ({"per_layer_config": {"5": {"intermediate_size": 256}}}, "per_layer_config"),
    ({"per_layer_config": {"5": {"num_key_value_heads": 3}}}, "per_layer_config"),  # 3 does not divide 4
])
def test_gemma4_refusals_name_the_key(tmp_path, run, changes, key):
    result = run("params", _write(tmp_path, {**GEMMA4, **changes}))
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.stderr
    assert f"key '{key}'" in result.stderr


def test_gemma4_moe_reads_absent_and_null_keys_as_transformers():
    """26B-A4B's text_config (two layers): each key left out or null, as transformers reads it (its class has no
    default for num_experts, top_k_experts and moe_intermediate_size: both refuse them left out). Left out,
    hidden_size_per_layer_input turns on per-layer embeddings, which llmcalc refuses (REFUSED_DEFAULTS)."""
    differ = _differ(_shallow({"model_type": "gemma4_text", **GEMMA4_26B}))
    assert list(differ) == ["hidden_size_per_layer_input dropped"]
    assert differ["hidden_size_per_layer_input dropped"][0] == "refused"


# Qwen3.5-27B's and Qwen3.5-397B-A17B's language models: the text_config of their published config.json
QWEN3_5_27B_TEXT = dict(
    vocab_size=248320, hidden_size=5120, intermediate_size=17408, num_hidden_layers=64, num_attention_heads=24,
    num_key_value_heads=4, head_dim=256, full_attention_interval=4, linear_num_key_heads=16, linear_num_value_heads=48,
    linear_key_head_dim=128, linear_value_head_dim=128, linear_conv_kernel_dim=4, max_position_embeddings=262144,
    tie_word_embeddings=False,
    rope_parameters=dict(rope_type="default", rope_theta=10000000, partial_rotary_factor=0.25, mrope_interleaved=True,
                         mrope_section=[11, 11, 10]))
QWEN3_5_397B_TEXT = dict(
    {k: v for k, v in QWEN3_5_27B_TEXT.items() if k != "intermediate_size"}, hidden_size=4096, num_hidden_layers=60,
    num_attention_heads=32, num_key_value_heads=2, linear_num_value_heads=64, num_experts=512, num_experts_per_tok=10,
    moe_intermediate_size=1024, shared_expert_intermediate_size=1024)
# bundled presets -> (model_type, the published config's hyperparameters, total and active parameters)
PRESETS = {"gemma-4-26b-a4b": ("gemma4_text", GEMMA4_26B, 25_233_141_790),
           "deepseek-v3.2": ("deepseek_v32", CHECKPOINTS["deepseek_v32"][1], 671_877_944_064),
           "qwen3.5-27b": ("qwen3_5_text", QWEN3_5_27B_TEXT, 26_895_998_464),
           "qwen3.5-397b-a17b": ("qwen3_5_moe_text", QWEN3_5_397B_TEXT, 396_346_350_336)}  # active: test_params.py


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_are_their_published_configs(name):
    """A bundled preset is what the mapper reads from its published config (the same parameters per component,
    forward matmul FLOPs and KV + state bytes), and its total is transformers' model's on that config."""
    from llmcalc.analysis.count.flops import count_flops
    from llmcalc.analysis.count.kvcache import kv_cache
    from llmcalc.analysis.model.checks import from_dict
    from llmcalc.analysis.spec import RunSpec

    kind, hp, total = PRESETS[name]
    config = _config(kind, hp)
    mapped, preset = from_dict(from_hf_config(config.to_dict(), "config.json")), load_bundled(name)
    assert count_params(mapped).components == count_params(preset).components
    run, decode = RunSpec("train", 64, 1, "eager"), RunSpec("decode", 4096, 1)
    assert count_flops(mapped, run).forward.matmul == count_flops(preset, run).forward.matmul
    assert kv_cache(mapped, decode).bytes == kv_cache(preset, decode).bytes
    assert count_params(preset).total == total
    assert _stored(_transformers_model(config)) == total


def test_gemma4_per_layer_config_is_the_source():
    """transformers' to_dict writes per_layer_config in place of global_head_dim and
    num_global_key_value_heads; given, it wins over them (transformers ignores them then)."""
    keys = from_hf_config({**GEMMA4, "global_head_dim": 32, "num_global_key_value_heads": 1,
                           "attention_k_eq_v": True}, "config.json")
    assert (keys["full_head_dim"], keys["full_kv_heads"], keys["full_k_eq_v"]) == (32, 1, True)
    written = {**GEMMA4, "attention_k_eq_v": True, "global_head_dim": 8,
               "per_layer_config": {"5": {"head_dim": 32, "num_key_value_heads": 1}}}
    assert from_hf_config(written, "config.json") == keys
    plain = from_hf_config({**GEMMA4, "global_head_dim": 32, "per_layer_config": None}, "config.json")
    assert "full_head_dim" not in plain and "full_kv_heads" not in plain  # no overrides: the global shape


@pytest.mark.parametrize("raw, key", [
    ({"partial_rotary_factor": ""}, "partial_rotary_factor"),
    ({"rope_parameters": {"partial_rotary_factor": {}}}, "rope_parameters.partial_rotary_factor"),
])
def test_a_rotary_fraction_that_is_not_a_number_is_refused_by_its_key(raw, key):
    """Read before a mapper computes with it (GLM-4.5 rounds its rotated dims up to even): found by
    tests/test_fuzz.py."""
    with pytest.raises(ConfigError) as e:
        from_hf_config({"model_type": "glm4_moe", **raw}, "config.json")
    assert e.value.key == key and "must be a number" in e.value.message


LONGCAT = {"model_type": "longcat_flash", **SMALL["longcat_flash"]}


@pytest.mark.parametrize("changes, key", [
    ({"head_dim": 16}, "head_dim"),  # sizes the RoPE tables: transformers cannot run another than the rope dims
    ({"qk_head_dim": 24}, "qk_head_dim"),
    ({"router_bias": True}, "router_bias"),
    ({"n_routed_experts": 8}, "moe.zero_experts"),  # 3 * 8 / 10 real experts a token: not whole
    ({"num_hidden_layers": 1}, "num_hidden_layers"),
])
def test_longcat_refusals_name_the_key(tmp_path, run, changes, key):
    result = run("params", _write(tmp_path, {**LONGCAT, **changes}))
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.stderr
    assert f"key '{key}'" in result.stderr


def test_longcat_layers_are_its_sublayers():
    """Two llmcalc layers per transformers layer, num_hidden_layers setting num_layers to half (as transformers),
    every even one dense+shortcut_moe; the shortcut's pairs."""
    from llmcalc.analysis.model.checks import from_dict
    from llmcalc.analysis.model.layers import layer_specs

    assert from_hf_config(LONGCAT, "config.json")["n_layers"] == 4
    keys = from_hf_config({**LONGCAT, "num_hidden_layers": 7}, "config.json")
    assert keys["n_layers"] == 6 == 2 * transformers.LongcatFlashConfig(num_hidden_layers=7).num_layers
    assert [s.ffn for s in layer_specs(from_dict(keys))] == ["dense+shortcut_moe", "dense"] * 3
    assert keys["moe"] == {"num_experts": 4, "experts_per_token": 3, "expert_d_ff": 32, "router_bias": True,
                           "shortcut": True, "zero_experts": 2}


# Gemma 3n's language model: (keys of Gemma3nTextConfig, params, forward matmul FLOPs of a prefill of 8 tokens with
# every position's logits, eager, and the KV bytes (bf16) of decoding at context 8), each transformers' own figure
# (Gemma3nForCausalLM on meta, FlopCounterMode, DynamicCache): its defaults (E4B) and E2B's text geometry
GEMMA3N_E2B = dict(hidden_size=2048, num_hidden_layers=30, intermediate_size=[8192] * 30, num_kv_shared_layers=10,
                   activation_sparsity_pattern=[0.95] * 10 + [0.0] * 20, laurel_rank=64, altup_num_inputs=4)


@pytest.mark.parametrize("keys, params, flops, kv", [
    ({}, 6_835_235_568, 71_814_655_744, 327_680), (GEMMA3N_E2B, 4_435_182_688, 38_777_951_744, 327_680)],
    ids=["E4B", "E2B"])
def test_gemma3n_text_published_geometries(tmp_path, keys, params, flops, kv):
    from llmcalc.analysis.count.flops import count_flops
    from llmcalc.analysis.count.kvcache import kv_cache
    from llmcalc.analysis.spec import RunSpec

    raw = {**transformers.Gemma3nTextConfig(**keys).to_dict(), "model_type": "gemma3n_text"}
    cfg = load_path(_write(tmp_path, raw))
    assert count_params(cfg).total == params
    run = RunSpec("train", 8, 1, "eager")
    counted = count_flops(cfg, run)
    assert counted.forward.matmul_total == flops and counted.backward.matmul_total == 2 * flops
    assert kv_cache(cfg, RunSpec("decode", 8, 1)).bytes == kv


def _gemma3n_closed_forms(c, B: int, S: int) -> tuple[int, int, int]:
    """Parameters, forward matmul FLOPs (every position's logits, eager) and the KV bytes (bf16) at context S of a
    Gemma3nTextConfig ``c`` with one intermediate size: each part transformers' model builds, written out."""
    d, L, N, p, r = c.hidden_size, c.num_hidden_layers, c.altup_num_inputs, c.hidden_size_per_layer_input, c.laurel_rank
    h, g, hd, f, T = c.num_attention_heads, c.num_key_value_heads, c.head_dim, c.intermediate_size[0], B * S
    reuse = [m == "reuse" for m in c.kv_sharing_modes]
    params = c.vocab_size * d + c.vocab_size_per_layer_input * L * p + d * L * p + p + 2 * (N - 1) * d * d + d
    flops = 2 * T * d * L * p + 4 * (N - 1) * T * d * d + 2 * T * d * c.vocab_size
    kv = 0
    for i in range(L):
        params += 2 * d * h * hd + hd + (0 if reuse[i] else 2 * d * g * hd + hd) + 3 * d * f + 4 * d
        params += 2 * d + N * N + N ** 3 + d * N + 2 * d * r + d + 2 * d * p + d
        flops += 4 * T * d * h * hd + (0 if reuse[i] else 4 * T * d * g * hd) + 4 * B * h * S * S * hd + 6 * T * d * f
        flops += 4 * T * d * N + 2 * T * (N ** 3 + N * N) + 2 * T * d * N * N + 4 * T * d * r + 4 * T * d * p
        window = c.sliding_window if c.layer_types[i] == "sliding_attention" else S
        kv += 0 if reuse[i] else 2 * B * g * hd * min(S, window) * 2
    return params, flops, kv


@pytest.mark.parametrize("scale", [True, False], ids=["scaled", "unscaled"])
def test_gemma3n_text_small_closed_forms(tmp_path, scale):
    """6 layers: 3 streams, per-layer inputs from a table smaller than the vocabulary, a window of 4 that binds,
    the last 2 layers reading layers 2's and 3's K/V, 2 sparse layers: llmcalc's figures are the closed forms,
    and verify --against transformers agrees on every component. Without ``altup_correct_scale`` transformers
    still builds each layer's ``correct_output_scale`` (only its multiply depends on the flag)."""
    from llmcalc.analysis.count.flops import count_flops
    from llmcalc.analysis.count.kvcache import kv_cache
    from llmcalc.analysis.spec import RunSpec

    c = transformers.Gemma3nTextConfig(
        hidden_size=64, num_hidden_layers=6, intermediate_size=96, num_kv_shared_layers=2, vocab_size=300,
        activation_sparsity_pattern=[0.95, 0.95, 0.0, 0.0, 0.0, 0.0], vocab_size_per_layer_input=200,
        hidden_size_per_layer_input=16, laurel_rank=8, altup_num_inputs=3, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, sliding_window=4, layer_types=["sliding_attention", "full_attention"] * 3,
        altup_correct_scale=scale)
    raw = {**c.to_dict(), "model_type": "gemma3n_text"}
    path = _write(tmp_path, raw)
    cfg = load_path(path)
    params, flops, kv = _gemma3n_closed_forms(c, 2, 6)
    assert count_params(cfg).total == params
    assert count_flops(cfg, RunSpec("train", 6, 2, "eager")).forward.matmul_total == flops
    assert kv_cache(cfg, RunSpec("decode", 6, 2)).bytes == kv
    checks = against.against_transformers(cfg, raw, 6, 2, str(path))
    assert [ch for ch in checks if not ch.ok or "unmatched" in ch.name] == []


@pytest.mark.parametrize("changes, key", [
    ({"intermediate_size": [96, 128, 96, 64]}, "intermediate_size"),
    ({"activation_sparsity_pattern": [0.95, 0.9, 0.0, 0.0]}, "activation_sparsity_pattern"),
    # transformers' __post_init__ takes its len(): a TypeError
    ({"activation_sparsity_pattern": 0.95}, "activation_sparsity_pattern"),
    ({"hidden_activation": "silu"}, "hidden_activation"), ({"altup_num_inputs": 1}, "altup_num_inputs")])
def test_gemma3n_text_refusals_name_the_key(tmp_path, changes, key):
    raw = {**transformers.Gemma3nTextConfig(num_hidden_layers=4, num_kv_shared_layers=1).to_dict(),
           "model_type": "gemma3n_text", **changes}
    with pytest.raises(ConfigError) as err:
        load_path(_write(tmp_path, raw))
    assert err.value.key == key
