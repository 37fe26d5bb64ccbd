"""The rules between a config's keys, and :func:`from_dict`, the one way a mapping of keys
becomes a checked :class:`ModelConfig` (each key's own check is its field's, in
:mod:`analysis.model.config`)."""

from __future__ import annotations

from typing import Any

from .architecture import build
from .config import APPLIES, Checker, ModelConfig, read_fields
from .formats import WEIGHT_FORMATS, quantized


def from_dict(raw: Any, source: str | None = None, lines: dict[str, int] | None = None) -> ModelConfig:
    """Validate a mapping of YAML keys and build a ModelConfig (or raise ConfigError)."""
    check = Checker(source, lines or {})
    cfg = read_fields(ModelConfig, raw, check)
    _applies(cfg, _given(raw), check)
    _cross_checks(cfg, check)
    return cfg


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
    if cfg.layer_types and "sliding" in cfg.layer_types and cfg.sliding_window is None:
        check.fail("layer_types", "has 'sliding' layers but sliding_window is not set")
    if cfg.dtype in WEIGHT_FORMATS:
        _format_checks(cfg, check)
    moe = cfg.moe
    if moe is not None:
        if moe.experts_per_token > moe.num_experts:
            check.fail("moe", f"experts_per_token ({moe.experts_per_token}) exceeds "
                              f"num_experts ({moe.num_experts})")
        if not any(moe.is_moe_layer(i) for i in range(cfg.n_layers)):
            check.fail("moe", f"no layer is MoE (first_dense_layers {moe.first_dense_layers}, "
                              f"step {moe.step}, {cfg.n_layers} layers)")


def _format_checks(cfg: ModelConfig, check: Checker) -> None:
    """``quant_skip`` names the model's linears (breakdown keys or their prefixes; the LM head's whether
    tied or not)."""
    model = build(cfg)
    keys = [m.key for m, _ in model.layer_linears()] + [model.head.linear.key]
    unknown = [s for s in cfg.quant_skip or () if all(quantized(k, (s,)) for k in keys)]
    if unknown:
        check.fail("quant_skip", f"{', '.join(unknown)} names none of the model's linears (breakdown keys or "
                                 "their prefixes, e.g. lm_head, attention, moe/router)")
