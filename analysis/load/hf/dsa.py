"""DeepSeek Sparse Attention families: DeepSeek-V3.2 (``deepseek_v32``), GLM-5 (``glm_moe_dsa``) and Hy4
(``hy_v4``).

Both are DeepSeek-V3's latent attention (:func:`.core._mla`) with a lightning indexer (``index_n_heads``
heads of ``index_head_dim``, attention over the ``index_topk`` best keys: llmcalc's ``dsa``), and
GLM-4.5's experts (:func:`.moe._v3_moe`: routed experts with the router's ``e_score_correction_bias``,
the ``n_shared_experts`` as one MLP) after the dense layers of ``mlp_layer_types`` (default: the first
``first_k_dense_replace``). transformers points ``head_dim`` at ``qk_rope_head_dim`` (the key is
ignored), requires ``q_lora_rank`` (the indexer reads the normed low-rank query) and caches one indexer
key per token and layer beside the latent. The multi-token-prediction layers are not built by
transformers (not counted).

Hy4 adds to DeepSeek-V3.2's layers an attention output gate (``gate_proj``, d -> h*v_head_dim:
``attention_gate``), a sink logit per head (``attention_sinks``), layers that reuse the previous indexed
layer's top-k (``indexer_types`` "shared": ``dsa.shared``; default: layer 0 and every fourth from layer 1
index) and Hy4's independent hyper-connections (``hc_mult`` streams: ``hyper`` without ``mix``); its
dense layers are ``mlp_layer_types``' (default: the first). transformers sets ``num_key_value_heads``
to the heads and ``head_dim`` to the RoPE dims itself (both ignored).
"""

from __future__ import annotations

from typing import Any, Callable

from ...errors import brief
from .common import _cycle
from .core import _mla
from .moe import _set_moe, _v3_moe
from .raw import Raw
from .recent import _dense_layers

# the layer type of an indexed layer, and the legacy names transformers reads as it (Hy4-preview's config.json
# writes deepseek_sparse_attention)
_INDEXED = frozenset({"indexed_attention", "deepseek_sparse_attention", "qwen_sparse_attention"})


def _indexed(r: Raw, n: int) -> None:
    """``layer_types``: every layer ``indexed_attention`` (transformers' default; its cache keeps the
    indexer's keys on those layers only)."""
    types = r.get("layer_types")
    if types is not None and (not isinstance(types, list) or len(types) != n
                              or any(not isinstance(t, str) or t not in _INDEXED for t in types)):
        r.fail("layer_types", f"must be indexed_attention on every layer ({n}), got {brief(types)}")


def _dsa(r: Raw, out: dict[str, Any], dense: int | None = None) -> dict[str, Any]:
    """The indexer, every layer ``indexed_attention``, the experts after the dense layers (``mlp_layer_types``,
    else the first ``dense``, else ``first_k_dense_replace``)."""
    r.ignore("moe_layer_freq", "indexer_rope_interleave", "index_share_for_mtp_iteration", "mlp_bias")  # unread
    out["dsa"] = {"n_heads": r.size("index_n_heads"), "head_dim": r.size("index_head_dim"),
                  "topk": r.size("index_topk")}
    n = out["n_layers"]
    _indexed(r, n)
    if dense is None:
        dense = min(r.size("first_k_dense_replace", minimum=0), n)
    _set_moe(out, _v3_moe(r, _dense_layers(r, n, dense)))
    return out


def _deepseek_v32(r: Raw) -> dict[str, Any]:
    """DeepSeek-V3.2: MLA with its lightning indexer on every layer, DeepSeek-V3's experts."""
    out = _mla(r)
    return _dsa(r, out)


def _indexer_types(r: Raw, n: int) -> None:
    """GLM-5's per-layer indexer: ``indexer_types`` ("full" runs the indexer, "shared" reuses the previous
    full layer's top-k), else transformers' ``index_topk_pattern`` ("F"/"S"), else the schedule of
    ``index_topk_freq`` and ``index_skip_topk_offset`` (default: every layer full). Shared layers are not
    modeled (they have no indexer, no indexer key in the cache): refused, naming the key that makes them."""
    key, types = "indexer_types", r.get("indexer_types")
    if types is None and r.get("index_topk_pattern") is not None:
        key, pattern = "index_topk_pattern", r.get("index_topk_pattern")
        if isinstance(pattern, str) and set(pattern) <= {"F", "S"}:
            types = [{"F": "full", "S": "shared"}[c] for c in pattern]
        else:
            types = pattern
    elif types is None:
        # transformers reads these two only where given (a null fails there, as here)
        freq = max(r.size("index_topk_freq", minimum=0), 1) if "index_topk_freq" in r.raw else 1
        offset = r.size("index_skip_topk_offset", minimum=0) if "index_skip_topk_offset" in r.raw else 2
        key = "index_topk_freq"
        types = ["full" if max(i - offset + 1, 0) % freq == 0 else "shared" for i in range(n)]
    else:
        r.ignore("index_topk_pattern", "index_topk_freq", "index_skip_topk_offset")  # indexer_types wins
    if not isinstance(types, list) or len(types) != n or any(t not in ("full", "shared") for t in types):
        r.fail(key, f"must give one of full and shared per layer ({n}), got {brief(types)}")
    if "shared" in types:
        r.fail(key, "layers that reuse the previous layer's top-k ('shared') are not modeled; every layer "
                    "must run its indexer ('full')")


def _glm_moe_dsa(r: Raw) -> dict[str, Any]:
    """GLM-5: DeepSeek-V3.2's layers (its indexer rotates interleaved pairs: no count changes), every
    layer running its own indexer (:func:`_indexer_types`)."""
    out = _mla(r)
    _indexer_types(r, out["n_layers"])
    return _dsa(r, out)


def _shared_layers(r: Raw, n: int) -> list[bool]:
    """Hy4's ``indexer_types``: "full" runs the layer's indexer, "shared" reuses the previous full layer's top-k
    (layer 0 must index: transformers fails on a shared one); absent, layer 0 and every fourth from layer 1."""
    types = r.get("indexer_types")
    if types is None:
        types = ["full" if i == 0 or (i - 1) % 4 == 0 else "shared" for i in range(n)]
    if not isinstance(types, list) or len(types) != n or any(t not in ("full", "shared") for t in types):
        r.fail("indexer_types", f"must give one of full and shared per layer ({n}), got {brief(types)}")
    if types[0] == "shared":
        r.fail("indexer_types", "layer 0 must be full: a shared layer reuses the top-k of a full one before it")
    return [t == "shared" for t in types]


def _hy_v4(r: Raw) -> dict[str, Any]:
    """Hy4: DeepSeek-V3.2's layers with an output gate, sinks and shared indexer layers, and independent
    hyper-connections (module docstring)."""
    r.ignore("hc_magnitude", "hc_eps", "learnable_sink_init", "swiglu_limit", "norm_topk_prob")  # values only
    out = _mla(r, kv_heads=False)
    n = out["n_layers"]
    out.update(attention_gate=True, attention_sinks=True, hyper={"streams": r.size("hc_mult"), "mix": False})
    _dsa(r, out, min(1, n))
    shared = _shared_layers(r, n)
    if any(shared):
        out["dsa"]["shared"] = _cycle(shared)
    return out


MAPPERS: dict[str, Callable[[Raw], dict[str, Any]]] = {"deepseek_v32": _deepseek_v32,
                                                        "glm_moe_dsa": _glm_moe_dsa, "hy_v4": _hy_v4}
