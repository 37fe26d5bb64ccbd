"""Families with recurrent mixers: Mamba-1 (Mamba, Falcon-Mamba), Mamba-2 (Mamba2, Bamba, Granite
4.0-H), Jamba (attention, Mamba-1 and MoE layers), LFM2 (gated short convolutions; dense and MoE)."""

from __future__ import annotations

from typing import Any, Callable

from ...errors import brief
from ...model.sizes import MAX_LAYERS
from .common import _base, _cycle, _dtype, _name, _rope
from .core import _first, _granite, _llama
from .raw import Raw


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
    "mamba": _mamba, "falcon_mamba": _mamba, "mamba2": _mamba2, "bamba": _bamba, "granitemoehybrid": _granitemoehybrid,
    "jamba": _jamba, "lfm2": _lfm2, "lfm2_moe": _lfm2_moe,
}
