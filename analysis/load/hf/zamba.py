"""Zamba2 (Zyphra/Zamba2-*): Mamba-2 layers, some of them after one of a few shared transformer blocks
(``shared_transformer``, :mod:`analysis.model.shared_transformer`)."""

from __future__ import annotations

from typing import Any, Callable

from ...errors import brief
from ...model.sizes import MAX_LAYERS
from .common import _dtype, _name, _rope
from .raw import Raw

# transformers' layer types (legacy "mamba" remapped as its config class remaps it)
_ZAMBA2_TYPES = {"linear_attention": False, "mamba": False, "hybrid": True}


def _zamba2_layers(r: Raw) -> list[int]:
    """The hybrid layers' indices, from ``layers_block_type`` (absent: the class's 54-layer default, as its
    __post_init__ writes it); the list must have ``num_hidden_layers`` entries, as transformers validates."""
    kinds = r.get("layers_block_type")
    if kinds is None:
        kinds = ["mamba"] + (["mamba"] * 5 + ["hybrid"]) * 7 + ["mamba"] * 4 + ["hybrid"] + ["mamba"] * 3 + \
            ["hybrid"] + ["mamba"] * 2
    if not isinstance(kinds, list) or not kinds or len(kinds) > MAX_LAYERS or \
            any(not isinstance(k, str) or k not in _ZAMBA2_TYPES for k in kinds):
        r.fail("layers_block_type", f"must list 'linear_attention' (or 'mamba') or 'hybrid' per layer, "
                                    f"got {brief(kinds)}")
    if r.size("num_hidden_layers", maximum=MAX_LAYERS) != len(kinds):
        r.fail("layers_block_type", f"must list num_hidden_layers ({r.get('num_hidden_layers')}) layers, "
                                    f"got {len(kinds)}")
    return [i for i, k in enumerate(kinds) if _ZAMBA2_TYPES[k]]


def _zamba2(r: Raw) -> dict[str, Any]:
    """Zamba2: every layer ``x + mamba(rmsnorm(x + h))``, ``h`` on the ``hybrid`` layers the output of a shared
    block (blocks used in turn over the hybrid layers, ``num_mem_blocks`` of them; transformers builds at most
    one per hybrid layer) projected by the layer's ``linear``, else 0. The block: MHA over the concatenation of
    ``x`` and the embeddings (``2 * hidden_size`` wide; head dim ``2 * hidden_size // num_attention_heads``
    whatever ``head_dim`` says, as its __post_init__ overwrites it; no biases; RoPE over the full head only with
    ``use_mem_rope``), then a gated MLP ``act(gate) * up`` of ``intermediate_size`` (else ``4 * hidden_size``),
    biases ``add_bias_linear``, with a per-use adapter of ``adapter_rank`` on gate and up (always built), and
    with ``use_shared_attention_adapter`` on q, k and v (their output ``2 * hidden_size`` wide: transformers
    runs only with ``num_key_value_heads == num_attention_heads``, refused otherwise). The Mamba-2 mixer:
    ``n_mamba_heads`` heads of ``mamba_expand * hidden_size / n_mamba_heads``, its conv always biased
    (``use_conv_bias`` is not read), in_proj and out_proj biased with ``add_bias_linear``, its gated norm in
    ``mamba_ngroups`` groups. ``use_long_context`` sets the context to 16,384 (RoPE's rescaling changes no
    count); the derived keys its config writes (``attention_hidden_size``, ``attention_head_dim``,
    ``mamba_headdim``, ``kv_channels``, ``num_query_groups``, ``hybrid_layer_ids``) are recomputed by
    transformers, and are here. transformers ties a block's uses only with ``tie_word_embeddings`` (its tie
    mapping is dropped with the head's): untied, a block used twice is refused."""
    r.ignore("use_conv_bias", "head_dim", "attention_head_dim", "attention_hidden_size", "mamba_headdim",
             "kv_channels", "num_query_groups", "hybrid_layer_ids", "time_step_min", "time_step_max",
             "time_step_floor", "use_mamba_kernels", "use_mem_eff_path", "num_logits_to_keep")
    hybrid = _zamba2_layers(r)
    d, heads = r.size("hidden_size"), r.size("num_attention_heads")
    out: dict[str, Any] = {
        "name": _name(r.raw, r.source), "vocab_size": r.size("vocab_size"), "d_model": d,
        "n_layers": r.size("num_hidden_layers", maximum=MAX_LAYERS), "n_heads": heads, "d_ff": 0,
        "layer_types": ["mamba2"], "norm": "rmsnorm", "position": "none",
        "tie_embeddings": r.flag("tie_word_embeddings"), "dtype": _dtype(r, "bf16"),
        "context_length": 16384 if r.flag("use_long_context") else r.size("max_position_embeddings")}
    H, width = r.size("n_mamba_heads"), r.size("mamba_expand") * d
    if width % H:
        r.fail("n_mamba_heads", f"must divide mamba_expand * hidden_size ({width}), got {H}")
    G = r.size("mamba_ngroups")
    if H % G:
        r.fail("mamba_ngroups", f"must divide n_mamba_heads ({H}), got {G}")
    bias = r.flag("add_bias_linear")
    out["mamba2"] = {"d_state": r.size("mamba_d_state"), "d_conv": r.size("mamba_d_conv"), "n_heads": H,
                     "head_dim": width // H, "n_groups": G, "conv_bias": True, "proj_bias": bias,
                     "chunk_size": r.size("chunk_size")}
    if not hybrid:  # no shared block: its sizes act nowhere
        r.ignore("num_key_value_heads", "intermediate_size", "hidden_act", "num_mem_blocks", "adapter_rank",
                 "use_shared_attention_adapter", "use_mem_rope", "rope_parameters")
        return out
    kv = r.maybe_size("num_key_value_heads") or heads
    if heads % kv:
        r.fail("num_key_value_heads", f"must divide num_attention_heads ({heads}), got {kv}")
    if 2 * d < heads:
        r.fail("num_attention_heads", f"leaves heads of 2 * hidden_size // {heads} = 0 dims")
    blocks = r.size("num_mem_blocks")
    if blocks < len(hybrid) and not out["tie_embeddings"]:  # transformers ties the blocks only with the head
        r.fail("tie_word_embeddings", f"false leaves each of the {len(hybrid)} hybrid layers its own copy of the "
                                      f"{blocks} shared block(s) in transformers (and of every use's adapters)")
    rank = r.size("adapter_rank", 0)
    shared: dict[str, Any] = {"layers": hybrid, "d_ff": r.maybe_size("intermediate_size") or 4 * d,
                              "blocks": min(blocks, len(hybrid)), "adapter_rank": rank}
    if r.flag("use_shared_attention_adapter"):  # built whatever the rank: a rank of 0 adds zeros
        if (2 * d) % heads:
            r.fail("num_attention_heads", f"the q, k and v adapters output 2 * hidden_size ({2 * d}): it must "
                                          f"divide among the heads, got {heads}")
        if kv != heads:
            r.fail("num_key_value_heads", f"the k and v adapters output 2 * hidden_size ({2 * d}): transformers "
                                          f"runs only with num_attention_heads ({heads}) key-value heads, got {kv}")
        shared["attention_adapters"] = rank > 0
    out.update(n_kv_heads=kv, head_dim=2 * d // heads, activation=r.activation("hidden_act", True), mlp_bias=bias,
               shared_transformer=shared)
    if r.flag("use_mem_rope"):
        _rope(r, out, fraction=1.0)
    else:
        r.ignore("rope_parameters")
    return out


MAPPERS: dict[str, Callable[[Raw], dict[str, Any]]] = {"zamba2": _zamba2}
