"""NOT REGISTERED in MAPPERS yet (work in progress): it refuses per-layer embeddings, whose default
(``hidden_size_per_layer_input`` 256) tests/test_hf.py requires read as transformers reads it, and it
does not yet read ``per_layer_config`` as the source of the full layers' shape (transformers' to_dict
writes it instead of ``global_head_dim``/``num_global_key_value_heads``).

Gemma 4's language model (``gemma4_text``), as transformers 5's Gemma4TextModel builds it.

Gemma 3's layout (sandwich RMSNorms, per-head q/k norms, GeGLU, embeddings scaled by sqrt(d), layer i
slides unless i + 1 is a multiple of 6, the last layer always full) with:

- full-attention layers of their own shape: ``global_head_dim`` (``full_head_dim``) and, with
  ``attention_k_eq_v``, ``num_global_key_value_heads`` K/V heads (``full_kv_heads``) whose values are
  the k projection's output (no v projection: ``full_k_eq_v``);
- a weightless RMSNorm over each value head (``v_norm``), no parameters;
- proportional RoPE on the full layers: its tables cover the whole head (the dimensions beyond
  ``partial_rotary_factor`` turn at frequency 0), so the rotation is counted over the whole head;
- each layer's output times ``layer_scalar``, a buffer its checkpoint stores (one parameter per layer);
- the score scale 1 changes no count.

Not modeled, each refused naming its key: the mixture of experts beside the MLP
(``enable_moe_block``, Gemma 4 26B-A4B), per-layer embeddings (``hidden_size_per_layer_input``, the
E2B/E4B models), KV shared across layers (``num_kv_shared_layers``) and bidirectional attention
(``use_bidirectional_attention: all``). The multimodal ``gemma4`` checkpoint (its vision tower: 2-D
RoPE, a pooler, clipped linears; its audio tower) has no mapper: transformers counts it.
"""

from __future__ import annotations

import math
from typing import Any, Callable

from ...errors import brief
from .common import _attention_bias, _decoder, _window, _windows
from .raw import Raw


def _gemma4_text(r: Raw) -> dict[str, Any]:
    out = _decoder(r, act="hidden_activation")
    _attention_bias(r, out)
    out.pop("rotary_fraction", None)  # proportional RoPE: tables over the whole head (module docstring)
    out.update(embedding_scale=math.sqrt(out["d_model"]), norm_placement="sandwich", qk_norm="head", v_norm=True,
               layer_scalar=True)
    if r.get("use_bidirectional_attention") == "all":  # "vision": image tokens only; text stays causal
        r.fail("use_bidirectional_attention", "bidirectional attention over every token is not modeled")
    if r.get("final_logit_softcapping"):
        out["final_logit_softcap"] = r.get("final_logit_softcapping")
    if r.flag("enable_moe_block"):
        r.fail("enable_moe_block", "Gemma 4's mixture of experts beside the MLP is not modeled")
    r.ignore("num_experts", "top_k_experts", "moe_intermediate_size")
    if r.maybe_size("hidden_size_per_layer_input", minimum=0):
        r.fail("hidden_size_per_layer_input", "per-layer embeddings (Gemma 4 E2B/E4B) are not modeled")
    r.ignore("vocab_size_per_layer_input")
    if r.maybe_size("num_kv_shared_layers", minimum=0):
        r.fail("num_kv_shared_layers", "KV shared across layers is not modeled")
    r.ignore("use_double_wide_mlp")  # doubles the MLP of KV-sharing layers only
    types = r.get("layer_types")
    if types is None:
        types = ["sliding_attention" if (i + 1) % 6 else "full_attention" for i in range(out["n_layers"])]
    if isinstance(types, list) and types and types[-1] != "full_attention":  # transformers forces it
        types = [*types[:-1], "full_attention"]
    _windows(r, out, types, _window(r))
    full_head_dim = r.size("global_head_dim")
    if full_head_dim != out.get("head_dim", out["d_model"] // out["n_heads"]):
        out["full_head_dim"] = full_head_dim
    global_kv = r.maybe_size("num_global_key_value_heads")
    if r.flag("attention_k_eq_v"):  # transformers reads the global K/V heads only then
        out["full_k_eq_v"] = True
        if global_kv is not None:
            if out["n_heads"] % global_kv:
                r.fail("num_global_key_value_heads", f"must divide num_attention_heads ({out['n_heads']}), "
                                                     f"got {brief(global_kv)}")
            out["full_kv_heads"] = global_kv
    written = r.get("per_layer_config")  # what transformers' to_dict writes: it must be what the keys above imply
    if written is not None:
        over: dict[str, Any] = {"head_dim": full_head_dim}
        if r.flag("attention_k_eq_v") and global_kv is not None:
            over["num_key_value_heads"] = global_kv
        implied = {i: over for i, t in enumerate(types) if t == "full_attention"}
        # transformers writes the layer indices as text, zero-padded ("05")
        if not isinstance(written, dict) or {int(k) if str(k).isdigit() else k: v
                                             for k, v in written.items()} != implied:
            r.fail("per_layer_config", "per-layer overrides other than global_head_dim and "
                                       "num_global_key_value_heads imply are not modeled")
    return out


MAPPERS: dict[str, Callable[[Raw], dict[str, Any]]] = {"gemma4_text": _gemma4_text}
