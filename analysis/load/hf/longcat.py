"""LongCat-Flash (``longcat_flash``): DeepSeek's latent attention (:func:`.core._mla`, with a low-rank
query) on every sublayer, and its shortcut-connected MoE with identity experts.

transformers' decoder layer holds two sublayers, each an attention and a dense MLP ``ffn_hidden_size``
wide, and one MoE beside the first MLP (reading its input, its output added after the second
sublayer): llmcalc's layers are the sublayers, ``2 * num_layers`` (``num_hidden_layers``, which sets
``num_layers`` to half of it, wins), every even one's FFN ``dense+shortcut_moe`` (``moe.shortcut``). The
router scores ``n_routed_experts + zero_expert_num`` experts (its ``e_score_correction_bias`` too: ``router_bias``),
the identity ones returning their input (``moe.zero_experts``). Its scaled latents (q and the KV
latent times ``sqrt(hidden_size / rank)``) are multiplies by constants, uncounted; the RoPE tables span
``head_dim``, which must equal ``qk_rope_head_dim`` (transformers cannot run another). Counted as the
model is, not as transformers allocates it: transformers' stacked ``gate_up_proj`` has rows for the
identity experts too, which no checkpoint stores (:data:`analysis.verify.against.PHANTOM_EXPERTS`).
"""

from __future__ import annotations

from typing import Any, Callable

from ...errors import brief
from ...model.sizes import MAX_LAYERS
from .core import _first, _mla
from .raw import Raw


def _longcat_flash(r: Raw) -> dict[str, Any]:
    r.ignore("zero_expert_type", "mla_scale_q_lora", "mla_scale_kv_lora")  # remote code's: identity, always scaled
    r.false("router_bias", "a bias on the router beside its e_score_correction_bias is not modeled")
    out = _mla(r, layers="num_layers", d_ff=_first(r, "intermediate_size", "ffn_hidden_size"))
    if r.has("num_hidden_layers"):  # transformers sets num_layers = num_hidden_layers // 2
        pairs = r.size("num_hidden_layers", maximum=MAX_LAYERS) // 2
        if pairs == 0:
            r.fail("num_hidden_layers", f"must be at least 2 (two sublayers a layer), got {r.get('num_hidden_layers')}")
        out["n_layers"] = 2 * pairs
    else:
        out["n_layers"] = 2 * out["n_layers"]
    mla = out["mla"]
    qk = r.maybe_size("qk_head_dim")
    if qk is not None and qk != mla["qk_nope_head_dim"] + mla["qk_rope_head_dim"]:
        r.fail("qk_head_dim", f"must be qk_nope_head_dim + qk_rope_head_dim "
                              f"({mla['qk_nope_head_dim'] + mla['qk_rope_head_dim']}), got {qk}")
    if r.get("head_dim") != mla["qk_rope_head_dim"]:
        r.fail("head_dim", f"sizes the RoPE tables: must be qk_rope_head_dim ({mla['qk_rope_head_dim']}), "
                           f"got {brief(r.get('head_dim'))}")
    moe: dict[str, Any] = {"num_experts": _first(r, "num_local_experts", "n_routed_experts"),
                           "experts_per_token": _first(r, "num_experts_per_tok", "moe_topk"),
                           "expert_d_ff": _first(r, "moe_intermediate_size", "expert_ffn_hidden_size"),
                           "router_bias": True, "shortcut": True}
    zero = r.size("zero_expert_num", minimum=0)
    if zero:
        moe["zero_experts"] = zero
    out["moe"] = moe
    return out


MAPPERS: dict[str, Callable[[Raw], dict[str, Any]]] = {"longcat_flash": _longcat_flash}
