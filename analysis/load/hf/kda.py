"""Families with KDA layers (Kimi Delta Attention): Kimi Linear (``kimi_linear``), KDA layers beside
DeepSeek's latent attention without positions, DeepSeek-V3's experts.

transformers' ``KimiLinearConfig`` names several keys twice (its ``attribute_map``): ``num_experts``
for ``num_local_experts``, ``num_experts_per_token`` for ``num_experts_per_tok``, ``num_shared_experts``
for ``n_shared_experts``, ``model_max_length`` for ``max_position_embeddings``, and the first of each
pair wins when a file gives both. The checkpoint's ``linear_attn_config`` (``num_heads``, ``head_dim``,
``short_conv_kernel_size``, and the 1-based ``full_attn_layers`` and ``kda_layers``) overrides the
top-level ``linear_*`` keys; ``layer_types`` overrides its layer lists.
"""

from __future__ import annotations

from typing import Any, Callable

from ...errors import brief
from .core import _mla, _shared_mlp
from .moe import _set_moe
from .raw import Raw
from .recent import _dense_layers

_NAMES = {"full_attention": "full", "linear_attention": "kda"}


def _kda_layers(r: Raw, n: int, linear: dict[str, Any]) -> list[str]:
    """Each layer's type: ``layer_types``, else ``linear_attn_config``'s ``full_attn_layers`` and
    ``kda_layers`` (both, 1-based, covering every layer), else every 4th layer from the fifth attends."""
    types = r.get("layer_types")
    key = "layer_types"
    if types is None and "full_attn_layers" in linear and "kda_layers" in linear:
        key = "linear_attn_config"
        full, kda = linear["full_attn_layers"], linear["kda_layers"]
        types = [None] * n
        for kind, layers in (("full_attention", full), ("linear_attention", kda)):
            if not isinstance(layers, list) or any(type(i) is not int or not 1 <= i <= n for i in layers):
                r.fail(key, f"must list layers 1 to {n} in full_attn_layers and kda_layers, got {brief(layers)}")
            for i in layers:
                types[i - 1] = kind
    elif types is None:
        types = ["full_attention" if i and i % 4 == 0 else "linear_attention" for i in range(n)]
    if not isinstance(types, list) or len(types) != n or any(t not in _NAMES for t in types):
        r.fail(key, f"must give each of the {n} layers 'full_attention' or 'linear_attention', got {brief(types)}")
    return [_NAMES[t] for t in types]


def _aliased(r: Raw, name: str, field: str, minimum: int = 1) -> tuple[int | None, str]:
    """The value of the ``attribute_map`` name ``name`` or of the field it stands for, and its key:
    ``name`` where the file gives it (a null too, which transformers then reads), else ``field``, else
    the class's default."""
    key = name if name in r.raw or field not in r.raw else field
    r.ignore(name, field)
    return r.maybe_size(key, minimum), key


def _kimi_linear(r: Raw) -> dict[str, Any]:
    """Kimi Linear (moonshotai/Kimi-Linear-48B-A3B-*): KDA layers (``kda``) and MLA layers that rotate
    nothing (transformers' KimiLinearAttention: NoPE, the shared key part as projected), a dense MLP in
    the layers ``mlp_layer_types`` says (default: the first ``first_k_dense_replace``), then routed
    experts with the router's ``e_score_correction_bias`` and the shared experts as one MLP. Its LM head
    is never tied (``tie_word_embeddings`` changes nothing in transformers)."""
    r.ignore("num_expert_group", "moe_renormalize", "tie_word_embeddings")
    context, key = _aliased(r, "model_max_length", "max_position_embeddings")
    out = _mla(r, rope=False, context=key if context is not None else "max_position_embeddings")
    if context is None:  # no bound in transformers: the class's default length
        out["context_length"] = r.defaults["model_max_length"].value
    out["tie_embeddings"] = False
    if r.get("hidden_act") not in ("silu", "swish"):
        r.fail("hidden_act", f"the kda mixer's conv is counted with SiLU, got {brief(r.get('hidden_act'))}")
    linear = r.get("linear_attn_config")
    if not isinstance(linear, dict):
        r.fail("linear_attn_config", f"must be a mapping, got {brief(linear)}")
    kda = {}
    for key, nested in (("linear_num_heads", "num_heads"), ("linear_head_dim", "head_dim"),
                        ("linear_conv_kernel_dim", "short_conv_kernel_size")):
        value = linear.get(nested, r.get(key))
        r.read.add(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            r.fail(f"linear_attn_config.{nested}" if nested in linear else key,
                   f"must be a positive integer, got {brief(value)}")
        kda[key] = value
    n = out["n_layers"]
    out["layer_types"] = _kda_layers(r, n, linear)
    if "kda" in out["layer_types"]:
        out["kda"] = kda
    expert = r.size("moe_intermediate_size")
    (experts, _), (top, key), (shared, _) = (_aliased(r, "num_experts", "num_local_experts"),
                                             _aliased(r, "num_experts_per_token", "num_experts_per_tok"),
                                             _aliased(r, "num_shared_experts", "n_shared_experts", 0))
    if top is None:  # its router fails on None
        r.fail(key, "is null, but a value is needed")
    moe: dict[str, Any] = {"num_experts": experts, "experts_per_token": top, "expert_d_ff": expert,
                           "router_bias": True}
    _shared_mlp(moe, (shared or 0) * expert)
    if r.get("mlp_layer_types") is None:
        dense = min(r.size("first_k_dense_replace", minimum=0), n)
    else:
        dense = 0
        r.ignore("first_k_dense_replace")
    dense = _dense_layers(r, n, dense)
    if dense:
        moe["first_dense_layers"] = dense
    _set_moe(out, moe)
    return out


MAPPERS: dict[str, Callable[[Raw], dict[str, Any]]] = {"kimi_linear": _kimi_linear}
