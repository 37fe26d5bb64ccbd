"""Griffin's families: RecurrentGemma (RG-LRU recurrent blocks beside local attention)."""

from __future__ import annotations

import math
from typing import Any

from ...errors import brief
from ...model.sizes import MAX_LAYERS
from .common import _cycle, _dtype, _name, _rope
from .raw import Raw


def _recurrent_gemma(r: Raw) -> dict[str, Any]:
    """RecurrentGemma (google/recurrentgemma-2b, -9b): layer i is ``block_types[i % len]`` (transformers
    repeats the list up to 100 times): ``recurrent`` a Griffin recurrent block (``rglru``: linear_y and
    linear_x to ``lru_width``, null: hidden_size, a depthwise conv of ``conv1d_width`` taps, the RG-LRU with
    ``num_attention_heads`` gate blocks, linear_out; biases on all), any other entry local attention over
    ``attention_window_size`` tokens (sliding; q, k, v biased iff ``attention_bias``, o always; head_dim
    ``hidden_size // num_attention_heads`` whatever the config says, as transformers' config sets it;
    RoPE on ``partial_rotary_factor`` of it, 0.5 by default). Every layer: a gated MLP of
    ``intermediate_size // 2`` with biases, pre-norm RMSNorms (1 + w), embeddings scaled by sqrt(d), a
    final norm, ``logits_soft_cap`` on the logits, the head tied. The activation (``hidden_activation``)
    is the MLP's and the recurrent block's y branch's: GELU there. The configs give no context length
    (RoPE needs none): 8192. ``embeddings_scale_by_sqrt_dim`` and ``_block_types`` (written by
    transformers 4) are not read by transformers 5; the init scales change values only."""
    r.ignore("w_init_variance_scale", "final_w_init_variance_scale", "embeddings_scale_by_sqrt_dim", "_block_types",
             "head_dim")
    d, heads = r.size("hidden_size"), r.size("num_attention_heads")
    n = r.size("num_hidden_layers", maximum=MAX_LAYERS)
    out: dict[str, Any] = {"name": _name(r.raw, r.source), "vocab_size": r.size("vocab_size"), "context_length": 8192,
                           "d_model": d, "n_layers": n, "n_heads": heads,
                           "tie_embeddings": r.flag("tie_word_embeddings"), "dtype": _dtype(r, "bf16")}
    kinds = r.get("block_types")
    if not isinstance(kinds, (list, tuple)) or not kinds or any(not isinstance(k, str) for k in kinds):
        r.fail("block_types", f"must list 'recurrent' or 'attention' blocks, got {brief(kinds)}")
    if n > 100 * len(kinds):  # transformers repeats the list 100 times
        r.fail("block_types", f"repeated 100 times ({100 * len(kinds)} layers) must cover the {n} layers")
    types = ["rglru" if kinds[i % len(kinds)] == "recurrent" else "sliding" for i in range(n)]
    half = r.size("intermediate_size", minimum=2) // 2
    out.update(d_ff=half, activation=r.activation("hidden_activation", True), norm="rmsnorm", mlp_bias=True,
               embedding_scale=math.sqrt(d), layer_types=_cycle(types))
    if "rglru" in types and out["activation"] != "geglu":
        r.fail("hidden_activation", f"the recurrent block's y branch is counted with GELU, got "
                                    f"{brief(r.get('hidden_activation'))}")
    cap = r.get("logits_soft_cap")
    if cap:
        out["final_logit_softcap"] = cap
    if "sliding" in types:
        kv = r.maybe_size("num_key_value_heads")
        out.update(n_kv_heads=heads if kv is None else kv, qkv_bias=r.flag("attention_bias"), out_bias=True,
                   sliding_window=r.size("attention_window_size"))
        if d % heads:
            out["head_dim"] = d // heads
        _rope(r, out)
    else:  # no layer attends: the attention keys are read by no layer
        out["position"] = "none"
    if "rglru" in types:
        width = r.maybe_size("lru_width")
        out["rglru"] = {"d_conv": r.size("conv1d_width")}
        if width is not None and width != d:
            out["rglru"]["width"] = width
    return out


MAPPERS = {"recurrent_gemma": _recurrent_gemma}
