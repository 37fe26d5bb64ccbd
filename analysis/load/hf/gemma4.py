"""Gemma 4's language model (``gemma4_text``), as transformers 5's Gemma4TextModel builds it.

Gemma 3's layout (sandwich RMSNorms, per-head q/k norms, GeGLU, embeddings scaled by sqrt(d), layer i
slides unless i + 1 is a multiple of 6, the last layer always full) with:

- full-attention layers of their own shape: ``global_head_dim`` (``full_head_dim``) and, with
  ``attention_k_eq_v``, ``num_global_key_value_heads`` K/V heads (``full_kv_heads``) whose values are
  the k projection's output (no v projection: ``full_k_eq_v``). transformers turns those two keys into
  ``per_layer_config`` (per-layer overrides of ``head_dim`` and ``num_key_value_heads``), which its
  ``to_dict`` writes in their place; given, it is the source and the two keys are ignored, as
  transformers ignores them. Overrides the same on every full layer and none elsewhere are read,
  others refused;
- a weightless RMSNorm over each value head (``v_norm``), no parameters;
- proportional RoPE on the full layers: its tables cover the whole head (the dimensions beyond
  ``partial_rotary_factor`` turn at frequency 0), so the rotation is counted over the whole head;
- each layer's output times ``layer_scalar``, a buffer its checkpoint stores (one parameter per layer);
- with ``enable_moe_block`` (Gemma 4 26B-A4B), in every layer ``num_experts`` experts of width
  ``moe_intermediate_size``, ``top_k_experts`` per token, beside the MLP (``moe.beside_mlp``: the
  ``dense+moe`` FFN, :class:`analysis.model.ffn.DenseMoE`); the class has no default for the three;
- the score scale 1 changes no count.

Not modeled, each refused naming its key: per-layer embeddings (``hidden_size_per_layer_input``, the
E2B/E4B models), KV shared across layers (``num_kv_shared_layers``) and bidirectional attention
(``use_bidirectional_attention: all``). The multimodal ``gemma4`` checkpoint reads this language model
from its ``text_config`` (its vision tower: :mod:`.vision`; an audio tower is refused).
"""

from __future__ import annotations

import math
from typing import Any, Callable

from ...errors import brief
from .common import _attention_bias, _decoder, _window, _windows
from .raw import Raw


def _gemma4_text(r: Raw) -> dict[str, Any]:
    out = _gemma4_layers(r)
    if r.flag("enable_moe_block"):  # every layer: the experts beside its MLP (module docstring)
        out["moe"] = {"num_experts": r.size("num_experts"), "experts_per_token": r.size("top_k_experts"),
                      "expert_d_ff": r.size("moe_intermediate_size"), "beside_mlp": True}
    else:  # read only with the block
        r.ignore("num_experts", "top_k_experts", "moe_intermediate_size")
    if r.maybe_size("hidden_size_per_layer_input", minimum=0):
        r.fail("hidden_size_per_layer_input", "per-layer embeddings (Gemma 4 E2B/E4B) are not modeled")
    r.ignore("vocab_size_per_layer_input")
    return out


def _gemma4_unified_text(r: Raw) -> dict[str, Any]:
    """Gemma 4 12B's language model (``gemma4_unified_text``, the ``text_config`` of the multimodal
    ``gemma4_unified``): Gemma 4's layers (:func:`_gemma4_layers`), transformers' model the same module for
    module. Its class has no per-layer embeddings and no experts: ``hidden_size_per_layer_input``,
    ``vocab_size_per_layer_input``, ``enable_moe_block``, ``num_experts``, ``top_k_experts`` and
    ``moe_intermediate_size`` are no fields of it, and its model reads none of them (the published config
    still writes them)."""
    r.ignore("hidden_size_per_layer_input", "vocab_size_per_layer_input", "enable_moe_block", "num_experts",
             "top_k_experts", "moe_intermediate_size")
    return _gemma4_layers(r)


def _gemma4_layers(r: Raw) -> dict[str, Any]:
    """Gemma 4's dense layers (module docstring), shared by ``gemma4_text`` and ``gemma4_unified_text``."""
    out = _decoder(r, act="hidden_activation")
    _attention_bias(r, out)
    out.pop("rotary_fraction", None)  # proportional RoPE: tables over the whole head (module docstring)
    out.update(embedding_scale=math.sqrt(out["d_model"]), norm_placement="sandwich", qk_norm="head", v_norm=True,
               layer_scalar=True)
    if r.get("use_bidirectional_attention") == "all":  # "vision": image tokens only; text stays causal
        r.fail("use_bidirectional_attention", "bidirectional attention over every token is not modeled")
    if r.get("final_logit_softcapping"):
        out["final_logit_softcap"] = r.get("final_logit_softcapping")
    if r.maybe_size("num_kv_shared_layers", minimum=0):
        r.fail("num_kv_shared_layers", "KV shared across layers is not modeled")
    r.ignore("use_double_wide_mlp")  # doubles the MLP of KV-sharing layers only
    types = r.get("layer_types")
    if types is None:
        types = ["sliding_attention" if (i + 1) % 6 else "full_attention" for i in range(out["n_layers"])]
    if isinstance(types, list) and types and types[-1] != "full_attention":  # transformers forces it
        types = [*types[:-1], "full_attention"]
    _windows(r, out, types, _window(r))
    written = r.get("per_layer_config")
    if written is None and "per_layer_config" not in r.raw:  # transformers derives it from the two keys
        over: dict[str, Any] = {"head_dim": r.size("global_head_dim")}
        if r.flag("attention_k_eq_v"):  # transformers reads the global K/V heads only then
            global_kv = r.maybe_size("num_global_key_value_heads")
            if global_kv is not None:
                over["num_key_value_heads"] = global_kv
        r.ignore("num_global_key_value_heads")
    else:  # what transformers' to_dict writes (null: no overrides); the two keys are then ignored
        r.ignore("global_head_dim", "num_global_key_value_heads")
        over = _full_overrides(r, written or {}, types)
    head_dim = out.get("head_dim", out["d_model"] // out["n_heads"])
    full_head_dim = over.get("head_dim", head_dim)
    if not isinstance(full_head_dim, int) or isinstance(full_head_dim, bool) or full_head_dim < 1:
        r.fail("per_layer_config", f"head_dim must be a positive integer, got {brief(full_head_dim)}")
    if full_head_dim != head_dim:
        out["full_head_dim"] = full_head_dim
    full_kv = over.get("num_key_value_heads", out["n_kv_heads"])
    if not isinstance(full_kv, int) or isinstance(full_kv, bool) or full_kv < 1 or out["n_heads"] % full_kv:
        key = "per_layer_config" if written is not None else "num_global_key_value_heads"
        r.fail(key, f"the full layers' K/V heads must divide num_attention_heads ({out['n_heads']}), "
                    f"got {brief(full_kv)}")
    if full_kv != out["n_kv_heads"]:
        out["full_kv_heads"] = full_kv
    if r.flag("attention_k_eq_v"):  # the full layers' values are their keys (no v projection)
        out["full_k_eq_v"] = True
    return out


def _full_overrides(r: Raw, written: Any, types: list[str]) -> dict[str, Any]:
    """The overrides ``per_layer_config`` gives every full layer (the same for each, none elsewhere; the
    layer indices as text, zero-padded, as transformers writes them, or integers)."""
    if not isinstance(written, dict):
        r.fail("per_layer_config", f"must be a mapping, got {brief(written)}")
    layers: dict[int, Any] = {}
    for key, value in written.items():
        index = int(key) if isinstance(key, int) or (isinstance(key, str) and key.isdigit()) else -1
        if not 0 <= index < len(types) or not isinstance(value, dict):
            r.fail("per_layer_config", f"must map layer indices to overrides, got {brief(key)}: {brief(value)}")
        layers[index] = value
    full = [i for i, t in enumerate(types) if t == "full_attention"]
    over = layers.get(full[0], {}) if full else {}
    if set(over) - {"head_dim", "num_key_value_heads"} or any(layers.get(i, {}) != over for i in full) \
            or any(i not in full and v for i, v in layers.items()):
        r.fail("per_layer_config", "only head_dim and num_key_value_heads, the same on every full_attention "
                                   "layer and on no other, are modeled")
    return dict(over)


MAPPERS: dict[str, Callable[[Raw], dict[str, Any]]] = {"gemma4_text": _gemma4_text,
                                                        "gemma4_unified_text": _gemma4_unified_text}
