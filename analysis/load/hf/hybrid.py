"""Hybrids whose layers hold one sublayer each: Nemotron-H (a Mamba-2 mixer, attention, an MLP or a MoE
alone in each layer: ``layer_types`` ``mamba2``, ``full`` or ``none`` with ``ffn_layers``); and whose
layers hold two mixers side by side: Falcon-H1 (attention and a Mamba-2 mixer on the same normed input,
summed: ``parallel_mixer: mamba2``)."""

from __future__ import annotations

from typing import Any, Callable

from ...errors import brief
from ...model.sizes import MAX_LAYERS
from .common import _attention_bias, _cycle, _decoder, _dtype, _name
from .raw import Raw
from .recurrent import _mamba2_mixer

# Nemotron-H's block types (transformers 5's layers_block_type; the legacy hybrid_override_pattern's letters)
_NEMOTRON_BLOCKS = {"linear_attention": ("mamba2", False), "full_attention": ("full", False),
                    "mlp": ("none", True), "moe": ("none", True)}
_NEMOTRON_LETTERS = {"M": "linear_attention", "*": "full_attention", "-": "mlp", "E": "moe"}
# the names earlier checkpoints list (Nemotron 3 Ultra's "mamba", "attention"), as transformers renames them in
# every config (configuration_utils._LEGACY_LAYER_TYPE_REMAP)
_LEGACY_BLOCKS = {"mamba": "linear_attention", "attention": "full_attention"}


def _nemotron_blocks(r: Raw) -> list[str]:
    """Each layer's block type: ``layers_block_type``, else the letters of ``hybrid_override_pattern`` (as
    transformers' __post_init__ reads them), else its default."""
    kinds = r.get("layers_block_type")
    if kinds is None and r.has("hybrid_override_pattern"):
        pattern = r.get("hybrid_override_pattern")
        if not isinstance(pattern, str) or any(c not in _NEMOTRON_LETTERS for c in pattern):
            r.fail("hybrid_override_pattern", f"must be letters M, *, - or E, got {brief(pattern)}")
        kinds = [_NEMOTRON_LETTERS[c] for c in pattern]
    else:
        r.read.add("hybrid_override_pattern")
    kinds = ["linear_attention", "moe", "full_attention", "mlp"] if kinds is None else kinds
    if isinstance(kinds, list):
        kinds = [_LEGACY_BLOCKS.get(k, k) if isinstance(k, str) else k for k in kinds]
    if not isinstance(kinds, list) or not kinds or len(kinds) > MAX_LAYERS or \
            any(k not in _NEMOTRON_BLOCKS for k in kinds):
        r.fail("layers_block_type", f"must list 'linear_attention', 'full_attention', 'mlp' or 'moe' per layer, "
                                    f"got {brief(kinds)}")
    return kinds


def _nemotron_h(r: Raw) -> dict[str, Any]:
    """Nemotron-H (nvidia/Nemotron-H-*, NVIDIA-Nemotron-Nano-*-v2, Nemotron 3 Nano): each layer is
    ``x + block(rmsnorm(x))`` with one block: a Mamba-2 mixer (``linear_attention``, M), GQA attention without
    positions or biases (``full_attention``, *), a non-gated MLP (``mlp``, -) or a MoE (``moe``, E) of
    ``n_routed_experts`` non-gated experts and one shared MLP of ``moe_shared_expert_intermediate_size``
    (transformers builds one, whatever ``n_shared_experts``), under a sigmoid router whose score correction
    ``e_score_correction_bias`` is a buffer the checkpoint stores (``router_bias``). The MLPs' activation is
    ``mlp_hidden_act`` (relu2); the mixer's width is ``mamba_num_heads * mamba_head_dim`` (``expand`` names no
    weight) and its biases ``use_bias``; the depth is the block list's (``num_hidden_layers`` is ignored, as
    transformers ignores it). ``moe_latent_size`` (latent projections
    around the experts) is refused. Layer ``i`` is MoE where ``(i + 1) % step == 0``: the MoE layers and the
    MLP layers must fall so (every FFN layer MoE, or none)."""
    r.ignore("num_hidden_layers", "expand", "attention_bias", "sliding_window", "num_logits_to_keep",
             "use_mamba_kernels", "time_step_min", "time_step_max", "time_step_limit", "time_step_floor",
             "mamba_ssm_cache_dtype", "residual_in_fp32", "rescale_prenorm_residual", "n_shared_experts",
             "moe_shared_expert_overlap", "mtp_layers_block_type", "mamba_proj_bias")
    kinds = _nemotron_blocks(r)
    n = len(kinds)
    if r.get("mamba_hidden_act") not in ("silu", "swish"):
        r.fail("mamba_hidden_act", f"the mamba2 mixer is counted with SiLU, got {brief(r.get('mamba_hidden_act'))}")
    out: dict[str, Any] = {"name": _name(r.raw, r.source), "vocab_size": r.size("vocab_size"),
           "context_length": r.size("max_position_embeddings"), "d_model": r.size("hidden_size"), "n_layers": n,
           "n_heads": r.size("num_attention_heads"), "tie_embeddings": r.flag("tie_word_embeddings"),
           "dtype": _dtype(r, "bf16")}
    out.update(norm="rmsnorm", position="none", n_kv_heads=r.size("num_key_value_heads"),
               head_dim=r.size("head_dim"))
    if out["n_heads"] % out["n_kv_heads"]:
        r.fail("num_key_value_heads", f"must divide num_attention_heads ({out['n_heads']}), got {out['n_kv_heads']}")
    out["layer_types"] = _cycle([_NEMOTRON_BLOCKS[k][0] for k in kinds])
    ffn = [_NEMOTRON_BLOCKS[k][1] for k in kinds]
    if "full_attention" not in kinds:  # no layer attends: the attention sizes act nowhere
        for key in ("n_kv_heads", "head_dim"):
            out.pop(key)
    if "linear_attention" in kinds:
        out["mamba2"] = _mamba2_mixer(r, "mamba_num_heads", "mamba_head_dim", "ssm_state_size", "conv_kernel",
                                      "n_groups", "use_conv_bias", "use_bias", "chunk_size")
    if not any(ffn):
        out["d_ff"] = 0
        return out
    out["ffn_layers"] = _cycle(ffn)
    out["activation"] = r.activation("mlp_hidden_act", False)
    moe = [i for i, k in enumerate(kinds) if k == "moe"]
    mlp = [i for i, k in enumerate(kinds) if k == "mlp"]
    out["d_ff"] = r.size("intermediate_size") if mlp else r.size("moe_intermediate_size")
    if mlp:
        out["mlp_bias"] = r.flag("mlp_bias")
    if moe:
        if r.get("moe_latent_size") is not None:
            r.fail("moe_latent_size", "latent projections around the experts are not modeled")
        step = moe[0] + 1  # llmcalc's MoE layers: (i + 1) % step == 0, among the layers with an FFN
        if mlp and any(((i + 1) % step == 0) != (kinds[i] == "moe") for i in moe + mlp):
            r.fail("layers_block_type", "MoE and MLP layers that are not every step-th FFN layer are not modeled")
        out["moe"] = {"num_experts": r.size("n_routed_experts"), "experts_per_token": r.size("num_experts_per_tok"),
                      "expert_d_ff": r.size("moe_intermediate_size"), "shared_experts": 1,
                      "shared_expert_d_ff": r.size("moe_shared_expert_intermediate_size"), "router_bias": True,
                      **({"step": step} if mlp else {})}
        if not mlp:
            r.ignore("intermediate_size", "mlp_bias")
    else:
        r.ignore("n_routed_experts", "num_experts_per_tok", "moe_intermediate_size",
                 "moe_shared_expert_intermediate_size", "moe_latent_size")
    return out


def _falcon_h1(r: Raw) -> dict[str, Any]:
    """Falcon-H1 (tiiuae/Falcon-H1-*): every layer ``x + attn(h) + mamba(h)`` with ``h = rmsnorm(x)``, then a
    SwiGLU MLP: GQA attention with RoPE (``head_dim`` where the file gives it, else ``hidden_size //
    heads``, as transformers' ``getattr`` reads it; biases ``attention_bias``) beside a Mamba-2 mixer of
    ``mamba_n_heads`` heads over ``mamba_d_ssm`` channels (else ``mamba_expand * hidden_size``; head dim
    ``mamba_d_head``, "auto" their quotient), its gated RMSNorm only with ``mamba_rms_norm`` (else the
    output is gated alone), in_proj's bias ``mamba_proj_bias`` and out_proj's ``projectors_bias``. The muP
    multipliers (embedding, LM head, key, attention and SSM in and out, ``mlp_multipliers``,
    ``ssm_multipliers``: a non-persistent buffer) scale values only; ``mamba_norm_before_gate`` orders the
    norm and the gate. transformers' config has no layer types (its ``layer_types`` cannot be set)."""
    r.ignore("num_logits_to_keep", "time_step_limit", "mamba_norm_before_gate", "lm_head_multiplier",
             "embedding_multiplier", "mlp_multipliers", "key_multiplier", "attention_out_multiplier",
             "attention_in_multiplier", "ssm_multipliers", "ssm_in_multiplier", "ssm_out_multiplier")
    if r.has("layer_types"):
        r.fail("layer_types", "transformers' Falcon-H1 config cannot set it: every layer attends beside its mixer")
    if r.get("hidden_act") not in ("silu", "swish"):
        r.fail("hidden_act", f"the mamba2 mixer is counted with SiLU, got {brief(r.get('hidden_act'))}")
    out = _decoder(r)
    _attention_bias(r, out)
    out["mlp_bias"] = r.flag("mlp_bias")
    H, width = r.size("mamba_n_heads"), r.maybe_size("mamba_d_ssm")
    if width is None:
        width = r.size("mamba_expand") * out["d_model"]
    else:
        r.ignore("mamba_expand")
    if r.get("mamba_d_head") == "auto":
        if width % H:
            r.fail("mamba_n_heads", f"must divide the mixer's width ({width}), got {H}")
        P = width // H
    else:
        P = r.size("mamba_d_head")
        if P * H != width:
            r.fail("mamba_d_head", f"mamba_n_heads * mamba_d_head ({H * P}) must be the mixer's width ({width})")
    mixer = {"d_state": r.size("mamba_d_state"), "d_conv": r.size("mamba_d_conv"), "n_heads": H, "head_dim": P,
             "n_groups": r.size("mamba_n_groups"), "conv_bias": r.flag("mamba_conv_bias"),
             "proj_bias": r.flag("mamba_proj_bias"), "chunk_size": r.size("mamba_chunk_size"),
             "norm": r.flag("mamba_rms_norm")}
    if r.flag("projectors_bias") != mixer["proj_bias"]:
        mixer["out_proj_bias"] = r.flag("projectors_bias")
    out.update(parallel_mixer="mamba2", mamba2=mixer)
    return out


MAPPERS: dict[str, Callable[[Raw], dict[str, Any]]] = {"nemotron_h": _nemotron_h, "falcon_h1": _falcon_h1}
