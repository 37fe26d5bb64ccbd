"""Translate a Hugging Face ``config.json`` into llmcalc config keys.

Only the architectures whose layout llmcalc reproduces exactly are accepted: GPT-2,
Llama, Mistral, Mixtral, Qwen2 and Qwen3. Anything else is a ConfigError rather than a
guess, because a silently wrong mapping would give silently wrong numbers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .errors import ConfigError

_LLAMA_LIKE = {"llama", "mistral", "mixtral", "qwen2", "qwen3"}


def _need(raw: dict[str, Any], key: str, source: str) -> Any:
    if key not in raw:
        raise ConfigError(f"missing Hugging Face key '{key}'", source, key)
    return raw[key]


def _activation(raw: dict[str, Any], key: str, default: str, gated: bool, source: str) -> str:
    """HF activation names to llmcalc's; Llama-style MLPs are gated (silu -> swiglu)."""
    act = raw.get(key, default)
    base = {"gelu": "gelu", "gelu_new": "gelu", "gelu_fast": "gelu", "gelu_pytorch_tanh": "gelu",
            "relu": "relu", "silu": "silu", "swish": "silu"}.get(act)
    if base is None:
        raise ConfigError(f"unsupported activation {act!r}", source, key)
    return {"gelu": "geglu", "relu": "reglu", "silu": "swiglu"}[base] if gated else base


def _window(raw: dict[str, Any], kind: str) -> dict[str, Any]:
    """Mistral windows every layer; Qwen the layers from ``max_window_layers`` on."""
    if not raw.get("sliding_window") or not raw.get("use_sliding_window", kind in ("mistral", "mixtral")):
        return {}
    n = raw["num_hidden_layers"]
    first = raw.get("max_window_layers", 0) if kind in ("qwen2", "qwen3") else 0
    if first >= n:
        return {}
    out: dict[str, Any] = {"sliding_window": raw["sliding_window"]}
    if first > 0:
        out["layer_types"] = ["full"] * first + ["sliding"] * (n - first)
    return out


def from_hf_config(raw: dict[str, Any], source: str) -> dict[str, Any]:
    kind = raw["model_type"]
    if not isinstance(kind, str):
        raise ConfigError(f"must be a string, got {kind!r}", source, "model_type")
    name = raw.get("_name_or_path") or Path(source).parent.name or Path(source).stem
    if kind == "gpt2":
        d = _need(raw, "n_embd", source)
        return {"name": name, "vocab_size": _need(raw, "vocab_size", source),
                "context_length": _need(raw, "n_positions", source), "d_model": d,
                "n_layers": _need(raw, "n_layer", source), "n_heads": _need(raw, "n_head", source),
                "d_ff": raw.get("n_inner") or 4 * d, "position": "learned",
                "activation": _activation(raw, "activation_function", "gelu_new", False, source),
                "qkv_bias": True, "out_bias": True, "mlp_bias": True,
                "tie_embeddings": raw.get("tie_word_embeddings", True), "dtype": "fp32"}
    if kind not in _LLAMA_LIKE:
        raise ConfigError(f"unsupported Hugging Face model_type {kind!r}; supported: gpt2, "
                          + ", ".join(sorted(_LLAMA_LIKE)), source, "model_type")
    out: dict[str, Any] = {
        "name": name, "vocab_size": _need(raw, "vocab_size", source),
        "context_length": _need(raw, "max_position_embeddings", source),
        "d_model": _need(raw, "hidden_size", source),
        "n_layers": _need(raw, "num_hidden_layers", source),
        "n_heads": _need(raw, "num_attention_heads", source),
        "n_kv_heads": raw.get("num_key_value_heads", raw.get("num_attention_heads")),
        "d_ff": _need(raw, "intermediate_size", source),
        "activation": _activation(raw, "hidden_act", "silu", True, source),
        "norm": "rmsnorm", "position": "rope",
        "rope_theta": raw.get("rope_theta", 10000.0),
        "tie_embeddings": bool(raw.get("tie_word_embeddings", False)),
        "qkv_bias": bool(raw.get("attention_bias", kind == "qwen2")),
        "out_bias": bool(raw.get("attention_bias", False)),
        "mlp_bias": bool(raw.get("mlp_bias", False)),
        "qk_norm": kind == "qwen3",
        "dtype": {"float32": "fp32", "float16": "fp16"}.get(raw.get("torch_dtype") or raw.get("dtype"),
                                                            "bf16"),
    }
    if raw.get("head_dim"):
        out["head_dim"] = raw["head_dim"]
    out.update(_window(raw, kind))
    if kind == "mixtral":
        out["moe"] = {"num_experts": _need(raw, "num_local_experts", source),
                      "experts_per_token": _need(raw, "num_experts_per_tok", source)}
    return out
