"""Families of 2025-2026 built from the shared parts: Granite with sliding windows (dense and MoE), VaultGemma,
Mellum, HyperCLOVA X, Youtu, Solar Open, Cohere 2 MoE, K-EXAONE (exaone_moe), GLM-4.7-Flash (glm4_moe_lite),
MiniCPM3, Flint, Kolibri, Cohere Compass, Aria's language model, Hy3 (hy_v3), CTRL."""

from __future__ import annotations

import math
from typing import Any, Callable

from ...errors import brief
from .common import _attention_bias, _base, _cycle, _decoder, _divides, _layer_types, _nope_full_layers, _window
from .core import _first, _gemma2, _granite, _mla, _moe_layers, _shared_mlp
from .dense import _exaone4
from .moe import _granitemoe, _set_moe, _v3_moe
from .older import _command
from .raw import Raw


def _rope_where(out: dict[str, Any], rope: list[bool]) -> None:
    """RoPE on the layers ``rope`` marks (the others NoPE); on none: no positions at all."""
    if not any(rope):
        out["position"] = "none"
        out.pop("rope_theta", None)
        out.pop("rotary_fraction", None)
    elif not all(rope):
        out["rope_layers"] = _cycle(rope)


def _whole_heads(r: Raw, out: dict[str, Any]) -> None:
    """Families whose RoPE rotates whole heads only (a partial_rotary_factor fails in their forward)."""
    if "rotary_fraction" in out:
        r.fail("partial_rotary_factor", f"must be 1: transformers' {r.raw['model_type']} rotates whole heads "
                                        f"(its forward fails on {out['rotary_fraction']})")


def _dense_layers(r: Raw, n: int, dense: int) -> int:
    """How many layers keep a dense MLP: ``mlp_layer_types`` ("dense"/"sparse", one per layer; a
    leading run of dense layers is modeled), else the first ``dense``."""
    types = r.get("mlp_layer_types")
    if types is None:
        return dense
    if not isinstance(types, list) or len(types) != n or any(t not in ("dense", "sparse") for t in types):
        r.fail("mlp_layer_types", f"must list one of dense and sparse per layer ({n}), got {brief(types)}")
    k = types.count("dense")
    if types[:k] != ["dense"] * k:
        r.fail("mlp_layer_types", f"only a leading run of dense layers is modeled, got {brief(types)}")
    return k


def _granite_swa(r: Raw) -> dict[str, Any]:
    """Granite SWA and Granite MoE SWA: Granite (MoE with an optional shared MLP) with one learned
    sink logit per head (``sinks``); without ``layer_types`` layer i is full when i % 4 == 0, else
    it slides; ``layer_rope_theta``: one RoPE base per layer, 0 a NoPE layer (the bases change no
    count)."""
    out = _granitemoe(r) if r.raw["model_type"] == "granitemoe_swa" else _granite(r)
    out["attention_sinks"] = True
    _layer_types(r, out, _window(r), lambda i: i % 4 != 0)
    n, thetas = out["n_layers"], r.get("layer_rope_theta")
    if thetas is not None:  # transformers reads theta i for layer i
        if not isinstance(thetas, list) or len(thetas) != n or any(
                isinstance(t, bool) or not isinstance(t, (int, float)) for t in thetas):
            r.fail("layer_rope_theta", f"must list one RoPE base per layer ({n}), 0 for NoPE, got {brief(thetas)}")
        _rope_where(out, [t != 0 for t in thetas])
    return out


def _vaultgemma(r: Raw) -> dict[str, Any]:
    """VaultGemma: Gemma 2 without the norms after the branches (pre-norm). Its config class refuses
    a hidden_size the heads do not divide, whatever ``head_dim`` says."""
    out = _gemma2(r)
    del out["norm_placement"]
    _divides(r, out, "num_attention_heads", "hidden_size")
    return out


def _hyperclovax(r: Raw) -> dict[str, Any]:
    """HyperCLOVA X: Granite with a norm after each branch too (``use_post_norm``, Peri-LN: llmcalc's
    sandwich; transformers names them ``post_norm1`` and ``post_norm2``). Its config class refuses a
    hidden_size the heads do not divide, whatever ``head_dim`` says."""
    out = _granite(r)
    _divides(r, out, "num_attention_heads", "hidden_size")
    if r.flag("use_post_norm"):
        out["norm_placement"] = "sandwich"
    return out


def _mellum(r: Raw) -> dict[str, Any]:
    """Mellum: Qwen3-MoE's attention (per-head q/k norms) and experts; ``layer_types`` (all full by
    default) and ``mlp_layer_types`` (all sparse by default; dense layers ``intermediate_size``
    wide). One RoPE base per layer type. The multi-token-prediction layers are not built by
    transformers (not counted)."""
    out = _decoder(r)
    _whole_heads(r, out)
    params = r.get("rope_parameters")
    sliding = params.get("sliding_attention") if isinstance(params, dict) else None
    if isinstance(sliding, dict) and sliding.get("partial_rotary_factor", 1) != 1:
        r.fail("partial_rotary_factor", "must be 1: transformers' mellum rotates whole heads")
    _attention_bias(r, out)
    out["qk_norm"] = "head"
    r.ignore("mtp_layer_types", "mtp_mlp_layer_types")
    _layer_types(r, out, _window(r), lambda i: False)
    dense = _dense_layers(r, out["n_layers"], 0)
    moe = {"num_experts": _first(r, "num_experts", "num_local_experts"),
           "experts_per_token": r.size("num_experts_per_tok"), "expert_d_ff": r.size("moe_intermediate_size")}
    _set_moe(out, {**moe, "first_dense_layers": dense} if dense else moe)
    return out


def _youtu(r: Raw) -> dict[str, Any]:
    """Youtu-LLM: DeepSeek-V3's latent attention (:func:`_mla`) on dense Llama layers."""
    r.ignore("embedding_initializer_range")
    return _mla(r)


def _minicpm3(r: Raw) -> dict[str, Any]:
    """MiniCPM3: DeepSeek-V2's latent attention (:func:`_mla`; a null ``v_head_dim`` is hidden_size //
    heads) on dense Llama layers (``mlp_bias``), token embeddings scaled by ``scale_emb``;
    ``scale_depth`` and ``dim_model_base`` scale the residual branches and the logits only."""
    out = _mla(r, derive_v=True)
    out["mlp_bias"] = r.flag("mlp_bias")
    r.ignore("scale_depth", "dim_model_base")
    scale = r.get("scale_emb")
    if scale != 1:
        out["embedding_scale"] = scale
    return out


def _glm4_moe_lite(r: Raw) -> dict[str, Any]:
    """GLM-4.7-Flash: DeepSeek-V3's latent attention (:func:`_mla`) and GLM-4.5's experts
    (:func:`_v3_moe`) after the dense layers of ``mlp_layer_types`` (the first one by default). Its
    ``attribute_map`` reads a ``head_dim`` key as ``qk_rope_head_dim`` (that key wins)."""
    out = _mla(r)
    if r.has("head_dim"):
        out["mla"]["qk_rope_head_dim"] = r.size("head_dim")
    _set_moe(out, _v3_moe(r, _dense_layers(r, out["n_layers"], 1)))
    return out


def _solar_open(r: Raw) -> dict[str, Any]:
    """Solar Open: GLM-4.5's experts (:func:`_v3_moe`) in every layer, on Llama's attention with
    ``attention_bias`` on q, k and v only (o_proj has none); RoPE over whole heads."""
    out = _decoder(r, ff="moe_intermediate_size")  # no dense layer: intermediate_size is no field
    _whole_heads(r, out)
    out["qkv_bias"] = r.flag("attention_bias")
    out["moe"] = _v3_moe(r, 0)
    return out


def _exaone_moe(r: Raw) -> dict[str, Any]:
    """K-EXAONE: EXAONE 4's attention (per-head q/k norms, RoPE on the sliding layers only) in
    pre-norm layers; after the dense layers of ``mlp_layer_types`` (else the first
    ``first_k_dense_replace``) DeepSeek-V3's experts: ``num_experts`` routed ones with the router's
    ``e_score_correction_bias`` (``router_bias``) and the ``num_shared_experts`` as one MLP that
    many times ``moe_intermediate_size`` wide. The multi-token-prediction layers are not built by
    transformers (not counted)."""
    out = _exaone4(r)
    del out["norm_placement"]
    n, expert = out["n_layers"], r.size("moe_intermediate_size")
    if r.has("mlp_layer_types"):
        r.ignore("first_k_dense_replace")  # read only to derive a missing mlp_layer_types
        dense = _dense_layers(r, n, 0)
    else:
        dense = r.size("first_k_dense_replace", minimum=0)
    moe: dict[str, Any] = {"num_experts": r.size("num_experts"), "experts_per_token": r.size("num_experts_per_tok"),
                           "expert_d_ff": expert, "router_bias": True}
    shared = r.size("num_shared_experts", minimum=0)
    _shared_mlp(moe, shared * expert)
    if dense:
        moe["first_dense_layers"] = dense
    _set_moe(out, moe)
    return out


def _flint(r: Raw) -> dict[str, Any]:
    """Flint: Qwen3-MoE's attention (per-head q/k norms) with sinks; layer i full when i < 2,
    i % 4 == 1 or it is the last, else sliding, and only the sliding layers apply RoPE. The
    ``mlp_only_layers`` (None: [0, 1]) dense, the others MoE with one ungated shared expert
    ``shared_expert_intermediate_size`` wide (0: none); ``num_experts`` 0 builds every layer dense."""
    out = _decoder(r)
    _attention_bias(r, out)
    out.update(qk_norm="head", attention_sinks=True)
    n = out["n_layers"]
    types = _layer_types(r, out, _window(r), lambda i: not (i < 2 or i % 4 == 1 or i == n - 1))
    _nope_full_layers(out, types)
    experts = r.size("num_experts", minimum=0)
    if not experts:
        return out
    moe: dict[str, Any] = {"num_experts": experts, "experts_per_token": r.size("num_experts_per_tok"),
                           "expert_d_ff": r.size("moe_intermediate_size")}
    shared = r.size("shared_expert_intermediate_size", minimum=0)
    _shared_mlp(moe, shared)
    _moe_layers(r, moe, null=(0, 1))
    _set_moe(out, moe)
    return out


def _kolibri1(r: Raw) -> dict[str, Any]:
    """Kolibri-1: GLM-4-0414's sandwich norms and EXAONE 4's attention (per-head q/k norms; with a
    ``sliding_window`` only the sliding layers apply RoPE); layer i full when i + 1 is a multiple
    of 5, else sliding. Every layer MoE, experts ``moe_intermediate_size`` wide (it has no
    intermediate_size), the router's ``e_score_correction_bias`` (a buffer the checkpoint stores:
    ``router_bias``) and one ungated shared MLP ``shared_expert_intermediate_size`` wide."""
    out = _decoder(r, ff="moe_intermediate_size")
    out.update(norm_placement="sandwich", qk_norm="head")
    window = r.maybe_size("sliding_window", minimum=0)  # 0 with full layers only: NoPE, as transformers reads it
    types = _layer_types(r, out, window or None, lambda i: (i + 1) % 5 != 0)
    if window is not None:
        _nope_full_layers(out, types)
    moe: dict[str, Any] = {"num_experts": _first(r, "num_local_experts", "num_experts"),
                           "experts_per_token": r.size("num_experts_per_tok"), "router_bias": True}
    shared = r.size("shared_expert_intermediate_size", minimum=0)
    _shared_mlp(moe, shared)
    out["moe"] = moe
    return out


def _cohere_compass(r: Raw) -> dict[str, Any]:
    """Cohere's compass text model (North): Command R7B's layer, every layer full by default, RoPE
    per layer type from ``rope_parameters`` (a null entry: that type is NoPE; a type without an
    entry fails in transformers), a ``sliding_window`` needed even without sliding layers. Its class
    overwrites ``head_dim`` with hidden_size // heads; ``pooling`` serves its classifier only."""
    out = _command(r)
    out.pop("head_dim", None)
    if out["d_model"] % out["n_heads"]:
        out["head_dim"] = out["d_model"] // out["n_heads"]
    r.ignore("pooling")
    window = r.size("sliding_window", minimum=0)  # its forward builds the sliding mask, used or not
    types = _layer_types(r, out, window or None, lambda i: False)
    params = r.get("rope_parameters")
    missing = [t for t in dict.fromkeys(types) if not isinstance(params, dict) or t not in params]
    if missing:
        r.fail("rope_parameters", f"must give an entry (null: no RoPE) for each layer type, none for {missing[0]}")
    for key in ("rope_theta", "rotary_fraction"):
        out.pop(key, None)
    rope = [params[t] is not None for t in types]
    if not any(rope):
        out["position"] = "none"
        return out
    theta = params[types[rope.index(True)]]
    if isinstance(theta, dict) and theta.get("rope_theta") is not None:
        out["rope_theta"] = theta["rope_theta"]
    if not all(rope):
        out["rope_layers"] = _cycle(rope)
    return out


def _aria_text(r: Raw) -> dict[str, Any]:
    """Aria's text model: Llama's attention; every layer MoE, the routed experts
    ``intermediate_size`` wide and SiLU-gated whatever ``hidden_act`` says, the
    ``moe_num_shared_experts`` one MLP that many times as wide. ``mlp_bias`` biases that shared
    MLP only (even 0 wide: its down projection's bias), which llmcalc does not model."""
    out = _decoder(r)
    _divides(r, out, "num_attention_heads", "hidden_size")  # its class refuses the rest
    _attention_bias(r, out)
    if out["activation"] != "swiglu":
        r.fail("hidden_act", f"must be silu (the routed experts are SiLU-gated), got {brief(r.get('hidden_act'))}")
    r.false("mlp_bias", "biases on the shared experts but not the routed ones are not modeled")
    moe: dict[str, Any] = {"num_experts": r.size("moe_num_experts"), "experts_per_token": r.size("moe_topk")}
    shared = r.size("moe_num_shared_experts", minimum=0)
    _shared_mlp(moe, shared * out["d_ff"])
    out["moe"] = moe
    return out


def _mlp_layer_types(r: Raw, n: int) -> dict[str, Any] | None:
    """``mlp_layer_types`` (one "dense" or "sparse" per layer; None: the first dense, the rest
    sparse) as ``first_dense_layers`` and ``step``; None without a sparse layer. A pattern those
    cannot express is refused."""
    types = r.get("mlp_layer_types")
    if types is None:
        types = ["dense"] + ["sparse"] * (n - 1)
    if not isinstance(types, list) or len(types) != n or any(t not in ("dense", "sparse") for t in types):
        r.fail("mlp_layer_types", f"must list dense or sparse for each layer ({n}), got {brief(types)}")
    sparse = [i for i, t in enumerate(types) if t == "sparse"]
    if not sparse:
        return None
    step = sparse[1] - sparse[0] if len(sparse) > 1 else sparse[0] + 1
    first = max(0, sparse[0] - step + 1)
    if sparse != [i for i in range(n) if i >= first and (i + 1) % step == 0]:
        r.fail("mlp_layer_types", "only dense layers first, then every step-th layer sparse, is modeled")
    moe: dict[str, Any] = {}
    if first:
        moe["first_dense_layers"] = first
    if step != 1:
        moe["step"] = step
    return moe


def _hy_v3(r: Raw) -> dict[str, Any]:
    """Hy3: per-head q/k norms, ``attention_bias`` on q/k/v/o; ``mlp_layer_types`` (the first
    dense by default); MoE layers with the block's ``e_score_correction_bias`` (a buffer the
    checkpoint stores: ``router_bias``) and the ``num_shared_experts`` as one MLP that many times
    ``moe_intermediate_size`` wide (0: ``intermediate_size`` wide, transformers' ``or``).
    ``mlp_bias`` biases the dense and shared MLPs but not the routed experts: not modeled with MoE
    layers."""
    out = _decoder(r)
    _attention_bias(r, out)
    out["qk_norm"] = "head"
    r.ignore("router_scaling_factor", "enable_moe_fp32_combine")  # routing weights, the sum's precision
    moe = _mlp_layer_types(r, out["n_layers"])
    if moe is None:
        out["mlp_bias"] = r.flag("mlp_bias")
        return out
    r.false("mlp_bias", "biases on the shared experts but not the routed ones are not modeled")
    expert = r.size("moe_intermediate_size")
    shared = expert * r.size("num_shared_experts", minimum=0) or out["d_ff"]
    moe.update(num_experts=_first(r, "num_local_experts", "num_experts"),
               experts_per_token=r.size("num_experts_per_tok"), expert_d_ff=expert, router_bias=True,
               shared_experts=1, shared_expert_d_ff=shared)
    _set_moe(out, moe)
    return out


def _cohere2_moe(r: Raw) -> dict[str, Any]:
    """Command A MoE (cohere2_moe): Cohere 2's parallel layer, a LayerNorm without bias (an RMSNorm
    when ``rms_norm_eps`` is set). The dense layers of ``mlp_layer_types`` come first,
    ``prefix_dense_intermediate_size`` wide (null: ``intermediate_size``); the experts and the
    ``num_shared_experts`` (one MLP that many times as wide) are ``intermediate_size`` wide. Without
    ``layer_types``/``mlp_layer_types`` transformers derives them from ``first_k_dense_replace``
    dense layers with their own ``prefix_dense_sliding_window_pattern``. RoPE on the sliding layers,
    and on the dense ones when that pattern is 1; the others NoPE. How the shared output is combined
    changes no count."""
    out = _command(r)
    n, width, prefix_width = out["n_layers"], out["d_ff"], r.maybe_size("prefix_dense_intermediate_size")
    if r.get("rms_norm_eps") is not None:
        out["norm"] = "rmsnorm"
        del out["norm_bias"]
    r.ignore("shared_expert_combination_strategy", "expert_selection_fn")
    first = 0
    if not r.has("layer_types") or not r.has("mlp_layer_types"):
        first = r.size("first_k_dense_replace", minimum=0, maximum=n)
    prefix, pattern, window = (r.size("prefix_dense_sliding_window_pattern"), r.size("sliding_window_pattern"),
                               _window(r))
    types = _layer_types(r, out, window, lambda i: (i + 1) % prefix != 0 if i < first
                         else (i - first + 1) % pattern != 0)
    dense = _dense_layers(r, n, first)
    _rope_where(out, [(t == "sliding_attention" and window is not None) or (i < dense and prefix == 1)
                      for i, t in enumerate(types)])
    moe: dict[str, Any] = {"num_experts": r.size("num_experts"), "experts_per_token": r.size("num_experts_per_tok"),
                           "expert_d_ff": width}
    shared = r.size("num_shared_experts", minimum=0)
    _shared_mlp(moe, shared * width)
    if dense:
        moe["first_dense_layers"] = dense
        out["d_ff"] = prefix_width or width
    _set_moe(out, moe)
    return out


def _ctrl(r: Raw) -> dict[str, Any]:
    """CTRL: sinusoidal positions (a buffer), token embeddings scaled by sqrt(d_model), LayerNorms
    before each branch, biases on every linear and on the LM head (its weight tied by default),
    a ReLU MLP ``dff`` wide."""
    out = _base(r, d="n_embd", layers="n_layer", heads="n_head", context="n_positions", dtype="fp32")
    _divides(r, out, "n_head", "n_embd")
    out.update(d_ff=r.size("dff"), activation="relu", norm="layernorm", position="sinusoidal",
               embedding_scale=math.sqrt(out["d_model"]), qkv_bias=True, out_bias=True, mlp_bias=True,
               lm_head_bias=True)
    return out


MAPPERS: dict[str, Callable[[Raw], dict[str, Any]]] = {
    "granite_swa": _granite_swa, "granitemoe_swa": _granite_swa, "vaultgemma": _vaultgemma, "mellum": _mellum,
    "hyperclovax": _hyperclovax, "youtu": _youtu, "solar_open": _solar_open, "cohere2_moe": _cohere2_moe,
    "exaone_moe": _exaone_moe, "glm4_moe_lite": _glm4_moe_lite, "minicpm3": _minicpm3, "flint": _flint,
    "kolibri1": _kolibri1, "cohere_compass_text": _cohere_compass, "aria_text": _aria_text, "hy_v3": _hy_v3,
    "ctrl": _ctrl,
}
