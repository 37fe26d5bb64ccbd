"""Families with one trait of their own: the attention output gate (AFMoE), xIELU (Apertus), a norm after
the embedding (BLOOM), chunked attention (Llama 4), sub-norms and squared ReLU (BitNet)."""

from __future__ import annotations

import math
from typing import Any, Callable

from ...errors import brief
from ...model.sizes import MAX_LAYERS
from .common import _attention_bias, _cycle, _decoder, _divides, _dtype, _layer_types, _name, _nope_full_layers
from .core import _shared_mlp
from .raw import Raw


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


MAPPERS: dict[str, Callable[[Raw], dict[str, Any]]] = {
    "afmoe": _afmoe, "apertus": _apertus, "bloom": _bloom, "llama4_text": _llama4_text, "bitnet": _bitnet,
}
