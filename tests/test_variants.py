"""The new config keys with real model shapes: exact parameters, matmul FLOPs and KV-cache bytes
against closed forms written here from each model's architecture, never from llmcalc's helpers.

Each model below is written out layer by layer as its checkpoint holds it: the matrices of each
layer (``d_in -> d_out``, bias or not, how many copies are stored and how many one token runs
through), its norms and learned vectors, its attention head sizes, its window and what one token
leaves in its cache. The expected figures follow from those by the conventions of DESIGN.md
section 3: a linear over T tokens is ``2*T*d_in*d_out`` FLOPs; attention scores and values are
``2*B*h*pairs*head size``, with ``pairs = S*S`` (dense), ``sum_i min(i+1, W)`` (causal) or
``min(seq, W)`` keys (decode); backward is 2x forward, plus one more forward of the scores with
flash attention; KV bytes are ``sum over layers of B * min(seq, W_l) * values_l * bytes``.
Where a published parameter total exists, the closed form is first shown to reproduce it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import lru_cache

import pytest

from llmcalc.analysis.count.activations import activation_bytes
from llmcalc.analysis.count.flops import count_flops
from llmcalc.analysis.count.kvcache import kv_cache
from llmcalc.analysis.count.params import count_params
from llmcalc.analysis.load.catalog import load_text
from llmcalc.analysis.spec import RunSpec

pytestmark = pytest.mark.unit

BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1}


# -- a model written out layer by layer -------------------------------------------------------

@dataclass(frozen=True)
class Mat:
    """A weight matrix ``d_in -> d_out``; ``copies`` stored (experts), ``used`` per token;
    ``over_keys``: applied to every attended key instead of every new token (MLA's kv_b)."""

    key: str
    d_in: int
    d_out: int
    bias: bool = False
    copies: int = 1
    used: int = 1
    over_keys: bool = False

    def size(self) -> int:
        return self.d_in * self.d_out + (self.d_out if self.bias else 0)


@dataclass(frozen=True)
class Layer:
    mats: tuple[Mat, ...]
    vectors: tuple[tuple[str, int], ...]  # norms and other learned vectors: (key, parameters)
    heads: int
    score_dim: int  # per-head size of q.k
    value_dim: int  # per-head size of the values
    kv_values: int  # values one token leaves in this layer's cache
    window: int | None  # None: full causal attention
    rope: bool
    ffn: str  # "dense" or "moe"
    # MLA: (score, value) head sizes of an absorbed decode step under flash, over the latents (r + rope, r),
    # where its over_keys matrix (kv_b) runs on the new tokens instead
    absorbed: tuple[int, int] | None = None


@dataclass(frozen=True)
class Model:
    yaml: str
    d: int
    vocab: int
    layers: tuple[Layer, ...]
    outside: dict[str, int] = field(default_factory=dict)  # embeddings, final norm, LM head

    @property
    def cfg(self):
        return load_text(self.yaml, "variant.yaml")


def mha(d, h, g, hd, qkv_bias=False, out_bias=False):
    return (Mat("attention/q", d, h * hd, qkv_bias), Mat("attention/k", d, g * hd, qkv_bias),
            Mat("attention/v", d, g * hd, qkv_bias), Mat("attention/o", h * hd, d, out_bias))


def gated_mlp(d, f, bias=False):
    return (Mat("mlp/up", d, f, bias), Mat("mlp/gate", d, f, bias), Mat("mlp/down", f, d, bias))


def gated_experts(key, d, f, copies, used, bias=False):
    """``copies`` gated experts (up, gate, down) of width ``f``, ``used`` per token."""
    return tuple(Mat(key, a, b, bias, copies, used) for a, b in ((d, f), (d, f), (f, d)))


def pre_norms(d):
    return (("norm/attention", d), ("norm/mlp", d))


# -- the models --------------------------------------------------------------------------------

def gemma2_9b() -> Model:
    """Gemma 2 9B (google/gemma-2-9b config.json): sliding window 4096 on even layers, full on odd
    ones; GeGLU; sandwich RMSNorm; soft-capped attention (50) and final (30) logits; embeddings
    scaled by sqrt(d); tied head."""
    d, L, h, g, hd, ff, V = 3584, 42, 16, 8, 256, 14336, 256000
    yaml = f"""name: gemma-2-9b
vocab_size: {V}
context_length: 8192
d_model: {d}
n_layers: {L}
n_heads: {h}
n_kv_heads: {g}
head_dim: {hd}
d_ff: {ff}
activation: geglu
norm: rmsnorm
norm_placement: sandwich
position: rope
tie_embeddings: true
sliding_window: 4096
layer_types: [sliding, full]
attn_logit_softcap: 50.0
final_logit_softcap: 30.0
embedding_scale: {math.sqrt(d)}
"""
    norms = pre_norms(d) + (("norm/attention_post", d), ("norm/mlp_post", d))
    layers = tuple(Layer(mha(d, h, g, hd) + gated_mlp(d, ff), norms, h, hd, hd, 2 * g * hd,
                         4096 if i % 2 == 0 else None, True, "dense") for i in range(L))
    return Model(yaml, d, V, layers, {"embedding/token": V * d, "norm/final": d})


def gemma3_1b() -> Model:
    """Gemma 3 1B (google/gemma-3-1b-pt): five sliding layers (window 512), then one full; MQA
    with head_dim 256; per-head q/k RMSNorm; sandwich norms; tied head."""
    d, L, h, g, hd, ff, V = 1152, 26, 4, 1, 256, 6912, 262144
    yaml = f"""name: gemma-3-1b
vocab_size: {V}
context_length: 32768
d_model: {d}
n_layers: {L}
n_heads: {h}
n_kv_heads: {g}
head_dim: {hd}
d_ff: {ff}
activation: geglu
norm: rmsnorm
norm_placement: sandwich
qk_norm: head
position: rope
tie_embeddings: true
sliding_window: 512
layer_types: [sliding, sliding, sliding, sliding, sliding, full]
embedding_scale: 33.94112549695428
"""
    norms = pre_norms(d) + (("norm/attention_post", d), ("norm/mlp_post", d),
                            ("attention/q_norm", hd), ("attention/k_norm", hd))
    layers = tuple(Layer(mha(d, h, g, hd) + gated_mlp(d, ff), norms, h, hd, hd, 2 * g * hd,
                         None if i % 6 == 5 else 512, True, "dense") for i in range(L))
    return Model(yaml, d, V, layers, {"embedding/token": V * d, "norm/final": d})


def deepseek_v2_lite() -> Model:
    """DeepSeek-V2-Lite (deepseek-ai/DeepSeek-V2-Lite config.json): MLA without a query
    low-rank (q_lora_rank null), kv_lora_rank 512, q/k heads of 128 + 64 (rope), values 128;
    layer 0 dense (10944), then 64 routed experts of 1408, top-6, and 2 shared experts."""
    d, L, h, V = 2048, 27, 16, 102400
    r, nope, rope, v = 512, 128, 64, 128
    yaml = f"""name: deepseek-v2-lite
vocab_size: {V}
context_length: 163840
d_model: {d}
n_layers: {L}
n_heads: {h}
d_ff: 10944
activation: swiglu
norm: rmsnorm
position: rope
attention: mla
mla:
  q_lora_rank: null
  kv_lora_rank: {r}
  qk_nope_head_dim: {nope}
  qk_rope_head_dim: {rope}
  v_head_dim: {v}
moe:
  num_experts: 64
  experts_per_token: 6
  expert_d_ff: 1408
  shared_experts: 2
  first_dense_layers: 1
"""
    attn = (Mat("attention/q", d, h * (nope + rope)), Mat("attention/kv_a", d, r + rope),
            Mat("attention/kv_b", r, h * (nope + v), over_keys=True), Mat("attention/o", h * v, d))
    vectors = pre_norms(d) + (("attention/kv_a_norm", r),)
    moe = ((Mat("moe/router", d, 64),) + gated_experts("moe/experts", d, 1408, 64, 6)
           + gated_experts("moe/shared_experts", d, 1408, 2, 2))
    layers = tuple(Layer(attn + (gated_mlp(d, 10944) if i == 0 else moe), vectors, h, nope + rope, v,
                         r + rope, None, True, "dense" if i == 0 else "moe", (r + rope, r)) for i in range(L))
    return Model(yaml, d, V, layers, {"embedding/token": V * d, "norm/final": d, "lm_head": V * d})


def deepseek_v3() -> Model:
    """DeepSeek-V3 (deepseek-ai/DeepSeek-V3 config.json, without the MTP module): MLA with a
    query low-rank of 1536 (q_a, its RMSNorm, q_b); first 3 layers dense (18432); then 256 routed
    experts of 2048, top-8, one shared expert; the router's e_score_correction_bias (one value
    per expert) is its bias."""
    d, L, h, V = 7168, 61, 128, 129280
    q, r, nope, rope, v = 1536, 512, 128, 64, 128
    yaml = f"""name: deepseek-v3
vocab_size: {V}
context_length: 163840
d_model: {d}
n_layers: {L}
n_heads: {h}
d_ff: 18432
activation: swiglu
norm: rmsnorm
position: rope
attention: mla
mla: {{q_lora_rank: {q}, kv_lora_rank: {r}, qk_nope_head_dim: {nope}, qk_rope_head_dim: {rope}, v_head_dim: {v}}}
moe: {{num_experts: 256, experts_per_token: 8, expert_d_ff: 2048, shared_experts: 1,
       first_dense_layers: 3, router_bias: true}}
"""
    attn = (Mat("attention/q_a", d, q), Mat("attention/q_b", q, h * (nope + rope)),
            Mat("attention/kv_a", d, r + rope), Mat("attention/kv_b", r, h * (nope + v), over_keys=True),
            Mat("attention/o", h * v, d))
    vectors = pre_norms(d) + (("attention/q_a_norm", q), ("attention/kv_a_norm", r))
    moe = ((Mat("moe/router", d, 256, True),) + gated_experts("moe/experts", d, 2048, 256, 8)
           + gated_experts("moe/shared_experts", d, 2048, 1, 1))
    layers = tuple(Layer(attn + (gated_mlp(d, 18432) if i < 3 else moe), vectors, h, nope + rope, v,
                         r + rope, None, True, "dense" if i < 3 else "moe", (r + rope, r)) for i in range(L))
    return Model(yaml, d, V, layers, {"embedding/token": V * d, "norm/final": d, "lm_head": V * d})


def qwen15_moe() -> Model:
    """Qwen1.5-MoE-A2.7B (Qwen/Qwen1.5-MoE-A2.7B config.json): 60 experts of 1408, top-4, one
    shared expert of 5632 (shared_expert_intermediate_size) behind a sigmoid gate (d -> 1, no
    bias); q/k/v biases; untied."""
    d, L, h, V = 2048, 24, 16, 151936
    yaml = f"""name: qwen1.5-moe-a2.7b
vocab_size: {V}
context_length: 8192
d_model: {d}
n_layers: {L}
n_heads: {h}
d_ff: 5632
activation: swiglu
norm: rmsnorm
position: rope
qkv_bias: true
moe:
  num_experts: 60
  experts_per_token: 4
  expert_d_ff: 1408
  shared_experts: 1
  shared_expert_d_ff: 5632
  shared_expert_gate: true
"""
    mats = (mha(d, h, h, 128, qkv_bias=True) + (Mat("moe/router", d, 60),)
            + gated_experts("moe/experts", d, 1408, 60, 4) + gated_experts("moe/shared_experts", d, 5632, 1, 1)
            + (Mat("moe/shared_expert_gate", d, 1),))
    layers = tuple(Layer(mats, pre_norms(d), h, 128, 128, 2 * h * 128, None, True, "moe") for _ in range(L))
    return Model(yaml, d, V, layers, {"embedding/token": V * d, "norm/final": d, "lm_head": V * d})


def llama4_maverick() -> Model:
    """Llama 4 Maverick, text model (meta-llama/Llama-4-Maverick-17B-128E config.json):
    interleave_moe_layer_step 2 (layers 1, 3, 5, ... are MoE: 128 experts of 8192, top-1, one
    shared expert of 8192; the others dense with intermediate_size_mlp 16384); every 4th layer
    has no RoPE (no_rope_layers). Its q/k L2 norm has no parameters and is left out."""
    d, L, h, g, hd, V = 5120, 48, 40, 8, 128, 202048
    yaml = f"""name: llama-4-maverick-text
vocab_size: {V}
context_length: 1048576
d_model: {d}
n_layers: {L}
n_heads: {h}
n_kv_heads: {g}
d_ff: 16384
activation: swiglu
norm: rmsnorm
position: rope
rope_layers: [true, true, true, false]
rope_theta: 500000
moe: {{num_experts: 128, experts_per_token: 1, expert_d_ff: 8192, shared_experts: 1, step: 2}}
"""
    moe = ((Mat("moe/router", d, 128),) + gated_experts("moe/experts", d, 8192, 128, 1)
           + gated_experts("moe/shared_experts", d, 8192, 1, 1))
    layers = tuple(Layer(mha(d, h, g, hd) + (moe if i % 2 else gated_mlp(d, 16384)), pre_norms(d), h, hd, hd,
                         2 * g * hd, None, i % 4 != 3, "moe" if i % 2 else "dense") for i in range(L))
    return Model(yaml, d, V, layers, {"embedding/token": V * d, "norm/final": d, "lm_head": V * d})


def smollm3_3b() -> Model:
    """SmolLM3-3B (HuggingFaceTB/SmolLM3-3B config.json): NoPE on every 4th layer
    (no_rope_layer_interval 4), GQA 4 KV heads, tied head."""
    d, L, h, g, hd, ff, V = 2048, 36, 16, 4, 128, 11008, 128256
    yaml = f"""name: smollm3-3b
vocab_size: {V}
context_length: 65536
d_model: {d}
n_layers: {L}
n_heads: {h}
n_kv_heads: {g}
d_ff: {ff}
activation: swiglu
norm: rmsnorm
position: rope
tie_embeddings: true
rope_layers: [true, true, true, false]
"""
    layers = tuple(Layer(mha(d, h, g, hd) + gated_mlp(d, ff), pre_norms(d), h, hd, hd, 2 * g * hd, None,
                         i % 4 != 3, "dense") for i in range(L))
    return Model(yaml, d, V, layers, {"embedding/token": V * d, "norm/final": d})


def gpt_oss_20b() -> Model:
    """gpt-oss-20b (openai/gpt-oss-20b config.json): 64 query heads of 64, 8 KV heads, biases
    on q/k/v/o, one learned sink logit per head; sliding window 128 on even layers, full on odd
    ones; 32 experts of 2880, top-4, biases on every expert matrix and on the router."""
    d, L, h, g, hd, V, E, f = 2880, 24, 64, 8, 64, 201088, 32, 2880
    yaml = f"""name: gpt-oss-20b
vocab_size: {V}
context_length: 131072
d_model: {d}
n_layers: {L}
n_heads: {h}
n_kv_heads: {g}
head_dim: {hd}
d_ff: {f}
activation: swiglu
norm: rmsnorm
position: rope
rope_theta: 150000
qkv_bias: true
out_bias: true
attention_sinks: true
sliding_window: 128
layer_types: [sliding, full]
moe: {{num_experts: {E}, experts_per_token: 4, router_bias: true, expert_bias: true}}
"""
    mats = (mha(d, h, g, hd, qkv_bias=True, out_bias=True) + (Mat("moe/router", d, E, True),)
            + gated_experts("moe/experts", d, f, E, 4, bias=True))
    vectors = pre_norms(d) + (("attention/sinks", h),)
    layers = tuple(Layer(mats, vectors, h, hd, hd, 2 * g * hd, 128 if i % 2 == 0 else None, True, "moe")
                   for i in range(L))
    return Model(yaml, d, V, layers, {"embedding/token": V * d, "norm/final": d, "lm_head": V * d})


def phi2() -> Model:
    """Phi-2 (microsoft/phi-2 config.json): partial_rotary_factor 0.4 (32 of 80 dims rotated),
    parallel attention and MLP behind one LayerNorm, biases everywhere, LM head with bias."""
    d, L, h, ff, V = 2560, 32, 32, 10240, 51200
    yaml = f"""name: phi-2
vocab_size: {V}
context_length: 2048
d_model: {d}
n_layers: {L}
n_heads: {h}
d_ff: {ff}
activation: gelu
position: rope
rotary_fraction: 0.4
parallel_block: true
parallel_norms: 1
qkv_bias: true
out_bias: true
mlp_bias: true
lm_head_bias: true
"""
    mats = mha(d, h, h, 80, True, True) + (Mat("mlp/up", d, ff, True), Mat("mlp/down", ff, d, True))
    layers = tuple(Layer(mats, (("norm/attention", 2 * d),), h, 80, 80, 2 * d, None, True, "dense")
                   for _ in range(L))
    return Model(yaml, d, V, layers, {"embedding/token": V * d, "norm/final": 2 * d, "lm_head": V * d + V})


def olmo_1b() -> Model:
    """OLMo-1B (allenai/OLMo-1B): LayerNorm without weight or bias, SwiGLU of 8192, tied."""
    d, L, h, ff, V = 2048, 16, 16, 8192, 50304
    yaml = f"""name: olmo-1b
vocab_size: {V}
context_length: 2048
d_model: {d}
n_layers: {L}
n_heads: {h}
d_ff: {ff}
activation: swiglu
norm: layernorm
norm_weight: false
norm_bias: false
position: rope
tie_embeddings: true
"""
    layers = tuple(Layer(mha(d, h, h, 128) + gated_mlp(d, ff), (), h, 128, 128, 2 * d, None, True, "dense")
                   for _ in range(L))
    return Model(yaml, d, V, layers, {"embedding/token": V * d})


def olmo2_32b() -> Model:
    """OLMo 2 32B (allenai/OLMo-2-0325-32B config.json): RMSNorm over the whole q (h*hd = 5120)
    and k (g*hd = 1024) projections, norms after each branch (``x + norm(f(x))``), untied."""
    d, L, h, g, hd, ff, V = 5120, 64, 40, 8, 128, 27648, 100352
    yaml = f"""name: olmo-2-32b
vocab_size: {V}
context_length: 4096
d_model: {d}
n_layers: {L}
n_heads: {h}
n_kv_heads: {g}
d_ff: {ff}
activation: swiglu
norm: rmsnorm
norm_placement: post_branch
qk_norm: full
position: rope
rope_theta: 500000
"""
    vectors = (("norm/attention_post", d), ("norm/mlp_post", d), ("attention/q_norm", h * hd),
               ("attention/k_norm", g * hd))
    layers = tuple(Layer(mha(d, h, g, hd) + gated_mlp(d, ff), vectors, h, hd, hd, 2 * g * hd, None, True,
                         "dense") for _ in range(L))
    return Model(yaml, d, V, layers, {"embedding/token": V * d, "norm/final": d, "lm_head": V * d})


MODELS = {m.__name__: m() for m in (gemma2_9b, gemma3_1b, deepseek_v2_lite, deepseek_v3, qwen15_moe,
                                     llama4_maverick, smollm3_3b, gpt_oss_20b, phi2, olmo_1b, olmo2_32b)}

# Published totals (sum of numel over a checkpoint's unique tensors, as the Hugging Face
# safetensors metadata gives it) that the closed forms reproduce exactly: Gemma 2 9B,
# DeepSeek-V2-Lite (15.7B), Qwen1.5-MoE-A2.7B (14.3B), Gemma 3 1B (1B), Phi-2 (2.78B), OLMo-1B (1.18B).
PUBLISHED = {"gemma2_9b": 9_241_705_984, "gemma3_1b": 999_885_952, "deepseek_v2_lite": 15_706_484_224,
             "qwen15_moe": 14_315_784_192, "phi2": 2_779_683_840, "olmo_1b": 1_176_764_416}
# The others, from their config shapes only (the model cards give rounded figures: DeepSeek-V3
# 671B without MTP; Llama 4 Maverick 400B total, 17B active; gpt-oss-20b 21B total, 3.6B active
# without the unembedding; SmolLM3 3B; OLMo 2 32B).
CLOSED_FORM = {"deepseek_v3": (671_026_419_200, 37_552_297_472), "llama4_maverick": (400_711_848_960, 17_184_691_200),
               "gpt_oss_20b": (20_914_757_184, 4_187_440_704), "smollm3_3b": (3_075_098_624, 3_075_098_624),
               "olmo2_32b": (32_234_279_936, 32_234_279_936)}


def bloom_560m() -> Model:
    """BLOOM-560m (bigscience/bloom-560m config.json): ALiBi, a LayerNorm (weight and bias) over the
    token embeddings before layer 0 (``word_embeddings_layernorm``), biases everywhere, GELU MLP of
    4 * d, tied head."""
    d, L, h, V = 1024, 24, 16, 250880
    yaml = f"""name: bloom-560m
vocab_size: {V}
context_length: 2048
d_model: {d}
n_layers: {L}
n_heads: {h}
d_ff: {4 * d}
activation: gelu
position: alibi
embedding_norm: true
qkv_bias: true
out_bias: true
mlp_bias: true
tie_embeddings: true
"""
    mats = mha(d, h, h, 64, True, True) + (Mat("mlp/up", d, 4 * d, True), Mat("mlp/down", 4 * d, d, True))
    layers = tuple(Layer(mats, (("norm/attention", 2 * d), ("norm/mlp", 2 * d)), h, 64, 64, 2 * d, None, False,
                         "dense") for _ in range(L))
    return Model(yaml, d, V, layers, {"embedding/token": V * d, "norm/embedding": 2 * d, "norm/final": 2 * d})


MODELS["bloom_560m"] = bloom_560m()
PUBLISHED["bloom_560m"] = 559_214_592  # BLOOM-560m's safetensors total


def opt_125m() -> Model:
    """OPT-125m (facebook/opt-125m config.json): learned positions in a table of 2,048 + 2 rows (position
    ``i`` reads row ``i + 2``), pre-norm LayerNorms, biases everywhere, a ReLU MLP, tied head."""
    d, L, h, V, ctx = 768, 12, 12, 50272, 2048
    yaml = f"""name: opt-125m
vocab_size: {V}
context_length: {ctx}
d_model: {d}
n_layers: {L}
n_heads: {h}
d_ff: {4 * d}
activation: relu
position: learned
position_offset: 2
qkv_bias: true
out_bias: true
mlp_bias: true
tie_embeddings: true
"""
    mats = mha(d, h, h, 64, True, True) + (Mat("mlp/up", d, 4 * d, True), Mat("mlp/down", 4 * d, d, True))
    layers = tuple(Layer(mats, (("norm/attention", 2 * d), ("norm/mlp", 2 * d)), h, 64, 64, 2 * d, None, False,
                         "dense") for _ in range(L))
    return Model(yaml, d, V, layers, {"embedding/token": V * d, "embedding/position": (ctx + 2) * d,
                                      "norm/final": 2 * d})


MODELS["opt_125m"] = opt_125m()
PUBLISHED["opt_125m"] = 125_239_296  # OPT-125m's total, as transformers counts it


def bitnet_2b4t() -> Model:
    """BitNet b1.58 2B4T (microsoft/bitnet-b1.58-2B-4T, unpacked): Llama's GQA layer with an RMSNorm
    over the merged heads before o and one over the MLP's product before down (``sub_norms``), relu2
    on the gate (``sqreglu``), tied head."""
    d, L, h, g, f, V = 2560, 30, 20, 5, 6912, 128256
    yaml = f"""name: bitnet-b1.58-2B-4T
vocab_size: {V}
context_length: 4096
d_model: {d}
n_layers: {L}
n_heads: {h}
n_kv_heads: {g}
d_ff: {f}
activation: sqreglu
norm: rmsnorm
position: rope
rope_theta: 500000
sub_norms: true
tie_embeddings: true
"""
    vectors = pre_norms(d) + (("attention/sub_norm", d), ("mlp/sub_norm", f))
    layers = tuple(Layer(mha(d, h, g, 128) + gated_mlp(d, f), vectors, h, 128, 128, 2 * g * 128, None, True,
                         "dense") for _ in range(L))
    return Model(yaml, d, V, layers, {"embedding/token": V * d, "norm/final": d})


MODELS["bitnet_2b4t"] = bitnet_2b4t()
CLOSED_FORM["bitnet_2b4t"] = (2_412_820_480, 2_412_820_480)  # = transformers' unpacked model (test_hf)


# -- closed forms ---------------------------------------------------------------------------------

def expected_params(m: Model) -> tuple[dict[str, int], int, int]:
    comps: dict[str, int] = dict(m.outside)
    active = sum(m.outside.values())
    for layer in m.layers:
        for mat in layer.mats:
            comps[mat.key] = comps.get(mat.key, 0) + mat.copies * mat.size()
            active += mat.used * mat.size()
        for key, n in layer.vectors:
            comps[key] = comps.get(key, 0) + n
            active += n
    return comps, sum(comps.values()), active


@lru_cache(maxsize=None)
def causal_pairs(seq: int, window: int | None) -> int:
    """Query i sees min(i + 1, W) keys, counted one query at a time."""
    return sum(min(i + 1, window or seq) for i in range(seq))


def expected_forward(m: Model, mode: str, seq: int, batch: int, causal: bool,
                     attention: str = "flash") -> dict[str, int]:
    tokens = batch if mode == "decode" else batch * seq
    logit_tokens = batch * seq if mode == "train" else batch  # prefill: the last position's logits
    out: dict[str, int] = {}

    def add(key, n):
        out[key] = out.get(key, 0) + n

    for layer in m.layers:
        keys = min(seq, layer.window or seq) if mode == "decode" else seq
        absorbed = layer.absorbed is not None and mode == "decode" and attention == "flash"
        for mat in layer.mats:
            rows = batch * keys if mat.over_keys and not absorbed else tokens
            add(mat.key, 2 * rows * mat.d_in * mat.d_out * mat.used)
        if mode == "decode":
            pairs = keys  # one query against the cached keys
        else:
            pairs = causal_pairs(seq, layer.window) if causal else seq * seq
        score, value = layer.absorbed if absorbed else (layer.score_dim, layer.value_dim)
        add("attention/scores", 2 * batch * layer.heads * pairs * score)
        add("attention/values", 2 * batch * layer.heads * pairs * value)
    add("lm_head", 2 * logit_tokens * m.d * m.vocab)
    return out


def expected_backward(forward: dict[str, int], attention: str) -> dict[str, int]:
    out = {k: 2 * v for k, v in forward.items()}
    if attention == "flash":  # the score matrix is computed once more, from the saved log-sum-exp
        out["attention/scores"] += forward["attention/scores"]
    return out


def expected_kv_bytes(m: Model, seq: int, batch: int, dtype: str) -> int:
    return sum(batch * min(seq, layer.window or seq) * layer.kv_values * BYTES[dtype] for layer in m.layers)


def _nonzero(d: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in d.items() if v}


# -- the tests ------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_closed_form_reproduces_published_total(name):
    assert expected_params(MODELS[name])[1] == PUBLISHED[name]


@pytest.mark.parametrize("name", sorted(CLOSED_FORM))
def test_closed_form_totals_written_out(name):
    _, total, active = expected_params(MODELS[name])
    assert (total, active) == CLOSED_FORM[name]


@pytest.mark.parametrize("name", sorted(MODELS))
def test_params(name):
    m = MODELS[name]
    comps, total, active = expected_params(m)
    p = count_params(m.cfg)
    assert _nonzero(p.components) == comps
    assert (p.total, p.active) == (total, active)


# sequence lengths past each window, so that both the band and the triangle are exercised
SEQ = {"gemma2_9b": 4608, "gemma3_1b": 1100, "gpt_oss_20b": 300}
RUNS = [("train", "eager", False), ("train", "flash", False), ("train", "eager", True),
        ("train", "flash", True), ("prefill", "flash", False), ("prefill", "eager", True),
        ("decode", "flash", False), ("decode", "eager", True)]


@pytest.mark.parametrize("mode, attention, causal", RUNS)
@pytest.mark.parametrize("name", sorted(MODELS))
def test_matmul_flops(name, mode, attention, causal):
    m, seq, batch = MODELS[name], SEQ.get(name, 640), 2
    r = count_flops(m.cfg, RunSpec(mode=mode, seq=seq, batch=batch, attention=attention, causal=causal))
    forward = expected_forward(m, mode, seq, batch, causal, attention)
    assert r.forward.matmul == forward
    assert r.forward.matmul_total == sum(forward.values())
    backward = expected_backward(forward, attention) if mode == "train" else {}
    assert _nonzero(r.backward.matmul) == backward
    assert r.total.matmul_total == sum(forward.values()) + sum(backward.values())


@pytest.mark.parametrize("name", sorted(MODELS))
def test_recompute_adds_one_forward_of_the_layers(name):
    m, seq = MODELS[name], SEQ.get(name, 640)
    r = count_flops(m.cfg, RunSpec(mode="train", seq=seq, batch=1, attention="flash", recompute="full"))
    forward = expected_forward(m, "train", seq, 1, False)
    backward = expected_backward(forward, "flash")
    layers = {k: v for k, v in forward.items() if k != "lm_head"}
    assert r.backward.matmul == {k: v + layers.get(k, 0) for k, v in backward.items()}


def test_mla_decode_decompresses_every_cached_key_eager_and_absorbs_under_flash():
    # DeepSeek-V2-Lite, one new token against 1,000 cached ones. Eager (transformers): kv_b runs over the 1,000
    # latents, the scores and values at nope + rope and v
    m = MODELS["deepseek_v2_lite"]
    f = count_flops(m.cfg, RunSpec(mode="decode", seq=1000, batch=3, attention="eager")).forward.matmul
    assert f["attention/kv_b"] == 27 * 2 * 3 * 1000 * 512 * 16 * (128 + 128)
    assert f["attention/kv_a"] == 27 * 2 * 3 * 2048 * (512 + 64)
    assert f["attention/scores"] == 27 * 2 * 3 * 16 * 1000 * (128 + 64)
    assert f["attention/values"] == 27 * 2 * 3 * 16 * 1000 * 128
    # flash, absorbed (vLLM's MLA decode): W_UK on q_nope and W_UV on the output, for the 3 new tokens; MQA over
    # the 1,000 latents, 512 + 64 wide for the scores, 512 for the values
    f = count_flops(m.cfg, RunSpec(mode="decode", seq=1000, batch=3, attention="flash")).forward.matmul
    assert f["attention/kv_b"] == 27 * (2 * 3 * 16 * 128 * 512 + 2 * 3 * 16 * 512 * 128)
    assert f["attention/kv_a"] == 27 * 2 * 3 * 2048 * (512 + 64)
    assert f["attention/scores"] == 27 * 2 * 3 * 16 * 1000 * (512 + 64)
    assert f["attention/values"] == 27 * 2 * 3 * 16 * 1000 * 512


@pytest.mark.parametrize("dtype", ["bf16", "fp8", "fp32"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_kv_cache_bytes(name, dtype):
    m = MODELS[name]
    for seq in (100, 600, 5000):
        for mode in ("decode", "prefill"):
            c = kv_cache(m.cfg, RunSpec(mode=mode, seq=seq, batch=3, kv_dtype=dtype))
            assert c.bytes == expected_kv_bytes(m, seq, 3, dtype), (seq, mode)


def test_kv_cache_published_shapes():
    # Gemma 2 9B at 8,192 tokens, bf16: 21 sliding layers hold 4,096 tokens, 21 full ones 8,192;
    # K and V of 8 heads x 256 per token per layer
    gemma = kv_cache(MODELS["gemma2_9b"].cfg, RunSpec(mode="decode", seq=8192, batch=1, kv_dtype="bf16"))
    assert gemma.bytes == 21 * (4096 + 8192) * 2 * 8 * 256 * 2 == 2_113_929_216
    # DeepSeek-V2-Lite: the latent (512) and the shared rope key (64) per token per layer
    ds = kv_cache(MODELS["deepseek_v2_lite"].cfg, RunSpec(mode="decode", seq=4096, batch=1, kv_dtype="bf16"))
    assert ds.bytes == 27 * 4096 * (512 + 64) * 2 == 127_401_984
    assert ds.bytes_per_token == 27 * 576 * 2
    # gpt-oss-20b at 131,072 tokens: 12 layers of 128 slots and 12 of the whole context
    oss = kv_cache(MODELS["gpt_oss_20b"].cfg, RunSpec(mode="decode", seq=131072, batch=1, kv_dtype="bf16"))
    assert oss.bytes == 12 * (128 + 131072) * 2 * 8 * 64 * 2


# -- elementwise costs of the variants that add no matmul (README "Elementwise FLOPs") -----------

def _elementwise(yaml: str, mode="train", seq=256, batch=2, causal=False) -> int:
    run = RunSpec(mode=mode, seq=seq, batch=batch, causal=causal)
    return count_flops(load_text(yaml, "variant.yaml"), run).forward.elementwise_total


def _without(yaml: str, *keys: str) -> str:
    return "".join(line + "\n" for line in yaml.splitlines() if line.split(":")[0] not in keys)


@pytest.mark.parametrize("causal", [False, True])
def test_softcaps_cost_three_per_capped_logit(causal):
    # cap * tanh(x / cap): divide, tanh, multiply = 3 FLOPs per score (per computed pair) and per logit
    m, seq, B = MODELS["gemma2_9b"], 4608, 1
    full = _elementwise(m.yaml, seq=seq, batch=B, causal=causal)
    no_attn = _elementwise(_without(m.yaml, "attn_logit_softcap"), seq=seq, batch=B, causal=causal)
    no_final = _elementwise(_without(m.yaml, "final_logit_softcap"), seq=seq, batch=B, causal=causal)
    pairs = sum(causal_pairs(seq, layer.window) if causal else seq * seq for layer in m.layers)
    assert full - no_attn == 3 * B * 16 * pairs
    assert full - no_final == 3 * B * seq * 256000


def test_embedding_scale_costs_one_per_element():
    m = MODELS["gemma2_9b"]
    assert _elementwise(m.yaml) - _elementwise(_without(m.yaml, "embedding_scale")) == 2 * 256 * 3584


def test_embedding_norm_costs_one_layernorm_per_token():
    # BLOOM's LayerNorm over the embeddings: 5 FLOPs per element, + 1 weight, + 1 bias, every token
    m = MODELS["bloom_560m"]
    assert _elementwise(m.yaml) - _elementwise(_without(m.yaml, "embedding_norm")) == 7 * 2 * 256 * 1024

def test_sub_norms_cost_one_rmsnorm_per_element():
    # BitNet's sub-norms: an RMSNorm (3 FLOPs + 1 weight) over h*hd and over d_ff, every token, 30 layers
    m = MODELS["bitnet_2b4t"]
    assert _elementwise(m.yaml) - _elementwise(_without(m.yaml, "sub_norms")) == 4 * 2 * 256 * (2560 + 6912) * 30


def test_sinks_cost_one_softmax_logit_per_row():
    # one more logit in every softmax row (a row per query per head): 5 FLOPs (max, subtract, exp,
    # sum, divide) each, in each of the 24 layers
    m = MODELS["gpt_oss_20b"]
    for mode, rows in (("train", 2 * 256), ("decode", 2)):
        delta = _elementwise(m.yaml, mode) - _elementwise(_without(m.yaml, "attention_sinks"), mode)
        assert delta == 5 * rows * 64 * 24


def test_attention_gate_costs_four_per_gated_element():
    # sigmoid (exp, add, divide) and the multiply: 4 FLOPs per element of h*hd per token, in each
    # of the 24 layers; its linear d -> h*hd is 2*T*d*h*hd matmul FLOPs and d*h*hd parameters
    m = MODELS["gpt_oss_20b"]
    gated = m.yaml + "attention_gate: true\n"
    for mode, T in (("train", 2 * 256), ("decode", 2)):
        assert _elementwise(gated, mode) - _elementwise(m.yaml, mode) == 4 * T * 64 * 64 * 24
    run = RunSpec(mode="train", seq=256, batch=2)
    flops = count_flops(load_text(gated, "variant.yaml"), run)
    assert flops.forward.matmul["attention/gate"] == 2 * 512 * 2880 * 64 * 64 * 24
    assert flops.backward.matmul["attention/gate"] == 2 * flops.forward.matmul["attention/gate"]
    assert count_params(load_text(gated, "v.yaml")).total - count_params(m.cfg).total == 24 * 2880 * 64 * 64


def test_nope_layers_skip_rope():
    # RoPE is 3 FLOPs per rotated element of q and k; 9 of SmolLM3's 36 layers rotate nothing
    m, T = MODELS["smollm3_3b"], 2 * 256
    per_layer = 3 * T * (16 + 4) * 128
    assert _elementwise(_without(m.yaml, "rope_layers")) - _elementwise(m.yaml) == 9 * per_layer
    assert _elementwise(_without(m.yaml, "rope_layers").replace("position: rope", "position: none")) == \
        _elementwise(m.yaml) - 27 * per_layer


def test_partial_rotary_rotates_only_its_share():
    # Phi-2 rotates int(80 * 0.4) = 32 of each head's 80 dims, on 32 query and 32 key heads
    m, T = MODELS["phi2"], 2 * 256
    assert _elementwise(_without(m.yaml, "rotary_fraction")) - _elementwise(m.yaml) == \
        3 * T * (32 + 32) * (80 - 32) * 32


def test_mla_rope_rotates_every_query_head_and_one_shared_key():
    m, T = MODELS["deepseek_v2_lite"], 2 * 256
    assert _elementwise(m.yaml) - _elementwise(m.yaml.replace("position: rope", "position: none")) == \
        3 * T * (16 + 1) * 64 * 27


def test_weightless_layernorm_saves_its_scale():
    # OLMo-1B: LayerNorm without weight or bias costs 5 per element, 6 with a weight; 2 norms per
    # layer and the final norm, over all 512 tokens
    m, T = MODELS["olmo_1b"], 2 * 256
    weighted = m.yaml.replace("norm_weight: false", "norm_weight: true")
    assert _elementwise(weighted) - _elementwise(m.yaml) == T * 2048 * (2 * 16 + 1)
    assert count_params(load_text(weighted, "w.yaml")).total - count_params(m.cfg).total == 2048 * 33


def test_weightless_rmsnorm_saves_its_scale():
    # OLMo-1B's shape with RMSNorms (nanochat's have no weight): 3 per element without a weight, 4
    # with one; 2 norms per layer and the final norm, over all 512 tokens
    m, T = MODELS["olmo_1b"], 2 * 256
    weightless = m.yaml.replace("norm: layernorm\n", "norm: rmsnorm\n").replace("norm_bias: false\n", "")
    weighted = weightless.replace("norm_weight: false", "norm_weight: true")
    assert _elementwise(weighted) - _elementwise(weightless) == T * 2048 * (2 * 16 + 1)
    assert count_params(load_text(weighted, "w.yaml")).total - count_params(load_text(weightless, "n.yaml")).total \
        == 2048 * 33


# -- the CLI: every variant loads, and mixed models report their layer groups --------------------

def _groups(m: Model) -> set[tuple[int, ...]]:
    """Layers with the same window, positions and FFN kind form one group."""
    members: dict[tuple, list[int]] = {}
    for i, layer in enumerate(m.layers):
        members.setdefault((layer.window, layer.rope, layer.ffn), []).append(i)
    return {tuple(v) for v in members.values()}


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("command, args", [("params", []), ("flops", ["--seq", "64"]),
                                           ("kvcache", ["--seq", "64"])])
def test_cli_json_and_layer_groups(config_file, run, name, command, args):
    m = MODELS[name]
    path = config_file(m.yaml, f"{name}.yaml")
    result = run(command, path, *args, "--json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    if command == "params":
        assert data["total"] == expected_params(m)[1]
    if command == "kvcache":
        assert data["bytes"] == expected_kv_bytes(m, 64, 1, "bf16")
    expected = _groups(m)
    if len(expected) > 1:
        groups = data["layer_groups"]
        assert isinstance(groups, list) and all(isinstance(g, dict) for g in groups)
        assert all({"spec", "layers", "count"} <= set(g) for g in groups)
        assert {tuple(g["layers"]) for g in groups} == expected
        for g in groups:
            assert g["count"] == len(g["layers"])
            for i in g["layers"]:  # which layers slide, rotate, route: not only how they group
                layer = m.layers[i]
                assert (g["spec"]["window"], g["spec"]["rope"], g["spec"]["ffn"]) == \
                    (layer.window, layer.rope, layer.ffn)


def test_mamba_heads_split_x_proj_and_dt_proj():
    # Zamba-7B-v1's Mamba-1 layer (d 3712, E = 2d = 7424 channels, N 16, dt rank R = ceil(3712 / 16) = 232, K 4
    # taps) in H = 2 heads of 3712 channels, each with its own x_proj (3712 -> R + 2N) and dt_proj (R -> 3712, with
    # bias): the parameters and matmul FLOPs of one head of 7424 channels; x_proj's output per token H * (R + 2N),
    # which dt_proj keeps for backward (its input, a view of it); the state E * (K + N) per sequence either way
    d, E, N, R, K, H, L, B, S = 3712, 7424, 16, 232, 4, 2, 2, 2, 64
    T, b = B * S, 2
    yaml = (f"name: zamba-layers\nvocab_size: 32000\ncontext_length: 4096\nd_model: {d}\nn_layers: {L}\n"
            f"n_heads: 1\nd_ff: 0\nposition: none\nnorm: rmsnorm\nlayer_types: [mamba]\ntie_embeddings: true\n"
            f"mamba: {{d_state: {N}, d_conv: {K}, expand: 2, heads: {H}}}\n")
    one = load_text(yaml.replace(f"heads: {H}", "heads: 1"), "one.yaml")
    heads = load_text(yaml, "heads.yaml")
    layer = d * 2 * E + E * K + E + H * (E // H) * (R + 2 * N) + H * (R * (E // H) + E // H) + E * N + E + E * d + d
    for cfg in (one, heads):
        assert count_params(cfg).total == 32000 * d + L * layer + d
    run = RunSpec(mode="train", seq=S, batch=B)
    fwd = count_flops(heads, run).forward.matmul
    assert fwd["mamba/x_proj"] == L * H * 2 * T * (E // H) * (R + 2 * N) == L * 2 * T * E * (R + 2 * N)
    assert fwd["mamba/dt_proj"] == L * H * 2 * T * R * (E // H) == L * 2 * T * R * E
    assert count_flops(heads, run).backward.matmul["mamba/x_proj"] == 2 * fwd["mamba/x_proj"]
    assert fwd == count_flops(one, run).forward.matmul
    saved, saved_one = activation_bytes(heads, run).components, activation_bytes(one, run).components
    assert saved["mamba/x_proj"] == saved_one["mamba/x_proj"] == L * T * E * b  # its input, u
    assert saved["mamba/dt_proj"] == L * T * H * (R + 2 * N) * b
    assert saved_one["mamba/dt_proj"] == L * T * (R + 2 * N) * b
    assert activation_bytes(heads, run).total - activation_bytes(one, run).total == L * T * (H - 1) * (R + 2 * N) * b
    decode = RunSpec(mode="decode", seq=S, batch=B)
    assert kv_cache(heads, decode).state_bytes == kv_cache(one, decode).state_bytes == L * B * E * (K + N) * b
