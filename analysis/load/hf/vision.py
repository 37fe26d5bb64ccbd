"""Multimodal Hugging Face checkpoints: the vision tower and projector of each family, read from its
``vision_config`` and top-level keys as transformers' config classes read them (:mod:`analysis.load.hf` reads the
language model with its own mapper and puts the two together).

Each family's tower and projector, as transformers builds them (``vision/...`` and ``projector/...``
in llmcalc; :mod:`analysis.model.vision`):

- ``gemma3``: SigLIP without its pooling head (``vision_use_head`` false), a final LayerNorm; the
  projector is an RMSNorm over the tower's width and one linear without bias (the average pooling to
  ``mm_tokens_per_image`` has no parameters);
- ``llava``: CLIP (class token, a patch convolution without bias, pre- and post-LayerNorm; every
  layer is built even when ``vision_feature_layer`` reads an earlier one), and two linears around an
  activation from the tower's width (times the number of layers ``vision_feature_layer`` lists) to
  the language model's, with ``multimodal_projector_bias``;
- ``mistral3``: Pixtral (RMSNorms, a gated MLP, no bias anywhere, 2-D RoPE, a norm before the first
  layer and none after the last), and Mistral 3's projector: an RMSNorm, the patch merger (a linear
  from ``spatial_merge_size^2`` patches back to the tower's width), two linears;
- ``qwen2_vl``: Qwen2-VL's ViT (a Conv3d without bias, LayerNorms with bias, fused qkv, an MLP
  ``mlp_ratio`` wide, all with biases, 2-D RoPE, no final norm), and its merger as Qwen2.5-VL's with
  a LayerNorm, to ``hidden_size``, which must be the language model's width;
- ``idefics3``, ``smolvlm``: SigLIP's encoder (Idefics3's vision transformer) and the pixel
  shuffle of ``scale_factor^2`` patches into one linear without bias;
- ``qwen2_5_vl``: Qwen2.5-VL's ViT (a Conv3d over ``temporal_patch_size`` frames without bias,
  RMSNorms, fused qkv with bias, a gated MLP with biases, 2-D RoPE, no final norm), and its merger:
  an RMSNorm, ``spatial_merge_size^2`` patches concatenated, two linears with biases (the first as
  wide as its input) to ``out_hidden_size``, which must be the language model's width.
- ``llama4``: Llama 4's vision model (a class token and learned positions, pre- and post-LayerNorm,
  biases everywhere but the patch linear), its pixel-shuffle adapter (two linears without bias) and
  one linear without bias to the language model's width.
- ``gemma4``: Gemma 4's vision model and its ``embed_vision`` (:func:`_gemma4`); without a
  ``vision_config``, transformers builds none, and the checkpoint is its language model.
- ``qwen3_vl``, ``qwen3_vl_moe``, ``qwen3_5``, ``qwen3_5_moe``: Qwen3-VL's ViT, its merger and (Qwen3-VL)
  its DeepStack mergers (:func:`_qwen3_vl`).

The tower's activation says only whether its MLP is gated: CLIP's ``quick_gelu`` reads as ``gelu``
(no image runs through the tower yet, so its elementwise cost counts nowhere).
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

from ...errors import brief
from .raw import ACTIVATIONS, Raw

_TOWER_ACTIVATIONS = {**ACTIVATIONS, "quick_gelu": "gelu"}
_GATED_TOWER = {"gelu": "geglu", "silu": "swiglu"}


def _tower_activation(v: Raw, gated: bool) -> str:
    """A tower's ``hidden_act``: the language models' names, and CLIP's quick GELU."""
    return v.activation("hidden_act", gated, _TOWER_ACTIVATIONS, _GATED_TOWER)


def _feature_layers(top: Raw) -> int:
    """The tower layers whose outputs the projector concatenates: ``vision_feature_layer``, one
    index or a list of them."""
    value = top.get("vision_feature_layer")
    if isinstance(value, list) and value and all(type(i) is int for i in value):
        return len(value)
    if type(value) is not int:
        top.fail("vision_feature_layer", f"must be a layer index or a list of them, got {brief(value)}")
    return 1


def _unread(top: Raw, layers: int) -> int:
    """The tower's last layers no feature reads: ``vision_feature_layer`` indexes the hidden states,
    the embeddings' then each layer's (-1: the last layer's)."""
    value = top.get("vision_feature_layer")
    indices = value if isinstance(value, list) else [value]
    unread = [-i - 1 if i < 0 else layers - i for i in indices]
    if not all(0 <= u <= layers for u in unread):
        top.fail("vision_feature_layer", f"indexes the {layers + 1} hidden states of a {layers}-layer tower, "
                                         f"got {brief(value)}")
    return min(unread)


def _gemma3(v: Raw, top: Raw, width: int) -> dict[str, Any]:
    v.false("vision_use_head", "SigLIP's attention-pooling head (Gemma 3 is built without it)")
    top.ignore("boi_token_index", "eoi_token_index", "image_token_index")
    side = v.size("image_size") // v.size("patch_size")
    tokens = top.size("mm_tokens_per_image")
    per_side = int(tokens ** 0.5)  # transformers' kernel: patches a side // tokens a side
    # a pool transformers cannot run (its kernel would be 0, or leave patches out): 0, no image runs
    pool = side // per_side if per_side * per_side == tokens and per_side <= side and side % per_side == 0 else 0
    return {"n_layers": v.size("num_hidden_layers"), "d_model": v.size("hidden_size"),
            "n_heads": v.size("num_attention_heads"), "d_ff": v.size("intermediate_size"),
            "patch_size": v.size("patch_size"), "image_size": v.size("image_size"), "channels": v.size("num_channels"),
            "activation": _tower_activation(v, False), "projector": {"norm": "rmsnorm", "pool": pool}}


def _llava(v: Raw, top: Raw, width: int) -> dict[str, Any]:
    v.ignore("projection_dim")  # CLIP's joint-embedding projection: not built in CLIPVisionModel
    top.ignore("image_token_index", "image_seq_length", "projector_hidden_act")
    strategy = top.get("vision_feature_select_strategy")
    if strategy not in (None, "default", "full"):
        top.fail("vision_feature_select_strategy", f"must be default or full, got {brief(strategy)}")
    return {"n_layers": v.size("num_hidden_layers"), "d_model": v.size("hidden_size"),
            "n_heads": v.size("num_attention_heads"), "d_ff": v.size("intermediate_size"),
            "patch_size": v.size("patch_size"), "image_size": v.size("image_size"), "channels": v.size("num_channels"),
            "activation": _tower_activation(v, False), "class_token": True, "patch_bias": False, "pre_norm": True,
            "projector": {"features": _feature_layers(top), "hidden": width,
                          "bias": top.flag("multimodal_projector_bias"), "class_token": strategy == "full",
                          "unread_layers": _unread(top, v.size("num_hidden_layers"))}}


def _mistral3(v: Raw, top: Raw, width: int) -> dict[str, Any]:
    d, heads = v.size("hidden_size"), v.size("num_attention_heads")
    head_dim = v.maybe_size("head_dim")
    if head_dim is not None and head_dim * heads != d:  # q, k, v and o are d -> heads * head_dim
        v.fail("head_dim", f"must be hidden_size / num_attention_heads ({d} / {heads}), got {head_dim}")
    v.ignore("rope_parameters")
    top.ignore("image_token_index", "projector_hidden_act")
    if _feature_layers(top) > 1:  # its norm and patch merger stay one layer wide: a forward fails
        top.fail("vision_feature_layer", "several layers: transformers' Mistral 3 projector cannot take them")
    return {"n_layers": v.size("num_hidden_layers"), "d_model": d, "n_heads": heads,
            "d_ff": v.size("intermediate_size"), "patch_size": v.size("patch_size"), "image_size": v.size("image_size"),
            "channels": v.size("num_channels"), "activation": _tower_activation(v, True), "norm": "rmsnorm",
            "position": "rope", "patch_bias": False, "qkv_bias": False, "out_bias": False, "mlp_bias": False,
            "pre_norm": True, "final_norm": False,
            "projector": {"norm": "rmsnorm", "merge": top.size("spatial_merge_size"),
                          "merge_linear": True, "hidden": width, "bias": top.flag("multimodal_projector_bias"),
                          "unread_layers": _unread(top, v.size("num_hidden_layers"))}}


def _qwen2_5_vl(v: Raw, top: Raw, width: int) -> dict[str, Any]:
    d, merge, out = v.size("hidden_size"), v.size("spatial_merge_size"), v.size("out_hidden_size")
    if out != width:
        v.fail("out_hidden_size", f"must be the language model's hidden_size ({width}), got {out}")
    # tokens_per_second times video positions
    v.ignore("tokens_per_second", "rope_parameters")
    window = v.size("window_size") // merge // v.size("patch_size")  # merged patches a side, as transformers
    if window == 0:
        v.fail("window_size", "must hold a merged patch (spatial_merge_size x patch_size pixels)")
    full = v.get("fullatt_block_indexes")
    if not isinstance(full, (list, tuple)) or not all(type(i) is int and 0 <= i for i in full):
        v.fail("fullatt_block_indexes", f"must be a list of layer indices, got {brief(full)}")
    top.ignore("image_token_id", "video_token_id", "vision_start_token_id", "vision_end_token_id", "vision_token_id")
    channels = "in_chans" if "in_chans" in v.raw else "in_channels"  # the key of transformers 4's files
    return {"n_layers": v.size("depth"), "d_model": d, "n_heads": v.size("num_heads"),
            "d_ff": v.size("intermediate_size"), "patch_size": v.size("patch_size"),
            "temporal_patch": v.size("temporal_patch_size"), "channels": v.size(channels),
            "activation": _tower_activation(v, True), "norm": "rmsnorm", "position": "rope", "patch_bias": False,
            "final_norm": False, "window": window * merge, "full_layers": list(full) or None,
            "projector": {"norm": "rmsnorm", "merge": merge, "hidden": d * merge * merge, "bias": True}}


def _qwen2_vl(v: Raw, top: Raw, width: int) -> dict[str, Any]:
    d, merge, out = v.size("embed_dim"), v.size("spatial_merge_size"), v.size("hidden_size")
    if out != width:
        v.fail("hidden_size", f"must be the language model's hidden_size ({width}), got {out}")
    v.ignore("rope_parameters")
    top.ignore("image_token_id", "video_token_id", "vision_start_token_id", "vision_end_token_id", "vision_token_id")
    channels = "in_chans" if "in_chans" in v.raw else "in_channels"
    return {"n_layers": v.size("depth"), "d_model": d, "n_heads": v.size("num_heads"),
            "d_ff": d * v.size("mlp_ratio"), "patch_size": v.size("patch_size"),
            "temporal_patch": v.size("temporal_patch_size"), "channels": v.size(channels),
            "activation": _tower_activation(v, False), "position": "rope", "patch_bias": False, "final_norm": False,
            "projector": {"norm": "layernorm", "merge": merge, "hidden": d * merge * merge, "bias": True}}


def _idefics3(v: Raw, top: Raw, width: int) -> dict[str, Any]:
    top.ignore("image_token_id", "use_cache", "_pad_token_id")
    return {"n_layers": v.size("num_hidden_layers"), "d_model": v.size("hidden_size"),
            "n_heads": v.size("num_attention_heads"), "d_ff": v.size("intermediate_size"),
            "patch_size": v.size("patch_size"), "image_size": v.size("image_size"), "channels": v.size("num_channels"),
            "activation": _tower_activation(v, False), "projector": {"merge": top.size("scale_factor")}}


def _llama4(v: Raw, top: Raw, width: int) -> dict[str, Any]:
    """Llama 4's vision model: the patch unfold and a linear without bias, a class token (after the
    patches) and learned positions (its 2-D RoPE holds no parameters), LayerNorms before the first
    layer and after the last, q/k/v/o and a GELU MLP with biases (nn.GELU whatever ``hidden_act``
    says). Its pixel-shuffle adapter (``pixel_shuffle_ratio`` 1/k: k x k patches into one) is two
    linears without bias, fc1 from the shuffled patches (``intermediate_size`` wide in transformers)
    to ``projector_input_dim``, fc2 ``projector_output_dim`` square, each followed by a GELU; then
    the projector, one linear without bias from ``vision_output_dim`` (``multi_modal_projector_bias``
    is read by nothing). Widths that cannot chain (an image could not pass) are refused."""
    d = v.size("hidden_size")
    ratio = v.get("pixel_shuffle_ratio")
    merge = round(1 / ratio) if isinstance(ratio, (int, float)) and not isinstance(ratio, bool) and ratio > 0 else 0
    if merge < 1 or merge * ratio != 1:
        v.fail("pixel_shuffle_ratio", f"must be 1/k for a whole k (k x k patches into one), got {brief(ratio)}")
    d_ff, hidden = v.size("intermediate_size"), v.size("projector_input_dim")
    if d_ff != d * merge * merge:  # fc1's input width, which the shuffled patches must have
        v.fail("intermediate_size", f"must be hidden_size / pixel_shuffle_ratio^2 ({d * merge * merge}): the "
                                    f"adapter's fc1 takes the shuffled patches with it, got {d_ff}")
    for key, want in (("projector_output_dim", "projector_input_dim"), ("vision_output_dim", "projector_output_dim")):
        if v.size(key) != hidden:
            v.fail(key, f"must be {want} ({hidden}): it takes that output, got {v.get(key)}")
    v.ignore("hidden_act", "norm_eps", "projector_dropout", "vision_feature_select_strategy", "vision_feature_layer",
             "multi_modal_projector_bias", "rope_parameters", "rope_theta")
    top.ignore("boi_token_index", "eoi_token_index", "image_token_index")
    return {"n_layers": v.size("num_hidden_layers"), "d_model": d, "n_heads": v.size("num_attention_heads"),
            "d_ff": d_ff, "patch_size": v.size("patch_size"), "image_size": v.size("image_size"),
            "channels": v.size("num_channels"), "activation": "gelu", "class_token": True, "patch_bias": False,
            "pre_norm": True, "projector": {"merge": merge, "hidden": hidden, "hidden_linear": True}}


def _gemma4(v: Raw, top: Raw, width: int) -> dict[str, Any]:
    """Gemma 4's vision model: a patch linear without bias over 3-channel patches, a 2-D position table of
    ``position_embedding_size`` rows per axis (2 x rows x d) beside 2-D RoPE, layers of sandwiched RMSNorms,
    q, k, v, o without bias, per-head q/k RMSNorms and a weightless one over v, a gated MLP without bias; its
    pooler (``pooling_kernel_size``^2 patches averaged, times sqrt(d)) and, with ``standardize``, two stored
    vectors; the projector (``embed_vision``): a weightless RMSNorm and one linear without bias. Clipped
    linears (their four stored bounds each) and heads that do not span the width are refused."""
    d, heads = v.size("hidden_size"), v.size("num_attention_heads")
    if v.size("head_dim") * heads != d:  # q, k, v and o are d -> heads * head_dim
        v.fail("head_dim", f"must be hidden_size / num_attention_heads ({d} / {heads}), got {v.get('head_dim')}")
    if v.size("num_key_value_heads") != heads:
        v.fail("num_key_value_heads", f"must be num_attention_heads ({heads}): a grouped tower is not modeled, "
                                      f"got {v.get('num_key_value_heads')}")
    v.false("use_clipped_linears", "each linear's four stored clip bounds (Gemma 4 E2B/E4B) are not modeled")
    v.ignore("attention_bias", "rope_parameters", "max_position_embeddings")  # its linears have no bias
    return {"n_layers": v.size("num_hidden_layers"), "d_model": d, "n_heads": heads,
            "d_ff": v.size("intermediate_size"), "patch_size": v.size("patch_size"),
            "activation": v.activation("hidden_activation", True, _TOWER_ACTIVATIONS, _GATED_TOWER),
            "norm": "rmsnorm", "position": "rope", "position_table": v.size("position_embedding_size"),
            "qk_norm": True, "v_norm": True, "norm_placement": "sandwich", "patch_bias": False, "qkv_bias": False,
            "out_bias": False, "mlp_bias": False, "final_norm": False, "pool": v.size("pooling_kernel_size"),
            "standardize": v.flag("standardize"), "projector": {"norm": "rmsnorm", "norm_weight": False}}


def _qwen3_vl(v: Raw, top: Raw, width: int) -> dict[str, Any]:
    """Qwen3-VL's ViT (``qwen3_vl``, ``qwen3_vl_moe``; Qwen3.5's, ``qwen3_5``, ``qwen3_5_moe``, without
    DeepStack): a Conv3d with bias over ``temporal_patch_size`` frames, a learned grid of
    ``num_position_embeddings`` positions resampled to each image beside 2-D RoPE, LayerNorms with bias, fused
    qkv and proj with bias, an MLP with biases (not gated), no final norm; its merger a LayerNorm over the
    tower's width, ``spatial_merge_size^2`` patches concatenated, two linears with biases (the first as wide as
    its input) to ``out_hidden_size``, which must be the language model's width; Qwen3-VL's
    ``deepstack_visual_indexes`` each a merger of its own, its LayerNorm after the merge (the language model
    adds their features to its first layers: ``projector.deepstack``). Qwen3.5's class has no DeepStack: a
    ``deepstack_visual_indexes`` its files carry is read by nothing."""
    d, merge, out = v.size("hidden_size"), v.size("spatial_merge_size"), v.size("out_hidden_size")
    if out != width:
        v.fail("out_hidden_size", f"must be the language model's hidden_size ({width}), got {out}")
    v.ignore("rope_parameters")
    projector: dict[str, Any] = {"norm": "layernorm", "merge": merge, "hidden": d * merge * merge, "bias": True}
    if "deepstack_visual_indexes" in v.defaults:  # Qwen3-VL's class
        layers = v.get("deepstack_visual_indexes")
        depth = v.size("depth")
        if not isinstance(layers, (list, tuple)) or not all(type(i) is int and 0 <= i < depth for i in layers) \
                or len(set(layers)) < len(layers):
            v.fail("deepstack_visual_indexes", f"must be distinct layer indices of the tower's {depth}, got "
                                               f"{brief(layers)}")
        if layers:
            projector["deepstack"] = list(layers)
    else:
        v.ignore("deepstack_visual_indexes")
    top.ignore("image_token_id", "video_token_id", "vision_start_token_id", "vision_end_token_id")
    return {"n_layers": v.size("depth"), "d_model": d, "n_heads": v.size("num_heads"),
            "d_ff": v.size("intermediate_size"), "patch_size": v.size("patch_size"),
            "temporal_patch": v.size("temporal_patch_size"), "channels": v.size("in_channels"),
            "activation": _tower_activation(v, False), "position": "rope",
            "position_grid": v.size("num_position_embeddings"), "final_norm": False, "projector": projector}


def _gemma4_top(top: Raw) -> None:
    """Gemma 4's top level, with a tower or without: its audio tower is refused, its token ids change no count."""
    if top.get("audio_config") is not None:
        top.fail("audio_config", "an audio tower (Gemma 4 E2B/E4B) is not modeled")
    top.ignore("boi_token_id", "eoi_token_id", "image_token_id", "video_token_id", "boa_token_id", "eoa_token_index",
               "audio_token_id")


def _nothing(top: Raw) -> None:
    """A top level whose keys the tower's reader reads."""


class Family(NamedTuple):
    text: str  # the language model's model_type when the file names none (the config class's default)
    vision: str  # the tower's defaults' table in .defaults
    # the model_type a vision_config may name where transformers picks the class by it (AutoConfig);
    # None: the family's class is fixed, and a model_type there is not read
    vision_type: str | None
    tower: Callable[[Raw, Raw, int], dict[str, Any]]  # (vision_config, the top level, text width) -> vision keys
    flat: bool = False  # a file may give the language model's keys at the top level (Qwen-VL)
    # the LM head tied as text_config says, the top level's flag read by nothing (Llama 4, whose
    # language model is a whole Llama4ForCausalLM)
    text_ties: bool = False
    vision_optional: bool = False  # no vision_config (absent or null): no tower (Gemma 4)
    top: Callable[[Raw], None] = _nothing  # reads the top level's own keys, with a tower or without


MULTIMODAL = {
    "gemma3": Family("gemma3_text", "siglip_vision_model", "siglip_vision_model", _gemma3),
    "llava": Family("llama", "clip_vision_model", "clip_vision_model", _llava),
    "mistral3": Family("mistral", "pixtral", "pixtral", _mistral3),
    "qwen2_vl": Family("qwen2_vl_text", "qwen2_vl_vision", None, _qwen2_vl, flat=True),
    "qwen2_5_vl": Family("qwen2_5_vl_text", "qwen2_5_vl_vision", None, _qwen2_5_vl, flat=True),
    "idefics3": Family("llama", "idefics3_vision", None, _idefics3),
    "smolvlm": Family("llama", "idefics3_vision", None, _idefics3),
    "llama4": Family("llama4_text", "llama4_vision_model", None, _llama4, text_ties=True),
    "gemma4": Family("gemma4_text", "gemma4_vision", None, _gemma4, vision_optional=True, top=_gemma4_top),
    "qwen3_vl": Family("qwen3_vl_text", "qwen3_vl_vision", None, _qwen3_vl),
    "qwen3_vl_moe": Family("qwen3_vl_moe_text", "qwen3_vl_moe_vision", None, _qwen3_vl),
    "qwen3_5": Family("qwen3_5_text", "qwen3_5_vision", None, _qwen3_vl),
    "qwen3_5_moe": Family("qwen3_5_moe_text", "qwen3_5_moe_vision", None, _qwen3_vl)}
