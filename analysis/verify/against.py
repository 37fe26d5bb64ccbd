"""`llmcalc verify --against transformers`: llmcalc's analytic figures against transformers'
own modeling code, a reference llmcalc did not write.

The model is ``AutoModelForCausalLM.from_config`` for the Hugging Face config of the same model
(a ``config.json`` path itself; for a bundled name the shipped ``model_configs/hf/<name>.json``),
built on the ``meta`` device (shapes only: no weights, no memory, no network) in fp32, with
``attn_implementation="eager"`` (the score matrix materialized, as llmcalc's dense convention
counts it) and ``experts_implementation="batched_mm"`` for MoE (the default loop over experts is
data dependent, and ``grouped_mm`` counts 0 FLOPs under FlopCounterMode on the CPU). Checks:

- parameters: the ``numel`` of the state dict (parameters and persistent buffers, tied weights
  once: what a checkpoint stores), per llmcalc component where transformers' module names map
  to one (``embed_tokens`` -> ``embedding/token``,
  ``self_attn.q_proj`` -> ``attention/q``, ``mlp.experts`` -> ``moe/experts``, ...; a fused
  projection such as GPT-2's ``c_attn`` is compared with the sum of its parts,
  ``attention/q+k+v``), and in total;
- forward and backward matmul FLOPs of a training step (cross-entropy on every position's
  logits) under FlopCounterMode, attributed to the innermost module as ``llmcalc verify`` does:
  the projections per component, the eager attention's two matmuls (run inside the attention
  module itself) as ``attention/scores+values``, and the total;
- KV-cache bytes of the ``DynamicCache`` transformers fills during a prefill past every window.
  On sliding layers transformers' convention differs from llmcalc's, so the analytic side is
  computed under transformers' convention from llmcalc's own layer plan and per-token sizes,
  and labelled so: transformers keeps the last ``W - 1`` tokens between steps (the next token
  makes ``W``); llmcalc's figure is the rolling buffer of ``W`` slots that a decode step reads,
  cache plus the new token. After a prefill of ``S`` tokens transformers holds ``min(S, W - 1)``
  tokens per sliding layer and ``S`` per full layer; llmcalc's ``kv_cache`` for a decode at
  context ``S + 1`` is exactly that plus one token on every layer. MLA (DeepSeek-V2/V3):
  transformers 5 caches what llmcalc counts, the normed latent and the rotated shared RoPE key
  (``kv_lora_rank + qk_rope_head_dim`` per token), and decompresses every cached key through
  ``kv_b`` at each step (llmcalc counts ``kv_b`` over keys too); no convention to translate.
  Chunked layers (Llama 4) are cached as sliding ones: ``min(S, C - 1)`` tokens after a prefill
  of ``S`` (llmcalc: a buffer of ``C``, ``min(S + 1, C)`` at context ``S + 1``: one more, as for windows).
  GPT-Neo: transformers' cache keeps every token of a local layer (the window is a mask only), so
  the analytic side counts ``S`` tokens on every layer; OpenAI GPT: transformers keeps no cache,
  so both sides are 0 (tests/test_against.py checks llmcalc's own figures for both in closed form).
  Mamba: transformers' cache keeps per layer the last ``conv_kernel`` conv inputs and the SSM state,
  llmcalc's state exactly; its bytes join the KV bytes. LFM2's short convolutions: its conv state,
  the last ``conv_L_cache`` conv inputs, likewise. MiniMax's lightning layers: its ``linear_cache``, the
  decayed ``K^T V`` per head (hd x hd), llmcalc's state exactly; its decay tables, persistent buffers
  transformers derives from the config (:data:`DERIVED_BUFFERS`), are left out of the parameters.
  Falcon-H1's layers keep both, the attention's K and V and the Mamba-2 mixer's state beside it.
  RecurrentGemma's recurrent blocks: the last
  ``conv1d_width - 1`` conv inputs and the RG-LRU's state, which its modules hold (:data:`MODULE_STATES`).
- A documented exception (:data:`DENSE_EXPERTS`, Llama 4): transformers' experts run every expert
  on every token, so their matmul FLOPs are ``num_experts / experts_per_token`` times the model's;
  ``moe/experts`` and the totals are compared under that convention and labelled so (parameters,
  attention, router, shared expert and KV bytes are compared as they are).
  DBRX's experts cannot run on meta: refused here; the tests run it on the CPU at a small size.
- LongCat-Flash (:data:`IDENTITY_EXPERTS`): its experts, looping over the experts a batch routes to,
  cannot run on meta either (the tests run it on the CPU at a small size), and its stacked
  ``gate_up_proj`` has rows for the identity experts too, which no checkpoint stores
  (:func:`phantom_params`): the analytic ``moe/experts`` is compared with those rows added, labelled.
  How many of a token's choices reach real experts depends on its router; llmcalc counts
  ``k*E/(E+Z)`` of them (:class:`analysis.model.ffn.MoE`), and transformers' routers are steered to
  that share before the FLOPs are measured (each router's ``e_score_correction_bias``, which picks the
  experts and weighs none, raised on as many real and identity experts), labelled.

Module names that map to no llmcalc component (a model type whose names this file does not
know) are not guessed: their parameters and FLOPs are compared, together, with the llmcalc
components transformers has no counterpart for (``.../unmatched``), so totals stay exact.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import torch

from ..count.flops import SCORES_VALUES, count_flops
from ..count.params import count_params
from ..errors import ConfigError
from ..load.catalog import HF_DIR, bundled_names
from ..load.files import config_file, read_json, read_text
from ..load.hf import remote_code
from ..model.architecture import build
from ..model.config import ModelConfig
from ..model.layers import LayerSpec, layer_config, layer_plan, layer_specs
from ..model.sizes import bytes_per
from ..spec import RunSpec
from .check import Check
from .measure import ModuleScope, _Counter, _storage_id, training_loss
from .report import check_sizes, on_deep_stack

# the last module names of a decoder layer's submodules -> llmcalc component
_LAYER_NAMES = {
    # attention projections
    "q_proj": "attention/q", "k_proj": "attention/k", "v_proj": "attention/v",
    "o_proj": "attention/o", "out_proj": "attention/o",
    "c_attn": "attention/q+k+v", "query_key_value": "attention/q+k+v", "qkv_proj": "attention/q+k+v",
    "Wqkv": "attention/q+k+v",
    "q_norm": "attention/q_norm", "k_norm": "attention/k_norm",
    "q_layernorm": "attention/q_norm", "k_layernorm": "attention/k_norm",
    # MLA
    "q_a_proj": "attention/q_a", "q_b_proj": "attention/q_b", "q_a_layernorm": "attention/q_a_norm",
    "kv_a_proj_with_mqa": "attention/kv_a", "kv_b_proj": "attention/kv_b",
    "kv_a_layernorm": "attention/kv_a_norm",
    # dense MLP
    "gate_proj": "mlp/gate", "up_proj": "mlp/up", "down_proj": "mlp/down", "gate_up_proj": "mlp/gate+up",
    "c_fc": "mlp/up", "fc_in": "mlp/up", "fc1": "mlp/up", "dense_h_to_4h": "mlp/up",
    "fc_out": "mlp/down", "fc2": "mlp/down", "dense_4h_to_h": "mlp/down",
    # MoE: MiniMax-M2 keeps the router's score correction on the block
    "e_score_correction_bias": "moe/router",
    # AFMoE keeps its router's score correction on the block too
    "expert_bias": "moe/router",
    # norms
    "ln_1": "norm/attention", "ln_2": "norm/mlp", "input_layernorm": "norm/attention",
    "ln_attn": "norm/attention", "ln_mlp": "norm/mlp",
    "pre_feedforward_layernorm": "norm/mlp", "post_feedforward_layernorm": "norm/mlp_post",
    # GLM-4-0414's sandwich, Hunyuan's per-head q/k norms
    "post_self_attn_layernorm": "norm/attention_post", "post_mlp_layernorm": "norm/mlp_post",
    "query_layernorm": "attention/q_norm", "key_layernorm": "attention/k_norm",
    "norm_1": "norm/attention", "norm_2": "norm/mlp", "self_attn_layer_norm": "norm/attention",
    # HyperCLOVA X's norms after the branches
    "post_norm1": "norm/attention_post", "post_norm2": "norm/mlp_post",
    # AFMoE's norm before the MLP (in its sandwich)
    "pre_mlp_layernorm": "norm/mlp",
    "pre_ff_layernorm": "norm/mlp",  # Bamba, Jamba
    "final_layer_norm": "norm/mlp",
    # CTRL: its MLP is an nn.Sequential (Linear, ReLU, Linear)
    "Wq": "attention/q", "Wk": "attention/k", "Wv": "attention/v",
    "layernorm1": "norm/attention", "layernorm2": "norm/mlp", "0": "mlp/up", "2": "mlp/down",
    # Apertus: its norms, and xIELU's learned scalars (alpha_p, alpha_n; the buffers beta, eps)
    "attention_layernorm": "norm/attention", "feedforward_layernorm": "norm/mlp", "act_fn": "mlp/act",
    # BitNet's sub-norms, before o_proj and before down_proj
    "attn_sub_norm": "attention/sub_norm", "ffn_sub_norm": "mlp/sub_norm",
    # LFM2: its norms before the mixer and the FFN, its FFN's linears (w1 the gate, w3 the up projection)
    # Gemma 4: the scalar each layer's output is multiplied by (a buffer its checkpoint stores); 26B-A4B's norms
    # before the experts and after each of its two FFNs
    "layer_scalar": "layer_scalar", "pre_feedforward_layernorm_2": "norm/moe",
    "post_feedforward_layernorm_1": "norm/dense_post", "post_feedforward_layernorm_2": "norm/moe_post",
    "operator_norm": "norm/attention", "ffn_norm": "norm/mlp", "w1": "mlp/gate", "w3": "mlp/up", "w2": "mlp/down",
}
# the Mamba mixer (transformers' MambaMixer, FalconMambaMixer): its parts; its own ops are the conv
# (F.conv1d on conv1d's weight), dt_proj (its weight times dt) and the scan
_MAMBA_NAMES = {"in_proj": "mamba/in_proj", "conv1d": "mamba/conv1d", "x_proj": "mamba/x_proj",
                "dt_proj": "mamba/dt_proj", "out_proj": "mamba/out_proj", "A_log": "mamba/A_log", "D": "mamba/D",
                "mixer": "mamba/conv1d+dt_proj+scan"}
# the Mamba-2 mixer (transformers' Mamba2Mixer, Bamba's and Granite 4.0-H's ``mamba``, Nemotron-H's
# ``mixer``): its parts; its own ops are the conv (F.conv1d on conv1d's weight) and the chunked scan
_MAMBA2_NAMES = {"in_proj": "mamba2/in_proj", "conv1d": "mamba2/conv1d", "dt_bias": "mamba2/dt_bias",
                 "A_log": "mamba2/A_log", "D": "mamba2/D", "norm": "mamba2/norm", "out_proj": "mamba2/out_proj",
                 "mixer": "mamba2/conv1d+scan", "mamba": "mamba2/conv1d+scan"}
# Jamba's mixer (JambaMambaMixer, a layer's ``mamba``): the same parts, and its weighted RMS norms on dt, B and C
_MAMBA_NAMES.update({"mamba": "mamba/conv1d+dt_proj+scan", "dt_layernorm": "mamba/dt_norm",
                     "b_layernorm": "mamba/b_norm", "c_layernorm": "mamba/c_norm"})
# Zamba's mixer (ZambaMambaMixer, a layer's ``mamba``): x_proj and dt_proj are its parameters, per head (its own
# ops then run x_proj too: :data:`HEAD_MIXER`)
_MAMBA_NAMES.update({"x_proj_weight": "mamba/x_proj", "dt_proj_weight": "mamba/dt_proj",
                     "dt_proj_bias": "mamba/dt_proj"})
HEAD_MIXER = "mamba/conv1d+x_proj+dt_proj+scan"
# LFM2's gated short convolution (Lfm2ShortConv, a layer's ``conv``): its parts; its own op is the conv
# (F.conv1d on its ``conv``'s weight)
_SHORT_CONV_NAMES = {"conv": "short_conv/conv1d", "in_proj": "short_conv/in_proj", "out_proj": "short_conv/out_proj"}
# MiniMax's lightning attention (MiniMaxLightningAttention, a lightning layer's ``self_attn``): its parts; its own
# ops are the blocked (or recurrent) linear attention
_LIGHTNING_NAMES = {"qkv_proj": "lightning/qkv_proj", "output_gate": "lightning/output_gate",
                    "out_proj": "lightning/out_proj", "norm": "lightning/norm", "self_attn": "lightning/attention"}
# its decay tables: persistent buffers transformers derives from the config (and recomputes when it loads a
# checkpoint), not learned: not parameters (DESIGN: buffers are not), left out of the state dict's count
DERIVED_BUFFERS = frozenset({"slope_rate", "query_decay", "key_decay", "diagonal_decay"})
# Zamba2's shared block (Zamba2AttentionDecoderLayer, a hybrid layer's ``shared_transformer``; Zamba's
# ZambaAttentionDecoderLayer, ``shared_transf``): its norms, and Zamba2's per-use adapters
# (``*_adapter_list.<use>.<0: A, 1: B>``)
_SHARED_NAMES = {"input_layernorm": "norm/shared_attention", "pre_ff_layernorm": "norm/shared_mlp",
                 "self_attn": "attention/scores+values"}
_SHARED_ADAPTERS = {"linear_q_adapter_list": "shared/attention/q_adapter", "linear_k_adapter_list":
                    "shared/attention/k_adapter", "linear_v_adapter_list": "shared/attention/v_adapter",
                    "gate_up_proj_adapter_list": "shared/mlp/adapter"}


def _shared_block(parts: list[str], local: str) -> str:
    """A module of Zamba's shared block (``parts`` below ``shared_transformer`` or ``shared_transf``)."""
    if len(parts) == 4 and parts[1] in _SHARED_ADAPTERS and parts[3] in ("0", "1"):
        return f"{_SHARED_ADAPTERS[parts[1]]}/{'ab'[int(parts[3])]}"
    if len(parts) == 1:
        return _SHARED_NAMES.get(parts[0], f"?{local}")
    return _LAYER_NAMES.get(parts[-1], f"?{local}") if len(parts) == 2 else f"?{local}"


_LAYER_INDEX = re.compile(r"(?:^|\.)(?:layers|h|blocks)\.(\d+)(?:\.|$)")
# the Gated DeltaNet mixer (Qwen3NextGatedDeltaNet, Qwen3.5's; a layer's ``linear_attn``): its parts, Qwen3-Next's
# fused projections as two each; its own ops are the conv (F.conv1d on conv1d's weight) and the delta rule
_GATED_DELTANET_NAMES = {
    "in_proj_qkvz": "gated_deltanet/in_proj_qkv+in_proj_z", "in_proj_ba": "gated_deltanet/in_proj_b+in_proj_a",
    "in_proj_qkv": "gated_deltanet/in_proj_qkv", "in_proj_z": "gated_deltanet/in_proj_z",
    "in_proj_b": "gated_deltanet/in_proj_b", "in_proj_a": "gated_deltanet/in_proj_a", "conv1d": "gated_deltanet/conv1d",
    "dt_bias": "gated_deltanet/dt_bias", "A_log": "gated_deltanet/A_log", "norm": "gated_deltanet/norm",
    "out_proj": "gated_deltanet/out_proj", "linear_attn": "gated_deltanet/conv1d+scan"}
# OLMo Hybrid's (OlmoHybridGatedDeltaNet): q, k and v projected apart (llmcalc's in_proj_qkv, together), the gate
# g_proj (in_proj_z), o_norm and o_proj
_GATED_DELTANET_NAMES.update({"q_proj": "gated_deltanet/in_proj_qkv", "k_proj": "gated_deltanet/in_proj_qkv",
                              "v_proj": "gated_deltanet/in_proj_qkv", "a_proj": "gated_deltanet/in_proj_a",
                              "b_proj": "gated_deltanet/in_proj_b", "g_proj": "gated_deltanet/in_proj_z",
                              "o_norm": "gated_deltanet/norm", "o_proj": "gated_deltanet/out_proj"})
# RecurrentGemma: its norms and MLP, its recurrent block's parts (RecurrentGemmaRglru, ``rg_lru``, holds both
# gates and recurrent_param, and runs the gates' batched matmuls), and the attention module it shares the name
# ``temporal_block`` with (the eager attention's own matmuls; the recurrent block runs none of its own)
_LAYER_NAMES.update({"temporal_pre_norm": "norm/attention", "channel_pre_norm": "norm/mlp", "mlp_block": "mlp",
                     "linear_y": "rglru/linear_y", "linear_x": "rglru/linear_x", "linear_out": "rglru/linear_out",
                     "conv_1d": "rglru/conv1d", "rg_lru": "rglru/input_gate+recurrent_gate+recurrent_param",
                     "temporal_block": "attention/scores+values"})
# Kimi Linear's KDA mixer (KimiLinearDeltaAttention, a kda layer's ``self_attn``; its forget gate's projections and
# parameters under ``forget_gate``): its parts; its own ops are the conv (F.conv1d on conv1d's weight) and the rule
_KDA_NAMES = {name: f"kda/{name}" for name in ("q_proj", "k_proj", "v_proj", "conv1d", "f_a_proj", "f_b_proj",
                                               "dt_bias", "A_log", "b_proj", "g_a_proj", "g_b_proj", "o_norm",
                                               "o_proj")}
_KDA_NAMES["self_attn"] = "kda/conv1d+scan"
_ATTENTION_MODULES = {"self_attn", "attn", "attention", "self_attention", "multi_head_attention"}
# DeepSeek V4's and Hy4's hyper-connections, one per branch of a layer
_HYPER = {"attn_hc": "hyper/attention", "ffn_hc": "hyper/mlp"}
# LongCat-Flash's layer: two sublayers, their attentions, MLPs and norms in lists of two (its MoE is ``mlp``)
_SUBLAYER_LISTS = {"self_attn", "mlps", "input_layernorm", "post_attention_layernorm"}
_MLP_MODULES = {"mlp", "feed_forward", "block_sparse_moe", "ffn"}
_TOP_NAMES = {
    "wte": "embedding/token", "embed_tokens": "embedding/token", "embed_in": "embedding/token",
    "word_embeddings": "embedding/token", "wpe": "embedding/position",
    "ln_f": "norm/final", "norm": "norm/final", "final_layer_norm": "norm/final",
    "final_layernorm": "norm/final", "lm_head": "lm_head", "embed_out": "lm_head",
    "norm_f": "norm/final", "layer_norm": "norm/final", "w": "embedding/token", "layernorm": "norm/final",
    "word_embeddings_layernorm": "norm/embedding",  # BLOOM
    "tokens_embed": "embedding/token", "positions_embed": "embedding/position",  # OpenAI GPT
    "embed_positions": "embedding/position", "output_projection": "lm_head",  # OPT, BioGPT
    "embeddings": "embedding/token",  # Mamba
    "embedding_norm": "norm/final",  # LFM2: after the last layer, whatever its name
}
_TOP_NAMES["final_norm"] = "norm/final"  # RecurrentGemma
# Gemma 3n's model and layer parts (analysis.model.gemma3n); a layer's own matmul is AltUp's predictions
_GEMMA3N_TOP = {"embed_tokens_per_layer": "embedding/per_layer",
                "per_layer_model_projection": "per_layer/model_projection",
                "per_layer_projection_norm": "norm/per_layer_projection", "altup_projections": "altup/embed",
                "altup_unembed_projections": "altup/unembed"}
_GEMMA3N_LAYER = {"altup.modality_router": "altup/router", "altup.prediction_coefs": "altup/prediction",
                  "altup.correction_coefs": "altup/correction", "altup.router_norm": "altup/router_norm",
                  "altup.correct_output_scale": "altup/scale", "altup": "altup/scale",
                  "laurel.linear_left": "laurel/left", "laurel.linear_right": "laurel/right",
                  "laurel.post_laurel_norm": "norm/laurel", "per_layer_input_gate": "per_layer/gate",
                  "per_layer_projection": "per_layer/projection", "post_per_layer_input_norm": "norm/per_layer"}
_LAYER_PATH = re.compile(r"^(?:.*\.)?(?:layers|h|blocks)\.\d+(?:\.(.*))?$")
_VISUAL = re.compile(r"(?:^|\.)visual(?:\.|$)")  # Qwen-VL's vision tower


class TransformersMissing(RuntimeError):
    """transformers is not installed (the ``hf`` extra)."""


def import_transformers():
    try:
        import transformers
    except ImportError:
        raise TransformersMissing("--against transformers needs transformers: "
                                  "pip install transformers==5.23.0 (from llmcalc's source tree: "
                                  "pip install -e '.[hf]')") from None
    return transformers


# --- where the Hugging Face config comes from ------------------------------------------------

def hf_config_path(spec: str) -> Path:
    """The ``config.json`` transformers builds from: the path itself (a model directory's
    config.json), or for a bundled name the shipped ``model_configs/hf/<name>.json``.
    ConfigError for a YAML (no HF config)."""
    if spec in bundled_names():
        path = HF_DIR / f"{spec}.json"
        if not path.exists():
            raise ConfigError(f"bundled model {spec!r} ships no Hugging Face config.json "
                              f"(model_configs/hf/{spec}.json), so --against transformers cannot build it")
        return path
    path = config_file(Path(spec))
    if path.suffix != ".json":
        raise ConfigError("--against transformers needs a Hugging Face config.json (or a bundled name); "
                          "a YAML config has no transformers model", spec)
    return path


def read_hf_config(path: Path) -> dict[str, Any]:
    raw = read_json(read_text(path), str(path))
    if not isinstance(raw, dict) or not isinstance(raw.get("model_type"), str):
        raise ConfigError("not a Hugging Face config.json (no model_type)", str(path), "model_type")
    return raw


def build_hf(raw: dict[str, Any], source: str | None = None, device: str = "meta") -> torch.nn.Module:
    """``AutoModelForCausalLM.from_config`` on meta (``device``: the CPU, with real weights, for the
    tests of :data:`NOT_ON_META`), fp32, eager attention, batched_mm experts. A config transformers
    refuses is a ConfigError (exit 2), naming transformers' reason."""
    transformers = import_transformers()
    raw = {k: v for k, v in remote_code(raw).items() if k not in ("torch_dtype", "dtype")}  # Kimi K2: deepseek_v3
    kind = raw.pop("model_type")
    try:
        config_class = transformers.CONFIG_MAPPING[kind]
    except KeyError:
        raise ConfigError(f"transformers {transformers.__version__} does not know model_type {kind!r}",
                          source, "model_type") from None
    # quiet: transformers logs notes about unused, legacy or out-of-range keys
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    try:
        config = config_class(**raw)  # from_dict without keyword arguments, less its log line formatting the config
        config.use_cache = True
        kwargs: dict[str, Any] = {"attn_implementation": "eager", "dtype": torch.float32}
        auto = transformers.AutoModelForCausalLM
        if getattr(config, "vision_config", None) is not None:  # a multimodal checkpoint: its whole model
            auto = transformers.AutoModelForImageTextToText
        with torch.device(device):
            try:
                model = auto.from_config(config, experts_implementation="batched_mm", **kwargs)
            except (ValueError, TypeError):  # a model without experts may refuse the kwarg
                model = auto.from_config(config, **kwargs)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(f"transformers cannot build this config: {reason}", source) from None
    finally:
        transformers.logging.set_verbosity(verbosity)
    return model.eval()


# --- names: transformers' module paths -> llmcalc components ----------------------------------

def component(path: str, cfg: ModelConfig, glm4: bool = False, head_mixer: bool = False) -> str:
    """``model.layers.3.self_attn.q_proj`` -> ``attention/q``; a multimodal checkpoint's vision tower
    and projector -> ``vision`` and ``projector``, whole; unknown -> ``?<path>``. ``glm4``:
    the model names its norm after attention ``post_self_attn_layernorm`` (:func:`_glm4_norms`);
    ``head_mixer``: its Mamba mixers hold x_proj as a parameter (:func:`_head_mixers`)."""
    if "multi_modal_projector" in path or ".merger" in path or ".connector" in path:  # Qwen-VL: the tower's merger
        return "projector"
    if "embed_vision" in path or "deepstack_merger" in path:  # Gemma 4's norm and linear; Qwen3-VL's DeepStack
        return "projector"
    if ".vision_adapter" in path:  # Llama 4: the pixel-shuffle adapter, in the tower, is llmcalc's projector
        return "projector"
    if "vision_tower" in path or "vision_model" in path or _VISUAL.search(path):
        return "vision"
    if path.rpartition(".")[2] == "hc_head" or ".hc_head." in path:  # hyper-connections' final collapse
        return "hyper/head"
    m = _LAYER_PATH.match(path)
    if m is None and cfg.gemma3n is not None:  # Gemma 3n's per-layer inputs and streams' ends
        key = next((_GEMMA3N_TOP[p] for p in path.split(".") if p in _GEMMA3N_TOP), None)
        if key is not None:
            return key
    if m is None:  # outside the decoder layers
        last = path.rpartition(".")[2]
        return _TOP_NAMES.get(last, "model" if not path or last in ("model", "transformer", "gpt_neox", "backbone")
                              else f"?{path}")
    local = m.group(1) or ""
    parts = local.split(".") if local else []
    if len(parts) >= 2 and parts[0] in _SUBLAYER_LISTS and parts[1].isdigit():  # LongCat-Flash: the sublayer's own
        parts = [parts[0], *parts[2:]]
    if cfg.gemma3n is not None and (local in _GEMMA3N_LAYER or not parts):  # its own matmul: the predictions
        return _GEMMA3N_LAYER.get(local, "altup/predict_mix")
    if not parts:  # the layer's own ops: with mixed hyper-connections, the streams' mixes after both branches
        return "hyper/attention_mix+hyper/mlp_mix" if cfg.hyper is not None and cfg.hyper.mix else "layer"
    if parts[0] in _HYPER:  # a branch's hyper-connection (its norm has no parameters)
        return _HYPER[parts[0]]
    if cfg.shared_transformer is not None:  # Zamba's and Zamba2's hybrid layers
        if parts[0] in ("shared_transformer", "shared_transf"):
            return _shared_block(parts[1:], local)
        if parts == ["linear"]:
            return "shared/proj"
        if parts[0] == "mamba_decoder":  # the layer's own mamba or mamba2 layer
            parts = parts[1:]
    last = parts[-1]
    spec = _layer_spec(path, cfg)
    if spec is not None and parts[0] == "mixer" and not spec.recurrent:  # Nemotron-H: attention as `mixer`
        if parts == ["mixer"]:
            return "attention/scores+values"
    elif spec is not None and spec.attention == "none":  # Nemotron-H's MLP and MoE layers: the FFN as `mixer`
        if parts == ["norm"]:
            return "norm/mlp"
        if parts == ["mixer"]:
            return "moe" if spec.ffn == "moe" else "mlp"
        if parts == ["mixer", "gate"]:
            return "moe/router"
    if cfg.has_mamba2 and parts[0] in ("mixer", "mamba") and len(parts) <= 2 and last in _MAMBA2_NAMES:
        return _MAMBA2_NAMES[last]  # a mamba2 layer's mixer
    if parts[0] in ("mixer", "mamba") and len(parts) <= 2 and last in _MAMBA_NAMES:  # a mamba layer's mixer
        return HEAD_MIXER if head_mixer and len(parts) == 1 else _MAMBA_NAMES[last]
    if cfg.has_short_conv and parts[0] == "conv" and len(parts) <= 2 and last in _SHORT_CONV_NAMES:
        return _SHORT_CONV_NAMES[last]  # a short_conv layer's mixer
    if cfg.has_lightning and parts[0] == "self_attn" and len(parts) <= 2 and last in _LIGHTNING_NAMES:
        index = _LAYER_INDEX.search(path)
        if index is not None and layer_specs(cfg)[int(index.group(1))].attention == "lightning":
            return _LIGHTNING_NAMES[last]  # a lightning layer's mixer
    if spec is not None and spec.attention == "kda" and parts[0] == "self_attn" and last in _KDA_NAMES:
        return _KDA_NAMES[last]  # a kda layer's mixer
    if cfg.has_gated_deltanet and parts[0] == "linear_attn" and len(parts) <= 2 and last in _GATED_DELTANET_NAMES:
        return _GATED_DELTANET_NAMES[last]  # a gated_deltanet layer's mixer
    if cfg.has_gated_deltanet and cfg.attention_gate and parts[0] == "self_attn" and last == "q_proj":
        return "attention/q+gate"  # Qwen3-Next's q_proj: q and the output gate, one linear
    if parts == ["norm"]:  # a mamba layer's one norm, before its mixer
        return "norm/attention"
    if parts[0] == "router" and len(parts) <= 2:  # Gemma 4's router: its scale is the weight of llmcalc's norm
        return {"scale": "moe/router_norm", "per_expert_scale": "moe/expert_scale"}.get(last, "moe/router")
    if "shared_expert_gate" in last:
        return "moe/shared_expert_gate"
    if any(p.startswith("shared_expert") or p == "shared_mlp" for p in parts):  # shared_mlp: GraniteMoeShared
        return "moe/shared_experts"
    if "experts" in parts:
        return "moe/experts"
    if len(parts) >= 2 and parts[0] in _MLP_MODULES and parts[1] in ("gate", "router"):  # and its parts (gate.wg)
        return "moe/router"
    if last == "post_attention_layernorm":  # after the attention branch (sandwich, OLMo 2) or before the MLP
        placement = (cfg if spec is None else layer_config(cfg, spec)).norm_placement  # OLMo Hybrid: per layer
        return "norm/attention_post" if placement in ("sandwich", "post_branch") and not glm4 else "norm/mlp"
    if len(parts) == 1 and last in _ATTENTION_MODULES:  # the eager attention's own matmuls
        return "attention/scores+values"
    if len(parts) == 2 and last in _ATTENTION_MODULES:  # GPT-Neo's attn.attention, DBRX's norm_attn_norm.attn
        return "attention/scores+values"
    if len(parts) == 1 and last in _MLP_MODULES:
        return "moe" if cfg.moe is not None else "mlp"
    if last in ("c_proj", "dense"):  # GPT-2 / NeoX / Falcon / Phi reuse the name in both branches
        return "attention/o" if parts[0] in _ATTENTION_MODULES else "mlp/down"
    if last == "sinks":
        return "attention/sinks"
    if len(parts) >= 2 and parts[-2] == "indexer":  # DSA's lightning indexer: its projections and key norm
        return f"attention/indexer/{last}"
    if last == "indexer":  # its own matmuls (q.k and the heads' weighted sum)
        return "attention/indexer"
    if last == "gate_proj" and parts[0] in _ATTENTION_MODULES:  # AFMoE's attention output gate
        return "attention/gate"
    return _LAYER_NAMES.get(last, f"?{local}")


_LAYER_INDEX = re.compile(r"^(?:.*\.)?(?:layers|h|blocks)\.(\d+)(?:\.|$)")


def _layer_spec(path: str, cfg: ModelConfig) -> LayerSpec | None:
    """The spec of the layer ``path`` lies in, by its index; None outside the layers (or past the plan)."""
    m = _LAYER_INDEX.match(path)
    specs = layer_specs(cfg)
    return specs[int(m.group(1))] if m is not None and int(m.group(1)) < len(specs) else None


def _glm4_norms(model: torch.nn.Module) -> bool:
    """GLM-4-0414 and HyperCLOVA X keep Llama's names in their sandwich: ``post_attention_layernorm``
    is the norm before the MLP there, the norms after the branches are ``post_self_attn_layernorm``
    and ``post_mlp_layernorm`` (HyperCLOVA X: ``post_norm1`` and ``post_norm2``)."""
    return any(name.endswith(("post_self_attn_layernorm", "post_norm1")) for name, _ in model.named_modules())


def _head_mixers(model: torch.nn.Module) -> bool:
    """Zamba's Mamba mixers hold x_proj as a parameter, ``x_proj_weight`` (a head's in each row), and run its
    matmul themselves."""
    return any(name.endswith(".x_proj_weight") for name, _ in model.named_parameters())


def _towers_whole(components: dict[str, int]) -> dict[str, int]:
    """A vision tower and its projector each as one whole, as :func:`component` names transformers' modules."""
    out: dict[str, int] = {}
    for key, n in components.items():
        whole = key.split("/")[0]
        key = whole if whole in ("vision", "projector") else key
        out[key] = out.get(key, 0) + n
    return out


def _parts(key: str) -> list[str]:
    """``attention/q+k+v`` -> ``attention/q``, ``attention/k``, ``attention/v``."""
    prefix, _, tail = key.rpartition("/")
    return [f"{prefix}/{t}" for t in tail.split("+")]


def _compare(prefix: str, analytic: dict[str, int], measured: dict[str, int]) -> list[Check]:
    """Per component where transformers' names map; unmapped ones (``?path``) against the
    llmcalc components transformers has no counterpart for, as one ``unmatched`` check."""
    grouped: dict[str, int] = {}
    used: set[str] = set()
    for key in measured:
        if key.startswith("?"):
            continue
        parts = _parts(key) if "+" in key else [key]
        grouped[key] = sum(analytic.get(p, 0) for p in parts)
        used.update(parts)
    out = [Check(f"{prefix}/{k}", grouped[k], measured[k], grouped[k] == measured[k])
           for k in measured if not k.startswith("?")]
    missing = {k: v for k, v in analytic.items() if k not in used and v}
    unmapped = {k[1:]: v for k, v in measured.items() if k.startswith("?")}
    if missing or unmapped:
        a, m = sum(missing.values()), sum(unmapped.values())
        note = f"llmcalc: {', '.join(missing) or '-'}; transformers: {', '.join(unmapped) or '-'}"
        out.append(Check(f"{prefix}/unmatched", a, m, a == m, note))
    a, m = sum(analytic.values()), sum(measured.values())
    return out + [Check(f"{prefix}/total", a, m, a == m)]


# model types whose transformers experts run every expert on every token (Llama4TextExperts: a
# batched matmul over all experts, each token pre-scaled by its router score, zero for the experts
# not chosen): their expert FLOPs are not the model's, which runs experts_per_token of them
DENSE_EXPERTS = frozenset({"llama4_text", "llama4"})  # llama4: its language model
EVERY_EXPERT = ("analytic under transformers' convention: every expert on every token "
                "(x num_experts / experts_per_token)")


# model types with identity experts: transformers allocates gate_up_proj rows for them, and its routing decides
# how many choices reach real experts (module docstring)
IDENTITY_EXPERTS = frozenset({"longcat_flash"})
PHANTOM = "analytic with the gate_up_proj rows transformers allocates for the identity experts"
STEERED = ("transformers' routers steered to llmcalc's convention: each token's experts_per_token * num_experts / "
           "(num_experts + zero_experts) choices on real experts")


def phantom_params(model: torch.nn.Module) -> int:
    """Parameters transformers allocates that no checkpoint stores: the rows of a stacked ``gate_up_proj`` past
    its ``down_proj``'s experts (LongCat-Flash's identity experts)."""
    total = 0
    for m in model.modules():
        up, down = getattr(m, "gate_up_proj", None), getattr(m, "down_proj", None)
        if isinstance(up, torch.Tensor) and isinstance(down, torch.Tensor) and up.dim() == 3:
            total += (up.shape[0] - down.shape[0]) * up.shape[1] * up.shape[2]
    return total


@torch.no_grad()
def steer_identity_experts(model: torch.nn.Module, cfg: ModelConfig) -> None:
    """Every token of every router picks the same ``k*E/(E+Z)`` real experts and ``k - k*E/(E+Z)`` identity
    ones: their ``e_score_correction_bias`` (added to the scores for the choice only) raised above any score."""
    moe = cfg.moe
    E, real = moe.num_experts, moe.real_experts_per_token
    chosen = [*range(real), *range(E, E + moe.experts_per_token - real)]
    for m in model.modules():
        bias = getattr(m, "e_score_correction_bias", None)
        if isinstance(bias, torch.Tensor) and bias.numel() == E + moe.zero_experts:
            bias.zero_()
            bias[chosen] = 2.0  # softmax scores lie in [0, 1]


# model types whose transformers attention (eager and SDPA) scores every key a query sees and masks all but the
# indexer's top-k: their attention FLOPs are dense attention's, not the model's, which reads min(keys, topk)
DENSE_TOPK = frozenset({"deepseek_v32", "glm_moe_dsa", "hy_v4"})
EVERY_KEY = ("analytic under transformers' convention: dense attention masked to the top-k "
             "(x keys / min(keys, topk))")


# --- measurements ----------------------------------------------------------------------------

def measure_params(model: torch.nn.Module, cfg: ModelConfig) -> dict[str, int]:
    """The numel of what a checkpoint stores, per component: the state dict, that is the
    parameters and the persistent buffers (DeepSeek-V3's router ``e_score_correction_bias``
    is a buffer in transformers, but a learned tensor the checkpoint ships), each storage
    once (tied weights once). A tensor belongs to its module, or is a component of its own
    when that module has submodules (``sinks``)."""
    counts: dict[str, int] = defaultdict(int)
    seen: set[int] = set()
    glm4 = _glm4_norms(model)
    for name, t in model.state_dict(keep_vars=True).items():
        storage = _storage_id(t)
        if storage in seen or (cfg.has_lightning and name.rpartition(".")[2] in DERIVED_BUFFERS):
            continue
        seen.add(storage)
        owner = name.rpartition(".")[0]
        leaf = not any(True for _ in model.get_submodule(owner).children())
        counts[component(owner if leaf else name, cfg, glm4)] += t.numel()
    return {k: v for k, v in counts.items() if v}


# families whose model reads the attention mask's values, which meta tensors do not have: Mamba-2's recurrent
# mask (``torch.all(mask == 1)``) runs without one (every token attended, as with a mask of ones); hybrids take
# their masks per layer type (a mapping), given as none (Jamba's mask for its mamba layers asks whether every
# entry is 1; the causal mask only adds, and matmul FLOPs and cache bytes do not depend on its values)
NO_MASK = frozenset({"mamba2"})
MASK_MAPPING = frozenset({"bamba", "granitemoehybrid", "nemotron_h", "jamba", "lfm2", "lfm2_moe", "minimax"})
MASK_MAPPING |= {"qwen3_next", "qwen3_5_text", "qwen3_5_moe_text", "qwen3_5", "qwen3_5_moe", "kimi_linear", "falcon_h1",
                 "olmo_hybrid", "zamba", "zamba2"}


def _inputs(model: torch.nn.Module, batch: int, seq: int) -> dict[str, Any]:
    device = next(model.parameters()).device  # meta, or the CPU for a model that cannot run on meta
    ids = torch.zeros(batch, seq, dtype=torch.long, device=device)
    kind = getattr(model.config, "model_type", None)
    if kind in NO_MASK:  # all ones, which these check on the values
        return {"input_ids": ids}
    if kind in MASK_MAPPING:  # the masks per layer type, given: none (selection only, no FLOP, no cache)
        return {"input_ids": ids, "attention_mask": {"full_attention": None, "linear_attention": None, "conv": None}}
    return {"input_ids": ids, "attention_mask": torch.ones(batch, seq, dtype=torch.long, device=device)}


def measure_flops(model: torch.nn.Module, cfg: ModelConfig, batch: int, seq: int):
    """(forward, backward) matmul FLOPs per component of a training step: cross-entropy on the
    logits of every position."""
    inputs, glm4, heads = _inputs(model, batch, seq), _glm4_norms(model), _head_mixers(model)
    with ModuleScope(model, lambda path: component(path, cfg, glm4, heads)) as scope:
        with _Counter(scope) as fwd:
            logits = model(**inputs, use_cache=False).logits
        loss = training_loss(logits, inputs["input_ids"])
    with _Counter(scope) as bwd:
        loss.backward()
    return fwd.result(), bwd.result()


@torch.no_grad()
def measure_kv_bytes(model: torch.nn.Module, batch: int, prefill: int) -> int:
    """Bytes of the key and value tensors of the cache transformers fills during a prefill (0 for a
    model that keeps none: OpenAI GPT), and Mamba's conv and SSM states."""
    given = _given_cache(model)
    out = model(**_inputs(model, batch, prefill), use_cache=True, logits_to_keep=1, **given)
    cache = out.cache_params if hasattr(out, "cache_params") else getattr(out, "past_key_values", None)
    cache = given.get("past_key_values", cache)
    total = _module_states(model)
    for layer in cache.layers if cache is not None else []:
        for t in (getattr(layer, "keys", None), getattr(layer, "values", None),
                  getattr(layer, "indexer_keys", None)):  # DSA: the indexer's key per token
            if isinstance(t, torch.Tensor):
                total += t.numel() * t.element_size()
        for states in (getattr(layer, "conv_states", None), getattr(layer, "recurrent_states", None)):
            for t in (states or {}).values():  # a recurrent layer's state (Mamba: conv and SSM)
                if isinstance(t, torch.Tensor):
                    total += t.numel() * t.element_size()
    for t in getattr(cache, "linear_cache", None) or []:  # MiniMax: each lightning layer's state, apart
        if isinstance(t, torch.Tensor):
            total += t.numel() * t.element_size()
    return total


# families whose model returns no cache and keeps its recurrent states on its modules (RecurrentGemma: the
# recurrent blocks' conv1d_state and their RG-LRU's recurrent_states, fp32): given a DynamicCache, whose
# layers hold the attention's K and V, and read with those states
MODULE_STATES = frozenset({"recurrent_gemma"})


def _given_cache(model: torch.nn.Module) -> dict[str, Any]:
    if getattr(model.config, "model_type", None) not in MODULE_STATES:
        return {}
    from transformers import DynamicCache

    return {"past_key_values": DynamicCache(config=model.config)}


def _module_states(model: torch.nn.Module) -> int:
    """Bytes of the states :data:`MODULE_STATES` families keep on their modules."""
    if getattr(model.config, "model_type", None) not in MODULE_STATES:
        return 0
    tensors = [getattr(m, name, None) for m in model.modules() for name in ("conv1d_state", "recurrent_states")]
    return sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))


# families whose transformers cache differs from llmcalc's by more than the W - 1 convention (module
# docstring; tests/test_against.py checks each in closed form): GPT-Neo's DynamicCache keeps every
# token of its local layers (their window is a mask), OpenAI GPT's model keeps no cache
EVERY_TOKEN_CACHED = frozenset({"gpt_neo"})
NO_CACHE = frozenset({"openai-gpt"})
# families whose transformers model cannot run on meta (DBRX's experts loop over the experts a batch
# routes to); the tests run them with real weights on the CPU, at a small size
NOT_ON_META = frozenset({"dbrx", "longcat_flash"})


def transformers_kv_bytes(cfg: ModelConfig, batch: int, prefill: int, dtype: str = "fp32",
                          model_type: str | None = None) -> int:
    """llmcalc's KV-cache figure under transformers' convention (module docstring): after a
    prefill of ``S`` tokens a sliding layer holds ``min(S, W - 1)`` tokens, a full one ``S`` (as does a use of
    a shared block); for
    ``model_type`` GPT-Neo every layer ``S``, for OpenAI GPT none."""
    if model_type in NO_CACHE:
        return 0
    total = 0
    for group, block in build(cfg).blocks:
        if group.spec.recurrent:  # a state per sequence: transformers keeps the same (conv inputs, SSM state)
            total += group.count * batch * block.recurrent.state_values * bytes_per(dtype)
            # and a shared block's uses (Zamba, Zamba2) the K and V of every token, each using layer its own
            per_token = sum(s.attention.kv_values_per_token for s in block.shared)
            total += group.count * batch * prefill * per_token * bytes_per(dtype)
            continue
        per_token = block.attention.kv_values_per_token
        window = None if model_type in EVERY_TOKEN_CACHED else (
            group.spec.window if group.spec.chunk is None else group.spec.chunk)  # a chunk: as a window
        cached = prefill if window is None else min(prefill, window - 1)
        total += group.count * batch * cached * per_token * bytes_per(dtype)
        total += sum(group.count * batch * m.state_values * bytes_per(dtype) for m in block.beside)
    return total


def kv_prefill(cfg: ModelConfig, seq: int) -> int:
    """A prefill past every window of the plan (or ``seq`` tokens without one)."""
    windows = [w for g in layer_plan(cfg) for w in g.spec.span if w is not None]  # windows and chunks
    return max(windows) + 3 if windows else seq


# --- the checks --------------------------------------------------------------------------------

def against_transformers(cfg: ModelConfig, raw: dict[str, Any], seq: int, batch: int,
                         source: str | None = None, device: str = "meta") -> list[Check]:
    """Parameters, forward/backward matmul FLOPs (eager) and KV-cache bytes of transformers'
    model for ``raw`` against llmcalc's analytic figures for ``cfg`` (on a deep stack, as
    ``report.verify``). ConfigError when ``seq`` and ``batch`` make tensors torch cannot address,
    and for a family that cannot run on meta (``device``: "cpu", real weights, for a small config)."""
    if device == "meta" and raw.get("model_type") in NOT_ON_META:
        raise ConfigError(f"transformers' {raw['model_type']} model cannot run on the meta device (its experts "
                          "loop over the experts a batch routes to), so --against transformers cannot measure it",
                          source, "model_type")
    check_sizes(cfg, seq, batch, max(seq, kv_prefill(cfg, seq)))
    return on_deep_stack(_against, cfg, raw, seq, batch, source, device)


def _against(cfg: ModelConfig, raw: dict[str, Any], seq: int, batch: int, source: str | None,
             device: str) -> list[Check]:
    model = build_hf(raw, source, device)
    analytic_params = _towers_whole(count_params(cfg).components)
    phantom = phantom_params(model)
    if phantom:  # rows transformers allocates for identity experts (module docstring)
        analytic_params["moe/experts"] += phantom
    out = _compare("transformers/params", analytic_params, measure_params(model, cfg))
    if phantom:
        out = [Check(c.name, c.analytic, c.measured, c.ok, PHANTOM) if c.name.endswith(("/moe/experts", "/total"))
               else c for c in out]
    steered = raw.get("model_type") in IDENTITY_EXPERTS and cfg.moe is not None and cfg.moe.zero_experts > 0
    if steered:
        steer_identity_experts(model, cfg)

    fwd, bwd = measure_flops(model, cfg, batch, seq)
    report = count_flops(cfg, RunSpec("train", seq, batch, "eager"))
    dense = raw.get("model_type") in DENSE_EXPERTS and cfg.moe is not None
    kind = raw.get("model_type")
    passes = (("forward", report.forward.matmul, fwd), ("backward", report.backward.matmul, bwd))
    for name, analytic, measured in passes:
        if dense:  # transformers' experts: every expert on every token (module docstring)
            analytic = {**analytic, "moe/experts": analytic["moe/experts"] * cfg.moe.num_experts
                        // cfg.moe.experts_per_token}
        sparse = kind in DENSE_TOPK and cfg.dsa is not None and cfg.dsa.topk < seq
        if sparse:  # transformers' attention: every key, the rest masked (DENSE_TOPK)
            analytic = {**analytic, **{k: analytic[k] * seq // min(seq, cfg.dsa.topk) for k in SCORES_VALUES}}
        checks = _compare(f"transformers/flops/eager/{name}", analytic, measured)
        note = EVERY_EXPERT if dense else STEERED if steered else None
        out += [Check(c.name, c.analytic, c.measured, c.ok, note) if note and c.name.endswith(
            ("/moe/experts", "/total")) else c for c in checks]
        if sparse:  # labelled, as the experts are
            out[-len(checks):] = [Check(c.name, c.analytic, c.measured, c.ok, EVERY_KEY) if c.name.endswith(
                ("/attention/scores+values", "/total")) else c for c in checks]

    prefill, kind = kv_prefill(cfg, seq), raw.get("model_type")
    windows = sorted({w for g in layer_plan(cfg) for w in g.spec.span if w is not None})
    keeps = " (sliding layers keep W - 1)" if windows else ""
    if kind in EVERY_TOKEN_CACHED or kind in NO_CACHE:
        keeps = " (every layer keeps every token)" if kind in EVERY_TOKEN_CACHED else " (transformers keeps none)"
    analytic = transformers_kv_bytes(cfg, batch, prefill, model_type=kind)
    measured = measure_kv_bytes(model, batch, prefill)
    out.append(Check(f"transformers/kv_cache/prefill {prefill}{keeps}", analytic, measured, analytic == measured,
                     "analytic under transformers' cache convention" if keeps else ""))
    return out


# --- images: the vision tower and projector of a multimodal checkpoint -------------------------

def _image_inputs(model: torch.nn.Module, raw: dict[str, Any], size: int, images: int) -> dict[str, Any]:
    """The keyword arguments of the family's ``get_image_features`` for ``images`` square images of
    ``size`` pixels: pixel values as its processor gives them (Qwen-VL: flattened patches and their
    ``grid_thw``; Mistral 3: ``image_sizes``; Idefics3/SmolVLM: images per sample)."""
    device = next(model.parameters()).device
    v, kind = raw["vision_config"], raw["model_type"]
    if kind in ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe"):
        p, t = v["patch_size"], v["temporal_patch_size"]
        side = size // p
        channels = v.get("in_chans", v.get("in_channels", 3))
        return {"pixel_values": torch.zeros(images * side * side, channels * t * p * p, device=device),
                "image_grid_thw": torch.tensor([[1, side, side]] * images)}
    # ones: Idefics3 drops an image of zeros as padding
    pixels = torch.ones(images, v.get("num_channels", 3), size, size, device=device)
    if kind == "mistral3":
        return {"pixel_values": pixels, "image_sizes": torch.tensor([[size, size]] * images)}
    if kind in ("idefics3", "smolvlm"):
        return {"pixel_values": pixels[None]}
    if kind == "gemma4":  # its processor's flattened patches (ones: none of them padding) and their (x, y)
        p, side = v.get("patch_size", 16), size // v.get("patch_size", 16)
        grid = torch.stack(torch.meshgrid(torch.arange(side), torch.arange(side), indexing="xy"), -1).reshape(-1, 2)
        return {"pixel_values": torch.ones(images, side * side, 3 * p * p, device=device),
                "image_position_ids": grid.expand(images, -1, -1).to(device)}
    return {"pixel_values": pixels}


def measure_image_flops(model: torch.nn.Module, cfg: ModelConfig, raw: dict[str, Any], size: int,
                        images: int) -> tuple[dict[str, int], dict[str, int]]:
    """(forward, backward) matmul FLOPs of transformers' ``get_image_features`` over ``images``
    images of ``size`` pixels, as ``vision`` and ``projector`` (whole), the backward of the sum of
    the image tokens and of Qwen3-VL's DeepStack features, which its language model adds to its first
    layers (the pixels need no gradient)."""
    inputs = _image_inputs(model, raw, size, images)
    with ModuleScope(model, lambda path: component(path, cfg)) as scope:
        with _Counter(scope) as fwd:
            out = model.model.get_image_features(**inputs)
        outputs = [out.pooler_output, *(getattr(out, "deepstack_features", None) or [])]
        loss = sum(t.sum() for tokens in outputs
                   for t in (tokens if isinstance(tokens, (list, tuple)) else [tokens]))
    with _Counter(scope) as bwd:
        loss.backward()
    return fwd.result(), bwd.result()
