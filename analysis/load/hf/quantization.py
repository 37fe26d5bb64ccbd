"""A ``quantization_config``: the storage format of the weights, and the modules it skips."""

from __future__ import annotations

from typing import Any

from ...errors import brief
from ...model.sizes import MAX_INT
from .raw import Raw

# The last part of a module name in a skip list -> the breakdown key it names (None: embeddings and
# the router's score correction, a vector, never quantized; MiniMax-M2.5 lists it). A name for one
# layer only (``model.layers.3.mlp``) is refused: llmcalc's formats apply to every layer alike.
_MODULES = {"lm_head": "lm_head", "embed_tokens": None, "wte": None, "wpe": None, "e_score_correction_bias": None,
            "self_attn": "attention", "attn": "attention", "attention": "attention",
            "q_proj": "attention/q", "k_proj": "attention/k", "v_proj": "attention/v", "o_proj": "attention/o",
            "q_a_proj": "attention/q_a", "q_b_proj": "attention/q_b", "kv_a_proj_with_mqa": "attention/kv_a",
            "kv_b_proj": "attention/kv_b", "mlp": "mlp", "up_proj": "mlp/up", "gate_proj": "mlp/gate",
            "down_proj": "mlp/down", "gate": "moe/router", "router": "moe/router", "experts": "moe/experts",
            "shared_expert": "moe/shared_experts", "shared_experts": "moe/shared_experts",
            "shared_expert_gate": "moe/shared_expert_gate"}


def _skip(r: Raw, key: str, names: Any) -> list[str] | None:
    if names is None:
        return None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        r.fail(key, f"must be a list of module names, got {brief(names)}")
    out = []
    for name in names:
        parts = name.split(".")
        if any(p.isdigit() for p in parts):
            r.fail(key, f"{brief(name)} names one layer's module; llmcalc quantizes every layer alike")
        if parts[-1] not in _MODULES:
            r.fail(key, f"cannot map module {brief(name)} to a llmcalc component (its last name must be one of "
                        f"{', '.join(_MODULES)})")
        if parts[-2:-1] in (["self_attn"], ["attn"], ["attention"]) and parts[-1] == "gate_proj":
            out.append("attention/gate")  # AFMoE's attention output gate, not the MLP's gate
        elif _MODULES[parts[-1]] is not None:
            out.append(_MODULES[parts[-1]])
    return list(dict.fromkeys(out))


def _quantization(r: Raw) -> dict[str, Any]:
    """``dtype`` (a format of analysis.quant), ``quant_group_size`` and ``quant_skip`` for a
    ``quantization_config`` (bitsandbytes, GPTQ, AWQ, FP8, MXFP4); ConfigError for other methods
    and for values of the wrong type (the string "false" is not false)."""
    key, q = "quantization_config", r.get("quantization_config")
    if not isinstance(q, dict):
        r.fail(key, f"must be a mapping, got {brief(q)}")

    def flag(name: str) -> bool:
        value = q.get(name, False)
        if not isinstance(value, bool):
            r.fail(f"{key}.{name}", f"must be true or false, got {brief(value)}")
        return value

    method = q.get("quant_method")
    skip_key = "llm_int8_skip_modules" if method == "bitsandbytes" else "modules_to_not_convert"
    out: dict[str, Any] = {"quant_skip": _skip(r, f"{key}.{skip_key}", q.get(skip_key))}
    if method == "bitsandbytes":
        four, eight = flag("load_in_4bit"), flag("load_in_8bit")
        if four == eight:
            r.fail(key, "bitsandbytes needs exactly one of load_in_4bit and load_in_8bit true")
        kind = q.get("bnb_4bit_quant_type", "fp4")  # BitsAndBytesConfig's default
        if four and kind not in ("nf4", "fp4"):
            r.fail(f"{key}.bnb_4bit_quant_type", f"must be nf4 or fp4, got {brief(kind)}")
        out["dtype"] = kind + ("-dq" if flag("bnb_4bit_use_double_quant") else "") if four else "llm-int8"
    elif method in ("gptq", "awq"):
        bits = q.get("bits", q.get("w_bit", 4))
        if type(bits) is not int or (method, bits) not in (("gptq", 4), ("gptq", 8), ("awq", 4)):
            sizes = "4 or 8" if method == "gptq" else "4"
            r.fail(f"{key}.bits", f"{method} stores {sizes} bits here, got {brief(bits)}")
        out["dtype"] = f"{method}-int{bits}"
        group = q.get("group_size", q.get("q_group_size"))
        if group is not None:  # -1: one group over the whole input (per-channel scales)
            if type(group) is not int or not (group == -1 or 1 <= group <= MAX_INT):
                r.fail(f"{key}.group_size", f"must be a positive integer or -1, got {brief(group)}")
            out["quant_group_size"] = MAX_INT if group == -1 else group
    elif method == "fp8":  # without blocks: one scale per tensor, as vLLM's fp8 checkpoints
        block = q.get("weight_block_size")
        if block is None:
            out["dtype"] = "fp8-tensor"
        elif isinstance(block, list) and len(block) == 2 and block[0] == block[1] and type(block[0]) is int \
                and 0 < block[0] <= MAX_INT:
            out.update(dtype="fp8-block", quant_group_size=block[0])
        else:
            r.fail(f"{key}.weight_block_size", f"must be a square block [n, n], got {brief(block)}")
    elif method == "fbgemm_fp8":
        out["dtype"] = "fp8-channel"
    elif method == "mxfp4":
        out["dtype"] = "mxfp4"
    else:
        r.fail(f"{key}.quant_method", f"{brief(method)} is not a format llmcalc sizes (bitsandbytes 4 or 8 bit, "
                                      "gptq, awq, fp8, fbgemm_fp8, mxfp4)")
    return {k: v for k, v in out.items() if v is not None}


def _quant_method(value: Any) -> str:
    method = value.get("quant_method") if isinstance(value, dict) else None
    return f"{brief(method)}: " if method else ""


def _nested_quantization(raw: dict[str, Any]) -> tuple[str, Any] | None:
    """The dotted key and value of a ``quantization_config`` inside any mapping of the config
    (``text_config``, ``rope_parameters``, ...): quantized storage wherever it is declared."""
    stack: list[tuple[str, Any]] = [(k, v) for k, v in raw.items() if isinstance(v, (dict, list))]
    while stack:
        path, value = stack.pop()
        items = value.items() if isinstance(value, dict) else ((f"{i}", v) for i, v in enumerate(value))
        for key, item in items:
            if key == "quantization_config" and item not in (None, {}, []):
                return f"{path}.{key}", item
            if isinstance(item, (dict, list)):
                stack.append((f"{path}.{key}", item))
    return None
