"""Families with Gated DeltaNet layers: Qwen3-Next (Gated DeltaNet and gated attention, MoE with a gated
shared expert) and the language models of Qwen3.5 (dense ``qwen3_5_text``, MoE ``qwen3_5_moe_text``)."""

from __future__ import annotations

from typing import Any, Callable

from ...errors import brief
from .core import _attention_bias, _decoder, _moe_layers
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


MAPPERS: dict[str, Callable[[Raw], dict[str, Any]]] = {
    "qwen3_next": _qwen3_next, "qwen3_5_text": _qwen3_5_text, "qwen3_5_moe_text": _qwen3_5_moe_text,
}
