"""Translate a Hugging Face ``config.json`` into llmcalc config keys.

llmcalc counts what transformers builds for the config's ``model_type`` (its own modeling
code is the reference, ``tests/test_hf.py`` checks every family against it). One small
mapper per family, in the family modules of this package (:mod:`.core`, :mod:`.dense`, :mod:`.moe`,
:mod:`.older`, :mod:`.recent`, :mod:`.traits`, :mod:`.recurrent`), gathered in :data:`MAPPERS`;
shared helpers (:mod:`.common`) read the common fields, in both the transformers 4 layout
(``rope_theta``, ``rope_scaling``, ``partial_rotary_factor`` at the top level) and the transformers 5
layout (``rope_parameters``, ``layer_types``).

Policy for the keys of a config (docs/huggingface.md):
- a key left out is read as transformers' config class for the ``model_type`` reads it, with
  the class's default (:data:`.defaults.DEFAULTS`); a null as transformers reads it: refused
  where transformers refuses it, else None with the meaning transformers' code gives it;
- a key a mapper reads is honoured, or rejected with a ConfigError naming it when its value
  is something llmcalc cannot count (a bias on MLA projections, per-head LayerNorms, ...) or
  of the wrong type (``{}``, ``false``, a string or a float for a size);
- :data:`REJECTED` keys (hybrid, state-space, linear-attention or chunked-attention layers)
  are errors whenever they carry a value, in a family whose mapper does not read them;
- :data:`IGNORED` keys change no count (token ids, dropout, init ranges, rope scaling,
  routing details, value multipliers) and are ignored on purpose, as are family-specific ones
  listed with their mapper;
- any other key is one transformers' modeling code for that ``model_type`` does not read
  either (custom fields of remote code, training metadata), so it changes nothing there and
  is ignored; ``unclassified`` lists them, and the tests check that transformers' own config
  classes write none.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from ...errors import ConfigError, UnmappedModelType, brief
from . import (
    core,
    dense,
    dsa,
    gated_deltanet,
    gemma3n,
    gemma4,
    hybrid,
    kda,
    longcat,
    minimax,
    moe,
    older,
    recent,
    recurrent,
    rglru,
    traits,
    zamba,
)
from .common import _dtype, _name, _refuse_null
from .core import _qwen3_vl_moe_text, _qwen3_vl_text, _qwen_vl_text
from .defaults import DEFAULTS, SUBCONFIGS
from .quantization import _nested_quantization, _quant_method, _quantization
from .raw import Raw
from .vision import MULTIMODAL, Family

# Keys that change no count, for every family.
IGNORED = frozenset({
    "_name_or_path", "architectures", "transformers_version", "model_type", "auto_map",
    "bos_token_id", "eos_token_id", "pad_token_id", "sep_token_id", "decoder_start_token_id",
    "initializer_range", "init_std", "embedding_init_std", "initializer_factor",
    "attention_dropout", "hidden_dropout", "resid_pdrop", "embd_pdrop", "attn_pdrop", "residual_dropout",
    "embedding_dropout", "classifier_dropout", "summary_first_dropout", "hidden_dropout_prob",
    "rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon", "norm_epsilon",
    "use_cache", "output_attentions", "output_hidden_states", "return_dict", "is_encoder_decoder",
    "is_decoder", "id2label", "label2id", "problem_type", "chunk_size_feed_forward", "pretraining_tp",
    "rope_scaling", "original_max_position_embeddings", "rope_interleave",
    "output_router_logits", "router_aux_loss_coef", "router_jitter_noise", "norm_topk_prob",
    "routed_scaling_factor", "n_group", "topk_group", "topk_method", "scoring_func", "aux_loss_alpha",
    "seq_aux", "ep_size", "num_nextn_predict_layers",
    "attn_implementation", "_attn_implementation_autoset", "tokenizer_class",
})


# Keys of layers llmcalc models for some families only: an error whenever they carry a value in a
# family whose mapper does not read them (key -> what they describe; the families that read each)
REJECTED = {
    "attention_chunk_size": "chunked-attention layers",
    "layers_block_type": "hybrid or state-space layers",
    "hybrid_override_pattern": "hybrid or state-space layers",
    "attn_layer_indices": "hybrid or state-space layers",
    "attn_layer_period": "hybrid or state-space layers",
    "mamba_d_state": "hybrid or state-space layers",
    "ssm_state_size": "hybrid or state-space layers",
    "linear_num_value_heads": "linear-attention layers",
    "full_attention_interval": "linear-attention layers",
}
_READS_REJECTED: dict[str, tuple[str, ...]] = {
    "llama4_text": ("attention_chunk_size",),
    "bamba": ("attn_layer_indices", "mamba_d_state"),
    "granitemoehybrid": ("layers_block_type", "mamba_d_state"),
    "jamba": ("attn_layer_period", "mamba_d_state"),
    "nemotron_h": ("layers_block_type", "hybrid_override_pattern", "ssm_state_size"),
    "falcon_h1": ("mamba_d_state",),
    "zamba": ("layers_block_type", "attn_layer_period", "mamba_d_state"),
    "zamba2": ("layers_block_type", "mamba_d_state"),
    "olmo_hybrid": ("linear_num_value_heads",),
    **{k: ("linear_num_value_heads", "full_attention_interval")
       for k in ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text")},
}


MAPPERS: dict[str, Callable[[Raw], dict[str, Any]]] = {
    **core.MAPPERS,
    **dense.MAPPERS,
    **older.MAPPERS,
    **moe.MAPPERS,
    **recent.MAPPERS,
    **traits.MAPPERS,
    **recurrent.MAPPERS,
    **hybrid.MAPPERS,
    **minimax.MAPPERS,
    **gated_deltanet.MAPPERS,
    **rglru.MAPPERS,
    **dsa.MAPPERS,
    **gemma3n.MAPPERS,
    **gemma4.MAPPERS,
    **kda.MAPPERS,
    **longcat.MAPPERS,
    **zamba.MAPPERS,
}


# transformers' token embeddings without a padding_idx; torch's Embedding refuses the others' one
# outside the vocabulary
_UNPADDED = frozenset({"gpt2", "gptj", "gpt_neox", "falcon", "gpt_bigcode", "codegen", "mpt", "gpt-sw3",
                       "ctrl", "bloom", "gpt_neo", "openai-gpt"})


def _padding(r: Raw, vocab: int) -> None:
    pad = r.get("pad_token_id")
    if isinstance(pad, int) and not -vocab <= pad < vocab:
        r.fail("pad_token_id", f"must be a token of the vocabulary (vocab_size {vocab:,}), got {pad:,}")


# language models that exist only inside a multimodal checkpoint (Qwen-VL's)
_INSIDE: dict[str, Callable[[Raw], dict[str, Any]]] = {"qwen2_vl_text": _qwen_vl_text,
                                                         "qwen2_5_vl_text": _qwen_vl_text,
                                                         "qwen3_vl_text": _qwen3_vl_text,
                                                         "qwen3_vl_moe_text": _qwen3_vl_moe_text}


def _multimodal(raw: dict[str, Any], source: str, family: Family) -> tuple[dict[str, Any], Raw]:
    """A multimodal checkpoint (:mod:`.vision`): the language model read by the mapper of its own
    model_type, from ``text_config`` or (Qwen-VL's layout) the top-level keys, with its class's
    defaults; the vision tower and projector from ``vision_config`` and the top level; the LM head
    tied as the top level says (transformers ties by the top-level flag; Llama 4 by text_config's)."""
    kind = raw["model_type"]
    defaults, own = DEFAULTS[kind], SUBCONFIGS.get(kind, {})
    _refuse_null(raw, defaults, source)
    top = Raw(raw, source, defaults)
    if "text_config" in raw or not family.flat:
        text, prefix = top.get("text_config"), "text_config."
        text = own.get("text_config", {}) if text is None else text
        if not isinstance(text, dict):
            top.fail("text_config", f"must be a mapping, got {brief(text)}")
        text = {"model_type": family.text, **text}
    else:  # the language model's keys at the top level
        text, prefix = {k: v for k, v in raw.items() if k not in defaults and k != "vision_config"}, ""
        top.ignore(*text)
        text["model_type"] = family.text
    try:
        out, _ = _read(text, source, inside=True)
    except ConfigError as exc:  # a key of text_config
        raise ConfigError(exc.message, source, prefix + (exc.key or "model_type"), exc.line) from None
    family.top(top)
    vision = top.get("vision_config")
    if vision is None and family.vision_optional:  # transformers builds no tower
        return _top_level(out, raw, source, family, top), top
    vision = own.get("vision_config", {}) if vision is None else vision
    if not isinstance(vision, dict):
        top.fail("vision_config", f"must be a mapping, got {brief(vision)}")
    if family.vision_type is not None and vision.get("model_type", family.vision_type) != family.vision_type:
        top.fail("vision_config.model_type", f"llmcalc reads {family.vision_type} towers for {kind}, "
                                             f"got {brief(vision['model_type'])}")
    _refuse_null(vision, DEFAULTS[family.vision], source, "vision_config.")
    out["vision"] = family.tower(Raw(vision, source, DEFAULTS[family.vision], "vision_config."), top, out["d_model"])
    return _top_level(out, raw, source, family, top), top


def _top_level(out: dict[str, Any], raw: dict[str, Any], source: str, family: Family, top: Raw) -> dict[str, Any]:
    """The keys of a multimodal checkpoint's top level: its name, the tie, the dtype, quantization."""
    out["name"] = _name(raw, source)
    if family.text_ties:  # Llama 4: the language model's own flag (read with text_config)
        top.ignore("tie_word_embeddings")
    else:
        out["tie_embeddings"] = top.flag("tie_word_embeddings")
    if top.has("dtype") or top.has("torch_dtype"):
        out["dtype"] = _dtype(top, out["dtype"])
    if top.get("quantization_config") not in (None, {}):
        out.update(_quantization(top))
    return out


def _architecture_hint(raw: dict[str, Any]) -> str:
    """For a model_type no mapper reads, whose ``architectures`` name the class of one a mapper does (Kimi K2's
    ``kimi_k2`` and DeepseekV3ForCausalLM): that model_type, as a hint (never read as it silently); else ""."""
    for arch in raw.get("architectures") or []:
        if not isinstance(arch, str):
            continue
        stem = re.sub(r"(ForCausalLM|ForConditionalGeneration|LMHeadModel)$", "", arch).lower()
        kind = next((k for k in MAPPERS if k.replace("_", "") == stem), None)
        if kind is not None:
            return f"its architectures name {arch}: model_type {kind!r} reads it"
    return ""


# model_types of remote code whose ``auto_map`` names a configuration class transformers has, read as that class's
# model_type when the file's AutoConfig is that class: Kimi K2 ships DeepSeek-V3's code
# (configuration_deepseek.DeepseekV3Config) under model_type kimi_k2, which transformers does not register
REMOTE_CODE = {"kimi_k2": ("DeepseekV3Config", "deepseek_v3")}


def remote_code(raw: dict[str, Any]) -> dict[str, Any]:
    """``raw`` as the model_type its remote code's configuration class reads (:data:`REMOTE_CODE`), else as it is."""
    kind = raw.get("model_type")
    if not isinstance(kind, str) or kind not in REMOTE_CODE:
        return raw
    cls, reads = REMOTE_CODE[kind]
    auto = raw.get("auto_map")
    config = auto.get("AutoConfig") if isinstance(auto, dict) else None
    return {**raw, "model_type": reads} if isinstance(config, str) and config.rsplit(".", 1)[-1] == cls else raw


def _read(raw: dict[str, Any], source: str, inside: bool = False) -> tuple[dict[str, Any], Raw]:
    """llmcalc's keys for ``raw`` and what was read of it; ``inside``: the language model of a
    multimodal checkpoint."""
    raw = remote_code(raw)
    kind = raw.get("model_type")
    if not isinstance(kind, str):
        raise ConfigError(f"must be a string, got {brief(kind)}", source, "model_type")
    if kind in MULTIMODAL and not inside:
        return _multimodal(raw, source, MULTIMODAL[kind])
    mapper = MAPPERS.get(kind) or (_INSIDE.get(kind) if inside else None)
    if mapper is None:  # `llmcalc params` may count it through transformers (analysis.verify.fallback)
        hint = _architecture_hint(raw) or (f"the {len(MAPPERS)} supported are listed in the docs (Hugging Face "
                                           "configs, Supported model types)")
        raise UnmappedModelType(f"unsupported Hugging Face model_type {brief(kind)}; {hint}", source, raw,
                                _name(raw, source))
    for key, what in REJECTED.items():
        if raw.get(key) not in (None, {}, []) and key not in _READS_REJECTED.get(kind, ()):
            readers = ", ".join(sorted(k for k, keys in _READS_REJECTED.items() if key in keys))
            raise ConfigError(f"{what}: modeled for model_type {readers} only, not {kind!r}", source, key)
    nested = _nested_quantization(raw)
    if nested is not None:
        path, value = nested
        raise ConfigError(_quant_method(value) + "not supported inside a nested config; move it to the top "
                          "level, or delete it to count the dequantized model", source, path)
    defaults = DEFAULTS[kind]
    _refuse_null(raw, defaults, source)
    r = Raw(raw, source, defaults)
    out = mapper(r)
    if kind not in _UNPADDED:
        _padding(r, out["vocab_size"])
    if r.get("quantization_config") not in (None, {}):
        out.update(_quantization(r))
    return out, r


def from_hf_config(raw: dict[str, Any], source: str) -> dict[str, Any]:
    """llmcalc config keys for a Hugging Face config (or ConfigError naming the field)."""
    return _read(raw, source)[0]


def unclassified(raw: dict[str, Any], source: str = "config.json") -> list[str]:
    """Keys of ``raw`` no rule covers: neither read by its family's mapper nor listed as ignored."""
    _, r = _read(raw, source)
    return sorted(k for k in raw if k not in r.read and k not in IGNORED and k not in REJECTED)


__all__ = ["MAPPERS", "IGNORED", "REJECTED", "from_hf_config", "remote_code", "unclassified"]
