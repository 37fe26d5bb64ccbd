"""MiniMax (MiniMax-Text-01, MiniMax-M1): lightning-attention layers beside softmax-attention ones, MoE in
every layer."""

from __future__ import annotations

from typing import Any, Callable

from ...errors import brief
from .common import _cycle, _decoder
from .core import _first
from .raw import Raw

# the layer_types transformers' MiniMax reads -> llmcalc's
_TYPES = {"linear_attention": "lightning", "full_attention": "full"}


def _minimax(r: Raw) -> dict[str, Any]:
    """MiniMax: ``layer_types`` (absent: transformers' default, attention on even layers and lightning on
    odd ones) of ``linear_attention`` (llmcalc's ``lightning``: qkv_proj d -> 3*h*hd with SiLU, the
    decayed linear attention computed in blocks of ``block_size``, an RMSNorm over h*hd, a sigmoid
    output gate, out_proj) and ``full_attention`` (GQA with RoPE); a MoE FFN in every layer
    (``num_local_experts`` SwiGLU experts of ``intermediate_size``, ``num_experts_per_tok`` per token);
    RMSNorms, a final one, the head untied by default. The decoder layer takes its residual after the
    input norm and scales both terms of each sum by the ``*_alpha_factor`` and ``*_beta_factor`` values:
    values only, counted as pre-norm (their multiplies are not in the elementwise FLOPs). The lightning
    mixer's activation is ``hidden_act`` too: SiLU only. A ``sliding_window`` is refused: transformers'
    MiniMax cache keeps every token of such a layer (its window is a mask only)."""
    r.ignore("full_attn_alpha_factor", "full_attn_beta_factor", "linear_attn_alpha_factor",
             "linear_attn_beta_factor", "mlp_alpha_factor", "mlp_beta_factor")
    out = _decoder(r)
    n, kinds = out["n_layers"], r.get("layer_types")
    if kinds is None:
        kinds = ["full_attention" if (i + 1) % 2 else "linear_attention" for i in range(n)]
    if not isinstance(kinds, list) or len(kinds) < n or any(k not in _TYPES for k in kinds[:n]):
        r.fail("layer_types", f"must list 'linear_attention' or 'full_attention' for each of the {n} layers, "
                              f"got {brief(kinds)}")
    types = [_TYPES[k] for k in kinds[:n]]
    if r.get("sliding_window") is not None:
        r.fail("sliding_window", "is not modeled for minimax: transformers' MiniMax cache keeps every token "
                                 "(the window is a mask only)")
    block = r.size("block_size")
    if "lightning" in types:
        if r.get("hidden_act") not in ("silu", "swish"):
            r.fail("hidden_act", f"the lightning mixer is counted with SiLU, got {brief(r.get('hidden_act'))}")
        out["lightning"] = {"block_size": block}
    out["layer_types"] = _cycle(types)
    out["moe"] = {"num_experts": _first(r, "num_local_experts", "num_experts"),
                  "experts_per_token": r.size("num_experts_per_tok")}
    if "full" not in types:  # no layer attends: its positions act nowhere
        for key in ("rope_theta", "rotary_fraction", "n_kv_heads", "qk_norm"):
            out.pop(key, None)
        out["position"] = "none"
    return out


MAPPERS: dict[str, Callable[[Raw], dict[str, Any]]] = {"minimax": _minimax}
