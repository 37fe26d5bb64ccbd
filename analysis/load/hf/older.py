"""Older decoders still served, and Cohere: GPT-BigCode, CodeGen, Persimmon, Nemotron, Command R (cohere)
and R7B (cohere2), MPT, XGLM, GPT-Neo, DBRX, OpenAI GPT, nanochat, OPT, BioGPT."""

from __future__ import annotations

import math
from typing import Any, Callable

from ...errors import brief
from ...model.sizes import MAX_LAYERS
from .common import (
    _attention_bias,
    _base,
    _cycle,
    _decoder,
    _divides,
    _dtype,
    _layer_types,
    _name,
    _nope_full_layers,
    _refuse_null,
    _rope,
    _window,
)
from .core import _gpt2, _gptj
from .defaults import DEFAULTS, Default
from .raw import Raw


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


MAPPERS: dict[str, Callable[[Raw], dict[str, Any]]] = {
    "gpt_bigcode": _gpt_bigcode, "codegen": _codegen, "persimmon": _persimmon, "nemotron": _nemotron,
    "cohere": _cohere, "cohere2": _cohere2, "mpt": _mpt, "xglm": _xglm, "gpt_neo": _gpt_neo, "dbrx": _dbrx,
    "openai-gpt": _openai_gpt, "nanochat": _nanochat, "opt": _opt, "biogpt": _biogpt,
}
