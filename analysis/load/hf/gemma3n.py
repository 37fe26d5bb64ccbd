"""Gemma 3n's language model (``gemma3n_text``), as transformers 5's Gemma3nTextModel builds it.

Gemma 3's layout (sandwich RMSNorms, per-head q/k norms, a weightless value norm, GeGLU, embeddings scaled by
sqrt(d), the final logits soft-capped) with layer i full iff (i + 1) % 5 == 0 (``layer_types`` where given),
the last ``num_kv_shared_layers`` layers reading an earlier layer's K/V (``kv_shared_layers``), and
llmcalc's ``gemma3n`` mapping (:mod:`analysis.model.gemma3n`): ``altup_num_inputs`` streams, ``laurel_rank``,
``hidden_size_per_layer_input`` and ``vocab_size_per_layer_input``, ``altup_correct_scale``, and the layers
whose ``activation_sparsity_pattern`` entry is above 0 (one target for all of them). ``altup_active_idx``
(which stream the layer computes), ``altup_coef_clip`` (training's clamp) and the score scale change no count.

Refused, naming the key: an ``intermediate_size`` list whose widths differ (every published checkpoint has
one width), sparse layers of different targets, an ``activation_sparsity_pattern`` that is not a list (transformers'
__post_init__ fails on one value), a ``hidden_activation`` other than GeLU, fewer than 2 streams (``altup_num_inputs``;
every published checkpoint has 4). The multimodal
``gemma3n`` (a MobileNetV5 vision tower through timm and an audio tower) has no mapper: docs/huggingface.md,
Models without a mapper.
"""

from __future__ import annotations

import math
from typing import Any, Callable

from ...errors import brief
from .common import _attention_bias, _decoder, _window, _windows
from .raw import Raw


def _width(r: Raw, layers: int) -> int:
    """``intermediate_size``: one width, or a list of one per layer, all the same."""
    value = r.get("intermediate_size")
    if not isinstance(value, list):
        return r.size("intermediate_size")
    if len(value) != layers or any(type(v) is not int or v < 1 for v in value):
        r.fail("intermediate_size", f"must list a positive width per layer ({layers}), got {brief(value)}")
    if len(set(value)) > 1:
        r.fail("intermediate_size", "layers of different widths are not modeled (every published Gemma 3n has "
                                    f"one), got {brief(sorted(set(value)))}")
    return value[0]


def _sparse_layers(r: Raw, layers: int) -> dict[str, Any]:
    """``activation_sparsity_pattern`` (None: the first 10 of more than 10 layers at 0.95, as the class sets it)."""
    pattern = r.get("activation_sparsity_pattern")
    if pattern is None:
        pattern = [0.95] * (10 if layers > 10 else 0) + [0.0] * (layers - (10 if layers > 10 else 0))
    # a single value is refused as transformers' __post_init__ refuses it (it takes its len())
    if not isinstance(pattern, list) or len(pattern) != layers or any(
            isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < 1 for v in pattern):
        r.fail("activation_sparsity_pattern", f"must list a sparsity in [0, 1) per layer ({layers}), "
                                              f"got {brief(pattern)}")
    targets = {v for v in pattern if v > 0}
    if len(targets) > 1:
        r.fail("activation_sparsity_pattern", f"sparse layers of different targets are not modeled, got "
                                              f"{brief(sorted(targets))}")
    if not targets:
        return {}
    return {"sparse_layers": [v > 0 for v in pattern], "sparsity": float(targets.pop())}


def _gemma3n_text(r: Raw) -> dict[str, Any]:
    layers = r.size("num_hidden_layers")
    width = _width(r, layers)
    read = Raw({**r.raw, "intermediate_size": width}, r.source, r.defaults)
    out = _decoder(read, act="hidden_activation")
    r.read |= read.read
    if out["activation"] != "geglu":
        r.fail("hidden_activation", f"Gemma 3n's per-layer inputs are modeled with GeLU, got "
                                    f"{brief(r.get('hidden_activation'))}")
    _attention_bias(r, out)
    out.update(embedding_scale=math.sqrt(out["d_model"]), norm_placement="sandwich", qk_norm="head", v_norm=True)
    if r.get("final_logit_softcapping"):
        out["final_logit_softcap"] = r.get("final_logit_softcapping")
    types = r.get("layer_types")
    if types is None:
        types = ["full_attention" if (i + 1) % 5 == 0 else "sliding_attention" for i in range(layers)]
    _windows(r, out, types, _window(r))
    shared = r.maybe_size("num_kv_shared_layers", minimum=0, maximum=layers - 1)
    if shared:
        out["kv_shared_layers"] = shared
    out["gemma3n"] = {"streams": r.size("altup_num_inputs", minimum=2), "laurel_rank": r.size("laurel_rank"),
                      "per_layer_width": r.size("hidden_size_per_layer_input"),
                      "per_layer_vocab": r.size("vocab_size_per_layer_input"),
                      "correct_scale": r.flag("altup_correct_scale"), **_sparse_layers(r, layers)}
    r.ignore("altup_active_idx", "altup_coef_clip", "attention_dropout")
    return out


MAPPERS: dict[str, Callable[[Raw], dict[str, Any]]] = {"gemma3n_text": _gemma3n_text}
