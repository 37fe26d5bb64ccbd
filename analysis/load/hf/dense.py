"""Dense decoders of 2025-2026: GLM, GLM-4, ERNIE 4.5, Hunyuan, Seed-OSS, EXAONE 4, OLMo 3, Helium, Arcee,
InternLM3, Ministral (2 and 3), IQuest-Coder, Jais 2, CWM."""

from __future__ import annotations

from typing import Any, Callable

from .common import _attention_bias, _decoder, _layer_types, _nope_full_layers
from .core import _llama, _olmo2
from .raw import Raw


def _glm(r: Raw) -> dict[str, Any]:
    """GLM-4: ``attention_bias`` on q/k/v only (o_proj has none); gate and up fused in one
    ``gate_up_proj``; half of each head rotated (the class's ``partial_rotary_factor``)."""
    out = _decoder(r)
    out["qkv_bias"] = r.flag("attention_bias")
    return out


def _glm4(r: Raw) -> dict[str, Any]:
    """GLM-4-0414: GLM-4 with sandwich norms. transformers names them after Llama's:
    ``post_self_attn_layernorm`` and ``post_mlp_layernorm`` after the branches,
    ``post_attention_layernorm`` before the MLP."""
    out = _glm(r)
    out["norm_placement"] = "sandwich"
    return out


def _ernie4_5(r: Raw) -> dict[str, Any]:
    """ERNIE 4.5 (dense): ``use_bias`` on every attention and MLP projection."""
    out = _decoder(r)
    bias = r.flag("use_bias")
    out.update(qkv_bias=bias, out_bias=bias, mlp_bias=bias)
    return out


def _hunyuan_dense(r: Raw) -> dict[str, Any]:
    """Hunyuan dense: Llama's attention with per-head ``query_layernorm``/``key_layernorm``
    (after RoPE); its MLP has no bias. Its attention fails without a ``head_dim``."""
    r.size("head_dim")
    out = _decoder(r)
    _attention_bias(r, out)
    out["qk_norm"] = "head"
    r.ignore("eod_token_id")
    return out


def _seed_oss(r: Raw) -> dict[str, Any]:
    """Seed-OSS: q/k/v biases (``attention_bias``), o_proj's own ``attention_out_bias``."""
    out = _decoder(r)
    out.update(qkv_bias=r.flag("attention_bias"), out_bias=r.flag("attention_out_bias"), mlp_bias=r.flag("mlp_bias"))
    return out


def _exaone4(r: Raw) -> dict[str, Any]:
    """EXAONE 4: OLMo 2's norms after each branch, per-head q/k norms; with a ``sliding_window``
    only the sliding layers apply RoPE (the full ones are NoPE). ``sliding_window_pattern`` (an
    integer; a string such as "LLLG" transformers cannot use) only derives a missing
    ``layer_types``: layer i slides unless i + 1 is a multiple of it."""
    out = _decoder(r)
    out.update(norm_placement="post_branch", qk_norm="head")
    window = r.maybe_size("sliding_window")
    pattern = 0
    if r.has("layer_types"):
        r.ignore("sliding_window_pattern")
    elif window is None:  # transformers' default layer_types then divide by a pattern of 0
        r.fail("sliding_window", "is null, but a value is needed (transformers derives layer_types from it)")
    else:
        pattern = r.size("sliding_window_pattern")
    types = _layer_types(r, out, window, lambda i: (i + 1) % pattern != 0)
    if window is not None:
        _nope_full_layers(out, types)
    return out


def _olmo3(r: Raw) -> dict[str, Any]:
    """OLMo 3: OLMo 2 with sliding layers, three of every four by default."""
    out = _olmo2(r)
    _layer_types(r, out, r.maybe_size("sliding_window"), lambda i: (i + 1) % 4 != 0)
    return out


def _helium(r: Raw) -> dict[str, Any]:
    """Helium: ``attention_bias`` on q/k/v only; o_proj is hidden_size x hidden_size, so the heads
    must span hidden_size (transformers' forward fails otherwise)."""
    out = _llama(r)
    out["out_bias"] = False
    if out["n_heads"] * out.get("head_dim", out["d_model"] // out["n_heads"]) != out["d_model"]:
        r.fail("head_dim", f"num_attention_heads x head_dim must equal hidden_size ({out['d_model']}): "
                           "Helium's o_proj maps hidden_size to hidden_size")
    return out


def _arcee(r: Raw) -> dict[str, Any]:
    """Arcee (AFM): Llama's attention; an MLP of up and down projections only (Nemotron's),
    ReLU² (``relu2``) by default."""
    out = _decoder(r, gated=False)
    _attention_bias(r, out)
    out["mlp_bias"] = r.flag("mlp_bias")
    return out


def _internlm3(r: Raw) -> dict[str, Any]:
    """InternLM3, built as Llama; its ``attribute_map`` reads ``qkv_bias`` as ``attention_bias``
    and ``bias`` as ``mlp_bias`` (those win when both are given), and its class refuses the two
    unequal."""
    out = _decoder(r)
    bias, mlp = (r.flag(k if r.has(k) else key) for k, key in (("qkv_bias", "attention_bias"), ("bias", "mlp_bias")))
    if bias != mlp:
        r.fail("mlp_bias", f"must equal attention_bias ({bias}): InternLM3's config class refuses them unequal")
    out.update(qkv_bias=bias, out_bias=bias, mlp_bias=mlp)
    return out


def _ministral(r: Raw) -> dict[str, Any]:
    """Ministral: ``layer_types`` when given, else every layer slides. transformers' attention
    fails without a ``head_dim``, its model without a ``sliding_window``."""
    r.size("head_dim")
    out = _decoder(r)
    _layer_types(r, out, r.size("sliding_window"), lambda i: True)
    return out


def _ministral3(r: Raw) -> dict[str, Any]:
    """Ministral 3: Mistral's layout, one window on every layer when set; transformers ignores
    ``layer_types`` for it."""
    out = _decoder(r)
    r.ignore("layer_types")
    window = r.maybe_size("sliding_window")
    if window is not None:
        out["sliding_window"] = window
    return out


def _iquestcoder(r: Raw) -> dict[str, Any]:
    """IQuest-Coder, built as Llama; its class refuses ``clip_qkv`` and ``use_sliding_window``."""
    out = _llama(r)
    if r.has("clip_qkv"):
        r.fail("clip_qkv", "is not supported by transformers' IQuestCoder")
    r.false("use_sliding_window", "transformers' IQuestCoder refuses it")
    return out


def _jais2(r: Raw) -> dict[str, Any]:
    """Jais 2: Llama's attention with LayerNorms and an up/down MLP (Nemotron's), ReLU² by default."""
    out = _decoder(r, gated=False, norm="layernorm")
    _attention_bias(r, out)
    out["mlp_bias"] = r.flag("mlp_bias")
    return out


def _cwm(r: Raw) -> dict[str, Any]:
    """CWM: Llama without attention biases; every fourth layer (i % 4 == 0) full, the others slide."""
    out = _decoder(r)
    out["mlp_bias"] = r.flag("mlp_bias")
    _layer_types(r, out, r.size("sliding_window"), lambda i: i % 4 != 0)
    return out


MAPPERS: dict[str, Callable[[Raw], dict[str, Any]]] = {
    "glm4": _glm4, "glm": _glm, "ernie4_5": _ernie4_5, "hunyuan_v1_dense": _hunyuan_dense, "seed_oss": _seed_oss,
    "exaone4": _exaone4, "olmo3": _olmo3, "helium": _helium, "arcee": _arcee, "internlm3": _internlm3,
    "ministral": _ministral, "ministral3": _ministral3, "iquestcoder": _iquestcoder, "jais2": _jais2, "cwm": _cwm,
}
