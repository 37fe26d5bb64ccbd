"""Families with Gated DeltaNet layers: Qwen3-Next (Gated DeltaNet and gated attention, MoE with a gated
shared expert), the language models of Qwen3.5 (dense ``qwen3_5_text``, MoE ``qwen3_5_moe_text``) and OLMo
Hybrid (``olmo_hybrid``: Gated DeltaNet layers pre-norm, OLMo 3's attention layers post-norm)."""

from __future__ import annotations

from typing import Any, Callable

from ...errors import brief
from .common import _attention_bias, _decoder
from .core import _moe_layers
from .raw import Raw


def _deltanet_layers(r: Raw, out: dict[str, Any]) -> None:
    """The ``gated_deltanet`` mapping (transformers' ``linear_*`` keys) and each layer's type from
    ``layer_types`` (``linear_attention`` or ``full_attention``; absent: every ``full_attention_interval``-th
    layer attends, 4 by default, as the classes' ``__post_init__`` makes it)."""
    n, kinds = out["n_layers"], r.get("layer_types")
    if kinds is None:
        interval = r.get("full_attention_interval")
        interval = 4 if interval is None else r.size("full_attention_interval")
        kinds = ["linear_attention" if (i + 1) % interval else "full_attention" for i in range(n)]
    else:
        r.ignore("full_attention_interval")
    names = {"linear_attention": "gated_deltanet", "full_attention": "full"}
    if not isinstance(kinds, list) or len(kinds) != n or any(k not in names for k in kinds):
        r.fail("layer_types", f"must list 'linear_attention' or 'full_attention' for each of the {n} layers, "
                              f"got {brief(kinds)}")
    out["layer_types"] = [names[k] for k in kinds]
    if r.get("hidden_act") not in ("silu", "swish"):
        r.fail("hidden_act", f"the gated_deltanet mixer is counted with SiLU, got {brief(r.get('hidden_act'))}")
    out["gated_deltanet"] = {key: r.size(key) for key in (
        "linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim",
        "linear_conv_kernel_dim")}
    if "full" not in out["layer_types"]:  # no layer attends: its positions act nowhere
        for key in ("rope_theta", "rotary_fraction"):
            out.pop(key, None)
        out["position"] = "none"


def _qwen3_next_attention(r: Raw, ff: str = "intermediate_size") -> dict[str, Any]:
    """The layers all three share: pre-norm RMSNorm (zero-centred, ``1 + w``: still d parameters), gated
    attention (q_proj gives q and a sigmoid gate on the output: ``attention_gate``), per-head q/k norms,
    partial RoPE (``partial_rotary_factor`` 0.25 when absent, as the classes default it)."""
    out = _decoder(r, ff=ff)
    _attention_bias(r, out)
    out.update(qk_norm="head", attention_gate=True)
    if "rotary_fraction" not in out and not r.has("partial_rotary_factor") \
            and "partial_rotary_factor" not in (r.get("rope_parameters") or {}):
        out["rotary_fraction"] = 0.25
    _deltanet_layers(r, out)
    return out


def _moe(r: Raw, out: dict[str, Any], leading_dense: bool) -> None:
    """Routed experts (``moe_intermediate_size``) and one shared expert behind a sigmoid gate."""
    moe: dict[str, Any] = {"num_experts": r.size("num_experts"), "experts_per_token": r.size("num_experts_per_tok"),
                           "expert_d_ff": r.size("moe_intermediate_size"), "shared_experts": 1,
                           "shared_expert_d_ff": r.size("shared_expert_intermediate_size"), "shared_expert_gate": True}
    if leading_dense:
        _moe_layers(r, moe)
    out["moe"] = moe


def _qwen3_next(r: Raw) -> dict[str, Any]:
    """Qwen3-Next (Qwen/Qwen3-Next-80B-A3B-*): Gated DeltaNet layers and gated attention layers, MoE in
    every layer (``decoder_sparse_step``, ``mlp_only_layers``: dense layers ``intermediate_size`` wide)."""
    out = _qwen3_next_attention(r)
    _moe(r, out, True)
    return out


def _qwen3_5_text(r: Raw) -> dict[str, Any]:
    """Qwen3.5's dense language model (``qwen3_5_text``): Qwen3-Next's layers, a SwiGLU MLP in each; its
    Gated DeltaNet projects q/k/v, z, b and a apart (llmcalc's parts). ``mrope_section`` and
    ``mrope_interleaved`` place the rotated dimensions only."""
    return _qwen3_next_attention(r)


def _qwen3_5_moe_text(r: Raw) -> dict[str, Any]:
    """Qwen3.5's MoE language model (``qwen3_5_moe_text``): every layer MoE with a gated shared expert."""
    out = _qwen3_next_attention(r, ff="moe_intermediate_size")  # no dense layer: d_ff the experts' width
    _moe(r, out, False)
    return out


def _olmo_hybrid_layers(r: Raw, n: int) -> list[str]:
    """Each layer's type: ``layer_types``, else every fourth layer attends (the last, if none would), as its
    class's ``__post_init__`` makes it; transformers requires both kinds."""
    kinds = r.get("layer_types")
    if kinds is None:
        kinds = ["full_attention" if i % 4 == 3 else "linear_attention" for i in range(n)]
        if "full_attention" not in kinds:
            kinds[-1] = "full_attention"
    names = {"linear_attention": "gated_deltanet", "full_attention": "full"}
    if not isinstance(kinds, list) or len(kinds) != n or any(k not in names for k in kinds) \
            or len(set(kinds)) < 2:
        r.fail("layer_types", f"must list 'linear_attention' or 'full_attention' for each of the {n} layers, "
                              f"both kinds, got {brief(kinds)}")
    return [names[k] for k in kinds]


def _olmo_hybrid(r: Raw) -> dict[str, Any]:
    """OLMo Hybrid (allenai/Olmo-Hybrid-7B): Gated DeltaNet layers, pre-norm (``recurrent_norm_placement:
    pre``), and OLMo 3's attention layers, their norms after each branch (``post_branch``) with q/k norms over
    the whole projections, biased iff ``attention_bias``; a SwiGLU MLP in every layer. The mixer's q, k, v, a,
    b and gate projections are apart (llmcalc's parts: q, k and v as ``in_proj_qkv``, the gate ``g_proj`` as
    ``in_proj_z``); its sizes default as the class's ``__post_init__`` makes them (heads: the attention's;
    key heads' size ``int(0.75 * hidden_size / heads)``, value heads' twice that). RoPE on the attention
    layers unless ``rope_parameters.rope_theta`` is null (the release: no positions at all).
    ``linear_allow_neg_eigval`` doubles beta (one multiply per head and token, not in the elementwise FLOPs);
    the ``linear_a_log_*`` and ``linear_dt_*`` keys initialize values only."""
    r.ignore("linear_a_log_min", "linear_a_log_max", "linear_dt_min", "linear_dt_max", "linear_dt_init_floor",
             "linear_allow_neg_eigval")
    if r.get("hidden_act") not in ("silu", "swish"):
        r.fail("hidden_act", f"the gated_deltanet mixer is counted with SiLU, got {brief(r.get('hidden_act'))}")
    out = _decoder(r)
    _attention_bias(r, out)
    params = r.get("rope_parameters") or {}
    if isinstance(params, dict) and "rope_theta" in params and params["rope_theta"] is None:  # NoPE
        out.pop("rope_theta", None)
        out.pop("rotary_fraction", None)
        out["position"] = "none"
    heads, d = out["n_heads"], out["d_model"]
    key_heads = r.maybe_size("linear_num_key_heads") or heads
    key_dim = r.maybe_size("linear_key_head_dim") or int(0.75 * d / key_heads)
    out.update(norm_placement="post_branch", recurrent_norm_placement="pre", qk_norm="full",
               layer_types=_olmo_hybrid_layers(r, out["n_layers"]),
               gated_deltanet={"linear_num_key_heads": key_heads,
                               "linear_num_value_heads": r.maybe_size("linear_num_value_heads") or heads,
                               "linear_key_head_dim": key_dim,
                               "linear_value_head_dim": r.maybe_size("linear_value_head_dim") or 2 * key_dim,
                               "linear_conv_kernel_dim": r.size("linear_conv_kernel_dim")})
    return out


MAPPERS: dict[str, Callable[[Raw], dict[str, Any]]] = {
    "qwen3_next": _qwen3_next, "qwen3_5_text": _qwen3_5_text, "qwen3_5_moe_text": _qwen3_5_moe_text,
    "olmo_hybrid": _olmo_hybrid,
}
