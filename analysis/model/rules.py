"""The rules between a config's keys: which keys apply to which configs (:data:`APPLIES`), and the
rules each key's own check cannot see. Used by :func:`analysis.model.checks.from_dict` for a file
and by :meth:`ModelConfig.replace` for a copy, so both check alike."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from .formats import FORMATS, WEIGHT_FORMATS
from .mixer import RECURRENT_TYPES
from .variants import ACTIVATIONS

if TYPE_CHECKING:  # config.py imports this module to check its copies
    from .config import Checker, ModelConfig


def _has_dense_mlp(cfg: ModelConfig) -> bool:
    moe = cfg.moe
    if cfg.shared_transformer is not None:  # the shared transformer block's MLP
        return True
    if cfg.d_ff == 0:  # no FFN at all
        return False
    if moe is not None and (moe.beside_mlp or moe.shortcut):  # every layer with an FFN has a dense MLP
        return True
    if cfg.ffn_layers is not None:  # the layers with an FFN that are not MoE
        return any(cfg.has_ffn(i) and (moe is None or not moe.is_moe_layer(i)) for i in range(cfg.n_layers))
    return moe is None or moe.first_dense_layers > 0 or moe.step > 1  # layer 0 is then dense


def _has_full(cfg: ModelConfig) -> bool:
    """Whether some layer attends without a window or chunk (a ``full`` layer)."""
    return "full" in cfg.type_pattern[:cfg.n_layers]


_FULL = "full-attention layers (layer_types lists full), with attention other than mla (mha)"


# A key given where it changes nothing is refused, whatever its value: key -> (whether it applies to
# a config, what it applies to). Every other key applies to every model (tests/test_config.py
# checks that each key is one or the other).
APPLIES: dict[str, tuple[Callable[["ModelConfig"], bool], str]] = {
    "n_kv_heads": (lambda c: c.attention != "mla", "attention other than mla (its sizes are under 'mla')"),
    "head_dim": (lambda c: c.attention != "mla", "attention other than mla (its sizes are under 'mla')"),
    "qk_norm": (lambda c: c.attention != "mla", "attention other than mla (its sizes are under 'mla')"),
    "mla": (lambda c: c.attention == "mla", "attention: mla"),
    "dsa": (lambda c: c.attention == "mla", "attention: mla"),
    "sub_norms": (lambda c: c.attention != "mla" and c.moe is None and not c.has_recurrent,  # BitNet's: dense MHA
                  "attention other than mla (mha), without moe or recurrent (mamba, mamba2, short_conv) layers"),
    "norm_bias": (lambda c: c.norm == "layernorm", "norm: layernorm"),
    "parallel_norms": (lambda c: c.parallel_block, "parallel_block: true"),
    "rope_theta": (lambda c: c.position == "rope", "position: rope"),
    "rope_layers": (lambda c: c.position == "rope", "position: rope"),
    "rotary_fraction": (lambda c: c.position == "rope" and c.attention != "mla",
                        "position: rope, with attention other than mla"),
    "position_offset": (lambda c: c.position == "learned", "position: learned"),
    "relative_buckets": (lambda c: c.position == "relative", "position: relative"),
    "relative_max_distance": (lambda c: c.position == "relative", "position: relative"),
    "mlp_bias": (_has_dense_mlp, "dense MLP layers (no moe, or moe with first_dense_layers, step > 1, "
                                 "beside_mlp or shortcut) or a shared_transformer"),
    "sliding_window": (lambda c: c.layer_types is None or "sliding" in c.layer_types,
                       "sliding layers (layer_types lists none)"),
    "attention_chunk": (lambda c: c.layer_types is not None and "chunked" in c.layer_types,
                        "chunked layers (layer_types lists chunked)"),
    "attn_temperature_tuning": (lambda c: c.attention != "mla" and (c.position != "rope" or (
        c.rope_layers is not None and False in c.rope_layers)), "layers without RoPE, with attention other than mla"),
    "k_eq_v": (lambda c: c.attention != "mla" and c.has_attention, "attention other than mla (mha)"),
    "v_norm": (lambda c: c.attention != "mla" and c.has_attention, "attention other than mla (mha)"),
    "full_head_dim": (lambda c: c.attention != "mla" and _has_full(c), _FULL),
    "full_kv_heads": (lambda c: c.attention != "mla" and _has_full(c), _FULL),
    "full_k_eq_v": (lambda c: c.attention != "mla" and _has_full(c), _FULL),
    "kv_shared_layers": (lambda c: c.attention != "mla" and not c.has_recurrent and c.hyper is None,
                         "attention layers alone, other than mla (mha), without hyper-connections"),
    "quant_skip": (lambda c: c.dtype in WEIGHT_FORMATS, f"a quantized dtype ({', '.join(WEIGHT_FORMATS)})"),
    "quant_group_size": (lambda c: c.dtype in WEIGHT_FORMATS and FORMATS[c.dtype].group != 1,
                         "a quantized dtype with blocks or groups"),
    "vision.norm_bias": (lambda c: c.vision is not None and c.vision.norm == "layernorm", "vision.norm: layernorm"),
    # Mamba: its mapping where a layer is a mamba layer; FFN keys where some layer has an FFN
    "mamba": (lambda c: c.has_mamba, "mamba layers (layer_types lists 'mamba')"),
    "mamba2": (lambda c: c.has_mamba2, "mamba2 layers (layer_types lists 'mamba2')"),
    "short_conv": (lambda c: c.has_short_conv, "short_conv layers (layer_types lists 'short_conv')"),
    "lightning": (lambda c: c.has_lightning, "lightning layers (layer_types lists 'lightning')"),
    "gated_deltanet": (lambda c: c.has_gated_deltanet, "gated_deltanet layers (layer_types lists 'gated_deltanet')"),
    "rglru": (lambda c: c.has_rglru, "rglru layers (layer_types lists 'rglru')"),
    "kda": (lambda c: c.has_kda, "kda layers (layer_types lists 'kda')"),
    "recurrent_norm_placement": (lambda c: c.has_recurrent_layers,
                                 "layers without attention (layer_types lists a recurrent mixer or none)"),
    "parallel_mixer": (lambda c: c.has_attention, "layers that attend (layer_types lists full, sliding or chunked)"),
    "moe": (lambda c: c.d_ff > 0, "layers with an FFN (d_ff > 0)"),
    "ffn_layers": (lambda c: c.d_ff > 0, "layers with an FFN (d_ff > 0)"),
    "activation": (lambda c: c.d_ff > 0 or c.shared_transformer is not None,
                   "layers with an FFN (d_ff > 0; the mamba mixer's is SiLU) or a shared_transformer"),
    "shared_transformer.attention_adapters": (lambda c: c.shared_transformer is not None
                                              and c.shared_transformer.adapter_rank > 0,
                                              "shared_transformer.adapter_rank > 0"),
    "moe.shared_expert_d_ff": (lambda c: c.moe is not None and c.moe.shared_experts > 0, "moe.shared_experts >= 1"),
    "moe.shared_expert_gate": (lambda c: c.moe is not None and c.moe.shared_experts > 0, "moe.shared_experts >= 1"),
    "hyper.sinkhorn_iters": (lambda c: c.hyper is not None and c.hyper.mix, "hyper.mix: true"),
    "gemma3n.sparsity": (lambda c: c.gemma3n is not None and True in (c.gemma3n.sparse_layers or ()),
                         "gemma3n.sparse_layers with a true entry"),
}


def check_rules(cfg: ModelConfig, raw: dict[str, Any], check: Checker) -> None:
    """Every rule between keys, for ``cfg`` read from the mapping ``raw``."""
    _applies(cfg, _given(raw), check)
    _cross_checks(cfg, check)


def _given(raw: dict[str, Any]) -> list[str]:
    """The keys a mapping gives, nested ones dotted (``moe.step``)."""
    return [*raw, *(f"{k}.{n}" for k, v in raw.items() if isinstance(v, dict) for n in v)]


def _applies(cfg: ModelConfig, given: list[str], check: Checker) -> None:
    """Each given key of :data:`APPLIES` applies to ``cfg``, or is refused."""
    for key in given:
        if key in APPLIES and not APPLIES[key][0](cfg):
            check.fail(key, f"applies only to {APPLIES[key][1]}; delete it")


def _cross_checks(cfg: ModelConfig, check: Checker) -> None:
    """Rules between keys; each names the key a user would change."""
    mla = cfg.attention == "mla"
    if mla and cfg.mla is None:
        check.fail("attention", "mla needs an 'mla' mapping (kv_lora_rank, qk_nope_head_dim, "
                          "qk_rope_head_dim, v_head_dim)")
    if mla:
        if cfg.position == "rope" and cfg.mla.qk_rope_head_dim % 2:
            check.fail("mla.qk_rope_head_dim", f"RoPE needs an even size, got {cfg.mla.qk_rope_head_dim}")
        if cfg.dsa is not None and cfg.mla.q_lora_rank is None:  # the indexer's queries read q_a's normed output
            check.fail("dsa", "the indexer reads the low-rank query: needs mla.q_lora_rank")
        if cfg.dsa is not None and (cfg.position != "rope" or cfg.sliding_window is not None
                                    or cfg.attention_chunk is not None or cfg.attn_logit_softcap is not None):
            check.fail("dsa", "is modeled with RoPE on full causal layers only (no sliding_window, "
                              "attention_chunk or attn_logit_softcap)")
        if cfg.dsa is not None and cfg.dsa.shared is not None and cfg.dsa.shared[0]:
            check.fail("dsa.shared", "layer 0 must run its indexer (a shared layer reuses the previous one's top-k)")
        if cfg.dsa is not None and cfg.position == "rope" and cfg.dsa.head_dim < cfg.mla.qk_rope_head_dim:
            check.fail("dsa.head_dim", f"RoPE rotates its first mla.qk_rope_head_dim ({cfg.mla.qk_rope_head_dim}) "
                                       f"dimensions: must be at least that, got {cfg.dsa.head_dim}")
    else:
        if cfg.n_heads % cfg.kv_heads:
            check.fail("n_kv_heads", f"must divide n_heads ({cfg.n_heads}), got {cfg.kv_heads}")
        if cfg.head_dim is None and cfg.d_model % cfg.n_heads:
            check.fail("n_heads", f"must divide d_model ({cfg.d_model}) when head_dim is not given, "
                                  f"got {cfg.n_heads}")
        if cfg.position == "rope" and (cfg.rotary_dims % 2 or cfg.rotary_dims == 0):
            key = "head_dim" if cfg.rotary_fraction == 1 else "rotary_fraction"
            check.fail(key, f"RoPE needs an even, non-zero number of rotated dimensions, got "
                            f"int({cfg.head_size} * {cfg.rotary_fraction:g}) = {cfg.rotary_dims}")
    for key in ("k_eq_v", "full_k_eq_v"):  # the form measured: v its own tensor (normed), k normed per head
        if getattr(cfg, key) and not (cfg.v_norm and cfg.qk_norm == "head"):
            check.fail(key, "keys reused as values are modeled as Gemma 4 has them: with v_norm and qk_norm: head")
    if cfg.attention != "mla" and cfg.full_kv_heads is not None and cfg.n_heads % cfg.full_kv_heads:
        check.fail("full_kv_heads", f"must divide n_heads ({cfg.n_heads}), got {cfg.full_kv_heads}")
    if cfg.attention != "mla" and cfg.full_head_dim is not None and cfg.position == "rope":
        dims = int(cfg.full_head_dim * cfg.rotary_fraction)
        if dims % 2 or dims == 0:
            check.fail("full_head_dim", f"RoPE needs an even, non-zero number of rotated dimensions, got "
                                        f"int({cfg.full_head_dim} * {cfg.rotary_fraction:g}) = {dims}")
    if cfg.relative_max_distance <= cfg.relative_buckets // 2:
        check.fail("relative_max_distance", f"must exceed relative_buckets // 2 "
                                            f"({cfg.relative_buckets // 2}), got {cfg.relative_max_distance}")
    if cfg.parallel_block and cfg.norm_placement in ("post", "post_branch"):
        check.fail("norm_placement", "parallel_block works with 'pre' or 'sandwich', "
                                     f"not {cfg.norm_placement!r}")
    if cfg.layer_types and "sliding" in cfg.layer_types and cfg.sliding_window is None:
        check.fail("layer_types", "has 'sliding' layers but sliding_window is not set")
    if cfg.layer_types and "chunked" in cfg.layer_types and cfg.attention_chunk is None:
        check.fail("layer_types", "has 'chunked' layers but attention_chunk is not set")
    if cfg.qk_norm == "l2" and cfg.attention != "mla":  # a weightless RMSNorm per head on the RoPE layers
        if cfg.norm != "rmsnorm":
            check.fail("qk_norm", f"l2 is a weightless RMSNorm: needs norm: rmsnorm, got {cfg.norm!r}")
        if cfg.position != "rope" or (cfg.rope_layers is not None and True not in cfg.rope_layers):
            check.fail("qk_norm", "l2 norms q and k on the RoPE layers: the model has none")
    _kv_sharing_checks(cfg, check)
    moe = cfg.moe
    if moe is not None:
        if moe.experts_per_token > moe.num_experts + moe.zero_experts:
            check.fail("moe", f"experts_per_token ({moe.experts_per_token}) exceeds "
                              f"num_experts ({moe.num_experts})" + (f" + zero_experts ({moe.zero_experts})"
                                                                    if moe.zero_experts else ""))
        _zero_expert_checks(cfg, check)
        if not any(moe.is_moe_layer(i) and cfg.has_ffn(i) for i in range(cfg.n_layers)):
            check.fail("moe", f"no layer is MoE (first_dense_layers {moe.first_dense_layers}, "
                              f"step {moe.step}, {cfg.n_layers} layers)")
        placements = {cfg.norm_placement, cfg.recurrent_norm_placement or cfg.norm_placement}  # every layer's
        if moe.beside_mlp and (cfg.parallel_block or not placements <= {"pre", "sandwich"}):
            check.fail("moe.beside_mlp", "is modeled in a sequential block with norm_placement pre or sandwich "
                                         "(Gemma 4's; recurrent_norm_placement too), not with parallel_block or "
                                         "post norms")
        if moe.beside_mlp and (moe.shortcut or moe.zero_experts):  # Gemma's router scales real experts alone
            check.fail("moe.beside_mlp", "Gemma 4's experts beside the MLP: not with LongCat-Flash's MoE "
                                         "(moe.shortcut, moe.zero_experts)")
    if cfg.hyper is not None and (cfg.norm_placement != "pre" or cfg.parallel_block or cfg.has_recurrent
                                  or cfg.layer_scalar or (moe is not None and (moe.shortcut or moe.beside_mlp))):
        check.fail("hyper", "hyper-connections are modeled on sequential pre-norm layers (no parallel_block, other "
                            "norm_placement, recurrent layers, layer_scalar, moe.shortcut or moe.beside_mlp)")
    if cfg.gemma3n is not None and (cfg.norm_placement != "sandwich" or cfg.norm != "rmsnorm" or cfg.parallel_block
                                    or cfg.attention != "mha" or cfg.activation != "geglu" or cfg.has_recurrent
                                    or moe is not None or cfg.hyper is not None or cfg.layer_scalar
                                    or cfg.ffn_layers is not None or cfg.d_ff == 0 or cfg.sub_norms
                                    or cfg.parallel_mixer is not None):
        check.fail("gemma3n", "Gemma 3n's layers are modeled as its own: sequential sandwich rmsnorm layers of mha "
                              "and a dense geglu MLP in every layer (no moe, hyper, recurrent layers, ffn_layers, "
                              "layer_scalar, sub_norms or parallel_block)")
    if moe is not None and ACTIVATIONS[cfg.activation].scalars:  # xIELU: its scalars belong to a dense MLP
        check.fail("activation", f"{cfg.activation} learns scalars per dense MLP: not with moe")
    _mamba_checks(cfg, check)
    if cfg.vision is not None:
        _vision_checks(cfg.vision, check.nested("vision"))


def _zero_expert_checks(cfg: ModelConfig, check: Checker) -> None:
    """Identity experts: a whole number of real experts per token; the shortcut: pairs of pre-norm layers."""
    moe = cfg.moe
    E, Z, k = moe.num_experts, moe.zero_experts, moe.experts_per_token
    if Z and (k * E) % (E + Z):
        check.fail("moe.zero_experts", f"{Z}: each token's share of real experts, experts_per_token * num_experts / "
                                       f"(num_experts + zero_experts) = {k * E}/{E + Z}, must be whole (llmcalc "
                                       "counts that share)")
    if not moe.shortcut:
        return
    if moe.first_dense_layers or moe.step != 1:
        check.fail("moe.shortcut", "puts the MoE beside every even layer's MLP: not with first_dense_layers or step")
    if cfg.n_layers % 2 or cfg.ffn_layers is not None:
        check.fail("moe.shortcut", f"pairs the layers, each with its MLP: needs an even n_layers (got "
                                   f"{cfg.n_layers}) and no ffn_layers")
    if cfg.norm_placement != "pre" or cfg.parallel_block or cfg.has_recurrent or cfg.layer_scalar:
        check.fail("moe.shortcut", "is modeled on sequential pre-norm attention layers (no parallel_block, other "
                                   "norm_placement, recurrent layers or layer_scalar)")


def _vision_checks(v, check: Checker) -> None:
    if v.d_model % v.n_heads:
        check.fail("n_heads", f"must divide d_model ({v.d_model}), got {v.n_heads}")
    p = v.projector
    if v.image_size is None and v.position == "learned":
        check.fail("image_size", "is needed by learned positions (a row per patch of an image of that size)")
    if v.image_size is not None and v.image_size < v.patch_size:
        check.fail("image_size", f"must hold a patch ({v.patch_size} pixels), got {v.image_size}")
    if p.merge_linear and p.merge == 1:
        check.fail("projector", "merge_linear needs merge > 1 (it takes merged patches back to the tower's width)")
    if p.hidden_linear and p.hidden is None:
        check.fail("projector", "hidden_linear needs hidden (the width of its linear, hidden -> hidden)")
    if v.window is not None and v.window % p.merge:
        check.fail("window", f"must be a multiple of projector.merge ({p.merge}): windows hold whole merged "
                             f"patches, got {v.window}")
    if v.full_layers is not None and v.window is None:
        check.fail("full_layers", "names the layers that do not attend within windows: needs window")
    if p.pool > 1 and (v.image_size is None or (v.image_size // v.patch_size) % p.pool):
        check.fail("projector.pool", f"{p.pool} needs an image_size whose patches a side it divides")
    if p.unread_layers >= v.n_layers:
        check.fail("projector.unread_layers", f"must leave a layer to read (the tower has {v.n_layers}), "
                                              f"got {p.unread_layers}")
    if p.class_token and not v.class_token:
        check.fail("projector.class_token", "the tower has none")
    if p.class_token and (p.pool > 1 or p.merge > 1):
        check.fail("projector.class_token", "joins the patches' features as they are (LLaVA's): not with pool or "
                                            "merge")
    if v.pool is not None and (v.class_token or p.features > 1 or p.unread_layers or p.pool > 1 or p.merge > 1
                               or p.deepstack):
        check.fail("pool", "the tower's pooler (Gemma 4's) is modeled over its last layer's patches alone: no "
                           "class_token, and a projector of one feature layer, none unread, without pool, merge or "
                           "deepstack")
    if v.standardize and v.pool is None:
        check.fail("standardize", "standardizes the pooler's output: needs pool")
    for key in ("position_table", "position_grid"):
        if getattr(v, key) is not None and v.position == "learned":
            check.fail(key, "is a learned table beside 2-D RoPE (Gemma 4's, Qwen3-VL's): needs position: rope")
    if v.position_table is not None and v.position_grid is not None:
        check.fail("position_grid", "one table of positions: not with position_table")
    if p.deepstack is not None:
        if len(set(p.deepstack)) < len(p.deepstack) or any(i >= v.n_layers for i in p.deepstack):
            check.fail("projector.deepstack", f"must be distinct layers of the tower's {v.n_layers}, got "
                                              f"{list(p.deepstack)}")
        if p.features > 1 or p.merge_linear or p.hidden_linear or p.pool > 1 or v.class_token or p.unread_layers:
            check.fail("projector.deepstack", "is modeled with Qwen3-VL's tower and projector: no class_token, one "
                                              "feature layer, none unread, no merge_linear, hidden_linear or pool")


def _mamba_checks(cfg: ModelConfig, check: Checker) -> None:
    """Mamba layers need their mapping (and the mixer beside attention, ``parallel_mixer``, its own); a
    model without FFN (``d_ff: 0``) needs mamba layers; positions that act inside attention need attention
    layers."""
    beside = cfg.parallel_mixer
    if beside is not None and cfg.has_attention and getattr(cfg, beside) is None:
        check.fail("parallel_mixer", f"{beside} needs a '{beside}' mapping")
    if cfg.has_mamba and cfg.mamba is None:
        check.fail("layer_types", "has 'mamba' layers but no 'mamba' mapping (d_state, d_conv, expand, ...)")
    if cfg.has_mamba and cfg.mamba.heads > 1:
        if cfg.mamba_width % cfg.mamba.heads:
            check.fail("mamba.heads", f"must divide the mixer's width expand * d_model ({cfg.mamba_width}), "
                                      f"got {cfg.mamba.heads}")
        if cfg.mamba.mixer_norms:
            check.fail("mamba.heads", f"{cfg.mamba.heads} heads with mixer_norms are not modeled (the norms on dt, "
                                      "B and C of Falcon-Mamba and Jamba have one head)")
    if cfg.d_ff == 0 and not cfg.has_recurrent:
        check.fail("d_ff", "0 (no FFN) is for models with mamba layers (layer_types lists 'mamba')")
    if not cfg.has_attention and cfg.shared_transformer is None and cfg.position in ("rope", "alibi", "relative"):
        check.fail("position", f"{cfg.position} acts inside attention, and no layer attends (every layer is "
                               "'mamba'): use none, learned or sinusoidal")
    if cfg.has_mamba and cfg.parallel_block:
        check.fail("parallel_block", "is not supported with mamba layers")
    for mixer_checks in (_ffn_layer_checks, _mamba2_checks, _gated_deltanet_checks, _rglru_checks, _kda_checks,
                         _shared_transformer_checks):
        mixer_checks(cfg, check)
    if cfg.has_short_conv and cfg.short_conv is None:
        check.fail("layer_types", "has 'short_conv' layers but no 'short_conv' mapping (d_conv, bias)")
    if cfg.has_short_conv and cfg.parallel_block:
        check.fail("parallel_block", "is not supported with short_conv layers")
    if cfg.has_lightning and cfg.lightning is None:
        check.fail("layer_types", "has 'lightning' layers but no 'lightning' mapping (block_size)")
    if cfg.has_lightning and cfg.parallel_block:
        check.fail("parallel_block", "is not supported with lightning layers")
    if cfg.has_lightning and cfg.attention == "mla":  # lightning heads are the MHA sizes (n_heads, head_dim)
        check.fail("attention", "mla is not supported with lightning layers (their heads are n_heads x head_dim)")


def _ffn_layer_checks(cfg: ModelConfig, check: Checker) -> None:
    """``ffn_layers`` leaves some layer an FFN; a ``none`` layer (no mixer) has one, in a sequential block."""
    if cfg.ffn_layers is not None and not any(cfg.has_ffn(i) for i in range(cfg.n_layers)):
        check.fail("ffn_layers", "leaves no layer an FFN: use d_ff: 0")
    types = cfg.layer_types or ()
    none = [i for i in range(cfg.n_layers) if types and types[i % len(types)] == "none"]
    if none and not all(cfg.has_ffn(i) for i in none):
        check.fail("layer_types", "a 'none' layer (no mixer) needs an FFN: d_ff > 0 and ffn_layers true there")
    if none and cfg.parallel_block:
        check.fail("parallel_block", "is not supported with 'none' layers (no mixer)")


def _gated_deltanet_checks(cfg: ModelConfig, check: Checker) -> None:
    """Gated DeltaNet layers need their mapping, and key heads that divide the value heads."""
    if not cfg.has_gated_deltanet:
        return
    g = cfg.gated_deltanet
    if g is None:
        check.fail("layer_types", "has 'gated_deltanet' layers but no 'gated_deltanet' mapping (linear_num_key_heads, "
                                  "linear_num_value_heads, ...)")
        return
    if g.linear_num_value_heads % g.linear_num_key_heads:
        check.fail("gated_deltanet.linear_num_key_heads", f"must divide linear_num_value_heads "
                                                          f"({g.linear_num_value_heads}), got {g.linear_num_key_heads}")
    if cfg.parallel_block:
        check.fail("parallel_block", "is not supported with gated_deltanet layers")


def _kda_checks(cfg: ModelConfig, check: Checker) -> None:
    """KDA layers need their mapping."""
    if not cfg.has_kda:
        return
    if cfg.kda is None:
        check.fail("layer_types", "has 'kda' layers but no 'kda' mapping (linear_num_heads, linear_head_dim, ...)")
    if cfg.parallel_block:
        check.fail("parallel_block", "is not supported with kda layers")


def _rglru_checks(cfg: ModelConfig, check: Checker) -> None:
    """rglru layers need their mapping and gate blocks that divide the width."""
    if not cfg.has_rglru:
        return
    if cfg.rglru is None:
        check.fail("layer_types", "has 'rglru' layers but no 'rglru' mapping (width, d_conv, n_heads)")
    E, H, _ = cfg.rglru_sizes
    if E % H:
        check.fail("rglru.n_heads" if cfg.rglru.n_heads is not None else "n_heads",
                   f"must divide the rglru width ({E}) into the gates' blocks, got {H}")
    if E == H:  # a block of one channel: torch's batched matmul may copy its input (by layout), unmodeled
        check.fail("rglru.n_heads" if cfg.rglru.n_heads is not None else "n_heads",
                   f"{H} makes gate blocks of one channel (width {E}), which are not modeled: give blocks of "
                   "at least 2 channels")
    if cfg.parallel_block:
        check.fail("parallel_block", "is not supported with rglru layers")


def _mamba2_checks(cfg: ModelConfig, check: Checker) -> None:
    """Mamba-2 layers need their mapping, whole heads and groups that divide the heads."""
    if not cfg.has_mamba2:
        return
    m = cfg.mamba2
    if m is None:
        check.fail("layer_types", "has 'mamba2' layers but no 'mamba2' mapping (d_state, n_heads, head_dim, ...)")
        return
    if m.n_heads is None and (m.expand * cfg.d_model) % m.head_dim:
        check.fail("mamba2.head_dim", f"must divide expand * d_model ({m.expand * cfg.d_model}) when n_heads is "
                                      f"not given, got {m.head_dim}")
        return
    H = cfg.mamba2_sizes[1]
    if H % m.n_groups:
        check.fail("mamba2.n_groups", f"must divide the heads ({H}), got {m.n_groups}")
    if cfg.parallel_block:
        check.fail("parallel_block", "is not supported with mamba2 layers")


def _shared_transformer_checks(cfg: ModelConfig, check: Checker) -> None:
    """A shared transformer block (Zamba) runs before the recurrent mixer of each layer it lists, in a pre-norm
    layer without an FFN; its attention is MHA, full causal (RoPE on every use: rope_layers acts on attention
    layers); there are no more blocks than uses."""
    s = cfg.shared_transformer
    if s is None:
        return
    types = cfg.layer_types or ("full",)
    for i in s.layers:
        kind = types[i % len(types)]
        if i >= cfg.n_layers:
            check.fail("shared_transformer.layers", f"layer {i} is past the model's {cfg.n_layers} layers")
        if kind not in RECURRENT_TYPES or kind == "none":
            check.fail("shared_transformer.layers", f"layer {i} is a '{kind}' layer: a shared block runs before a "
                                                    "recurrent mixer (layer_types mamba, mamba2, ...)")
        if cfg.has_ffn(i):
            check.fail("shared_transformer.layers", f"layer {i} has an FFN: a shared block is modeled in layers "
                                                    "without one (Zamba's; d_ff: 0 or ffn_layers false there)")
    placement = cfg.recurrent_norm_placement or cfg.norm_placement
    if placement != "pre":
        key = "recurrent_norm_placement" if cfg.recurrent_norm_placement else "norm_placement"
        check.fail(key, f"a shared transformer block is modeled in pre-norm layers (Zamba's), not {placement!r}")
    if s.blocks > len(s.layers):
        check.fail("shared_transformer.blocks", f"{s.blocks} blocks for {len(s.layers)} layers that use one: "
                                                "a block no layer uses")
    if cfg.attention == "mla":
        check.fail("attention", "mla is not modeled in a shared transformer block (its attention is mha)")
    if cfg.position in ("alibi", "relative"):
        check.fail("position", f"{cfg.position} is not modeled in a shared transformer block's attention (rope, or "
                               "positions added to the embeddings)")
    if cfg.rope_layers is not None and not cfg.has_attention:
        check.fail("rope_layers", "acts on attention layers, and there are none: a shared transformer block's "
                                  "attention rotates q and k on every use")


def _kv_sharing_checks(cfg: ModelConfig, check: Checker) -> None:
    """``kv_shared_layers``: fewer than the layers, and each span (full, sliding, chunked) of the shared tail
    has a layer before it whose K and V it reads (transformers' Gemma3nTextConfig.kv_sharing_modes)."""
    k = cfg.kv_shared_layers
    if not k:
        return
    if k >= cfg.n_layers:
        check.fail("kv_shared_layers", f"must be fewer than the {cfg.n_layers} layers, got {k}")
    types = cfg.type_pattern
    produced = {types[i % len(types)] for i in range(cfg.n_layers - k)}
    missing = sorted({types[i % len(types)] for i in range(cfg.n_layers - k, cfg.n_layers)} - produced)
    if missing:
        check.fail("kv_shared_layers", f"the last {k} layers read the K/V of an earlier layer of their span: no "
                                       f"layer before them is {', '.join(missing)}")
    if cfg.qk_norm == "l2" or cfg.rope_layers is not None:  # a source and its reusers rotate alike
        check.fail("kv_shared_layers", "not with qk_norm: l2 or rope_layers (the layers rotate alike: Gemma 3n's)")
