"""Zamba (Zyphra/Zamba-7B-v1: Mamba-1 layers) and Zamba2 (Zyphra/Zamba2-*: Mamba-2 layers), some of their layers
after a shared transformer block (``shared_transformer``, :mod:`analysis.model.shared_transformer`)."""

from __future__ import annotations

from typing import Any, Callable

from ...errors import brief
from ...model.sizes import MAX_INT, MAX_LAYERS
from .common import _dtype, _name, _rope
from .kda import _aliased
from .raw import Raw

# transformers' layer types (legacy "mamba" remapped as its config class remaps it)
_ZAMBA_TYPES = {"linear_attention": False, "mamba": False, "hybrid": True}


def _hybrid_layers(r: Raw, kinds: Any, key: str = "layers_block_type") -> list[int]:
    """The hybrid layers' indices from the per-layer types ``kinds`` (the file's ``key``, or the class's
    default); the list must have ``num_hidden_layers`` entries, as transformers validates."""
    if not isinstance(kinds, list) or not kinds or len(kinds) > MAX_LAYERS or \
            any(not isinstance(k, str) or k not in _ZAMBA_TYPES for k in kinds):
        r.fail(key, f"must list 'linear_attention' (or 'mamba') or 'hybrid' per layer, got {brief(kinds)}")
    if r.size("num_hidden_layers", maximum=MAX_LAYERS) != len(kinds):
        r.fail(key, f"must list num_hidden_layers ({r.get('num_hidden_layers')}) layers, got {len(kinds)}")
    return [i for i, k in enumerate(kinds) if _ZAMBA_TYPES[k]]


def _zamba2_layers(r: Raw) -> list[int]:
    """Zamba2's hybrid layers, from ``layers_block_type`` (absent: the class's 54-layer default, as its
    __post_init__ writes it)."""
    kinds = r.get("layers_block_type")
    if kinds is None:
        kinds = ["mamba"] + (["mamba"] * 5 + ["hybrid"]) * 7 + ["mamba"] * 4 + ["hybrid"] + ["mamba"] * 3 + \
            ["hybrid"] + ["mamba"] * 2
    return _hybrid_layers(r, kinds)


def _zamba_layers(r: Raw) -> list[int]:
    """Zamba's hybrid layers, from ``layers_block_type`` (or its ``attribute_map`` name ``layer_types``, which
    wins); absent, as its __post_init__ writes it: layer 2, then layer ``i + 3`` where ``i % attn_layer_period ==
    attn_layer_offset`` (a list of 3 layers at least, refused with fewer, as transformers refuses it)."""
    key = "layer_types" if r.has("layer_types") else "layers_block_type"
    kinds = r.get(key)
    if kinds is None:
        period = r.size("attn_layer_period")
        offset = r.size("attn_layer_offset", minimum=-MAX_INT)
        n = r.size("num_hidden_layers", maximum=MAX_LAYERS)
        kinds = ["mamba", "mamba", "hybrid"] + ["hybrid" if i % period == offset else "mamba" for i in range(n - 3)]
    else:
        r.ignore("attn_layer_period", "attn_layer_offset", "layers_block_type")
    return _hybrid_layers(r, kinds, key)


def _common(r: Raw) -> dict[str, Any]:
    """What both read alike: the stack of mixer layers without FFN or positions, RMSNorms, the embeddings and
    the head (tied by default)."""
    return {"name": _name(r.raw, r.source), "vocab_size": r.size("vocab_size"), "d_model": r.size("hidden_size"),
            "n_layers": r.size("num_hidden_layers", maximum=MAX_LAYERS), "n_heads": r.size("num_attention_heads"),
            "d_ff": 0, "norm": "rmsnorm", "position": "none", "tie_embeddings": r.flag("tie_word_embeddings"),
            "dtype": _dtype(r, "bf16")}


def _shared(r: Raw, out: dict[str, Any], hybrid: list[int], blocks: int) -> dict[str, Any]:
    """The shared block's attention keys (``num_key_value_heads`` dividing the heads) into ``out``, and its
    ``shared_transformer`` mapping; the MLP's width ``intermediate_size`` (else 4 x ``hidden_size``), its
    gated ``hidden_act``. transformers ties a block's uses only with ``tie_word_embeddings`` (its tie mapping
    is dropped with the head's): untied, a block used twice is refused."""
    d, heads = out["d_model"], out["n_heads"]
    kv = r.maybe_size("num_key_value_heads") or heads
    if heads % kv:
        r.fail("num_key_value_heads", f"must divide num_attention_heads ({heads}), got {kv}")
    if blocks < len(hybrid) and not out["tie_embeddings"]:  # transformers ties the blocks only with the head
        r.fail("tie_word_embeddings", f"false leaves each of the {len(hybrid)} hybrid layers its own copy of the "
                                      f"{blocks} shared block(s) in transformers")
    out.update(n_kv_heads=kv, activation=r.activation("hidden_act", True))
    return {"layers": hybrid, "d_ff": r.maybe_size("intermediate_size") or 4 * d, "blocks": min(blocks, len(hybrid))}


def _zamba(r: Raw) -> dict[str, Any]:
    """Zamba (v1): every layer ``x + mamba(rmsnorm(x + h))``, ``h`` on the ``hybrid`` layers the output of the one
    shared block projected by the layer's ``linear``, else 0 (Zamba2's layout, :func:`_zamba2`, with one block and
    no adapters, no biases, no positions). The block: MHA over the concatenation of ``x`` and the embeddings
    (``attention_hidden_size``, which must be ``2 * hidden_size``, the concatenation's width), heads of
    ``attention_head_dim`` (its ``attribute_map`` name ``head_dim`` wins; else ``2 * hidden_size //
    num_attention_heads``) scaled by ``(head_dim / 2) ** -0.5`` (a value, no count), then a gated MLP of
    ``intermediate_size``; transformers builds it tied (``tie_word_embeddings``) only when two layers or more use it.
    The Mamba-1 mixer: ``mamba_expand * hidden_size`` channels in ``n_mamba_heads`` heads
    (``mamba.heads``: x_proj and dt_proj per head), dt rank ``mamba_dt_rank`` ("auto": ``ceil(hidden_size /
    16)``), its conv's activation ``hidden_mamba_act`` (SiLU only). The scan's implementation
    (``use_associative_scan``, ``use_mamba_kernels``) and the time-step initialisation change no count."""
    r.ignore("use_mamba_kernels", "use_associative_scan", "time_step_min", "time_step_max", "time_step_floor",
             "num_logits_to_keep")
    if r.get("hidden_mamba_act") not in ("silu", "swish"):
        r.fail("hidden_mamba_act", f"the mamba mixer is counted with SiLU, got {brief(r.get('hidden_mamba_act'))}")
    hybrid, out = _zamba_layers(r), _common(r)
    d, heads = out["d_model"], out["n_heads"]
    out.update(layer_types=["mamba"], context_length=r.size("max_position_embeddings"))
    H, width = r.size("n_mamba_heads"), r.size("mamba_expand") * d
    if width % H:
        r.fail("n_mamba_heads", f"must divide mamba_expand * hidden_size ({width}), got {H}")
    mamba: dict[str, Any] = {"d_state": r.size("mamba_d_state"), "d_conv": r.size("mamba_d_conv"),
                             "expand": r.size("mamba_expand"), "conv_bias": r.flag("mamba_conv_bias"),
                             "proj_bias": r.flag("mamba_proj_bias"), "heads": H}
    if r.get("mamba_dt_rank") != "auto":
        mamba["dt_rank"] = r.size("mamba_dt_rank")
    out["mamba"] = mamba
    if not hybrid:  # no shared block: its sizes act nowhere
        r.ignore("num_key_value_heads", "intermediate_size", "hidden_act", "attention_hidden_size",
                 "attention_head_dim", "head_dim")
        return out
    concat = r.maybe_size("attention_hidden_size")
    if concat is not None and concat != 2 * d:  # its norm and q, k, v are built that wide, then fed 2 * hidden_size
        r.fail("attention_hidden_size", f"must be 2 * hidden_size ({2 * d}), the width of the concatenation the "
                                        f"shared block reads, got {concat}")
    if len(hybrid) == 1 and out["tie_embeddings"]:  # its tie mapping finds no other use of the block
        r.fail("tie_word_embeddings", "true with one hybrid layer: transformers ties the shared block of the first "
                                      "hybrid layer to the others' and fails to build the model when there are none")
    head_dim, _ = _aliased(r, "head_dim", "attention_head_dim")
    if head_dim is None and 2 * d < heads:
        r.fail("num_attention_heads", f"leaves heads of 2 * hidden_size // {heads} = 0 dims")
    out["shared_transformer"] = _shared(r, out, hybrid, 1)
    out["head_dim"] = head_dim or 2 * d // heads
    return out


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
    transformers, and are here. Untied, a block used twice is refused (:func:`_shared`), the adapters of every
    use with it."""
    r.ignore("use_conv_bias", "head_dim", "attention_head_dim", "attention_hidden_size", "mamba_headdim",
             "kv_channels", "num_query_groups", "hybrid_layer_ids", "time_step_min", "time_step_max",
             "time_step_floor", "use_mamba_kernels", "use_mem_eff_path", "num_logits_to_keep")
    hybrid, out = _zamba2_layers(r), _common(r)
    d, heads = out["d_model"], out["n_heads"]
    out.update(layer_types=["mamba2"],
               context_length=16384 if r.flag("use_long_context") else r.size("max_position_embeddings"))
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
    if 2 * d < heads:
        r.fail("num_attention_heads", f"leaves heads of 2 * hidden_size // {heads} = 0 dims")
    shared = _shared(r, out, hybrid, r.size("num_mem_blocks"))
    kv, rank = out["n_kv_heads"], r.size("adapter_rank", 0)
    shared["adapter_rank"] = rank
    if r.flag("use_shared_attention_adapter"):  # built whatever the rank: a rank of 0 adds zeros
        if (2 * d) % heads:
            r.fail("num_attention_heads", f"the q, k and v adapters output 2 * hidden_size ({2 * d}): it must "
                                          f"divide among the heads, got {heads}")
        if kv != heads:
            r.fail("num_key_value_heads", f"the k and v adapters output 2 * hidden_size ({2 * d}): transformers "
                                          f"runs only with num_attention_heads ({heads}) key-value heads, got {kv}")
        shared["attention_adapters"] = rank > 0
    out.update(head_dim=2 * d // heads, mlp_bias=bias, shared_transformer=shared)
    if r.flag("use_mem_rope"):
        _rope(r, out, fraction=1.0)
    else:
        r.ignore("rope_parameters")
    return out


MAPPERS: dict[str, Callable[[Raw], dict[str, Any]]] = {"zamba": _zamba, "zamba2": _zamba2}
