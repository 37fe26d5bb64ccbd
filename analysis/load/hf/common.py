"""Helpers every family's mapper shares: the common fields (sizes, dtype, tying, the model's name), RoPE in
both transformers layouts, per-layer attention spans, the decoder block's shape, and the nulls transformers
refuses."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

from ...errors import ConfigError, brief
from ...model.sizes import MAX_LAYERS
from .defaults import Default
from .raw import Raw

_DTYPES = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}


_LAYER_TYPES = {"full_attention": "full", "sliding_attention": "sliding"}


def _dtype(r: Raw, default: str) -> str:
    key = "dtype" if r.has("dtype") else "torch_dtype"
    value = r.get(key)
    if value is None:
        return default
    if not isinstance(value, str) or value not in _DTYPES:
        r.fail(key, f"unsupported dtype {brief(value)}; expected one of: {', '.join(_DTYPES)}")
    return _DTYPES[value]


def _base(r: Raw, *, d: str = "hidden_size", layers: str = "num_hidden_layers", heads: str = "num_attention_heads",
          context: str = "max_position_embeddings", dtype: str = "bf16") -> dict[str, Any]:
    """Name, sizes, dtype and tying (a context length changes no count unless positions are learned)."""
    return {"name": _name(r.raw, r.source), "vocab_size": r.size("vocab_size"), "context_length": r.size(context),
            "d_model": r.size(d), "n_layers": r.size(layers, maximum=MAX_LAYERS), "n_heads": r.size(heads),
            "tie_embeddings": r.flag("tie_word_embeddings"), "dtype": _dtype(r, dtype)}


def _name(raw: dict[str, Any], source: str) -> str:
    """The model's name: in a Hugging Face cache snapshot
    (``models--<org>--<name>/snapshots/<commit>/config.json``) the repository's ``<name>``, never
    the commit hash; else the config's ``_name_or_path`` when it has one; else a ``config.json``'s
    folder (a model directory's name) or any other file's stem."""
    path = Path(os.path.abspath(source))  # not resolved: a snapshot's config.json links into blobs/
    folder, repo = path.parent, path.parent.parent.parent.name
    if path.parent.parent.name == "snapshots" and repo.startswith("models--"):
        return repo.split("--")[-1]
    given = raw.get("_name_or_path")
    if isinstance(given, str) and given.strip():
        return given
    return folder.name if path.name == "config.json" and folder.name else path.stem


def _rope(r: Raw, out: dict[str, Any], fraction: float | None = None,
          keys: tuple[str, str] = ("rope_theta", "partial_rotary_factor")) -> None:
    """RoPE from ``rope_parameters`` (transformers 5; per layer type for Gemma 3), else the top-level
    ``keys``, base and rotated fraction (transformers 4; absent: the class's defaults).
    ``fraction``: a family key already read (GPT-J's ``rotary_dim``)."""
    params = r.get("rope_parameters") or {}
    if not isinstance(params, dict):
        r.fail("rope_parameters", f"must be a mapping, got {brief(params)}")
    if "full_attention" in params and isinstance(params["full_attention"], dict):
        params = params["full_attention"]  # Gemma 3: one set per layer type; the bases change no count
    theta_key, fraction_key = keys
    theta = params.get("rope_theta", r.get(theta_key))
    r.get("rope_scaling")
    if fraction is None:
        fraction = params.get("partial_rotary_factor", r.get(fraction_key))
        # a number before any mapper computes with it (GLM-4.5 rounds its rotated dims up to even)
        if fraction is not None and (isinstance(fraction, bool) or not isinstance(fraction, (int, float))):
            key = "rope_parameters.partial_rotary_factor" if "partial_rotary_factor" in params else fraction_key
            r.fail(key, f"must be a number, got {brief(fraction)}")
    out["position"] = "rope"
    if theta is not None:
        out["rope_theta"] = theta
    if fraction is not None and fraction != 1:
        out["rotary_fraction"] = fraction


def _cycle(values: list[Any]) -> list[Any]:
    """The shortest list that repeats cyclically to ``values``."""
    n = len(values)
    return next(values[:p] for p in range(1, n + 1) if all(values[i] == values[i % p] for i in range(n)))


def _windows(r: Raw, out: dict[str, Any], types: Any, window: int | None) -> None:
    """Per-layer spans from transformers' ``layer_types`` (``sliding_attention``/``full_attention``)."""
    n = out["n_layers"]
    if not isinstance(types, list) or len(types) != n:
        r.fail("layer_types", f"must list one type per layer ({n}), got {brief(types)}")
    bad = [t for t in types if not isinstance(t, str) or t not in _LAYER_TYPES]
    if bad:
        r.fail("layer_types", f"unsupported layer type {brief(bad[0])} (llmcalc models full_attention and "
                              "sliding_attention; hybrid, linear and chunked layers are not modeled)")
    spans = [_LAYER_TYPES[t] for t in types]
    if "sliding" not in spans:
        return
    if window is None:  # transformers' sliding layers fail without one
        r.fail("sliding_window", "layer_types has sliding_attention layers but no sliding_window")
    out["sliding_window"] = window
    if "full" in spans:
        out["layer_types"] = _cycle(spans)


def _window(r: Raw) -> int | None:
    """``sliding_window``: 0 or None, no window (Qwen2-MoE writes 0 without use_sliding_window)."""
    return r.maybe_size("sliding_window", minimum=0) or None


def _layer_types(r: Raw, out: dict[str, Any], window: int | None, slides: Callable[[int], bool]) -> list[str]:
    """``layer_types`` if given, else transformers' default rule (``slides(i)``: layer i slides);
    returns them."""
    types = r.get("layer_types")
    if types is None:
        types = ["sliding_attention" if slides(i) else "full_attention" for i in range(out["n_layers"])]
    _windows(r, out, types, window)
    return types


def _nope_full_layers(out: dict[str, Any], types: list[str]) -> None:
    """RoPE on the sliding layers only, the full ones NoPE (Cohere 2, EXAONE 4 with a window)."""
    rope = [t == "sliding_attention" for t in types]
    if not all(rope):
        out["rope_layers"] = _cycle(rope)


def _every_layer_window(r: Raw, out: dict[str, Any], use: bool = True) -> None:
    """Mistral, Mixtral, Phi-3, Starcoder2, Qwen3-MoE: a window on every layer when set (and ``use``)."""
    window = _window(r)
    if not use:
        window = None
    if r.has("layer_types"):
        _windows(r, out, r.get("layer_types"), window)
    elif window is not None:
        out["sliding_window"] = window


# transformers' config classes that refuse a hidden_size the heads do not divide (their
# validate_architecture); the others floor-divide it into head_dim
_EXACT_HEADS = frozenset({"llama", "gpt_neox", "arcee", "internlm3", "iquestcoder", "jais2", "cwm"})


def _decoder(r: Raw, *, gated: bool = True, act: str = "hidden_act", norm: str = "rmsnorm",
             rope: tuple[str, str] = ("rope_theta", "partial_rotary_factor"), ff: str = "intermediate_size"
             ) -> dict[str, Any]:
    """The Llama layout: hidden_size, num_key_value_heads (None: one per head), head_dim (None:
    hidden_size // heads), intermediate_size (``ff``: the key of a family without one), RoPE."""
    out = _base(r)
    kv, head_dim = r.maybe_size("num_key_value_heads"), r.maybe_size("head_dim")
    out.update(n_kv_heads=out["n_heads"] if kv is None else kv, d_ff=r.size(ff),
               activation=r.activation(act, gated), norm=norm)
    if out["d_model"] % out["n_heads"] and r.raw["model_type"] in _EXACT_HEADS:  # even with a head_dim
        r.fail("num_attention_heads", f"must divide hidden_size ({out['d_model']}), as transformers' config "
                                      f"requires, got {out['n_heads']}")
    if head_dim is None and out["d_model"] % out["n_heads"]:
        head_dim = out["d_model"] // out["n_heads"]
    if head_dim is not None:
        out["head_dim"] = head_dim
    _rope(r, out, keys=rope)
    return out


def _attention_bias(r: Raw, out: dict[str, Any], key: str = "attention_bias") -> None:
    bias = r.flag(key)
    out["qkv_bias"] = out["out_bias"] = bias


def _divides(r: Raw, out: dict[str, Any], heads: str, width: str) -> None:
    """The heads must divide the width (these families' attention refuses the rest, or fails on it)."""
    if out["d_model"] % out["n_heads"]:
        r.fail(heads, f"must divide {width} ({out['d_model']}), got {out['n_heads']}")


_NULLABLE = Default(None, True)  # a key no table lists: transformers takes None or does not read it


def _refuse_null(raw: dict[str, Any], defaults: dict[str, Default], source: str, prefix: str = "") -> None:
    """A null transformers refuses: typed without None, or its code fails on None."""
    null = next((key for key, value in raw.items() if value is None and not defaults.get(key, _NULLABLE).nullable),
                None)
    if null is not None:
        raise ConfigError("is null, but a value is needed", source, prefix + null)
