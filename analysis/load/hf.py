"""Translate a Hugging Face ``config.json`` into llmcalc config keys.

llmcalc counts what transformers builds for the config's ``model_type`` (its own modeling
code is the reference, ``tests/test_hf.py`` checks every family against it). One small
mapper per family, in :data:`MAPPERS`; shared helpers read the common fields, in both the
transformers 4 layout (``rope_theta``, ``rope_scaling``, ``partial_rotary_factor`` at the top
level) and the transformers 5 layout (``rope_parameters``, ``layer_types``).

Policy for the keys of a config (docs/huggingface.md):
- a key left out is read as transformers' config class for the ``model_type`` reads it, with
  the class's default (:data:`.hf_defaults.DEFAULTS`); a null as transformers reads it: refused
  where transformers refuses it, else None with the meaning transformers' code gives it;
- a key a mapper reads is honoured, or rejected with a ConfigError naming it when its value
  is something llmcalc cannot count (a bias on MLA projections, per-head LayerNorms, ...) or
  of the wrong type (``{}``, ``false``, a string or a float for a size);
- :data:`REJECTED` keys (quantized storage, hybrid or state-space layers, chunked attention)
  are errors whenever they carry a value;
- :data:`IGNORED` keys change no count (token ids, dropout, init ranges, rope scaling,
  routing details, value multipliers) and are ignored on purpose, as are family-specific ones
  listed with their mapper;
- any other key is one transformers' modeling code for that ``model_type`` does not read
  either (custom fields of remote code, training metadata), so it changes nothing there and
  is ignored; ``unclassified`` lists them, and the tests check that transformers' own config
  classes write none.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Callable

from ..errors import ConfigError, UnmappedModelType, brief
from ..model.config import MAX_LAYERS
from ..model.sizes import MAX_INT
from .hf_defaults import DEFAULTS, SUBCONFIGS, Default
from .hf_raw import Raw
from .hf_vision import MULTIMODAL, Family

# Keys that change no count, for every family.
IGNORED = frozenset({
    "_name_or_path", "architectures", "transformers_version", "model_type", "auto_map",
    "bos_token_id", "eos_token_id", "pad_token_id", "sep_token_id", "decoder_start_token_id",
    "initializer_range", "init_std", "embedding_init_std", "initializer_factor",
    "attention_dropout", "hidden_dropout", "resid_pdrop", "embd_pdrop", "attn_pdrop", "residual_dropout",
    "embedding_dropout", "classifier_dropout", "summary_first_dropout", "hidden_dropout_prob",
    "rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon", "norm_epsilon",
    "use_cache", "output_attentions", "output_hidden_states", "return_dict", "is_encoder_decoder",
    "is_decoder", "id2label", "label2id", "problem_type", "chunk_size_feed_forward", "pretraining_tp",
    "rope_scaling", "original_max_position_embeddings", "rope_interleave",
    "output_router_logits", "router_aux_loss_coef", "router_jitter_noise", "norm_topk_prob",
    "routed_scaling_factor", "n_group", "topk_group", "topk_method", "scoring_func", "aux_loss_alpha",
    "seq_aux", "ep_size", "num_nextn_predict_layers",
    "attn_implementation", "_attn_implementation_autoset", "tokenizer_class",
})

# Keys that describe something llmcalc cannot count: an error whenever they carry a value.
REJECTED = {
    "attention_chunk_size": "chunked attention is modeled for llama4_text only",
    "layers_block_type": "hybrid or state-space layers are not modeled",
    "hybrid_override_pattern": "hybrid or state-space layers are not modeled",
    "attn_layer_indices": "hybrid or state-space layers are not modeled",
    "attn_layer_period": "hybrid or state-space layers are not modeled",
    "mamba_d_state": "hybrid or state-space layers are not modeled",
    "ssm_state_size": "hybrid or state-space layers are not modeled",
    "linear_num_value_heads": "hybrid (linear attention) layers are not modeled",
    "full_attention_interval": "hybrid (linear attention) layers are not modeled",
}

_DTYPES = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}
_LAYER_TYPES = {"full_attention": "full", "sliding_attention": "sliding"}


# -- shared helpers -------------------------------------------------------------------

def _dtype(r: Raw, default: str) -> str:
    key = "dtype" if r.has("dtype") else "torch_dtype"
    value = r.get(key)
    if value is None:
        return default
    if not isinstance(value, str) or value not in _DTYPES:
        r.fail(key, f"unsupported dtype {brief(value)}; expected one of: {', '.join(_DTYPES)}")
    return _DTYPES[value]


def _base(r: Raw, *, d: str = "hidden_size", layers: str = "num_hidden_layers", heads: str = "num_attention_heads",
          context: str = "max_position_embeddings", dtype: str = "bf16") -> dict[str, Any]:
    """Name, sizes, dtype and tying (a context length changes no count unless positions are learned)."""
    return {"name": _name(r.raw, r.source), "vocab_size": r.size("vocab_size"), "context_length": r.size(context),
            "d_model": r.size(d), "n_layers": r.size(layers, maximum=MAX_LAYERS), "n_heads": r.size(heads),
            "tie_embeddings": r.flag("tie_word_embeddings"), "dtype": _dtype(r, dtype)}


def _name(raw: dict[str, Any], source: str) -> str:
    """The model's name: in a Hugging Face cache snapshot
    (``models--<org>--<name>/snapshots/<commit>/config.json``) the repository's ``<name>``, never
    the commit hash; else the config's ``_name_or_path`` when it has one; else a ``config.json``'s
    folder (a model directory's name) or any other file's stem."""
    path = Path(os.path.abspath(source))  # not resolved: a snapshot's config.json links into blobs/
    folder, repo = path.parent, path.parent.parent.parent.name
    if path.parent.parent.name == "snapshots" and repo.startswith("models--"):
        return repo.split("--")[-1]
    given = raw.get("_name_or_path")
    if isinstance(given, str) and given.strip():
        return given
    return folder.name if path.name == "config.json" and folder.name else path.stem


def _rope(r: Raw, out: dict[str, Any], fraction: float | None = None,
          keys: tuple[str, str] = ("rope_theta", "partial_rotary_factor")) -> None:
    """RoPE from ``rope_parameters`` (transformers 5; per layer type for Gemma 3), else the top-level
    ``keys``, base and rotated fraction (transformers 4; absent: the class's defaults).
    ``fraction``: a family key already read (GPT-J's ``rotary_dim``)."""
    params = r.get("rope_parameters") or {}
    if not isinstance(params, dict):
        r.fail("rope_parameters", f"must be a mapping, got {brief(params)}")
    if "full_attention" in params and isinstance(params["full_attention"], dict):
        params = params["full_attention"]  # Gemma 3: one set per layer type; the bases change no count
    theta_key, fraction_key = keys
    theta = params.get("rope_theta", r.get(theta_key))
    r.get("rope_scaling")
    if fraction is None:
        fraction = params.get("partial_rotary_factor", r.get(fraction_key))
    out["position"] = "rope"
    if theta is not None:
        out["rope_theta"] = theta
    if fraction is not None and fraction != 1:
        out["rotary_fraction"] = fraction


def _cycle(values: list[Any]) -> list[Any]:
    """The shortest list that repeats cyclically to ``values``."""
    n = len(values)
    return next(values[:p] for p in range(1, n + 1) if all(values[i] == values[i % p] for i in range(n)))


def _windows(r: Raw, out: dict[str, Any], types: Any, window: int | None) -> None:
    """Per-layer spans from transformers' ``layer_types`` (``sliding_attention``/``full_attention``)."""
    n = out["n_layers"]
    if not isinstance(types, list) or len(types) != n:
        r.fail("layer_types", f"must list one type per layer ({n}), got {brief(types)}")
    bad = [t for t in types if not isinstance(t, str) or t not in _LAYER_TYPES]
    if bad:
        r.fail("layer_types", f"unsupported layer type {brief(bad[0])} (llmcalc models full_attention and "
                              "sliding_attention; hybrid, linear and chunked layers are not modeled)")
    spans = [_LAYER_TYPES[t] for t in types]
    if "sliding" not in spans:
        return
    if window is None:  # transformers' sliding layers fail without one
        r.fail("sliding_window", "layer_types has sliding_attention layers but no sliding_window")
    out["sliding_window"] = window
    if "full" in spans:
        out["layer_types"] = _cycle(spans)


def _window(r: Raw) -> int | None:
    """``sliding_window``: 0 or None, no window (Qwen2-MoE writes 0 without use_sliding_window)."""
    return r.maybe_size("sliding_window", minimum=0) or None


def _layer_types(r: Raw, out: dict[str, Any], window: int | None, slides: Callable[[int], bool]) -> list[str]:
    """``layer_types`` if given, else transformers' default rule (``slides(i)``: layer i slides);
    returns them."""
    types = r.get("layer_types")
    if types is None:
        types = ["sliding_attention" if slides(i) else "full_attention" for i in range(out["n_layers"])]
    _windows(r, out, types, window)
    return types


def _nope_full_layers(out: dict[str, Any], types: list[str]) -> None:
    """RoPE on the sliding layers only, the full ones NoPE (Cohere 2, EXAONE 4 with a window)."""
    rope = [t == "sliding_attention" for t in types]
    if not all(rope):
        out["rope_layers"] = _cycle(rope)


def _every_layer_window(r: Raw, out: dict[str, Any], use: bool = True) -> None:
    """Mistral, Mixtral, Phi-3, Starcoder2, Qwen3-MoE: a window on every layer when set (and ``use``)."""
    window = _window(r)
    if not use:
        window = None
    if r.has("layer_types"):
        _windows(r, out, r.get("layer_types"), window)
    elif window is not None:
        out["sliding_window"] = window


# transformers' config classes that refuse a hidden_size the heads do not divide (their
# validate_architecture); the others floor-divide it into head_dim
_EXACT_HEADS = frozenset({"llama", "gpt_neox", "arcee", "internlm3", "iquestcoder", "jais2", "cwm"})


def _decoder(r: Raw, *, gated: bool = True, act: str = "hidden_act", norm: str = "rmsnorm",
             rope: tuple[str, str] = ("rope_theta", "partial_rotary_factor"), ff: str = "intermediate_size"
             ) -> dict[str, Any]:
    """The Llama layout: hidden_size, num_key_value_heads (None: one per head), head_dim (None:
    hidden_size // heads), intermediate_size (``ff``: the key of a family without one), RoPE."""
    out = _base(r)
    kv, head_dim = r.maybe_size("num_key_value_heads"), r.maybe_size("head_dim")
    out.update(n_kv_heads=out["n_heads"] if kv is None else kv, d_ff=r.size(ff),
               activation=r.activation(act, gated), norm=norm)
    if out["d_model"] % out["n_heads"] and r.raw["model_type"] in _EXACT_HEADS:  # even with a head_dim
        r.fail("num_attention_heads", f"must divide hidden_size ({out['d_model']}), as transformers' config "
                                      f"requires, got {out['n_heads']}")
    if head_dim is None and out["d_model"] % out["n_heads"]:
        head_dim = out["d_model"] // out["n_heads"]
    if head_dim is not None:
        out["head_dim"] = head_dim
    _rope(r, out, keys=rope)
    return out


def _attention_bias(r: Raw, out: dict[str, Any], key: str = "attention_bias") -> None:
    bias = r.flag(key)
    out["qkv_bias"] = out["out_bias"] = bias


# -- one mapper per family ------------------------------------------------------------

def _gpt2(r: Raw) -> dict[str, Any]:
    r.false("add_cross_attention", "cross-attention layers")
    # value scaling, and the summary heads of other model classes
    r.ignore("scale_attn_weights", "scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn", "summary_type",
             "summary_use_proj", "summary_activation", "summary_proj_to_labels")
    out = _base(r, d="n_embd", layers="n_layer", heads="n_head", context="n_positions", dtype="fp32")
    return {**out, "d_ff": _inner(r, out["d_model"]), "position": "learned",
            "activation": r.activation("activation_function", False),
            "qkv_bias": True, "out_bias": True, "mlp_bias": True}


def _inner(r: Raw, d: int) -> int:
    """GPT-2 and GPT-J: ``n_inner``, None is 4 d."""
    inner = r.maybe_size("n_inner")
    return 4 * d if inner is None else inner


def _gpt_neox(r: Raw) -> dict[str, Any]:
    """The rotated fraction and base are ``rotary_pct`` and ``rotary_emb_base`` at the top level."""
    out = _decoder(r, gated=False, norm="layernorm", rope=("rotary_emb_base", "rotary_pct"))
    out.pop("n_kv_heads")
    _attention_bias(r, out)
    out["mlp_bias"] = True
    if r.flag("use_parallel_residual"):
        out.update(parallel_block=True, parallel_norms=2)
    return out


def _gptj(r: Raw) -> dict[str, Any]:
    out = _base(r, d="n_embd", layers="n_layer", heads="n_head", context="n_positions")
    _divides(r, out, "n_head", "n_embd")  # transformers' GPT-J refuses it too
    out.update(d_ff=_inner(r, out["d_model"]), activation=r.activation("activation_function", False),
               mlp_bias=True, lm_head_bias=True, parallel_block=True)
    _rope(r, out, r.size("rotary_dim") / (out["d_model"] // out["n_heads"]))
    return out


def _falcon(r: Raw) -> dict[str, Any]:
    """Its booleans are typed ``bool | None``: None is false (``multi_query`` None: one K/V head
    per ``num_kv_heads``, as false)."""
    out = _base(r)
    d, h = out["d_model"], out["n_heads"]
    new, parallel = r.flag("new_decoder_architecture"), r.flag("parallel_attn")
    # read by one architecture only: num_kv_heads, num_ln_in_parallel_attn (new), multi_query (old)
    kv, norms, mq = r.maybe_size("num_kv_heads"), r.maybe_size("num_ln_in_parallel_attn"), r.flag("multi_query")
    if new:
        if not parallel:
            r.fail("parallel_attn", "false with new_decoder_architecture is not a layout transformers builds")
        out["n_kv_heads"] = h if kv is None else kv
        out["parallel_norms"] = norms or 2
    elif mq:
        out["n_kv_heads"] = 1
    if parallel:
        out["parallel_block"] = True
    bias, ffn = r.flag("bias"), r.maybe_size("ffn_hidden_size")
    out.update(d_ff=4 * d if ffn is None else ffn, activation=r.activation("activation", False),
               norm="layernorm", qkv_bias=bias, out_bias=bias, mlp_bias=bias)
    if r.flag("alibi"):
        out["position"] = "alibi"
        r.get("rope_parameters"), r.get("rope_theta"), r.get("rope_scaling")
    else:
        _rope(r, out)
    return out


def _phi(r: Raw) -> dict[str, Any]:
    out = _decoder(r, gated=False, norm="layernorm")
    if r.flag("qk_layernorm"):
        out["qk_norm"] = "head"  # one LayerNorm(head_dim) with bias, shared by the heads
    out.update(qkv_bias=True, out_bias=True, mlp_bias=True, lm_head_bias=True, parallel_block=True)
    return out


def _llama(r: Raw) -> dict[str, Any]:
    out = _decoder(r)
    _attention_bias(r, out)
    out["mlp_bias"] = r.flag("mlp_bias")
    return out


def _mistral(r: Raw) -> dict[str, Any]:
    """Llama layout, one window on every layer (Mistral, Phi-3)."""
    out = _decoder(r)
    _every_layer_window(r, out)
    return out


def _mixtral(r: Raw) -> dict[str, Any]:
    out = _mistral(r)
    out["moe"] = {"num_experts": _first(r, "num_experts", "num_local_experts"),
                  "experts_per_token": r.size("num_experts_per_tok")}
    return out


def _first(r: Raw, *keys: str) -> int:
    """The first of ``keys`` the file gives, in the order transformers prefers them (its
    ``attribute_map`` maps one name onto the other); none: the config class's default."""
    given = [key for key in keys if r.has(key)]
    default = next((key for key in keys if r.defaults.get(key, _NULLABLE).value is not None), keys[-1])
    return r.size(given[0] if given else default)


def _qwen_windows(r: Raw, out: dict[str, Any]) -> None:
    """Qwen2/Qwen3: with use_sliding_window and a sliding_window, layers i >= max_window_layers slide."""
    window, first = _window(r), r.size("max_window_layers", minimum=0)
    if not r.flag("use_sliding_window"):
        window = None
    _layer_types(r, out, window, lambda i: window is not None and i >= first)


def _qwen2(r: Raw) -> dict[str, Any]:
    out = _decoder(r)
    out["qkv_bias"] = True  # hard-coded in transformers' Qwen2 attention (o_proj has none)
    _qwen_windows(r, out)
    return out


def _qwen3(r: Raw) -> dict[str, Any]:
    out = _llama(r)
    out["qk_norm"] = "head"
    _qwen_windows(r, out)
    return out


def _shared_mlp(moe: dict[str, Any], width: int) -> None:
    """One always-on MLP ``width`` wide beside the experts (0: none), llmcalc's single shared expert
    (several shared experts of one width are one MLP their sum wide)."""
    if width:
        moe.update(shared_experts=1, shared_expert_d_ff=width)


def _moe_layers(r: Raw, moe: dict[str, Any], null: tuple[int, ...] = ()) -> None:
    """Qwen-MoE: ``decoder_sparse_step`` and ``mlp_only_layers`` (a leading run of dense layers;
    ``null``: what its class makes of None)."""
    step = r.size("decoder_sparse_step")
    dense = r.get("mlp_only_layers")
    if dense is None:
        dense = list(null)
    if not isinstance(dense, list) or any(isinstance(i, bool) or not isinstance(i, int) for i in dense):
        r.fail("mlp_only_layers", f"must be a list of layer indices, got {brief(dense)}")
    dense = sorted(dense)
    if dense != list(range(len(dense))):
        r.fail("mlp_only_layers", f"only a leading run of dense layers (0, 1, ..., k-1) is modeled, got {dense}")
    if step != 1:
        moe["step"] = step
    if dense:
        moe["first_dense_layers"] = len(dense)


def _qwen2_moe(r: Raw) -> dict[str, Any]:
    out = _decoder(r)
    out["qkv_bias"] = r.flag("qkv_bias")
    moe: dict[str, Any] = {"num_experts": r.size("num_experts"), "experts_per_token": r.size("num_experts_per_tok"),
                           "expert_d_ff": r.size("moe_intermediate_size")}
    shared = r.size("shared_expert_intermediate_size", minimum=0)
    if shared:
        moe.update(shared_experts=1, shared_expert_d_ff=shared, shared_expert_gate=True)
    _moe_layers(r, moe)
    out["moe"] = moe
    use, window = r.flag("use_sliding_window"), _window(r)
    first = r.size("max_window_layers", minimum=0)
    _layer_types(r, out, window if use else None, lambda i: use and (i + 1) % 2 == 1 and i < first)
    return out


def _qwen3_moe(r: Raw) -> dict[str, Any]:
    out = _llama(r)
    out.pop("mlp_bias")
    out["qk_norm"] = "head"
    moe: dict[str, Any] = {"num_experts": _first(r, "num_local_experts", "num_experts"),
                           "experts_per_token": r.size("num_experts_per_tok"),
                           "expert_d_ff": r.size("moe_intermediate_size")}
    _moe_layers(r, moe)
    out["moe"] = moe
    _every_layer_window(r, out, r.flag("use_sliding_window"))
    return out


def _gemma(r: Raw, act: str = "hidden_act") -> dict[str, Any]:
    """Gemma's RMSNorm scales by (1 + w): still d parameters."""
    out = _decoder(r, act=act)
    _attention_bias(r, out)
    out["embedding_scale"] = math.sqrt(out["d_model"])
    if r.raw["model_type"] != "vaultgemma":  # VaultGemma's class drops the field, its attention is causal
        r.false("use_bidirectional_attention", "bidirectional attention")
    return out


def _gemma2(r: Raw, pattern: int = 2) -> dict[str, Any]:
    """Gemma 2 and 3 read ``hidden_activation``; layer i slides unless i + 1 is a multiple of
    ``pattern`` (2 in Gemma 2, Gemma 3's ``sliding_window_pattern``)."""
    out = _gemma(r, "hidden_activation")
    out["norm_placement"] = "sandwich"
    r.get("query_pre_attn_scalar")  # the score scale: changes no count
    for key, ours in (("attn_logit_softcapping", "attn_logit_softcap"),
                      ("final_logit_softcapping", "final_logit_softcap")):
        if r.get(key):
            out[ours] = r.get(key)
    _layer_types(r, out, _window(r), lambda i: (i + 1) % pattern != 0)
    return out


def _gemma3(r: Raw) -> dict[str, Any]:
    """Gemma 3's text model. rope_local_base_freq (transformers 4) is the sliding layers' base;
    transformers reads ``sliding_window_pattern`` and overwrites ``_sliding_window_pattern``."""
    out = _gemma2(r, r.size("sliding_window_pattern"))
    out["qk_norm"] = "head"
    r.get("rope_local_base_freq")
    r.ignore("_sliding_window_pattern")
    return out


def _olmo(r: Raw) -> dict[str, Any]:
    """OLMo 1: LayerNorm without weight or bias; clip_qkv clamps values only."""
    out = _llama(r)
    out.pop("mlp_bias")
    r.get("clip_qkv")
    out.update(norm="layernorm", norm_weight=False, norm_bias=False)
    return out


def _olmo2(r: Raw) -> dict[str, Any]:
    out = _olmo(r)
    out.update(norm="rmsnorm", norm_placement="post_branch", qk_norm="full")
    del out["norm_weight"], out["norm_bias"]
    return out


def _stablelm(r: Raw) -> dict[str, Any]:
    out = _decoder(r, norm="layernorm")
    out["qkv_bias"] = r.flag("use_qkv_bias")
    r.false("qk_layernorm", "StableLM's qk_layernorm is one LayerNorm per head, which llmcalc does not model")
    if r.flag("use_parallel_residual"):
        out["parallel_block"] = True
    return out


def _starcoder2(r: Raw) -> dict[str, Any]:
    out = _decoder(r, gated=False, norm="layernorm")
    bias = r.flag("use_bias")
    out.update(qkv_bias=bias, out_bias=bias, mlp_bias=bias)
    _every_layer_window(r, out)
    return out


def _granite(r: Raw) -> dict[str, Any]:
    """residual_multiplier, attention_multiplier and logits_scaling scale values only."""
    out = _llama(r)
    r.ignore("residual_multiplier", "attention_multiplier", "logits_scaling")
    scale = r.get("embedding_multiplier")
    if scale != 1:
        out["embedding_scale"] = scale
    return out


def _smollm3(r: Raw) -> dict[str, Any]:
    out = _llama(r)
    n = out["n_layers"]
    rope = r.get("no_rope_layers")  # 1: the layer applies RoPE; 0: a NoPE layer
    interval = r.size("no_rope_layer_interval")
    if rope is None:
        rope = [int((i + 1) % interval != 0) for i in range(n)]
    if not isinstance(rope, list) or len(rope) != n or any(type(v) not in (int, bool) or v not in (0, 1) for v in rope):
        r.fail("no_rope_layers", f"must list one value per layer ({n}), each 1 or 0, got {brief(rope)}")
    if not all(rope):
        out["rope_layers"] = _cycle([bool(v) for v in rope])
    use, window = r.flag("use_sliding_window"), _window(r)
    window = window if use else None
    types = r.get("layer_types")
    if types is None:
        types = ["sliding_attention" if window is not None and not rope[i] else "full_attention" for i in range(n)]
    elif not use and isinstance(types, list):  # transformers' SmolLM3 slides a layer only with use_sliding_window
        types = ["full_attention" if t == "sliding_attention" else t for t in types]
    _windows(r, out, types, window)
    return out


def _mla(r: Raw, derive_v: bool = False) -> dict[str, Any]:
    """DeepSeek's multi-head latent attention (no biases: ``attention_bias`` refused) on a pre-norm
    RMSNorm layer with a gated MLP ``intermediate_size`` wide (DeepSeek-V2/V3, Youtu, MiniCPM3,
    GLM-4.7-Flash). ``derive_v``: a null ``v_head_dim`` is hidden_size // heads (MiniCPM3), else
    it is needed."""
    out = _base(r)
    r.false("attention_bias", "biases on MLA projections are not modeled")
    r.ignore("head_dim", "qk_head_dim")  # derived from the MLA sizes
    kv = r.maybe_size("num_key_value_heads")  # None: one per head
    if kv not in (None, out["n_heads"]):  # transformers' attention repeats MLA's per-head keys heads / kv times
        r.fail("num_key_value_heads", f"must equal num_attention_heads ({out['n_heads']}) with MLA, got {kv}")
    mla: dict[str, Any] = {key: r.size(key) for key in ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim")}
    v = r.maybe_size("v_head_dim")
    mla["v_head_dim"] = out["d_model"] // out["n_heads"] if v is None and derive_v else r.size("v_head_dim")
    q_lora = r.maybe_size("q_lora_rank")  # None: queries without the low-rank path
    if q_lora is not None:
        mla["q_lora_rank"] = q_lora
    out.update(d_ff=r.size("intermediate_size"), activation=r.activation("hidden_act", True),
               norm="rmsnorm", attention="mla", mla=mla)
    _rope(r, out)
    out.pop("rotary_fraction", None)
    return out


def _deepseek(r: Raw) -> dict[str, Any]:
    """DeepSeek-V2/V3: MLA (:func:`_mla`), the first ``first_k_dense_replace`` layers dense, then MoE
    layers with ``n_shared_experts`` always-on experts. V3's router has ``e_score_correction_bias``, one value
    per expert: a buffer in transformers but a learned tensor the checkpoint stores, counted as
    ``router_bias``. The multi-token-prediction layers are not built by transformers (not counted)."""
    r.false("mlp_bias", "MLP biases in DeepSeek's experts are not modeled")
    freq = r.get("moe_layer_freq")  # not a field of transformers' classes: absent or null, 1
    if freq not in (None, 1):
        r.fail("moe_layer_freq", f"must be 1 (transformers makes every layer from first_k_dense_replace on "
                                 f"MoE), got {brief(freq)}")
    out = _mla(r)
    moe: dict[str, Any] = {"num_experts": r.size("n_routed_experts"),
                           "experts_per_token": r.size("num_experts_per_tok"),
                           "expert_d_ff": r.size("moe_intermediate_size")}
    shared, dense = r.size("n_shared_experts", minimum=0), r.size("first_k_dense_replace", minimum=0)
    if shared:
        moe["shared_experts"] = shared
    if dense:
        moe["first_dense_layers"] = dense
    if r.raw["model_type"] == "deepseek_v3":
        moe["router_bias"] = True
    out["moe"] = moe
    return out


def _gpt_oss(r: Raw) -> dict[str, Any]:
    """GPT-OSS: sinks, biased attention, router and expert biases, alternating windows.
    swiglu_alpha and swiglu_limit shape the activation's values only."""
    out = _decoder(r)
    _attention_bias(r, out)
    r.ignore("swiglu_alpha", "swiglu_limit")
    out["attention_sinks"] = True
    out["moe"] = {"num_experts": _first(r, "num_experts", "num_local_experts"),
                  "experts_per_token": r.size("num_experts_per_tok"), "router_bias": True, "expert_bias": True}
    _layer_types(r, out, _window(r), lambda i: (i + 1) % 2 == 1)
    return out


# -- dense decoders: GLM, ERNIE 4.5, Hunyuan, Seed-OSS, EXAONE 4, OLMo 3, Helium, Arcee, InternLM3, Ministral,
# IQuest-Coder, Jais 2, CWM

def _glm(r: Raw) -> dict[str, Any]:
    """GLM-4: ``attention_bias`` on q/k/v only (o_proj has none); gate and up fused in one
    ``gate_up_proj``; half of each head rotated (the class's ``partial_rotary_factor``)."""
    out = _decoder(r)
    out["qkv_bias"] = r.flag("attention_bias")
    return out


def _glm4(r: Raw) -> dict[str, Any]:
    """GLM-4-0414: GLM-4 with sandwich norms. transformers names them after Llama's:
    ``post_self_attn_layernorm`` and ``post_mlp_layernorm`` after the branches,
    ``post_attention_layernorm`` before the MLP."""
    out = _glm(r)
    out["norm_placement"] = "sandwich"
    return out


def _ernie4_5(r: Raw) -> dict[str, Any]:
    """ERNIE 4.5 (dense): ``use_bias`` on every attention and MLP projection."""
    out = _decoder(r)
    bias = r.flag("use_bias")
    out.update(qkv_bias=bias, out_bias=bias, mlp_bias=bias)
    return out


def _hunyuan_dense(r: Raw) -> dict[str, Any]:
    """Hunyuan dense: Llama's attention with per-head ``query_layernorm``/``key_layernorm``
    (after RoPE); its MLP has no bias. Its attention fails without a ``head_dim``."""
    r.size("head_dim")
    out = _decoder(r)
    _attention_bias(r, out)
    out["qk_norm"] = "head"
    r.ignore("eod_token_id")
    return out


def _seed_oss(r: Raw) -> dict[str, Any]:
    """Seed-OSS: q/k/v biases (``attention_bias``), o_proj's own ``attention_out_bias``."""
    out = _decoder(r)
    out.update(qkv_bias=r.flag("attention_bias"), out_bias=r.flag("attention_out_bias"), mlp_bias=r.flag("mlp_bias"))
    return out


def _exaone4(r: Raw) -> dict[str, Any]:
    """EXAONE 4: OLMo 2's norms after each branch, per-head q/k norms; with a ``sliding_window``
    only the sliding layers apply RoPE (the full ones are NoPE). ``sliding_window_pattern`` (an
    integer; a string such as "LLLG" transformers cannot use) only derives a missing
    ``layer_types``: layer i slides unless i + 1 is a multiple of it."""
    out = _decoder(r)
    out.update(norm_placement="post_branch", qk_norm="head")
    window = r.maybe_size("sliding_window")
    pattern = 0
    if r.has("layer_types"):
        r.ignore("sliding_window_pattern")
    elif window is None:  # transformers' default layer_types then divide by a pattern of 0
        r.fail("sliding_window", "is null, but a value is needed (transformers derives layer_types from it)")
    else:
        pattern = r.size("sliding_window_pattern")
    types = _layer_types(r, out, window, lambda i: (i + 1) % pattern != 0)
    if window is not None:
        _nope_full_layers(out, types)
    return out


def _olmo3(r: Raw) -> dict[str, Any]:
    """OLMo 3: OLMo 2 with sliding layers, three of every four by default."""
    out = _olmo2(r)
    _layer_types(r, out, r.maybe_size("sliding_window"), lambda i: (i + 1) % 4 != 0)
    return out


def _helium(r: Raw) -> dict[str, Any]:
    """Helium: ``attention_bias`` on q/k/v only; o_proj is hidden_size x hidden_size, so the heads
    must span hidden_size (transformers' forward fails otherwise)."""
    out = _llama(r)
    out["out_bias"] = False
    if out["n_heads"] * out.get("head_dim", out["d_model"] // out["n_heads"]) != out["d_model"]:
        r.fail("head_dim", f"num_attention_heads x head_dim must equal hidden_size ({out['d_model']}): "
                           "Helium's o_proj maps hidden_size to hidden_size")
    return out


def _arcee(r: Raw) -> dict[str, Any]:
    """Arcee (AFM): Llama's attention; an MLP of up and down projections only (Nemotron's),
    ReLU² (``relu2``) by default."""
    out = _decoder(r, gated=False)
    _attention_bias(r, out)
    out["mlp_bias"] = r.flag("mlp_bias")
    return out


def _internlm3(r: Raw) -> dict[str, Any]:
    """InternLM3, built as Llama; its ``attribute_map`` reads ``qkv_bias`` as ``attention_bias``
    and ``bias`` as ``mlp_bias`` (those win when both are given), and its class refuses the two
    unequal."""
    out = _decoder(r)
    bias, mlp = (r.flag(k if r.has(k) else key) for k, key in (("qkv_bias", "attention_bias"), ("bias", "mlp_bias")))
    if bias != mlp:
        r.fail("mlp_bias", f"must equal attention_bias ({bias}): InternLM3's config class refuses them unequal")
    out.update(qkv_bias=bias, out_bias=bias, mlp_bias=mlp)
    return out


def _ministral(r: Raw) -> dict[str, Any]:
    """Ministral: ``layer_types`` when given, else every layer slides. transformers' attention
    fails without a ``head_dim``, its model without a ``sliding_window``."""
    r.size("head_dim")
    out = _decoder(r)
    _layer_types(r, out, r.size("sliding_window"), lambda i: True)
    return out


def _ministral3(r: Raw) -> dict[str, Any]:
    """Ministral 3: Mistral's layout, one window on every layer when set; transformers ignores
    ``layer_types`` for it."""
    out = _decoder(r)
    r.ignore("layer_types")
    window = r.maybe_size("sliding_window")
    if window is not None:
        out["sliding_window"] = window
    return out


def _iquestcoder(r: Raw) -> dict[str, Any]:
    """IQuest-Coder, built as Llama; its class refuses ``clip_qkv`` and ``use_sliding_window``."""
    out = _llama(r)
    if r.has("clip_qkv"):
        r.fail("clip_qkv", "is not supported by transformers' IQuestCoder")
    r.false("use_sliding_window", "transformers' IQuestCoder refuses it")
    return out


def _jais2(r: Raw) -> dict[str, Any]:
    """Jais 2: Llama's attention with LayerNorms and an up/down MLP (Nemotron's), ReLU² by default."""
    out = _decoder(r, gated=False, norm="layernorm")
    _attention_bias(r, out)
    out["mlp_bias"] = r.flag("mlp_bias")
    return out


def _cwm(r: Raw) -> dict[str, Any]:
    """CWM: Llama without attention biases; every fourth layer (i % 4 == 0) full, the others slide."""
    out = _decoder(r)
    out["mlp_bias"] = r.flag("mlp_bias")
    _layer_types(r, out, r.size("sliding_window"), lambda i: i % 4 != 0)
    return out


# -- older decoders still served, and Cohere ------------------------------------------

def _divides(r: Raw, out: dict[str, Any], heads: str, width: str) -> None:
    """The heads must divide the width (these families' attention refuses the rest, or fails on it)."""
    if out["d_model"] % out["n_heads"]:
        r.fail(heads, f"must divide {width} ({out['d_model']}), got {out['n_heads']}")


def _gpt_bigcode(r: Raw) -> dict[str, Any]:
    """StarCoder, SantaCoder: GPT-2's layout (nn.Linear for Conv1D), one K/V head with ``multi_query``."""
    out = _gpt2(r)
    _divides(r, out, "n_head", "n_embd")
    # softmax precision; num_key_value_heads: written from multi_query, read by nothing
    r.ignore("attention_softmax_in_fp32", "scale_attention_softmax_in_fp32", "num_key_value_heads")
    if r.flag("multi_query"):
        out["n_kv_heads"] = 1
    return out


def _codegen(r: Raw) -> dict[str, Any]:
    """GPT-J's layout with one fused qkv_proj, which CodeGen splits in ``mp_num`` = 4 groups of
    heads (a head count not divisible by 4 fails in transformers' forward); ``n_ctx`` sizes an
    attribute nothing reads."""
    out = _gptj(r)
    r.ignore("n_ctx")
    if out["n_heads"] % 4:
        r.fail("n_head", f"must be a multiple of 4 (CodeGen splits q, k and v in 4 groups), got {out['n_heads']}")
    return out


def _persimmon(r: Raw) -> dict[str, Any]:
    """A fused, biased query_key_value; ``qk_layernorm``: one LayerNorm(head_dim) with bias,
    shared by the heads, on q and on k (as Phi's); squared ReLU (``relu2``)."""
    out = _base(r)
    _divides(r, out, "num_attention_heads", "hidden_size")
    out.update(d_ff=r.size("intermediate_size"), activation=r.activation("hidden_act", False), norm="layernorm",
               qkv_bias=True, out_bias=True, mlp_bias=True)
    if r.flag("qk_layernorm"):
        out["qk_norm"] = "head"
    _rope(r, out)
    return out


def _nemotron(r: Raw) -> dict[str, Any]:
    """Llama's attention, LayerNorm1P (``(1 + w)`` and a bias: still 2d), an ungated MLP
    (``relu2``). ``num_key_value_heads`` has no default: transformers fails without it."""
    out = _decoder(r, gated=False, norm="layernorm")
    out["n_kv_heads"] = r.size("num_key_value_heads")
    _attention_bias(r, out)
    out["mlp_bias"] = r.flag("mlp_bias")
    r.ignore("norm_eps")
    return out


def _command(r: Raw) -> dict[str, Any]:
    """Cohere and Cohere 2: one LayerNorm without bias feeds attention and the MLP in parallel;
    ``logit_scale`` scales the logits only. A ``head_dim`` key sizes the heads (transformers
    reads it with getattr; null fails)."""
    out = _decoder(r, norm="layernorm")
    _attention_bias(r, out)
    out.update(norm_bias=False, parallel_block=True)
    r.ignore("logit_scale")
    return out


def _cohere(r: Raw) -> dict[str, Any]:
    out = _command(r)
    r.false("use_qk_norm", "Cohere's q/k LayerNorms have a weight per head (num_heads x head_dim), "
                           "which llmcalc does not model")
    return out


def _cohere2(r: Raw) -> dict[str, Any]:
    """Command R7B: layer i slides unless i + 1 is a multiple of ``sliding_window_pattern``
    (without ``layer_types``); RoPE only on the sliding layers, the full ones are NoPE."""
    out = _command(r)
    pattern = r.size("sliding_window_pattern")  # read by transformers only without layer_types
    types = _layer_types(r, out, _window(r), lambda i: (i + 1) % pattern != 0)
    if "sliding_attention" not in types:
        out["position"] = "none"
        out.pop("rope_theta", None)
        out.pop("rotary_fraction", None)
    else:
        _nope_full_layers(out, types)
    return out


def _mpt(r: Raw) -> dict[str, Any]:
    """transformers' MPT builds one layout whatever the config says: ALiBi, no biases, LayerNorms
    without bias, a fused Wqkv with K/V on every head, an exact-GELU MLP of 4 x d_model. Values of
    the original code's other layouts are refused; ``learned_pos_emb`` is ignored (the original
    drops learned positions under ALiBi), as are ``norm_type`` (one LayerNorm), ``clip_qkv``,
    ``softmax_scale`` and ``logit_scale`` (values only)."""
    out = _base(r, d="d_model", layers="n_layers", heads="n_heads", context="max_seq_len")
    _divides(r, out, "n_heads", "d_model")
    for key, built in (("expansion_ratio", 4), ("no_bias", True)):
        if r.get(key) != built:
            r.fail(key, f"transformers' MPT builds {key} {built} only, got {brief(r.get(key))}")
    attn = r.get("attn_config") or {}
    if not isinstance(attn, dict):
        r.fail("attn_config", f"must be a mapping, got {brief(attn)}")
    for key, value in (("alibi", True), ("attn_type", "multihead_attention"), ("qk_ln", False)):
        if attn.get(key, value) != value:
            r.fail(f"attn_config.{key}", f"transformers' MPT builds {key} {value} only, got {brief(attn[key])}")
    r.ignore("learned_pos_emb", "norm_type", "init_device", "embedding_fraction", "logit_scale", "emb_pdrop")
    out.update(d_ff=4 * out["d_model"], activation="gelu", norm="layernorm", norm_bias=False, position="alibi")
    return out


def _xglm(r: Raw) -> dict[str, Any]:
    """Sinusoidal positions (a buffer, offset by 2: values only), token embeddings scaled by
    sqrt(d_model) with ``scale_embedding``, biases on every linear."""
    r.false("add_cross_attention", "cross-attention layers")
    r.ignore("dropout", "activation_dropout", "layerdrop")
    out = _base(r, d="d_model", layers="num_layers", heads="attention_heads")
    _divides(r, out, "attention_heads", "d_model")
    out.update(d_ff=r.size("ffn_dim"), activation=r.activation("activation_function", False),
               position="sinusoidal", qkv_bias=True, out_bias=True, mlp_bias=True)
    if r.flag("scale_embedding"):
        out["embedding_scale"] = math.sqrt(out["d_model"])
    return out


# -- mixture-of-experts decoders -------------------------------------------------------

def _even_rotary(out: dict[str, Any]) -> None:
    """transformers' RoPE rotates ``int(head_dim * fraction)`` dims rounded up to even (its
    frequencies are ``arange(0, dims, 2)``, one per pair): the fraction llmcalc reads as that."""
    hd = out.get("head_dim", out["d_model"] // out["n_heads"])
    dims = int(hd * out.get("rotary_fraction", 1))
    if dims % 2 and dims < hd:
        out["rotary_fraction"] = (dims + 1.5) / hd  # int(hd * fraction) = dims + 1, clear of rounding


def _glm4_moe(r: Raw) -> dict[str, Any]:
    """GLM-4.5: biases on q, k and v only (o_proj has none), optional per-head q/k norms, half of
    each head rotated by default; DeepSeek-V3's experts (:func:`_v3_moe`) after
    ``first_k_dense_replace`` dense layers. The multi-token-prediction layers are not built by
    transformers (not counted)."""
    out = _decoder(r)
    _even_rotary(out)
    out["qkv_bias"] = r.flag("attention_bias")
    if r.flag("use_qk_norm"):
        out["qk_norm"] = "head"
    _set_moe(out, _v3_moe(r, r.size("first_k_dense_replace", minimum=0)))
    return out


def _v3_moe(r: Raw, dense: int) -> dict[str, Any]:
    """DeepSeek-V3's experts as GLM-4.5 and dots.llm1 build them: routed experts
    ``moe_intermediate_size`` wide with the router's ``e_score_correction_bias`` (a buffer the
    checkpoint stores: ``router_bias``), the ``n_shared_experts`` as one MLP that many times as wide,
    after ``dense`` dense layers."""
    expert = r.size("moe_intermediate_size")
    moe: dict[str, Any] = {"num_experts": _first(r, "num_local_experts", "n_routed_experts"),
                           "experts_per_token": r.size("num_experts_per_tok"), "expert_d_ff": expert,
                           "router_bias": True}
    shared = r.size("n_shared_experts", minimum=0)
    _shared_mlp(moe, shared * expert)
    if dense:
        moe["first_dense_layers"] = dense
    return moe


def _olmoe(r: Raw) -> dict[str, Any]:
    """OLMoE: pre-norm layers with OLMo 2's norms over the whole q and k projections, sized
    hidden_size and (hidden_size // heads) * kv_heads (so head_dim * heads must be hidden_size);
    every layer MoE, experts ``intermediate_size`` wide. clip_qkv clamps values only."""
    out = _decoder(r)
    _attention_bias(r, out)
    r.get("clip_qkv")
    hd = out.get("head_dim", out["d_model"] // out["n_heads"])
    if hd * out["n_heads"] != out["d_model"]:  # transformers' q_norm (hidden_size) fails on the q projection
        r.fail("head_dim", f"must be hidden_size / num_attention_heads ({out['d_model']} / {out['n_heads']}), "
                           f"got {hd}")
    out["qk_norm"] = "full"
    out["moe"] = {"num_experts": _first(r, "num_local_experts", "num_experts"),
                  "experts_per_token": r.size("num_experts_per_tok")}
    return out


def _granitemoe(r: Raw) -> dict[str, Any]:
    """Granite's multipliers, every layer MoE with experts ``intermediate_size`` wide (no MLP
    bias); GraniteMoeShared adds one always-on MLP ``shared_intermediate_size`` wide (0: none)."""
    out = _granite(r)
    out.pop("mlp_bias")
    moe: dict[str, Any] = {"num_experts": r.size("num_local_experts"),
                           "experts_per_token": r.size("num_experts_per_tok")}
    if r.raw["model_type"] in ("granitemoeshared", "granitemoe_swa"):
        shared = r.size("shared_intermediate_size", minimum=0)
        _shared_mlp(moe, shared)
    out["moe"] = moe
    return out


def _phimoe(r: Raw) -> dict[str, Any]:
    """Phi-3.5-MoE: LayerNorms with biases, q/k/v/o biases with attention_bias, an optional LM
    head bias, a window on every layer when set. Its sparsemixer router picks two experts per
    token whatever ``num_experts_per_tok`` says; input_jitter_noise scales values in training."""
    out = _mistral(r)
    _attention_bias(r, out)
    out.update(norm="layernorm", lm_head_bias=r.flag("lm_head_bias"))
    r.ignore("input_jitter_noise")
    if r.size("num_experts_per_tok") != 2:
        r.fail("num_experts_per_tok", f"must be 2 (transformers' sparsemixer routes every token to two experts), "
                                      f"got {r.get('num_experts_per_tok')}")
    out["moe"] = {"num_experts": r.size("num_local_experts"), "experts_per_token": 2}
    return out


def _ernie4_5_moe(r: Raw) -> dict[str, Any]:
    """ERNIE 4.5 MoE: layer i is MoE when moe_layer_start_index <= i <= moe_layer_end_index (-1:
    the last) and (i + 1) % moe_layer_interval == 0, else dense; the router's
    ``e_score_correction_bias`` is a frozen parameter (``router_bias``); the moe_num_shared_experts
    are one MLP that many times moe_intermediate_size wide. ``use_bias`` biases every linear but
    the router and the routed experts: the shared experts' biases are not modeled."""
    out = _decoder(r)
    n, bias = out["n_layers"], r.flag("use_bias")
    r.ignore("moe_norm_min")  # a floor on the routing weights' sum
    expert, shared = r.size("moe_intermediate_size"), r.size("moe_num_shared_experts", minimum=0)
    if bias and shared:
        r.fail("use_bias", "True is not supported with shared experts: biases on the shared experts but not the "
                           "routed ones are not modeled")
    out.update(qkv_bias=bias, out_bias=bias, lm_head_bias=bias)
    moe: dict[str, Any] = {"num_experts": _first(r, "num_experts", "moe_num_experts"),
                           "experts_per_token": _first(r, "num_experts_per_tok", "moe_k"),
                           "expert_d_ff": expert, "router_bias": True}
    _shared_mlp(moe, shared * expert)
    start, step = r.size("moe_layer_start_index", minimum=0), r.size("moe_layer_interval")
    end = r.get("moe_layer_end_index")
    if isinstance(end, bool) or not isinstance(end, int):
        r.fail("moe_layer_end_index", f"must be an integer, got {brief(end)}")
    last = n - 1 if end == -1 else end
    sparse = [i for i in range(n) if i >= start and (i + 1) % step == 0]
    if any(i > last for i in sparse) and any(i <= last for i in sparse):
        r.fail("moe_layer_end_index", f"only MoE layers up to the last ({n - 1}) are modeled, got {end}")
    if start:
        moe["first_dense_layers"] = start
    if step != 1:
        moe["step"] = step
    _set_moe(out, moe if sparse and sparse[0] <= last else None, bias)
    return out


def _set_moe(out: dict[str, Any], moe: dict[str, Any] | None, mlp_bias: bool = False) -> None:
    """``moe``, unless no layer is MoE (transformers then builds every layer dense); ``mlp_bias``
    on the dense layers, where there are any."""
    n, first, step = out["n_layers"], (moe or {}).get("first_dense_layers", 0), (moe or {}).get("step", 1)
    sparse = [i for i in range(n) if i >= first and (i + 1) % step == 0] if moe else []
    if sparse:
        out["moe"] = moe
    if mlp_bias and len(sparse) < n:
        out["mlp_bias"] = True


def _hunyuan_v1_moe(r: Raw) -> dict[str, Any]:
    """Hunyuan-A13B: per-head q/k norms; every layer MoE, the experts and the one shared MLP
    ``intermediate_size`` wide (its remote code's moe_intermediate_size and num_shared_expert are
    not read by transformers). ``moe_topk`` may list one value per layer: only a constant one is
    modeled."""
    out = _decoder(r)
    out["head_dim"] = r.size("head_dim")  # its attention fails without one
    _attention_bias(r, out)
    out["qk_norm"] = "head"
    n, top = out["n_layers"], r.get("num_experts_per_tok" if r.has("num_experts_per_tok") else "moe_topk")
    if isinstance(top, list) and len(top) >= n and len(set(map(repr, top[:n]))) == 1:  # layer i reads top[i]
        top = top[0]
    if isinstance(top, bool) or not isinstance(top, int) or top < 1:
        r.fail("moe_topk", f"must be a positive integer (one for every layer), got {brief(top)}")
    out["moe"] = {"num_experts": _first(r, "num_local_experts", "num_experts"), "experts_per_token": top,
                  "shared_experts": 1}
    r.ignore("eod_token_id")
    return out


def _minimax_m2(r: Raw) -> dict[str, Any]:
    """MiniMax-M2: norms over the whole q and k projections, every layer MoE, the block's
    ``e_score_correction_bias`` (a buffer the checkpoint stores: ``router_bias``). The rotated
    share is ``partial_rotary_factor``, else its legacy ``rotary_dim / head_dim``."""
    out = _decoder(r)
    params = r.get("rope_parameters")
    if r.has("rotary_dim") and not r.has("partial_rotary_factor") and not (
            isinstance(params, dict) and "partial_rotary_factor" in params):
        out["rotary_fraction"] = r.size("rotary_dim") / out["head_dim"]
        if out["rotary_fraction"] == 1:
            del out["rotary_fraction"]
    _even_rotary(out)
    out["qk_norm"] = "full"
    out["moe"] = {"num_experts": _first(r, "num_experts", "num_local_experts"),
                  "experts_per_token": r.size("num_experts_per_tok"),
                  "router_bias": True}
    return out


def _dots1(r: Raw) -> dict[str, Any]:
    """dots.llm1: DeepSeek-V3's experts (:func:`_v3_moe`) after ``first_k_dense_replace`` dense
    layers, on a Qwen3 attention; with a sliding_window, layers
    i >= max_window_layers slide (no use_sliding_window switch)."""
    out = _decoder(r)
    _attention_bias(r, out)
    out["qk_norm"] = "head"
    dense = r.size("first_k_dense_replace", minimum=0)
    if dense < out["n_layers"]:  # transformers reads the expert keys in MoE layers only
        out["moe"] = _v3_moe(r, dense)
    window = _window(r)
    r.get("max_window_layers")  # read only with a window
    _layer_types(r, out, window, lambda i: window is not None and i >= r.size("max_window_layers", minimum=0))
    return out


def _flex_olmo(r: Raw) -> dict[str, Any]:
    """FlexOlmo: OLMo 2's layer (a norm after each branch, norms over the whole q and k
    projections) with every layer MoE, experts ``intermediate_size`` wide."""
    out = _decoder(r)
    _attention_bias(r, out)
    out.update(norm_placement="post_branch", qk_norm="full")
    out["moe"] = {"num_experts": _first(r, "num_local_experts", "num_experts"),
                  "experts_per_token": r.size("num_experts_per_tok")}
    return out


# -- batch A --
# GPT-SW3, Granite SWA, Granite MoE SWA, VaultGemma, Mellum, HyperCLOVA X, Youtu, Solar Open, Cohere 2 MoE,
# K-EXAONE (exaone_moe), GLM-4.7-Flash (glm4_moe_lite), MiniCPM3

def _rope_where(out: dict[str, Any], rope: list[bool]) -> None:
    """RoPE on the layers ``rope`` marks (the others NoPE); on none: no positions at all."""
    if not any(rope):
        out["position"] = "none"
        out.pop("rope_theta", None)
        out.pop("rotary_fraction", None)
    elif not all(rope):
        out["rope_layers"] = _cycle(rope)


def _whole_heads(r: Raw, out: dict[str, Any]) -> None:
    """Families whose RoPE rotates whole heads only (a partial_rotary_factor fails in their forward)."""
    if "rotary_fraction" in out:
        r.fail("partial_rotary_factor", f"must be 1: transformers' {r.raw['model_type']} rotates whole heads "
                                        f"(its forward fails on {out['rotary_fraction']})")


def _dense_layers(r: Raw, n: int, dense: int) -> int:
    """How many layers keep a dense MLP: ``mlp_layer_types`` ("dense"/"sparse", one per layer; a
    leading run of dense layers is modeled), else the first ``dense``."""
    types = r.get("mlp_layer_types")
    if types is None:
        return dense
    if not isinstance(types, list) or len(types) != n or any(t not in ("dense", "sparse") for t in types):
        r.fail("mlp_layer_types", f"must list one of dense and sparse per layer ({n}), got {brief(types)}")
    k = types.count("dense")
    if types[:k] != ["dense"] * k:
        r.fail("mlp_layer_types", f"only a leading run of dense layers is modeled, got {brief(types)}")
    return k


def _granite_swa(r: Raw) -> dict[str, Any]:
    """Granite SWA and Granite MoE SWA: Granite (MoE with an optional shared MLP) with one learned
    sink logit per head (``sinks``); without ``layer_types`` layer i is full when i % 4 == 0, else
    it slides; ``layer_rope_theta``: one RoPE base per layer, 0 a NoPE layer (the bases change no
    count)."""
    out = _granitemoe(r) if r.raw["model_type"] == "granitemoe_swa" else _granite(r)
    out["attention_sinks"] = True
    _layer_types(r, out, _window(r), lambda i: i % 4 != 0)
    n, thetas = out["n_layers"], r.get("layer_rope_theta")
    if thetas is not None:  # transformers reads theta i for layer i
        if not isinstance(thetas, list) or len(thetas) != n or any(
                isinstance(t, bool) or not isinstance(t, (int, float)) for t in thetas):
            r.fail("layer_rope_theta", f"must list one RoPE base per layer ({n}), 0 for NoPE, got {brief(thetas)}")
        _rope_where(out, [t != 0 for t in thetas])
    return out


def _vaultgemma(r: Raw) -> dict[str, Any]:
    """VaultGemma: Gemma 2 without the norms after the branches (pre-norm). Its config class refuses
    a hidden_size the heads do not divide, whatever ``head_dim`` says."""
    out = _gemma2(r)
    del out["norm_placement"]
    _divides(r, out, "num_attention_heads", "hidden_size")
    return out


def _hyperclovax(r: Raw) -> dict[str, Any]:
    """HyperCLOVA X: Granite with a norm after each branch too (``use_post_norm``, Peri-LN: llmcalc's
    sandwich; transformers names them ``post_norm1`` and ``post_norm2``). Its config class refuses a
    hidden_size the heads do not divide, whatever ``head_dim`` says."""
    out = _granite(r)
    _divides(r, out, "num_attention_heads", "hidden_size")
    if r.flag("use_post_norm"):
        out["norm_placement"] = "sandwich"
    return out


def _mellum(r: Raw) -> dict[str, Any]:
    """Mellum: Qwen3-MoE's attention (per-head q/k norms) and experts; ``layer_types`` (all full by
    default) and ``mlp_layer_types`` (all sparse by default; dense layers ``intermediate_size``
    wide). One RoPE base per layer type. The multi-token-prediction layers are not built by
    transformers (not counted)."""
    out = _decoder(r)
    _whole_heads(r, out)
    params = r.get("rope_parameters")
    sliding = params.get("sliding_attention") if isinstance(params, dict) else None
    if isinstance(sliding, dict) and sliding.get("partial_rotary_factor", 1) != 1:
        r.fail("partial_rotary_factor", "must be 1: transformers' mellum rotates whole heads")
    _attention_bias(r, out)
    out["qk_norm"] = "head"
    r.ignore("mtp_layer_types", "mtp_mlp_layer_types")
    _layer_types(r, out, _window(r), lambda i: False)
    dense = _dense_layers(r, out["n_layers"], 0)
    moe = {"num_experts": _first(r, "num_experts", "num_local_experts"),
           "experts_per_token": r.size("num_experts_per_tok"), "expert_d_ff": r.size("moe_intermediate_size")}
    _set_moe(out, {**moe, "first_dense_layers": dense} if dense else moe)
    return out


def _youtu(r: Raw) -> dict[str, Any]:
    """Youtu-LLM: DeepSeek-V3's latent attention (:func:`_mla`) on dense Llama layers."""
    r.ignore("embedding_initializer_range")
    return _mla(r)


def _minicpm3(r: Raw) -> dict[str, Any]:
    """MiniCPM3: DeepSeek-V2's latent attention (:func:`_mla`; a null ``v_head_dim`` is hidden_size //
    heads) on dense Llama layers (``mlp_bias``), token embeddings scaled by ``scale_emb``;
    ``scale_depth`` and ``dim_model_base`` scale the residual branches and the logits only."""
    out = _mla(r, derive_v=True)
    out["mlp_bias"] = r.flag("mlp_bias")
    r.ignore("scale_depth", "dim_model_base")
    scale = r.get("scale_emb")
    if scale != 1:
        out["embedding_scale"] = scale
    return out


def _glm4_moe_lite(r: Raw) -> dict[str, Any]:
    """GLM-4.7-Flash: DeepSeek-V3's latent attention (:func:`_mla`) and GLM-4.5's experts
    (:func:`_v3_moe`) after the dense layers of ``mlp_layer_types`` (the first one by default). Its
    ``attribute_map`` reads a ``head_dim`` key as ``qk_rope_head_dim`` (that key wins)."""
    out = _mla(r)
    if r.has("head_dim"):
        out["mla"]["qk_rope_head_dim"] = r.size("head_dim")
    _set_moe(out, _v3_moe(r, _dense_layers(r, out["n_layers"], 1)))
    return out


def _solar_open(r: Raw) -> dict[str, Any]:
    """Solar Open: GLM-4.5's experts (:func:`_v3_moe`) in every layer, on Llama's attention with
    ``attention_bias`` on q, k and v only (o_proj has none); RoPE over whole heads."""
    out = _decoder(r, ff="moe_intermediate_size")  # no dense layer: intermediate_size is no field
    _whole_heads(r, out)
    out["qkv_bias"] = r.flag("attention_bias")
    out["moe"] = _v3_moe(r, 0)
    return out


def _exaone_moe(r: Raw) -> dict[str, Any]:
    """K-EXAONE: EXAONE 4's attention (per-head q/k norms, RoPE on the sliding layers only) in
    pre-norm layers; after the dense layers of ``mlp_layer_types`` (else the first
    ``first_k_dense_replace``) DeepSeek-V3's experts: ``num_experts`` routed ones with the router's
    ``e_score_correction_bias`` (``router_bias``) and the ``num_shared_experts`` as one MLP that
    many times ``moe_intermediate_size`` wide. The multi-token-prediction layers are not built by
    transformers (not counted)."""
    out = _exaone4(r)
    del out["norm_placement"]
    n, expert = out["n_layers"], r.size("moe_intermediate_size")
    if r.has("mlp_layer_types"):
        r.ignore("first_k_dense_replace")  # read only to derive a missing mlp_layer_types
        dense = _dense_layers(r, n, 0)
    else:
        dense = r.size("first_k_dense_replace", minimum=0)
    moe: dict[str, Any] = {"num_experts": r.size("num_experts"), "experts_per_token": r.size("num_experts_per_tok"),
                           "expert_d_ff": expert, "router_bias": True}
    shared = r.size("num_shared_experts", minimum=0)
    _shared_mlp(moe, shared * expert)
    if dense:
        moe["first_dense_layers"] = dense
    _set_moe(out, moe)
    return out


# -- batch B --------------------------------------------------------------------------

def _flint(r: Raw) -> dict[str, Any]:
    """Flint: Qwen3-MoE's attention (per-head q/k norms) with sinks; layer i full when i < 2,
    i % 4 == 1 or it is the last, else sliding, and only the sliding layers apply RoPE. The
    ``mlp_only_layers`` (None: [0, 1]) dense, the others MoE with one ungated shared expert
    ``shared_expert_intermediate_size`` wide (0: none); ``num_experts`` 0 builds every layer dense."""
    out = _decoder(r)
    _attention_bias(r, out)
    out.update(qk_norm="head", attention_sinks=True)
    n = out["n_layers"]
    types = _layer_types(r, out, _window(r), lambda i: not (i < 2 or i % 4 == 1 or i == n - 1))
    _nope_full_layers(out, types)
    experts = r.size("num_experts", minimum=0)
    if not experts:
        return out
    moe: dict[str, Any] = {"num_experts": experts, "experts_per_token": r.size("num_experts_per_tok"),
                           "expert_d_ff": r.size("moe_intermediate_size")}
    shared = r.size("shared_expert_intermediate_size", minimum=0)
    _shared_mlp(moe, shared)
    _moe_layers(r, moe, null=(0, 1))
    _set_moe(out, moe)
    return out


def _kolibri1(r: Raw) -> dict[str, Any]:
    """Kolibri-1: GLM-4-0414's sandwich norms and EXAONE 4's attention (per-head q/k norms; with a
    ``sliding_window`` only the sliding layers apply RoPE); layer i full when i + 1 is a multiple
    of 5, else sliding. Every layer MoE, experts ``moe_intermediate_size`` wide (it has no
    intermediate_size), the router's ``e_score_correction_bias`` (a buffer the checkpoint stores:
    ``router_bias``) and one ungated shared MLP ``shared_expert_intermediate_size`` wide."""
    out = _decoder(r, ff="moe_intermediate_size")
    out.update(norm_placement="sandwich", qk_norm="head")
    window = r.maybe_size("sliding_window", minimum=0)  # 0 with full layers only: NoPE, as transformers reads it
    types = _layer_types(r, out, window or None, lambda i: (i + 1) % 5 != 0)
    if window is not None:
        _nope_full_layers(out, types)
    moe: dict[str, Any] = {"num_experts": _first(r, "num_local_experts", "num_experts"),
                           "experts_per_token": r.size("num_experts_per_tok"), "router_bias": True}
    shared = r.size("shared_expert_intermediate_size", minimum=0)
    _shared_mlp(moe, shared)
    out["moe"] = moe
    return out


def _cohere_compass(r: Raw) -> dict[str, Any]:
    """Cohere's compass text model (North): Command R7B's layer, every layer full by default, RoPE
    per layer type from ``rope_parameters`` (a null entry: that type is NoPE; a type without an
    entry fails in transformers), a ``sliding_window`` needed even without sliding layers. Its class
    overwrites ``head_dim`` with hidden_size // heads; ``pooling`` serves its classifier only."""
    out = _command(r)
    out.pop("head_dim", None)
    if out["d_model"] % out["n_heads"]:
        out["head_dim"] = out["d_model"] // out["n_heads"]
    r.ignore("pooling")
    window = r.size("sliding_window", minimum=0)  # its forward builds the sliding mask, used or not
    types = _layer_types(r, out, window or None, lambda i: False)
    params = r.get("rope_parameters")
    missing = [t for t in dict.fromkeys(types) if not isinstance(params, dict) or t not in params]
    if missing:
        r.fail("rope_parameters", f"must give an entry (null: no RoPE) for each layer type, none for {missing[0]}")
    for key in ("rope_theta", "rotary_fraction"):
        out.pop(key, None)
    rope = [params[t] is not None for t in types]
    if not any(rope):
        out["position"] = "none"
        return out
    theta = params[types[rope.index(True)]]
    if isinstance(theta, dict) and theta.get("rope_theta") is not None:
        out["rope_theta"] = theta["rope_theta"]
    if not all(rope):
        out["rope_layers"] = _cycle(rope)
    return out


def _aria_text(r: Raw) -> dict[str, Any]:
    """Aria's text model: Llama's attention; every layer MoE, the routed experts
    ``intermediate_size`` wide and SiLU-gated whatever ``hidden_act`` says, the
    ``moe_num_shared_experts`` one MLP that many times as wide. ``mlp_bias`` biases that shared
    MLP only (even 0 wide: its down projection's bias), which llmcalc does not model."""
    out = _decoder(r)
    _divides(r, out, "num_attention_heads", "hidden_size")  # its class refuses the rest
    _attention_bias(r, out)
    if out["activation"] != "swiglu":
        r.fail("hidden_act", f"must be silu (the routed experts are SiLU-gated), got {brief(r.get('hidden_act'))}")
    r.false("mlp_bias", "biases on the shared experts but not the routed ones are not modeled")
    moe: dict[str, Any] = {"num_experts": r.size("moe_num_experts"), "experts_per_token": r.size("moe_topk")}
    shared = r.size("moe_num_shared_experts", minimum=0)
    _shared_mlp(moe, shared * out["d_ff"])
    out["moe"] = moe
    return out


def _mlp_layer_types(r: Raw, n: int) -> dict[str, Any] | None:
    """``mlp_layer_types`` (one "dense" or "sparse" per layer; None: the first dense, the rest
    sparse) as ``first_dense_layers`` and ``step``; None without a sparse layer. A pattern those
    cannot express is refused."""
    types = r.get("mlp_layer_types")
    if types is None:
        types = ["dense"] + ["sparse"] * (n - 1)
    if not isinstance(types, list) or len(types) != n or any(t not in ("dense", "sparse") for t in types):
        r.fail("mlp_layer_types", f"must list dense or sparse for each layer ({n}), got {brief(types)}")
    sparse = [i for i, t in enumerate(types) if t == "sparse"]
    if not sparse:
        return None
    step = sparse[1] - sparse[0] if len(sparse) > 1 else sparse[0] + 1
    first = max(0, sparse[0] - step + 1)
    if sparse != [i for i in range(n) if i >= first and (i + 1) % step == 0]:
        r.fail("mlp_layer_types", "only dense layers first, then every step-th layer sparse, is modeled")
    moe: dict[str, Any] = {}
    if first:
        moe["first_dense_layers"] = first
    if step != 1:
        moe["step"] = step
    return moe


def _hy_v3(r: Raw) -> dict[str, Any]:
    """Hy3: per-head q/k norms, ``attention_bias`` on q/k/v/o; ``mlp_layer_types`` (the first
    dense by default); MoE layers with the block's ``e_score_correction_bias`` (a buffer the
    checkpoint stores: ``router_bias``) and the ``num_shared_experts`` as one MLP that many times
    ``moe_intermediate_size`` wide (0: ``intermediate_size`` wide, transformers' ``or``).
    ``mlp_bias`` biases the dense and shared MLPs but not the routed experts: not modeled with MoE
    layers."""
    out = _decoder(r)
    _attention_bias(r, out)
    out["qk_norm"] = "head"
    r.ignore("router_scaling_factor", "enable_moe_fp32_combine")  # routing weights, the sum's precision
    moe = _mlp_layer_types(r, out["n_layers"])
    if moe is None:
        out["mlp_bias"] = r.flag("mlp_bias")
        return out
    r.false("mlp_bias", "biases on the shared experts but not the routed ones are not modeled")
    expert = r.size("moe_intermediate_size")
    shared = expert * r.size("num_shared_experts", minimum=0) or out["d_ff"]
    moe.update(num_experts=_first(r, "num_local_experts", "num_experts"),
               experts_per_token=r.size("num_experts_per_tok"), expert_d_ff=expert, router_bias=True,
               shared_experts=1, shared_expert_d_ff=shared)
    _set_moe(out, moe)
    return out


def _cohere2_moe(r: Raw) -> dict[str, Any]:
    """Command A MoE (cohere2_moe): Cohere 2's parallel layer, a LayerNorm without bias (an RMSNorm
    when ``rms_norm_eps`` is set). The dense layers of ``mlp_layer_types`` come first,
    ``prefix_dense_intermediate_size`` wide (null: ``intermediate_size``); the experts and the
    ``num_shared_experts`` (one MLP that many times as wide) are ``intermediate_size`` wide. Without
    ``layer_types``/``mlp_layer_types`` transformers derives them from ``first_k_dense_replace``
    dense layers with their own ``prefix_dense_sliding_window_pattern``. RoPE on the sliding layers,
    and on the dense ones when that pattern is 1; the others NoPE. How the shared output is combined
    changes no count."""
    out = _command(r)
    n, width, prefix_width = out["n_layers"], out["d_ff"], r.maybe_size("prefix_dense_intermediate_size")
    if r.get("rms_norm_eps") is not None:
        out["norm"] = "rmsnorm"
        del out["norm_bias"]
    r.ignore("shared_expert_combination_strategy", "expert_selection_fn")
    first = 0
    if not r.has("layer_types") or not r.has("mlp_layer_types"):
        first = r.size("first_k_dense_replace", minimum=0, maximum=n)
    prefix, pattern, window = (r.size("prefix_dense_sliding_window_pattern"), r.size("sliding_window_pattern"),
                               _window(r))
    types = _layer_types(r, out, window, lambda i: (i + 1) % prefix != 0 if i < first
                         else (i - first + 1) % pattern != 0)
    dense = _dense_layers(r, n, first)
    _rope_where(out, [(t == "sliding_attention" and window is not None) or (i < dense and prefix == 1)
                      for i, t in enumerate(types)])
    moe: dict[str, Any] = {"num_experts": r.size("num_experts"), "experts_per_token": r.size("num_experts_per_tok"),
                           "expert_d_ff": width}
    shared = r.size("num_shared_experts", minimum=0)
    _shared_mlp(moe, shared * width)
    if dense:
        moe["first_dense_layers"] = dense
        out["d_ff"] = prefix_width or width
    _set_moe(out, moe)
    return out


def _ctrl(r: Raw) -> dict[str, Any]:
    """CTRL: sinusoidal positions (a buffer), token embeddings scaled by sqrt(d_model), LayerNorms
    before each branch, biases on every linear and on the LM head (its weight tied by default),
    a ReLU MLP ``dff`` wide."""
    out = _base(r, d="n_embd", layers="n_layer", heads="n_head", context="n_positions", dtype="fp32")
    _divides(r, out, "n_head", "n_embd")
    out.update(d_ff=r.size("dff"), activation="relu", norm="layernorm", position="sinusoidal",
               embedding_scale=math.sqrt(out["d_model"]), qkv_bias=True, out_bias=True, mlp_bias=True,
               lm_head_bias=True)
    return out


# -- the attention output gate ------------------------------------------------------------

def _afmoe(r: Raw) -> dict[str, Any]:
    """AFMoE (Arcee's Trinity): Llama's attention with per-head q/k norms and the output gate
    (``gate_proj``, d -> heads*head_dim, no bias: ``attention_gate``), sandwich norms around both
    branches; layer i full when i + 1 is a multiple of ``global_attn_every_n_layers``, else sliding,
    and only the sliding layers apply RoPE, over whole heads (its default RoPE ignores a
    ``partial_rotary_factor``); its forward builds the sliding mask whether a layer uses it or not,
    so ``sliding_window`` is needed. The first ``num_dense_layers`` layers dense, the others MoE:
    ``num_experts`` routed experts, the block's ``expert_bias`` (a frozen parameter: ``router_bias``)
    and the ``num_shared_experts`` as one MLP that many times ``moe_intermediate_size`` wide. The
    sigmoid routing is counted as llmcalc's softmax routing (elementwise, the same parameters and
    matmuls). ``mup_enabled`` scales the embeddings by sqrt(hidden_size)."""
    out = _decoder(r)
    out["head_dim"] = r.size("head_dim")  # its attention fails without one
    out.pop("rotary_fraction", None)
    _attention_bias(r, out)
    out.update(attention_gate=True, qk_norm="head", norm_placement="sandwich")
    r.ignore("route_scale")
    n, window = out["n_layers"], r.size("sliding_window")
    if r.has("layer_types"):
        types = _layer_types(r, out, window, lambda i: True)
        r.ignore("global_attn_every_n_layers")  # read only to derive a missing layer_types
    else:
        every = r.size("global_attn_every_n_layers")
        types = _layer_types(r, out, window, lambda i: (i + 1) % every != 0)
    if "sliding_attention" not in types:
        out["position"] = "none"
        for key in ("rope_theta", "rotary_fraction"):
            out.pop(key, None)
    else:
        _nope_full_layers(out, types)
    if r.flag("mup_enabled"):
        out["embedding_scale"] = math.sqrt(out["d_model"])
    dense = r.size("num_dense_layers", minimum=0)
    if dense >= n:  # every layer dense: the MoE keys are read by no layer
        r.ignore("num_experts", "num_experts_per_tok", "num_shared_experts", "moe_intermediate_size")
        return out
    expert = r.size("moe_intermediate_size")
    moe: dict[str, Any] = {"num_experts": r.size("num_experts"), "experts_per_token": r.size("num_experts_per_tok"),
                           "expert_d_ff": expert, "router_bias": True}
    shared = r.size("num_shared_experts", minimum=0)
    _shared_mlp(moe, shared * expert)
    if dense:
        moe["first_dense_layers"] = dense
    out["moe"] = moe
    return out


# -- xIELU (Apertus) ---------------------------------------------------------------------

def _apertus(r: Raw) -> dict[str, Any]:
    """Apertus: Llama's attention (``attention_bias`` on q/k/v/o) with per-head q/k RMSNorms, always;
    an MLP of up and down projections only, never biased, around ``hidden_act``: xIELU by default, whose
    four learned scalars per layer (``alpha_p``, ``alpha_n`` and the buffers ``beta``, ``eps``, all in the
    checkpoint) are ``mlp/act``. The published config's ``qk_norm``, ``post_norm`` and ``mlp_bias`` are
    not read by transformers' Apertus, which always has the q/k norms, pre-norm layers and no MLP bias."""
    out = _decoder(r, gated=False)
    _attention_bias(r, out)
    out["qk_norm"] = "head"
    r.ignore("qk_norm", "post_norm", "mlp_bias")
    return out


# -- embedding_norm -----------------------------------------------------------------------------

def _bloom(r: Raw) -> dict[str, Any]:
    """BLOOM: ALiBi, one fused, biased ``query_key_value``, LayerNorms with bias (one over the token
    embeddings before layer 0, ``word_embeddings_layernorm``), a GELU MLP of 4 x hidden_size with
    biases, the head tied by default. ``n_embed`` is an alias of ``hidden_size`` (it wins when
    given), ``num_hidden_layers`` and ``num_attention_heads`` of ``n_layer`` and ``n_head`` (they
    win when present, a null included). Its configs give no context length (ALiBi needs none):
    2048, its training length, the default ``--seq``. ``apply_residual_connection_post_layernorm``
    and ``slow_but_exact`` change values only (the latter splits the dense matmuls by
    ``pretraining_tp``: the same FLOPs)."""
    r.ignore("apply_residual_connection_post_layernorm", "slow_but_exact")
    d = "n_embed" if r.has("n_embed") else "hidden_size"
    layers = "num_hidden_layers" if "num_hidden_layers" in r.raw else "n_layer"
    heads = "num_attention_heads" if "num_attention_heads" in r.raw else "n_head"
    r.ignore("hidden_size", "n_layer", "n_head")  # their aliases win when given
    out: dict[str, Any] = {
        "name": _name(r.raw, r.source), "vocab_size": r.size("vocab_size"), "context_length": 2048,
        "d_model": r.size(d), "n_layers": r.size(layers, maximum=MAX_LAYERS), "n_heads": r.size(heads),
        "tie_embeddings": r.flag("tie_word_embeddings"), "dtype": _dtype(r, "bf16")}
    _divides(r, out, heads, d)
    out.update(d_ff=4 * out["d_model"], activation="gelu", norm="layernorm", position="alibi", embedding_norm=True,
               qkv_bias=True, out_bias=True, mlp_bias=True)
    return out


# -- chunked attention (Llama 4) ----------------------------------------------------------------

def _llama4_text(r: Raw) -> dict[str, Any]:
    """Llama 4's language model (Scout, Maverick: ``text_config``). ``no_rope_layers`` (1: RoPE;
    default: every ``no_rope_layer_interval``-th layer NoPE); ``layer_types`` (default: the RoPE
    layers ``chunked_attention``, the NoPE ones ``full_attention``) with ``attention_chunk_size``;
    ``use_qk_norm``: a weightless L2 (RMS) norm of q and k on the RoPE layers (``qk_norm: l2``);
    ``attn_temperature_tuning`` on the NoPE layers (``floor_scale`` and ``attn_scale`` change no
    count). Dense layers ``intermediate_size_mlp`` wide; the ``moe_layers`` (default every
    ``interleave_moe_layer_step``-th) route each token to ``num_experts_per_tok`` of
    ``num_local_experts`` experts of ``intermediate_size`` and one shared expert as wide. Its top-k
    sigmoid routing is counted as llmcalc's softmax routing (elementwise, the same parameters and
    matmuls)."""
    out = _decoder(r, ff="intermediate_size_mlp")
    _attention_bias(r, out)
    n = out["n_layers"]
    r.ignore("floor_scale", "attn_scale", "router_aux_loss_coef", "router_jitter_noise", "output_router_logits")
    rope = r.get("no_rope_layers")
    interval = r.size("no_rope_layer_interval")
    if not rope:  # None or [] (transformers: `if self.no_rope_layers`)
        rope = [int((i + 1) % interval != 0) for i in range(n)]
    if not isinstance(rope, list) or len(rope) < n or any(type(v) not in (int, bool) or v not in (0, 1) for v in rope):
        r.fail("no_rope_layers", f"must list a value per layer ({n}), each 1 or 0, got {brief(rope)}")
    rope = [bool(v) for v in rope[:n]]
    if not all(rope):
        out["rope_layers"] = _cycle(rope)
    if r.flag("use_qk_norm") and any(rope):
        out["qk_norm"] = "l2"
    if r.flag("attn_temperature_tuning") and not all(rope):
        out["attn_temperature_tuning"] = True
    types = r.get("layer_types")
    if types is None:
        types = ["chunked_attention" if v else "full_attention" for v in rope]
    spans = {"full_attention": "full", "chunked_attention": "chunked"}
    if not isinstance(types, list) or len(types) != n or any(t not in spans for t in types):
        r.fail("layer_types", f"must list full_attention or chunked_attention per layer ({n}), got {brief(types)}")
    chunk = r.maybe_size("attention_chunk_size")
    if "chunked_attention" in types:
        if chunk is None:  # transformers' chunked mask fails without one
            r.fail("attention_chunk_size", "layer_types has chunked_attention layers but no attention_chunk_size")
        out.update(attention_chunk=chunk, layer_types=_cycle([spans[t] for t in types]))
    moe_layers, step = r.get("moe_layers"), r.size("interleave_moe_layer_step")
    if moe_layers is None:
        moe_layers = list(range(step - 1, n, step))
    elif moe_layers != list(range(step - 1, n, step)):
        step = next((s for s in range(1, n + 1) if moe_layers == list(range(s - 1, n, s))), 0)
        if moe_layers and not step:
            r.fail("moe_layers", f"must be every k-th layer (k - 1, 2k - 1, ...), got {brief(moe_layers)}")
    if not moe_layers:  # every layer dense
        r.ignore("num_local_experts", "num_experts_per_tok", "intermediate_size")
        return out
    out["moe"] = {"num_experts": r.size("num_local_experts"), "experts_per_token": r.size("num_experts_per_tok"),
                  "expert_d_ff": r.size("intermediate_size"), "shared_experts": 1}
    if step > 1:
        out["moe"]["step"] = step
    return out


# -- families the harness had left out: GPT-Neo, DBRX, OpenAI GPT, nanochat ---------------------

_NEO_SPANS = {"global": "full", "local": "sliding"}


def _gpt_neo(r: Raw) -> dict[str, Any]:
    """GPT-Neo: learned positions, q/k/v without bias and a biased out_proj, a biased MLP
    ``intermediate_size`` wide (None: 4 x hidden_size), LayerNorms, the head tied by default.
    ``attention_types`` (``[[["global", "local"], 12]]``: that list of types, 12 times) gives
    each layer's type and must expand to ``num_layers`` (its config class refuses the rest); a
    local layer's mask keeps key j for query i when i - window_size < j <= i, llmcalc's window.
    Its scores are not scaled (matmuls the same). ``num_hidden_layers`` and ``num_attention_heads``
    are aliases of ``num_layers`` and ``num_heads`` (they win when present). transformers' cache
    keeps every token of a local layer (the mask drops the old ones); llmcalc keeps the window."""
    layers = "num_hidden_layers" if "num_hidden_layers" in r.raw else "num_layers"
    heads = "num_attention_heads" if "num_attention_heads" in r.raw else "num_heads"
    # attention_layers: written from attention_types by its class, which overwrites a given one
    r.ignore("num_layers", "num_heads", "embed_dropout", "resid_dropout", "attention_layers")
    out = _base(r, layers=layers, heads=heads, dtype="fp32")
    _divides(r, out, heads, "hidden_size")
    types, spans = r.get("attention_types"), []
    types = [[["global", "local"], 12]] if types is None else types
    for item in types if isinstance(types, list) else [None]:
        kinds = item[0] if isinstance(item, list) and len(item) == 2 else None
        count = item[1] if kinds is not None else None
        if not isinstance(kinds, list) or any(k not in _NEO_SPANS for k in kinds) or type(count) is not int \
                or not 0 <= count <= MAX_LAYERS:
            r.fail("attention_types", f"must list [[types, count], ...] of global and local layers, "
                                      f"got {brief(types)}")
        spans += [_NEO_SPANS[k] for k in kinds] * count
        if len(spans) > MAX_LAYERS:
            break
    if len(spans) != out["n_layers"]:
        r.fail("attention_types", f"must expand to one type per layer ({out['n_layers']}), got {len(spans)}")
    if "sliding" in spans:
        out["sliding_window"] = r.size("window_size")
        if "full" in spans:
            out["layer_types"] = _cycle(spans)
    else:
        r.ignore("window_size")
    inner = r.maybe_size("intermediate_size")
    out.update(d_ff=4 * out["d_model"] if inner is None else inner, position="learned",
               activation=r.activation("activation_function", False), norm="layernorm",
               out_bias=True, mlp_bias=True)
    return out


def _subconfig(r: Raw, key: str, table: str) -> Raw:
    """A nested config (DBRX's ``attn_config``): left out or null, its class's defaults."""
    value = r.get(key)
    value = {} if value is None else value
    if not isinstance(value, dict):
        r.fail(key, f"must be a mapping, got {brief(value)}")
    _refuse_null(value, DEFAULTS[table], r.source, f"{key}.")
    return Raw(value, r.source, DEFAULTS[table], f"{key}.")


def _dbrx(r: Raw) -> dict[str, Any]:
    """DBRX: a fused ``Wqkv`` and ``out_proj`` without bias, ``attn_config.kv_n_heads`` K/V heads,
    LayerNorms without bias, every layer MoE: ``ffn_config``'s ``moe_num_experts`` GLU experts
    ``ffn_hidden_size`` wide (``ffn_act_fn.name``, SiLU by default), ``moe_top_k`` per token, a
    router without bias; the head untied (its class refuses it tied). The nested configs left out
    or null are their classes' defaults, but transformers' attention fails without
    ``attn_config.rope_theta``, no field of its class (transformers 5's RoPE reads the top-level
    ``rope_parameters``: the same count). The top-level ``num_key_value_heads`` is overwritten from
    kv_n_heads; a null ``max_seq_len`` sizes nothing (RoPE): 2048, its class's default. clip_qkv,
    the routing weights' normalization and jitter change values only."""
    r.false("tie_word_embeddings", "transformers' DBRX refuses a tied LM head")
    r.ignore("num_key_value_heads", "emb_pdrop")
    out = {"name": _name(r.raw, r.source), "vocab_size": r.size("vocab_size"),
           "context_length": r.maybe_size("max_seq_len") or 2048, "d_model": r.size("d_model"),
           "n_layers": r.size("n_layers", maximum=MAX_LAYERS), "n_heads": r.size("n_heads"), "dtype": _dtype(r, "bf16")}
    _divides(r, out, "n_heads", "d_model")
    attn, ffn = _subconfig(r, "attn_config", "dbrx_attn"), _subconfig(r, "ffn_config", "dbrx_ffn")
    if "rope_theta" not in attn.raw:
        attn.fail("rope_theta", "missing Hugging Face key (transformers' DBRX attention fails without it)")
    out["n_kv_heads"] = attn.size("kv_n_heads")
    act = ffn.get("ffn_act_fn")
    act = {} if act is None else act
    if not isinstance(act, dict):
        ffn.fail("ffn_act_fn", f"must be a mapping with a name, got {brief(act)}")
    name = Raw(act, r.source, {"name": Default("silu", False)}, "ffn_config.ffn_act_fn.")
    expert = ffn.size("ffn_hidden_size")
    out.update(d_ff=expert, activation=name.activation("name", True), norm="layernorm", norm_bias=False,
               moe={"num_experts": ffn.size("moe_num_experts"), "experts_per_token": ffn.size("moe_top_k")})
    _rope(r, out)
    if not r.has("rope_parameters") and not r.has("rope_theta") and attn.get("rope_theta") is not None:
        out["rope_theta"] = attn.get("rope_theta")  # DBRX's own base
    return out


_OPENAI_ACTIVATIONS = ("relu", "silu", "gelu", "swish")  # its ACT_FNS (gelu is gelu_new)


def _openai_gpt(r: Raw) -> dict[str, Any]:
    """OpenAI GPT (GPT-1): GPT-2's biased Conv1D layer with a LayerNorm after each residual sum
    (``ln_1(x + attn(x))``: post-norm) and none before the head, learned positions, an MLP
    4 x n_embd wide, the head tied by default. transformers keeps no KV cache for it."""
    r.ignore("summary_type", "summary_use_proj", "summary_activation", "summary_proj_to_labels")
    out = _base(r, d="n_embd", layers="n_layer", heads="n_head", context="n_positions", dtype="fp32")
    _divides(r, out, "n_head", "n_embd")
    if r.get("afn") not in _OPENAI_ACTIVATIONS:
        r.fail("afn", f"unsupported activation {brief(r.get('afn'))}; transformers' OpenAI GPT takes "
                      f"{', '.join(_OPENAI_ACTIVATIONS)}")
    out.update(d_ff=4 * out["d_model"], activation=r.activation("afn", False), norm="layernorm",
               norm_placement="post", final_norm=False, position="learned", qkv_bias=True, out_bias=True,
               mlp_bias=True)
    return out


def _nanochat(r: Raw) -> dict[str, Any]:
    """nanochat: Llama's attention (``attention_bias`` on q, k, v and o) with per-head q/k RMSNorms
    after RoPE, an MLP of fc1 and fc2 without bias (ReLU² by default), and every RMSNorm without a
    weight: before each branch, on q and k, and one module, ``model.norm``, over the embeddings
    before layer 0 and again before the head. ``final_logit_softcapping`` caps the logits (null:
    none)."""
    out = _decoder(r, gated=False)
    _attention_bias(r, out)
    out.update(qk_norm="head", norm_weight=False, embedding_norm=True)
    cap = r.get("final_logit_softcapping")
    if cap:
        out["final_logit_softcap"] = cap
    return out


# -- position_offset ----------------------------------------------------------------------------

def _opt(r: Raw) -> dict[str, Any]:
    """OPT: learned positions in a table of ``max_position_embeddings`` + 2 rows (position ``i`` reads row
    ``i + 2``), LayerNorms (parameter-less without ``layer_norm_elementwise_affine``) before each branch
    and a final one (unless ``_remove_final_layer_norm``), or after each branch and none at the end
    with ``do_layer_norm_before`` false (OPT-350m), biases on every linear with ``enable_bias``, the head
    tied by default. A ``word_embed_proj_dim`` other than ``hidden_size`` (OPT-350m: project_in and
    project_out around the layers) is refused: llmcalc has no such projection pair."""
    r.ignore("dropout", "layerdrop")
    out = _base(r, heads="num_attention_heads")
    _divides(r, out, "num_attention_heads", "hidden_size")  # OPTAttention refuses the rest
    proj = r.maybe_size("word_embed_proj_dim")  # None: hidden_size (OPTConfig's __post_init__)
    if proj is not None and proj != out["d_model"]:
        r.fail("word_embed_proj_dim", f"a projection of the embeddings ({proj}) to and from hidden_size "
                                      f"({out['d_model']}) is not modeled; only word_embed_proj_dim = hidden_size")
    bias = r.flag("enable_bias")
    out.update(d_ff=r.size("ffn_dim"), activation=r.activation("activation_function", False),
               norm="layernorm", position="learned", position_offset=2, qkv_bias=bias, out_bias=bias, mlp_bias=bias)
    if not r.flag("layer_norm_elementwise_affine"):
        out.update(norm_weight=False, norm_bias=False)
    if r.flag("do_layer_norm_before"):
        out["final_norm"] = not r.flag("_remove_final_layer_norm")
    else:
        r.ignore("_remove_final_layer_norm")  # no final norm either way
        out.update(norm_placement="post", final_norm=False)
    return out


def _biogpt(r: Raw) -> dict[str, Any]:
    """BioGPT: learned positions in a table of ``max_position_embeddings`` + 2 rows (position ``i``
    reads row ``i + 2``), token embeddings scaled by sqrt(hidden_size) with ``scale_embedding``,
    pre-norm LayerNorms with a final one, biases on every linear, the output projection tied by
    default."""
    r.ignore("layerdrop", "activation_dropout", "attention_probs_dropout_prob")
    out = _base(r)
    _divides(r, out, "num_attention_heads", "hidden_size")  # BioGptAttention refuses the rest
    out.update(d_ff=r.size("intermediate_size"), activation=r.activation("hidden_act", False), norm="layernorm",
               position="learned", position_offset=2, qkv_bias=True, out_bias=True, mlp_bias=True)
    if r.flag("scale_embedding"):
        out["embedding_scale"] = math.sqrt(out["d_model"])
    return out


# -- the Mamba-1 mixer ----------------------------------------------------------------------------

def _mamba(r: Raw) -> dict[str, Any]:
    """Mamba (and Falcon-Mamba, whose mixer norms dt, B and C by weightless RMS norms): every layer
    ``x + mixer(rmsnorm(x))``, no FFN, no positions, a final RMSNorm, the head tied by default. The
    mixer's width is ``expand * hidden_size``, its dt rank ``time_step_rank`` ("auto":
    ``ceil(hidden_size / 16)``). Its configs give no context length (the state needs none): 2048, the
    default ``--seq``. The activation must be SiLU (the mixer's); ``residual_in_fp32``, the time-step
    initialisation and the scan's implementation (``use_mambapy``, ``use_associative_scan``) change
    values and speed only."""
    r.ignore("residual_in_fp32", "time_step_scale", "time_step_min", "time_step_max", "time_step_init_scheme",
             "time_step_floor", "rescale_prenorm_residual", "use_mambapy", "use_associative_scan",
             "use_falcon_mambapy", "mixer_rms_eps")
    if r.get("hidden_act") not in ("silu", "swish"):
        r.fail("hidden_act", f"the mamba mixer is counted with SiLU, got {brief(r.get('hidden_act'))}")
    rank = r.get("time_step_rank")
    mamba: dict[str, Any] = {"d_state": r.size("state_size"), "d_conv": r.size("conv_kernel"),
                             "expand": r.size("expand"), "conv_bias": r.flag("use_conv_bias"),
                             "proj_bias": r.flag("use_bias")}
    if rank != "auto":
        mamba["dt_rank"] = r.size("time_step_rank")
    width = r.maybe_size("intermediate_size")  # written by transformers: expand * hidden_size, always
    if width is not None and width != mamba["expand"] * r.size("hidden_size"):
        r.fail("intermediate_size", f"must be expand * hidden_size ({mamba['expand'] * r.size('hidden_size')}), "
                                    f"got {width}")
    if r.raw.get("model_type") == "falcon_mamba":
        mamba["mixer_norms"] = True
    return {"name": _name(r.raw, r.source), "vocab_size": r.size("vocab_size"), "context_length": 2048,
            "d_model": r.size("hidden_size"), "n_layers": r.size("num_hidden_layers", maximum=MAX_LAYERS),
            "n_heads": 1, "d_ff": 0, "layer_types": ["mamba"], "mamba": mamba, "norm": "rmsnorm",
            "position": "none", "tie_embeddings": r.flag("tie_word_embeddings"), "dtype": _dtype(r, "bf16")}
# -- LFM2: gated short convolutions and attention ------------------------------------------------

def _lfm2_width(r: Raw) -> int:
    """The SwiGLU FFN's width as transformers' Lfm2MLP computes it: ``intermediate_size`` (a legacy
    ``block_ff_dim`` overrides it), with ``block_auto_adjust_ff_dim`` two thirds of it (int), then with a
    ``block_ffn_dim_multiplier`` that times it (int), rounded up to a multiple of ``block_multiple_of``."""
    key = "block_ff_dim" if r.has("block_ff_dim") else "intermediate_size"
    width = r.size(key)
    if r.flag("block_auto_adjust_ff_dim"):
        width = int(2 * width / 3)
        multiplier = r.get("block_ffn_dim_multiplier")
        if multiplier is not None:
            if isinstance(multiplier, bool) or not isinstance(multiplier, (int, float)) or multiplier <= 0:
                r.fail("block_ffn_dim_multiplier", f"must be a positive number, got {brief(multiplier)}")
            step = r.size("block_multiple_of")
            width = step * ((int(multiplier * width) + step - 1) // step)
        if width < 1:
            r.fail(key, f"leaves an FFN of width {width} after block_auto_adjust_ff_dim")
    return width


def _lfm2(r: Raw, ffn: int | None = None) -> dict[str, Any]:
    """LFM2 (LiquidAI/LFM2-*): gated short-convolution layers (``short_conv``: in_proj d -> 3d, a depthwise
    causal conv of ``conv_L_cache`` taps, out_proj; ``conv_bias`` puts biases on all three) and GQA
    attention layers with per-head RMS norms on q and k (``layer_types``: ``conv`` or ``full_attention``;
    absent, the attention layers are ``full_attn_idxs``, every layer when null), a SwiGLU FFN in every
    layer (its width: :func:`_lfm2_width`), pre-norm RMSNorms, a final one (``embedding_norm``), the head
    tied. The legacy ``tie_embedding`` and ``block_ff_dim`` override ``tie_word_embeddings`` and
    ``intermediate_size``, as in transformers. The other ``block_*`` and ``conv_*`` keys of Liquid's
    configs are not read by transformers. ``ffn``: the FFN width a family reads otherwise (LFM2-MoE)."""
    r.ignore("norm_eps", "full_attn_idxs")  # full_attn_idxs: read below where layer_types is absent
    out = _base(r)
    if r.has("tie_embedding"):
        out["tie_embeddings"] = r.flag("tie_embedding")
    kv, head_dim = r.size("num_key_value_heads"), r.maybe_size("head_dim")
    if out["n_heads"] % kv:
        r.fail("num_key_value_heads", f"must divide num_attention_heads ({out['n_heads']}), got {kv}")
    out.update(n_kv_heads=kv, d_ff=_lfm2_width(r) if ffn is None else ffn, activation="swiglu", norm="rmsnorm",
               qk_norm="head")
    if head_dim is not None:
        out["head_dim"] = head_dim
    elif out["d_model"] % out["n_heads"]:
        out["head_dim"] = out["d_model"] // out["n_heads"]
    _rope(r, out)
    n, kinds = out["n_layers"], r.get("layer_types")
    if kinds is None:
        idxs = r.get("full_attn_idxs")
        if idxs is not None and (not isinstance(idxs, list) or any(type(i) is not int for i in idxs)):
            r.fail("full_attn_idxs", f"must list layer indices, got {brief(idxs)}")
        kinds = ["full_attention" if idxs is None or i in idxs else "conv" for i in range(n)]
    names = {"conv": "short_conv", "full_attention": "full"}
    if not isinstance(kinds, list) or len(kinds) < n or any(k not in names for k in kinds[:n]):
        r.fail("layer_types", f"must list 'conv' or 'full_attention' for each of the {n} layers, got {brief(kinds)}")
    types = [names[k] for k in kinds[:n]]
    if "short_conv" in types:
        out["short_conv"] = {"d_conv": r.size("conv_L_cache"), "bias": r.flag("conv_bias")}
    out["layer_types"] = _cycle(types)
    if "full" not in types:  # no layer attends: its positions act nowhere
        for key in ("rope_theta", "rotary_fraction", "n_kv_heads", "head_dim", "qk_norm"):
            out.pop(key, None)
        out["position"] = "none"
    return out


def _lfm2_moe(r: Raw) -> dict[str, Any]:
    """LFM2-MoE (LiquidAI/LFM2-8B-A1B): LFM2's layers, ``layer_types`` required (transformers reads it per
    layer and fails without it), the first ``num_dense_layers`` with a SwiGLU FFN ``intermediate_size``
    wide as given (no ``block_*`` adjustment), the others ``num_experts`` SwiGLU experts of
    ``moe_intermediate_size``, the top ``num_experts_per_tok`` by a sigmoid router without bias whose
    ``expert_bias`` (with ``use_expert_bias``: a buffer the checkpoint holds, one value per expert) steers
    the choice: ``router_bias``. ``routed_scaling_factor`` and ``norm_topk_prob`` scale values only."""
    if r.get("layer_types") is None:
        r.fail("layer_types", "is needed: transformers' LFM2-MoE reads each layer's type from it")
    r.ignore("routed_scaling_factor", "norm_topk_prob", "output_router_logits")
    out = _lfm2(r, r.size("intermediate_size"))
    n, dense = out["n_layers"], r.size("num_dense_layers", minimum=0)
    if dense >= n:  # every layer dense: the MoE keys are read by no layer
        r.ignore("num_experts", "num_experts_per_tok", "moe_intermediate_size", "use_expert_bias")
        return out
    out["moe"] = {"num_experts": r.size("num_experts"), "experts_per_token": r.size("num_experts_per_tok"),
                  "expert_d_ff": r.size("moe_intermediate_size"), "router_bias": r.flag("use_expert_bias")}
    if dense:
        out["moe"]["first_dense_layers"] = dense
    return out


# -- sub_norms (BitNet) -------------------------------------------------------------------------

def _bitnet(r: Raw) -> dict[str, Any]:
    """BitNet b1.58: Llama's attention and gated MLP (``relu2`` on the gate: ``sqreglu``) with an
    RMSNorm over the merged heads before o_proj (``attn_sub_norm``) and one over the MLP's product
    before down_proj (``ffn_sub_norm``): ``sub_norms``. transformers sizes ``attn_sub_norm`` hidden_size
    and runs it on the heads' h * head_dim outputs, so a head_dim (read with getattr) that makes them
    differ is refused. Parameters are the model transformers builds from the config: every linear
    unpacked, one weight per entry; a ``quantization_config`` (BitNet's packed ternary weights) is
    refused by the quantization reader, as a format llmcalc does not size."""
    out = _decoder(r)
    _attention_bias(r, out)
    if out["n_heads"] * out.get("head_dim", out["d_model"] // out["n_heads"]) != out["d_model"]:
        r.fail("head_dim" if "head_dim" in out else "num_attention_heads",
               f"the heads must span hidden_size ({out['d_model']}): transformers' attn_sub_norm is hidden_size wide")
    out["sub_norms"] = True
    return out


# -- Jamba: attention, Mamba-1 and MoE layers -------------------------------------------------------

def _jamba(r: Raw) -> dict[str, Any]:
    """Jamba: layer ``i`` attends when ``i % attn_layer_period == attn_layer_offset`` (GQA, no positions),
    else is a Mamba-1 mixer whose RMS norms on dt, B and C have weights (``mixer_norms: weighted``); its
    FFN is MoE when ``i % expert_layer_period == expert_layer_offset`` (and ``num_experts`` > 1), else a
    dense SwiGLU MLP of the same width. Pre-norm RMSNorms, a final one, the head untied by default.
    llmcalc's MoE layers are those with ``(i + 1) % step == 0``: an ``expert_layer_offset`` other than
    ``expert_layer_period - 1`` is refused. The mixer's activation is ``hidden_act`` too: SiLU only."""
    r.ignore("use_mamba_kernels", "use_mambapy", "use_associative_scan", "num_logits_to_keep")
    if r.get("hidden_act") not in ("silu", "swish"):
        r.fail("hidden_act", f"the mamba mixer is counted with SiLU, got {brief(r.get('hidden_act'))}")
    out = _base(r)
    head_dim = r.maybe_size("head_dim")
    if out["d_model"] % out["n_heads"] and head_dim is None:  # JambaAttention floor-divides
        head_dim = out["d_model"] // out["n_heads"]
    out.update(n_kv_heads=r.size("num_key_value_heads"), d_ff=r.size("intermediate_size"),
               activation=r.activation("hidden_act", True), norm="rmsnorm", position="none")
    if head_dim is not None:
        out["head_dim"] = head_dim
    period, offset = r.size("attn_layer_period"), r.size("attn_layer_offset", minimum=0)
    if offset >= period:
        r.fail("attn_layer_offset", f"must be smaller than attn_layer_period ({period}), got {offset}")
    types = ["full" if i == offset else "mamba" for i in range(period)]
    out["layer_types"] = types if "mamba" in types else ["full"]
    rank = r.get("mamba_dt_rank")
    mamba: dict[str, Any] = {"d_state": r.size("mamba_d_state"), "d_conv": r.size("mamba_d_conv"),
                             "expand": r.size("mamba_expand"), "conv_bias": r.flag("mamba_conv_bias"),
                             "proj_bias": r.flag("mamba_proj_bias"), "mixer_norms": "weighted"}
    if rank != "auto":
        mamba["dt_rank"] = r.size("mamba_dt_rank")
    if any(types[i % period] == "mamba" for i in range(out["n_layers"])):
        out["mamba"] = mamba
    experts, step = _first(r, "num_local_experts", "num_experts"), r.size("expert_layer_period")
    first = r.size("expert_layer_offset", minimum=0)
    top_k = r.size("num_experts_per_tok")
    if first >= step:
        r.fail("expert_layer_offset", f"must be smaller than expert_layer_period ({step}), got {first}")
    if experts > 1 and out["n_layers"] > first:  # some layer holds experts
        if first != step - 1:
            r.fail("expert_layer_offset", f"MoE layers i % {step} == {first} are not modeled: llmcalc's MoE "
                                          f"layers are every expert_layer_period-th, offset expert_layer_period - 1 "
                                          f"({step - 1})")
        out["moe"] = {"num_experts": experts, "experts_per_token": top_k, **({"step": step} if step != 1 else {})}
    return out


# -- the Mamba-2 mixer ----------------------------------------------------------------------------

def _mamba2_mixer(r: Raw, heads: str, head_dim: str, state: str, conv: str, groups: str, conv_bias: str,
                  proj_bias: str, chunk: str, expand: str | None = None) -> dict[str, Any]:
    """The ``mamba2`` mapping from a family's key names; with ``expand``, the family's head dim may be
    "auto": ``expand * hidden_size / heads``."""
    H = r.size(heads)
    P = r.get(head_dim)
    if expand is not None and P == "auto":
        width = r.size(expand) * r.size("hidden_size")
        if width % H:
            r.fail(heads, f"must divide {expand} * hidden_size ({width}), got {H}")
        P = width // H
    else:
        P = r.size(head_dim)
    return {"d_state": r.size(state), "d_conv": r.size(conv), "n_heads": H, "head_dim": P,
            "n_groups": r.size(groups), "conv_bias": r.flag(conv_bias), "proj_bias": r.flag(proj_bias),
            "chunk_size": r.size(chunk)}


def _mamba2(r: Raw) -> dict[str, Any]:
    """Mamba-2 (Mamba2Config: state-spaces/mamba2-*, Mamba-Codestral): every layer ``x + mixer(rmsnorm(x))``,
    no FFN, no positions, a final RMSNorm. The mixer's width is ``num_heads * head_dim`` (transformers
    requires it to be ``expand * hidden_size``); ``time_step_rank`` names no weight in Mamba-2 (dt comes
    from in_proj). No context length in its configs: 2048, the default ``--seq``. ``time_step_*``,
    ``residual_in_fp32``, ``rescale_prenorm_residual`` and the norms' epsilon change values only."""
    r.ignore("layer_norm_epsilon", "time_step_rank", "time_step_min", "time_step_max", "time_step_floor",
             "time_step_limit", "rescale_prenorm_residual", "residual_in_fp32")
    if r.get("hidden_act") not in ("silu", "swish"):
        r.fail("hidden_act", f"the mamba2 mixer is counted with SiLU, got {brief(r.get('hidden_act'))}")
    mixer = _mamba2_mixer(r, "num_heads", "head_dim", "state_size", "conv_kernel", "n_groups", "use_conv_bias",
                          "use_bias", "chunk_size")
    width = mixer["n_heads"] * mixer["head_dim"]
    if width != r.size("expand") * r.size("hidden_size"):
        r.fail("num_heads", f"num_heads * head_dim ({width}) must be expand * hidden_size "
                            f"({r.size('expand') * r.size('hidden_size')})")
    return {"name": _name(r.raw, r.source), "vocab_size": r.size("vocab_size"), "context_length": 2048,
            "d_model": r.size("hidden_size"), "n_layers": r.size("num_hidden_layers", maximum=MAX_LAYERS),
            "n_heads": 1, "d_ff": 0, "layer_types": ["mamba2"], "mamba2": mixer, "norm": "rmsnorm",
            "position": "none", "tie_embeddings": r.flag("tie_word_embeddings"), "dtype": _dtype(r, "bf16")}


def _hybrid_mamba2(r: Raw, out: dict[str, Any], types: list[str]) -> None:
    """A hybrid's ``mamba2`` mapping (the ``mamba_*`` keys) and its layer types (``types``: each layer's,
    ``full`` or ``mamba2``); with no attention layer, no positions."""
    mixer = _mamba2_mixer(r, "mamba_n_heads", "mamba_d_head", "mamba_d_state", "mamba_d_conv", "mamba_n_groups",
                          "mamba_conv_bias", "mamba_proj_bias", "mamba_chunk_size", expand="mamba_expand")
    width = r.size("mamba_expand") * out["d_model"]
    if mixer["n_heads"] * mixer["head_dim"] != width:
        r.fail("mamba_d_head", f"mamba_n_heads * mamba_d_head ({mixer['n_heads'] * mixer['head_dim']}) must be "
                               f"mamba_expand * hidden_size ({width})")
    out["mamba2"], out["layer_types"] = mixer, _cycle(types)
    if "full" not in types:  # no layer attends: its positions act nowhere
        for key in ("rope_theta", "rotary_fraction", "n_kv_heads", "head_dim"):
            out.pop(key, None)
        out["position"] = "none"


def _bamba(r: Raw) -> dict[str, Any]:
    """Bamba (ibm-ai-platform/Bamba-9B): Mamba-2 layers and attention layers (``attn_layer_indices``),
    a SwiGLU MLP in every layer, RoPE on half of each head (transformers hard-codes
    ``partial_rotary_factor`` 0.5). An index of ``attn_layer_indices`` past the depth names no layer,
    as in transformers. ``z_loss_coefficient``, ``num_logits_to_keep`` and ``time_step_limit``
    change values only."""
    r.ignore("num_logits_to_keep", "z_loss_coefficient", "time_step_limit")
    out = _llama(r)
    n, attn = out["n_layers"], r.get("attn_layer_indices") or []
    if not isinstance(attn, list) or any(type(i) is not int for i in attn):
        r.fail("attn_layer_indices", f"must list layer indices, got {brief(attn)}")
    # as transformers' layers_block_type: layer i attends when i is listed; an index outside
    # 0..num_hidden_layers-1 names no layer (a checkpoint's list read at a smaller depth)
    _hybrid_mamba2(r, out, ["full" if i in attn else "mamba2" for i in range(n)])
    return out


def _granitemoehybrid(r: Raw) -> dict[str, Any]:
    """Granite 4.0-H (ibm-granite/granite-4.0-h-*): Mamba-2 layers and attention layers (``layer_types``:
    ``mamba`` or ``attention``), every layer MoE (``num_local_experts``) with a shared SwiGLU MLP
    ``shared_intermediate_size`` wide; positions from ``position_embedding_type`` (``rope``, else none:
    Granite 4.0-H is NoPE). Granite's multipliers scale values only."""
    r.ignore("residual_multiplier", "attention_multiplier", "logits_scaling", "time_step_limit",
             "output_router_logits", "router_aux_loss_coef")
    out = _granite(r)
    out.pop("mlp_bias")
    if r.size("num_local_experts", minimum=0) == 0:
        r.fail("num_local_experts", "0 (a dense Granite 4.0-H, its shared MLP alone) is not mapped yet")
    out["moe"] = {"num_experts": r.size("num_local_experts"), "experts_per_token": r.size("num_experts_per_tok"),
                  "shared_experts": 1, "shared_expert_d_ff": r.size("shared_intermediate_size")}
    n, kinds = out["n_layers"], r.get("layer_types")
    kinds = ["mamba"] * n if kinds is None else kinds
    names = {"mamba": "mamba2", "linear_attention": "mamba2", "attention": "full", "full_attention": "full"}
    if not isinstance(kinds, list) or len(kinds) != n or any(k not in names for k in kinds):
        r.fail("layer_types", f"must list 'mamba' or 'attention' (transformers 5: 'linear_attention' or "
                              f"'full_attention') for each of the {n} layers, got {brief(kinds)}")
    if "attention" not in kinds and "full_attention" not in kinds:  # layer_types absent: every layer Mamba-2
        r.fail("layer_types", "no attention layer: transformers' GraniteMoeHybrid model cannot run a cache "
                              "without one (it reads the cached length from an attention layer)")
    if r.get("position_embedding_type") != "rope":
        for key in ("rope_theta", "rotary_fraction"):
            out.pop(key, None)
        out["position"] = "none"
    _hybrid_mamba2(r, out, [names[k] for k in kinds])
    return out


MAPPERS: dict[str, Callable[[Raw], dict[str, Any]]] = {
    "gpt2": _gpt2, "gpt_neox": _gpt_neox, "gptj": _gptj, "falcon": _falcon, "phi": _phi, "phi3": _mistral,
    "llama": _llama, "mistral": _mistral, "mixtral": _mixtral, "qwen2": _qwen2, "qwen2_moe": _qwen2_moe,
    "qwen3": _qwen3, "qwen3_moe": _qwen3_moe, "gemma": _gemma, "gemma2": _gemma2, "gemma3_text": _gemma3,
    "olmo": _olmo, "olmo2": _olmo2, "stablelm": _stablelm, "starcoder2": _starcoder2, "granite": _granite,
    "smollm3": _smollm3, "deepseek_v2": _deepseek, "deepseek_v3": _deepseek, "gpt_oss": _gpt_oss,
    "glm4": _glm4, "glm": _glm, "ernie4_5": _ernie4_5, "hunyuan_v1_dense": _hunyuan_dense, "seed_oss": _seed_oss,
    "exaone4": _exaone4, "olmo3": _olmo3, "helium": _helium, "arcee": _arcee, "internlm3": _internlm3,
    "ministral": _ministral, "ministral3": _ministral3, "iquestcoder": _iquestcoder, "jais2": _jais2, "cwm": _cwm,
    # older decoders, and Cohere
    "gpt_bigcode": _gpt_bigcode, "codegen": _codegen, "persimmon": _persimmon, "nemotron": _nemotron,
    "cohere": _cohere, "cohere2": _cohere2, "mpt": _mpt, "xglm": _xglm,
    # mixture-of-experts decoders
    "glm4_moe": _glm4_moe, "olmoe": _olmoe, "granitemoe": _granitemoe, "granitemoeshared": _granitemoe,
    "phimoe": _phimoe, "ernie4_5_moe": _ernie4_5_moe, "hunyuan_v1_moe": _hunyuan_v1_moe,
    "minimax_m2": _minimax_m2, "dots1": _dots1, "flex_olmo": _flex_olmo,
    # batch A
    "gpt-sw3": _gpt2, "granite_swa": _granite_swa, "granitemoe_swa": _granite_swa, "vaultgemma": _vaultgemma,
    "mellum": _mellum, "hyperclovax": _hyperclovax, "youtu": _youtu, "solar_open": _solar_open,
    "cohere2_moe": _cohere2_moe, "exaone_moe": _exaone_moe, "glm4_moe_lite": _glm4_moe_lite, "minicpm3": _minicpm3,
    # batch B
    "flint": _flint, "kolibri1": _kolibri1, "cohere_compass_text": _cohere_compass, "aria_text": _aria_text,
    "hy_v3": _hy_v3, "ctrl": _ctrl,
    # the attention output gate
    "afmoe": _afmoe,
    # xIELU
    "apertus": _apertus,
    # embedding_norm
    "bloom": _bloom,
    # chunked attention
    "llama4_text": _llama4_text,
    # the harness had left them out
    "gpt_neo": _gpt_neo, "dbrx": _dbrx, "openai-gpt": _openai_gpt, "nanochat": _nanochat,
    # position_offset
    "opt": _opt, "biogpt": _biogpt,
    # the Mamba-1 mixer
    "mamba": _mamba, "falcon_mamba": _mamba,
    # the Mamba-2 mixer
    "mamba2": _mamba2, "bamba": _bamba, "granitemoehybrid": _granitemoehybrid,
    # sub_norms (BitNet)
    "bitnet": _bitnet,
    # attention, Mamba-1 and MoE layers
    "jamba": _jamba,
    # gated short convolutions (LFM2)
    "lfm2": _lfm2, "lfm2_moe": _lfm2_moe,
}
# REJECTED keys a family's mapper reads (chunked attention: Llama 4)
_READS_REJECTED: dict[str, tuple[str, ...]] = {"llama4_text": ("attention_chunk_size",)}
_READS_REJECTED.update({"bamba": ("attn_layer_indices", "mamba_d_state"),
                        "granitemoehybrid": ("layers_block_type", "mamba_d_state")})
_READS_REJECTED["jamba"] = ("attn_layer_period", "mamba_d_state")


# transformers' token embeddings without a padding_idx; torch's Embedding refuses the others' one
# outside the vocabulary
_UNPADDED = frozenset({"gpt2", "gptj", "gpt_neox", "falcon", "gpt_bigcode", "codegen", "mpt", "gpt-sw3",
                       "ctrl", "bloom", "gpt_neo", "openai-gpt"})


def _padding(r: Raw, vocab: int) -> None:
    pad = r.get("pad_token_id")
    if isinstance(pad, int) and not -vocab <= pad < vocab:
        r.fail("pad_token_id", f"must be a token of the vocabulary (vocab_size {vocab:,}), got {pad:,}")


_NULLABLE = Default(None, True)  # a key no table lists: transformers takes None or does not read it


def _qwen_vl_text(r: Raw) -> dict[str, Any]:
    """Qwen-VL's language model: Qwen2's, with M-RoPE, whose ``mrope_section`` splits half of each
    head's dimensions over time, height and width (a section that does not is a model transformers
    builds but cannot run)."""
    out = _qwen2(r)
    key = "rope_parameters" if r.has("rope_parameters") else "rope_scaling"
    section = (r.get(key) or {}).get("mrope_section", [16, 24, 24])  # transformers' default
    half = (out.get("head_dim") or out["d_model"] // out["n_heads"]) // 2
    if not isinstance(section, list) or not all(type(n) is int for n in section) or sum(section) != half:
        r.fail(f"{key}.mrope_section", f"must add up to half a head ({half}), got {brief(section)}")
    return out


# language models that exist only inside a multimodal checkpoint (Qwen-VL's)
_INSIDE: dict[str, Callable[[Raw], dict[str, Any]]] = {"qwen2_vl_text": _qwen_vl_text,
                                                         "qwen2_5_vl_text": _qwen_vl_text}


def _refuse_null(raw: dict[str, Any], defaults: dict[str, Default], source: str, prefix: str = "") -> None:
    """A null transformers refuses: typed without None, or its code fails on None."""
    null = next((key for key, value in raw.items() if value is None and not defaults.get(key, _NULLABLE).nullable),
                None)
    if null is not None:
        raise ConfigError("is null, but a value is needed", source, prefix + null)


def _multimodal(raw: dict[str, Any], source: str, family: Family) -> tuple[dict[str, Any], Raw]:
    """A multimodal checkpoint (:mod:`.hf_vision`): the language model read by the mapper of its own
    model_type, from ``text_config`` or (Qwen-VL's layout) the top-level keys, with its class's
    defaults; the vision tower and projector from ``vision_config`` and the top level; the LM head
    tied as the top level says (transformers ties by the top-level flag; Llama 4 by text_config's)."""
    kind = raw["model_type"]
    defaults, own = DEFAULTS[kind], SUBCONFIGS.get(kind, {})
    _refuse_null(raw, defaults, source)
    top = Raw(raw, source, defaults)
    if "text_config" in raw or not family.flat:
        text, prefix = top.get("text_config"), "text_config."
        text = own.get("text_config", {}) if text is None else text
        if not isinstance(text, dict):
            top.fail("text_config", f"must be a mapping, got {brief(text)}")
        text = {"model_type": family.text, **text}
    else:  # the language model's keys at the top level
        text, prefix = {k: v for k, v in raw.items() if k not in defaults and k != "vision_config"}, ""
        top.ignore(*text)
        text["model_type"] = family.text
    try:
        out, _ = _read(text, source, inside=True)
    except ConfigError as exc:  # a key of text_config
        raise ConfigError(exc.message, source, prefix + (exc.key or "model_type"), exc.line) from None
    vision = top.get("vision_config")
    vision = own.get("vision_config", {}) if vision is None else vision
    if not isinstance(vision, dict):
        top.fail("vision_config", f"must be a mapping, got {brief(vision)}")
    if family.vision_type is not None and vision.get("model_type", family.vision_type) != family.vision_type:
        top.fail("vision_config.model_type", f"llmcalc reads {family.vision_type} towers for {kind}, "
                                             f"got {brief(vision['model_type'])}")
    _refuse_null(vision, DEFAULTS[family.vision], source, "vision_config.")
    out["vision"] = family.tower(Raw(vision, source, DEFAULTS[family.vision], "vision_config."), top, out["d_model"])
    out["name"] = _name(raw, source)
    if family.text_ties:  # Llama 4: the language model's own flag (read with text_config)
        top.ignore("tie_word_embeddings")
    else:
        out["tie_embeddings"] = top.flag("tie_word_embeddings")
    if top.has("dtype") or top.has("torch_dtype"):
        out["dtype"] = _dtype(top, out["dtype"])
    if top.get("quantization_config") not in (None, {}):
        out.update(_quantization(top))
    return out, top


def _read(raw: dict[str, Any], source: str, inside: bool = False) -> tuple[dict[str, Any], Raw]:
    """llmcalc's keys for ``raw`` and what was read of it; ``inside``: the language model of a
    multimodal checkpoint."""
    kind = raw.get("model_type")
    if not isinstance(kind, str):
        raise ConfigError(f"must be a string, got {brief(kind)}", source, "model_type")
    if kind in MULTIMODAL and not inside:
        return _multimodal(raw, source, MULTIMODAL[kind])
    mapper = MAPPERS.get(kind) or (_INSIDE.get(kind) if inside else None)
    if mapper is None:  # `llmcalc params` may count it through transformers (analysis.verify.fallback)
        raise UnmappedModelType(f"unsupported Hugging Face model_type {brief(kind)}; the {len(MAPPERS)} supported "
                                "are listed in the docs (Hugging Face configs, Supported model types)", source, raw,
                                _name(raw, source))
    for key, why in REJECTED.items():
        if raw.get(key) not in (None, {}, []) and key not in _READS_REJECTED.get(kind, ()):
            raise ConfigError(f"not supported: {why}", source, key)
    nested = _nested_quantization(raw)
    if nested is not None:
        path, value = nested
        raise ConfigError(_quant_method(value) + "not supported inside a nested config; move it to the top "
                          "level, or delete it to count the dequantized model", source, path)
    defaults = DEFAULTS[kind]
    _refuse_null(raw, defaults, source)
    r = Raw(raw, source, defaults)
    out = mapper(r)
    if kind not in _UNPADDED:
        _padding(r, out["vocab_size"])
    if r.get("quantization_config") not in (None, {}):
        out.update(_quantization(r))
    return out, r


# The last part of a module name in a skip list -> the breakdown key it names (None: embeddings,
# never quantized). A name for one layer only (``model.layers.3.mlp``) is refused: llmcalc's
# formats apply to every layer alike.
_MODULES = {"lm_head": "lm_head", "embed_tokens": None, "wte": None, "wpe": None,
            "self_attn": "attention", "attn": "attention", "attention": "attention",
            "q_proj": "attention/q", "k_proj": "attention/k", "v_proj": "attention/v", "o_proj": "attention/o",
            "q_a_proj": "attention/q_a", "q_b_proj": "attention/q_b", "kv_a_proj_with_mqa": "attention/kv_a",
            "kv_b_proj": "attention/kv_b", "mlp": "mlp", "up_proj": "mlp/up", "gate_proj": "mlp/gate",
            "down_proj": "mlp/down", "gate": "moe/router", "router": "moe/router", "experts": "moe/experts",
            "shared_expert": "moe/shared_experts", "shared_experts": "moe/shared_experts",
            "shared_expert_gate": "moe/shared_expert_gate"}


def _skip(r: Raw, key: str, names: Any) -> list[str] | None:
    if names is None:
        return None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        r.fail(key, f"must be a list of module names, got {brief(names)}")
    out = []
    for name in names:
        parts = name.split(".")
        if any(p.isdigit() for p in parts):
            r.fail(key, f"{brief(name)} names one layer's module; llmcalc quantizes every layer alike")
        if parts[-1] not in _MODULES:
            r.fail(key, f"cannot map module {brief(name)} to a llmcalc component (its last name must be one of "
                        f"{', '.join(_MODULES)})")
        if parts[-2:-1] in (["self_attn"], ["attn"], ["attention"]) and parts[-1] == "gate_proj":
            out.append("attention/gate")  # AFMoE's attention output gate, not the MLP's gate
        elif _MODULES[parts[-1]] is not None:
            out.append(_MODULES[parts[-1]])
    return list(dict.fromkeys(out))


def _quantization(r: Raw) -> dict[str, Any]:
    """``dtype`` (a format of analysis.quant), ``quant_group_size`` and ``quant_skip`` for a
    ``quantization_config`` (bitsandbytes, GPTQ, AWQ, FP8, MXFP4); ConfigError for other methods
    and for values of the wrong type (the string "false" is not false)."""
    key, q = "quantization_config", r.get("quantization_config")
    if not isinstance(q, dict):
        r.fail(key, f"must be a mapping, got {brief(q)}")

    def flag(name: str) -> bool:
        value = q.get(name, False)
        if not isinstance(value, bool):
            r.fail(f"{key}.{name}", f"must be true or false, got {brief(value)}")
        return value

    method = q.get("quant_method")
    skip_key = "llm_int8_skip_modules" if method == "bitsandbytes" else "modules_to_not_convert"
    out: dict[str, Any] = {"quant_skip": _skip(r, f"{key}.{skip_key}", q.get(skip_key))}
    if method == "bitsandbytes":
        four, eight = flag("load_in_4bit"), flag("load_in_8bit")
        if four == eight:
            r.fail(key, "bitsandbytes needs exactly one of load_in_4bit and load_in_8bit true")
        kind = q.get("bnb_4bit_quant_type", "fp4")  # BitsAndBytesConfig's default
        if four and kind not in ("nf4", "fp4"):
            r.fail(f"{key}.bnb_4bit_quant_type", f"must be nf4 or fp4, got {brief(kind)}")
        out["dtype"] = kind + ("-dq" if flag("bnb_4bit_use_double_quant") else "") if four else "llm-int8"
    elif method in ("gptq", "awq"):
        bits = q.get("bits", q.get("w_bit", 4))
        if type(bits) is not int or (method, bits) not in (("gptq", 4), ("gptq", 8), ("awq", 4)):
            sizes = "4 or 8" if method == "gptq" else "4"
            r.fail(f"{key}.bits", f"{method} stores {sizes} bits here, got {brief(bits)}")
        out["dtype"] = f"{method}-int{bits}"
        group = q.get("group_size", q.get("q_group_size"))
        if group is not None:  # -1: one group over the whole input (per-channel scales)
            if type(group) is not int or not (group == -1 or 1 <= group <= MAX_INT):
                r.fail(f"{key}.group_size", f"must be a positive integer or -1, got {brief(group)}")
            out["quant_group_size"] = MAX_INT if group == -1 else group
    elif method == "fp8":  # without blocks: one scale per tensor, as vLLM's fp8 checkpoints
        block = q.get("weight_block_size")
        if block is None:
            out["dtype"] = "fp8-tensor"
        elif isinstance(block, list) and len(block) == 2 and block[0] == block[1] and type(block[0]) is int \
                and 0 < block[0] <= MAX_INT:
            out.update(dtype="fp8-block", quant_group_size=block[0])
        else:
            r.fail(f"{key}.weight_block_size", f"must be a square block [n, n], got {brief(block)}")
    elif method == "fbgemm_fp8":
        out["dtype"] = "fp8-channel"
    elif method == "mxfp4":
        out["dtype"] = "mxfp4"
    else:
        r.fail(f"{key}.quant_method", f"{brief(method)} is not a format llmcalc sizes (bitsandbytes 4 or 8 bit, "
                                      "gptq, awq, fp8, fbgemm_fp8, mxfp4)")
    return {k: v for k, v in out.items() if v is not None}


def _quant_method(value: Any) -> str:
    method = value.get("quant_method") if isinstance(value, dict) else None
    return f"{brief(method)}: " if method else ""


def _nested_quantization(raw: dict[str, Any]) -> tuple[str, Any] | None:
    """The dotted key and value of a ``quantization_config`` inside any mapping of the config
    (``text_config``, ``rope_parameters``, ...): quantized storage wherever it is declared."""
    stack: list[tuple[str, Any]] = [(k, v) for k, v in raw.items() if isinstance(v, (dict, list))]
    while stack:
        path, value = stack.pop()
        items = value.items() if isinstance(value, dict) else ((f"{i}", v) for i, v in enumerate(value))
        for key, item in items:
            if key == "quantization_config" and item not in (None, {}, []):
                return f"{path}.{key}", item
            if isinstance(item, (dict, list)):
                stack.append((f"{path}.{key}", item))
    return None


def from_hf_config(raw: dict[str, Any], source: str) -> dict[str, Any]:
    """llmcalc config keys for a Hugging Face config (or ConfigError naming the field)."""
    return _read(raw, source)[0]


def unclassified(raw: dict[str, Any], source: str = "config.json") -> list[str]:
    """Keys of ``raw`` no rule covers: neither read by its family's mapper nor listed as ignored."""
    _, r = _read(raw, source)
    return sorted(k for k in raw if k not in r.read and k not in IGNORED and k not in REJECTED)


__all__ = ["MAPPERS", "IGNORED", "REJECTED", "from_hf_config", "unclassified"]
