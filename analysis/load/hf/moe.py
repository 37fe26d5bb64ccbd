"""Mixture-of-experts decoders: GLM-4.5, OLMoE, Granite MoE (and its shared-expert variant), Phi-3.5-MoE,
ERNIE 4.5 MoE, Hunyuan MoE, MiniMax-M2, dots.llm1, FlexOlmo."""

from __future__ import annotations

from typing import Any, Callable

from ...errors import brief
from .common import _attention_bias, _decoder, _layer_types, _window
from .core import _first, _granite, _mistral, _shared_mlp
from .raw import Raw


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


MAPPERS: dict[str, Callable[[Raw], dict[str, Any]]] = {
    "glm4_moe": _glm4_moe, "olmoe": _olmoe, "granitemoe": _granitemoe, "granitemoeshared": _granitemoe,
    "phimoe": _phimoe, "ernie4_5_moe": _ernie4_5_moe, "hunyuan_v1_moe": _hunyuan_v1_moe, "minimax_m2": _minimax_m2,
    "dots1": _dots1, "flex_olmo": _flex_olmo,
}
