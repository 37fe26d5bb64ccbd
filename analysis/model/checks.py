"""The rules between a config's keys, and :func:`from_dict`, the one way a mapping of keys
becomes a checked :class:`ModelConfig` (each key's own check is its field's, in
:mod:`analysis.model.config`)."""

from __future__ import annotations

from typing import Any

from .architecture import build
from .config import Checker, ModelConfig, read_fields
from .formats import FORMATS, WEIGHT_FORMATS, quantized


def from_dict(raw: Any, source: str | None = None, lines: dict[str, int] | None = None) -> ModelConfig:
    """Validate a mapping of YAML keys and build a ModelConfig (or raise ConfigError)."""
    check = Checker(source, lines or {})
    cfg = read_fields(ModelConfig, raw, check)
    _cross_checks(cfg, check)
    return cfg


def _cross_checks(cfg: ModelConfig, check: Checker) -> None:
    """Rules between keys; each names the key a user would change."""
    mla = cfg.attention == "mla"
    if mla and cfg.mla is None:
        check.fail("attention", "mla needs an 'mla' mapping (kv_lora_rank, qk_nope_head_dim, "
                          "qk_rope_head_dim, v_head_dim)")
    if not mla and cfg.mla is not None:
        check.fail("mla", "given, but attention is not 'mla'")
    if mla:
        for key, bad in (("n_kv_heads", cfg.n_kv_heads is not None), ("head_dim", cfg.head_dim is not None),
                         ("qk_norm", cfg.qk_norm != "none"), ("rotary_fraction", cfg.rotary_fraction != 1)):
            if bad:
                check.fail(key, "does not apply to attention: mla (its sizes are under 'mla')")
        if cfg.position == "rope" and cfg.mla.qk_rope_head_dim % 2:
            check.fail("mla.qk_rope_head_dim", f"RoPE needs an even size, got {cfg.mla.qk_rope_head_dim}")
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
    if cfg.relative_max_distance <= cfg.relative_buckets // 2:
        check.fail("relative_max_distance", f"must exceed relative_buckets // 2 "
                                            f"({cfg.relative_buckets // 2}), got {cfg.relative_max_distance}")
    if cfg.parallel_block and cfg.norm_placement in ("post", "post_branch"):
        check.fail("norm_placement", "parallel_block works with 'pre' or 'sandwich', "
                                     f"not {cfg.norm_placement!r}")
    if cfg.norm == "rmsnorm" and not cfg.norm_weight:
        check.fail("norm_weight", "false applies to layernorm only")
    if cfg.layer_types and "sliding" in cfg.layer_types and cfg.sliding_window is None:
        check.fail("layer_types", "has 'sliding' layers but sliding_window is not set")
    if cfg.layer_types and "sliding" not in cfg.layer_types and cfg.sliding_window is not None:
        check.fail("sliding_window", "is set but layer_types has no 'sliding' layer")
    if cfg.rope_layers is not None and cfg.position != "rope":
        check.fail("rope_layers", f"applies to position: rope, not {cfg.position!r}")
    if (cfg.quant_group_size is not None or cfg.quant_skip is not None) and cfg.dtype not in WEIGHT_FORMATS:
        check.fail("quant_group_size" if cfg.quant_group_size is not None else "quant_skip",
                   f"applies to a quantized dtype ({', '.join(WEIGHT_FORMATS)}), not {cfg.dtype!r}")
    if cfg.dtype in WEIGHT_FORMATS:
        _format_checks(cfg, check)
    moe = cfg.moe
    if moe is not None:
        if moe.experts_per_token > moe.num_experts:
            check.fail("moe", f"experts_per_token ({moe.experts_per_token}) exceeds "
                              f"num_experts ({moe.num_experts})")
        for key in ("shared_expert_gate", "shared_expert_d_ff"):
            if getattr(moe, key) not in (None, False) and not moe.shared_experts:
                check.fail(f"moe.{key}", "needs shared_experts >= 1")
        if not any(moe.is_moe_layer(i) for i in range(cfg.n_layers)):
            check.fail("moe", f"no layer is MoE (first_dense_layers {moe.first_dense_layers}, "
                              f"step {moe.step}, {cfg.n_layers} layers)")


def _format_checks(cfg: ModelConfig, check: Checker) -> None:
    """A quantized format's keys: ``quant_skip`` names the model's linears (breakdown keys or their
    prefixes; the LM head's whether tied or not), ``quant_group_size`` a format with groups."""
    model = build(cfg)
    keys = [m.key for m, _ in model.layer_linears()] + [model.head.linear.key]
    unknown = [s for s in cfg.quant_skip or () if all(quantized(k, (s,)) for k in keys)]
    if unknown:
        check.fail("quant_skip", f"{', '.join(unknown)} names none of the model's linears (breakdown keys or "
                                 "their prefixes, e.g. lm_head, attention, moe/router)")
    if cfg.quant_group_size is not None and FORMATS[cfg.dtype].group == 1:
        check.fail("quant_group_size", f"{cfg.dtype} has no blocks or groups to size")
