"""The families llmcalc read first: GPT-2 (and GPT-SW3), GPT-NeoX, GPT-J, Falcon, Phi, Phi-3, Llama, Mistral,
Mixtral, Qwen 2 and 3 with their MoE, Gemma 1 to 3, OLMo 1 and 2, StableLM, StarCoder2, Granite, SmolLM3,
DeepSeek V2 and V3, GPT-OSS; and Qwen-VL's language model (read inside its multimodal checkpoint)."""

from __future__ import annotations

import math
from typing import Any, Callable

from ...errors import brief
from .common import (
    _NULLABLE,
    _attention_bias,
    _base,
    _cycle,
    _decoder,
    _divides,
    _every_layer_window,
    _layer_types,
    _rope,
    _window,
    _windows,
)
from .raw import Raw


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


def _mla(r: Raw, derive_v: bool = False, rope: bool = True, context: str = "max_position_embeddings",
         layers: str = "num_hidden_layers", d_ff: int | None = None, kv_heads: bool = True) -> dict[str, Any]:
    """DeepSeek's multi-head latent attention (no biases: ``attention_bias`` refused) on a pre-norm
    RMSNorm layer with a gated MLP ``intermediate_size`` wide (DeepSeek-V2/V3, Youtu, MiniCPM3,
    GLM-4.7-Flash). ``derive_v``: a null ``v_head_dim`` is hidden_size // heads (MiniCPM3), else
    it is needed; without ``rope`` no layer rotates (Kimi Linear: its shared key part stays as
    projected); ``layers``, ``d_ff``: a family's own depth key and MLP width (LongCat-Flash);
    ``kv_heads`` false: the family sets ``num_key_value_heads`` to the heads itself (Hy4)."""
    out = _base(r, context=context, layers=layers)
    r.false("attention_bias", "biases on MLA projections are not modeled")
    r.ignore("head_dim", "qk_head_dim")  # derived from the MLA sizes
    kv = r.maybe_size("num_key_value_heads") if kv_heads else None  # None: one per head
    r.ignore("num_key_value_heads")
    if kv not in (None, out["n_heads"]):  # transformers' attention repeats MLA's per-head keys heads / kv times
        r.fail("num_key_value_heads", f"must equal num_attention_heads ({out['n_heads']}) with MLA, got {kv}")
    mla: dict[str, Any] = {key: r.size(key) for key in ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim")}
    v = r.maybe_size("v_head_dim")
    mla["v_head_dim"] = out["d_model"] // out["n_heads"] if v is None and derive_v else r.size("v_head_dim")
    q_lora = r.maybe_size("q_lora_rank")  # None: queries without the low-rank path
    if q_lora is not None:
        mla["q_lora_rank"] = q_lora
    out.update(d_ff=r.size("intermediate_size") if d_ff is None else d_ff, activation=r.activation("hidden_act", True),
               norm="rmsnorm", attention="mla", mla=mla)
    if not rope:
        out["position"] = "none"
        return out
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


def _qwen3_vl_text(r: Raw) -> dict[str, Any]:
    """Qwen3-VL's language model: Qwen3's (per-head q/k norms), with interleaved M-RoPE (``mrope_section``
    places the rotated dimensions only) and no window keys."""
    out = _decoder(r)
    _attention_bias(r, out)
    out["qk_norm"] = "head"
    return out


def _qwen3_vl_moe_text(r: Raw) -> dict[str, Any]:
    """Qwen3-VL-MoE's language model: Qwen3-MoE's experts (``decoder_sparse_step``, ``mlp_only_layers``)."""
    out = _qwen3_vl_text(r)
    moe: dict[str, Any] = {"num_experts": _first(r, "num_local_experts", "num_experts"),
                           "experts_per_token": r.size("num_experts_per_tok"),
                           "expert_d_ff": r.size("moe_intermediate_size")}
    _moe_layers(r, moe)
    out["moe"] = moe
    return out


MAPPERS: dict[str, Callable[[Raw], dict[str, Any]]] = {
    "gpt2": _gpt2, "gpt_neox": _gpt_neox, "gptj": _gptj, "falcon": _falcon, "phi": _phi, "phi3": _mistral,
    "llama": _llama, "mistral": _mistral, "mixtral": _mixtral, "qwen2": _qwen2, "qwen2_moe": _qwen2_moe,
    "qwen3": _qwen3, "qwen3_moe": _qwen3_moe, "gemma": _gemma, "gemma2": _gemma2, "gemma3_text": _gemma3,
    "olmo": _olmo, "olmo2": _olmo2, "stablelm": _stablelm, "starcoder2": _starcoder2, "granite": _granite,
    "smollm3": _smollm3, "deepseek_v2": _deepseek, "deepseek_v3": _deepseek, "gpt_oss": _gpt_oss, "gpt-sw3": _gpt2,
}
