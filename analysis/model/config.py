"""ModelConfig: one flat, frozen description of a decoder-only transformer, and the check of each key.

Fields are exactly the YAML keys (DESIGN.md section 2, the docs' "Config keys"); values a user
may omit are ``None`` or a documented default, and everything derived from them (KV heads,
head size, widths, expert width, the layer plan) is computed, never a field that gets
rewritten.

Validation is driven by the dataclass fields: every field carries its own check in its
metadata, so a key exists in YAML exactly when it exists here and can never be silently
dropped (:func:`read_fields`); the rules between keys are in :mod:`analysis.model.checks`. Every
problem with user input is a :class:`ConfigError` naming the file, the key and, where known, the
YAML line.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import unicodedata
from dataclasses import dataclass, field
from typing import Any, Callable

from ..errors import ConfigError, brief
from .attention import ATTENTION
from .formats import WEIGHT_FORMATS
from .rules import check_rules
from .sizes import DTYPE_BITS, MAX_INT
from .variants import ACTIVATIONS, NORMS, POSITIONS

NORM_PLACEMENTS = ("pre", "post", "sandwich", "post_branch")
# layer types with a recurrent mixer in place of attention (a state per sequence, no attention): Mamba-1, Mamba-2
# (SSD), LFM2's gated short convolution, MiniMax's lightning attention, Qwen3-Next's Gated DeltaNet and
# RecurrentGemma's RG-LRU block; and "none", no mixer (the layer is its FFN alone: Nemotron-H's MLP and MoE layers),
# which goes the recurrent layers' way (no attention, an empty mixer keeping no state; one GPU only)
RECURRENT_TYPES = ("mamba", "mamba2", "short_conv", "none", "lightning", "gated_deltanet", "rglru")
LAYER_TYPES = ("full", "sliding", "chunked", *RECURRENT_TYPES)
QK_NORMS = ("none", "head", "full", "l2")
MAX_LAYERS = 100_000  # the layer plan is built layer by layer (the deepest real models have ~130)


def _suggest(key: str, choices) -> str:
    close = difflib.get_close_matches(key, list(choices), n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


class Checker:
    """Raises ConfigError for one file; ``prefix`` names the enclosing mapping (``moe.``)."""

    def __init__(self, source: str | None, lines: dict[str, int], prefix: str = ""):
        self.source, self.lines, self.prefix = source, lines, prefix

    def fail(self, key: str | None, message: str):
        """Raise for ``key`` (``moe.step`` names a nested key; its line is that of ``moe``)."""
        full = self.prefix + key if key else None
        line = self.lines.get(full.split(".")[0]) if full else None
        raise ConfigError(message, self.source, full, line)

    def nested(self, key: str) -> "Checker":
        return Checker(self.source, self.lines, self.prefix + key + ".")


# -- per-field checks: (checker, key, value) -> the stored value ---------------------------

Check = Callable[[Checker, str, Any], Any]


def _int(minimum: int = 1, maximum: int = MAX_INT) -> Check:
    def check(c: Checker, key: str, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            c.fail(key, f"must be an integer, got {brief(value)}")
        if value < minimum:
            c.fail(key, f"must be >= {minimum}, got {brief(value)}")
        if value > maximum:
            c.fail(key, f"must be at most {maximum:,}, got {brief(value)}")
        return value
    return check


def _optional(inner: Check) -> Check:
    def check(c: Checker, key: str, value: Any) -> Any:
        return None if value is None else inner(c, key, value)
    return check


def _bool(c: Checker, key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        c.fail(key, f"must be true or false, got {brief(value)}")
    return value


def _enum(choices) -> Check:
    choices = tuple(choices)

    def check(c: Checker, key: str, value: Any) -> str:
        if not isinstance(value, str) or value not in choices:
            hint = _suggest(value, choices) if isinstance(value, str) else ""
            c.fail(key, f"unknown value {brief(value)}{hint}; "
                        f"expected one of: {', '.join(choices)}")
        return value
    return check


def _text(required: bool) -> Check:
    def check(c: Checker, key: str, value: Any) -> str:
        if not isinstance(value, str) or (required and not value.strip()):
            c.fail(key, f"must be a non-empty string, got {brief(value)}")
        if any(unicodedata.category(ch) == "Cc" for ch in value):
            # an escape sequence or a newline would rewrite the terminal or split a table row
            # (a lone surrogate, from a directory name that is not UTF-8, is escaped on output)
            c.fail(key, f"must be printable text (no control characters), got {brief(value)}")
        return value
    return check


def _number(maximum: float = math.inf) -> Check:
    """A finite positive number (at most ``maximum``), also one written as text (``"1e6"``)."""
    def check(c: Checker, key: str, value: Any) -> float:
        try:
            number = float(value) if not isinstance(value, bool) else math.nan
        except (TypeError, ValueError):
            number = math.nan
        if not (math.isfinite(number) and 0 < number <= maximum):
            bound = "" if maximum == math.inf else f" at most {maximum:g}"
            c.fail(key, f"must be a positive number{bound}, got {brief(value)}")
        return number
    return check


def _pattern(inner: Check) -> Check:
    """A non-empty list, repeated cyclically over the layers; stored as a tuple."""
    def check(c: Checker, key: str, value: Any) -> tuple:
        if not isinstance(value, list) or not value:
            c.fail(key, f"must be a non-empty list, got {brief(value)}")
        return tuple(inner(c, key, v) for v in value)
    return check


def _names(c: Checker, key: str, value: Any) -> tuple[str, ...]:
    """A list of names, possibly empty; stored as a tuple."""
    if not isinstance(value, list):
        c.fail(key, f"must be a list, got {brief(value)}")
    return tuple(_text(True)(c, key, v) for v in value)


def _one_of(*values: int) -> Check:
    def check(c: Checker, key: str, value: Any) -> int:
        if type(value) is not int or value not in values:
            c.fail(key, f"must be {' or '.join(map(str, values))}, got {brief(value)}")
        return value
    return check


def _qk_norm(c: Checker, key: str, value: Any) -> str:
    """``true`` is ``head`` (per head, Qwen 3), ``false`` is ``none``; ``full``: over the whole
    q and k projections (OLMo 2); ``l2``: a weightless RMSNorm per head on the RoPE layers (Llama 4)."""
    if isinstance(value, bool):
        return "head" if value else "none"
    return _enum(QK_NORMS)(c, key, value)


def _mapping(cls) -> Check:
    def check(c: Checker, key: str, value: Any) -> Any:
        return None if value is None else read_fields(cls, value, c.nested(key))
    return check


def _key(check: Check, default: Any = dataclasses.MISSING) -> Any:
    return field(default=default, metadata={"check": check})


@dataclass(frozen=True)
class MoEConfig:
    """Mixture of experts in place of the MLP of layer ``i`` when ``i >= first_dense_layers``
    and ``(i + 1) % step == 0``; the other layers keep a dense MLP of width ``d_ff``."""

    num_experts: int = _key(_int())
    experts_per_token: int = _key(_int())
    expert_d_ff: int | None = _key(_optional(_int()), None)  # None: the model's d_ff
    shared_experts: int = _key(_int(0), 0)  # always-active experts
    shared_expert_d_ff: int | None = _key(_optional(_int()), None)  # None: the expert width
    shared_expert_gate: bool = _key(_bool, False)  # sigmoid(x @ w), w: d -> 1 (Qwen2-MoE)
    first_dense_layers: int = _key(_int(0), 0)  # DeepSeek: the first 1 or 3 layers are dense
    step: int = _key(_int(), 1)  # every step-th layer is MoE (Qwen-MoE's decoder_sparse_step)
    router_bias: bool = _key(_bool, False)  # GPT-OSS
    expert_bias: bool = _key(_bool, False)  # biases on every expert matrix (GPT-OSS)

    def is_moe_layer(self, i: int) -> bool:
        return i >= self.first_dense_layers and (i + 1) % self.step == 0


@dataclass(frozen=True)
class MLAConfig:
    """Multi-head latent attention (DeepSeek-V2/V3, Kimi K2)."""

    kv_lora_rank: int = _key(_int())  # the compressed KV latent per token
    qk_nope_head_dim: int = _key(_int())  # per-head query/key size without positions
    qk_rope_head_dim: int = _key(_int())  # per-head query size with RoPE; one shared rope key
    v_head_dim: int = _key(_int())
    q_lora_rank: int | None = _key(_optional(_int()), None)  # None: a full-rank query projection


@dataclass(frozen=True)
class DSAConfig:
    """DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5): MLA's lightning indexer, which scores every
    cached key and lets each query attend to its ``topk`` best keys only."""

    n_heads: int = _key(_int())  # the indexer's query heads (index_n_heads)
    head_dim: int = _key(_int())  # its query/key head size; one key per token, cached (index_head_dim)
    topk: int = _key(_int())  # keys each query attends to (index_topk)


def _mixer_norms(c: Checker, key: str, value: Any) -> bool | str:
    """``mamba.mixer_norms``: true or false, or ``weighted``."""
    if value != "weighted" and not isinstance(value, bool):
        c.fail(key, f"must be true, false or weighted, got {brief(value)}")
    return value


@dataclass(frozen=True)
class MambaConfig:
    """The Mamba-1 selective-state-space mixer of ``mamba`` layers (transformers' MambaMixer): in_proj
    d -> 2E (E = expand * d_model), a depthwise causal conv1d of d_conv taps, x_proj E -> dt_rank + 2
    d_state, dt_proj dt_rank -> E (with bias), A_log (E x d_state), D (E), out_proj E -> d; SiLU."""

    d_state: int = _key(_int(), 16)  # N: the SSM state per channel
    d_conv: int = _key(_int(), 4)  # K: the depthwise convolution's taps
    expand: int = _key(_int(), 2)  # E = expand * d_model
    dt_rank: int | None = _key(_optional(_int()), None)  # None: ceil(d_model / 16)
    conv_bias: bool = _key(_bool, True)
    proj_bias: bool = _key(_bool, False)  # biases of in_proj and out_proj
    # RMS norms on dt, B and C: true, weightless (Falcon-Mamba); "weighted", a weight each (Jamba)
    mixer_norms: bool | str = _key(_mixer_norms, False)


@dataclass(frozen=True)
class Mamba2Config:
    """The Mamba-2 (SSD) mixer of ``mamba2`` layers (transformers' Mamba2Mixer): in_proj d -> 2E + 2GN + H
    (z, x, B, C, dt), a depthwise causal conv1d of d_conv taps over x, B and C, dt_bias, A_log and D per
    head, a gated RMSNorm (weight E, in n_groups groups) and out_proj E -> d; E = n_heads * head_dim."""

    d_state: int = _key(_int(), 128)  # N: the SSM state per head and head dimension
    d_conv: int = _key(_int(), 4)  # K: the depthwise convolution's taps
    expand: int = _key(_int(), 2)  # E = expand * d_model when n_heads is not given
    n_heads: int | None = _key(_optional(_int()), None)  # H; None: expand * d_model / head_dim
    head_dim: int = _key(_int(), 64)  # P
    n_groups: int = _key(_int(), 1)  # G: groups of B and C (and of the gated norm); divides n_heads
    conv_bias: bool = _key(_bool, True)
    proj_bias: bool = _key(_bool, False)  # biases of in_proj and out_proj
    chunk_size: int = _key(_int(), 256)  # Q: the chunked scan's chunk (training and prefill)


@dataclass(frozen=True)
class ShortConvConfig:
    """LFM2's gated short convolution of ``short_conv`` layers (transformers' Lfm2ShortConv): in_proj
    d -> 3d (B, C, x), a depthwise causal conv1d of d_conv taps over B*x, y = C * conv(B*x), out_proj
    d -> d; ``bias``: biases on in_proj, the conv and out_proj (transformers' ``conv_bias``)."""

    d_conv: int = _key(_int(), 3)  # L: the conv's taps (transformers' conv_L_cache), the state's length
    bias: bool = _key(_bool, False)


@dataclass(frozen=True)
class LightningConfig:
    """MiniMax's lightning attention of ``lightning`` layers (transformers' MiniMaxLightningAttention):
    qkv_proj d -> 3*h*hd (SiLU), linear attention with a fixed exponential decay per head, computed
    block by block for a pass over a prompt, an RMSNorm over h*hd, a sigmoid gate (output_gate d -> h*hd)
    and out_proj h*hd -> d; h and hd are the model's ``n_heads`` and ``head_dim``."""

    block_size: int = _key(_int(), 256)  # the blocked form's block (training and prefill)


@dataclass(frozen=True)
class GatedDeltaNetConfig:
    """The Gated DeltaNet mixer of ``gated_deltanet`` layers (transformers' Qwen3NextGatedDeltaNet): q, k
    (linear_num_key_heads x linear_key_head_dim each), v and the gate z (linear_num_value_heads x
    linear_value_head_dim each), b and a (one per value head) projected from d; a depthwise causal conv1d
    of linear_conv_kernel_dim taps over q, k and v; dt_bias and A_log per value head; a gated RMSNorm
    (weight linear_value_head_dim, per head) and out_proj; no biases. Names mirror transformers'."""

    linear_num_key_heads: int = _key(_int(), 16)  # Hk: query and key heads; divides the value heads
    linear_num_value_heads: int = _key(_int(), 32)  # Hv: value heads (each keeps a dk x dv state)
    linear_key_head_dim: int = _key(_int(), 128)  # dk
    linear_value_head_dim: int = _key(_int(), 128)  # dv
    linear_conv_kernel_dim: int = _key(_int(), 4)  # K: the depthwise convolution's taps
    chunk_size: int = _key(_int(), 64)  # Q: the chunked delta rule's chunk (training and prefill)


@dataclass(frozen=True)
class RGLRUConfig:
    """Griffin's recurrent block of ``rglru`` layers (transformers' RecurrentGemmaRecurrentBlock): linear_y and
    linear_x d -> E, a depthwise causal conv1d of d_conv taps over x, the RG-LRU (input and recurrence gates,
    block-diagonal with n_heads blocks of E / n_heads, and ``recurrent_param``), gelu(y) times its output,
    linear_out E -> d; biases on every linear and the conv."""

    width: int | None = _key(_optional(_int()), None)  # E (transformers' lru_width); None: d_model
    d_conv: int = _key(_int(), 4)  # K: the conv's taps (transformers' conv1d_width)
    n_heads: int | None = _key(_optional(_int()), None)  # the gates' blocks; None: the model's n_heads


@dataclass(frozen=True)
class ProjectorConfig:
    """The multimodal projector, vision features -> the language model's width: an optional norm over
    the tower's width, ``merge x merge`` neighbouring patches concatenated (and, with ``merge_linear``,
    taken back to the tower's width by a linear: Mistral 3's patch merger), then one linear, or two
    around an activation when ``hidden`` gives the width between them. Its input is ``features`` layers'
    outputs concatenated (LLaVA and Mistral 3 may take several)."""

    norm: str = _key(_enum(("none", *NORMS)), "none")  # rmsnorm: Gemma 3, Qwen-VL, Mistral 3
    features: int = _key(_int(), 1)  # the outputs of this many tower layers, concatenated (LLaVA's list)
    merge: int = _key(_int(), 1)  # Qwen-VL and Mistral 3: 2; Idefics3's pixel shuffle: its scale factor
    merge_linear: bool = _key(_bool, False)
    hidden: int | None = _key(_optional(_int()), None)  # None: one linear
    bias: bool = _key(_bool, False)
    # a linear hidden -> hidden after the first's activation, followed by the activation again
    # (Llama 4's vision adapter, fc1 and fc2, before its projector); needs hidden
    hidden_linear: bool = _key(_bool, False)
    # Gemma 3: pool x pool patches averaged into one token, before the norm; 0: the checkpoint's pooling
    # cannot take the tower's patches (no image runs)
    pool: int = _key(_int(minimum=0), 1)
    class_token: bool = _key(_bool, False)  # the class token's features join the patches' (LLaVA's "full")
    # the tower's last layers whose output no feature reads (LLaVA's vision_feature_layer -2: 1): they
    # run forward (transformers runs them) but get no gradient
    unread_layers: int = _key(_int(minimum=0), 0)


@dataclass(frozen=True)
class VisionConfig:
    """A vision tower (ViT: SigLIP, CLIP, Pixtral, the Qwen-VL towers) and its projector. Patches of
    ``patch_size`` (x ``temporal_patch`` frames) are embedded by one linear (the patch convolution,
    stride = kernel), then ``n_layers`` pre-norm encoder layers of full attention."""

    n_layers: int = _key(_int(maximum=MAX_LAYERS))
    d_model: int = _key(_int())
    n_heads: int = _key(_int())
    d_ff: int = _key(_int())
    patch_size: int = _key(_int())
    projector: ProjectorConfig = _key(_mapping(ProjectorConfig))
    # the default resolution (square); learned positions have a row per patch of it. None: the
    # tower takes any resolution (Qwen-VL, Pixtral), with 2-D RoPE
    image_size: int | None = _key(_optional(_int()), None)
    channels: int = _key(_int(), 3)
    temporal_patch: int = _key(_int(), 1)  # frames per patch (Qwen-VL's Conv3d: 2)
    # not xIELU, whose learned scalars belong to the language model's dense MLPs
    activation: str = _key(_enum(tuple(a for a, r in ACTIVATIONS.items() if not r.scalars)), "gelu")
    norm: str = _key(_enum(NORMS), "layernorm")
    norm_bias: bool = _key(_bool, True)  # layernorm only
    position: str = _key(_enum(("learned", "rope")), "learned")  # rope (2-D: Qwen-VL, Pixtral) holds no parameters
    class_token: bool = _key(_bool, False)  # CLIP: a learned token before the patches (and its position)
    patch_bias: bool = _key(_bool, True)
    qkv_bias: bool = _key(_bool, True)
    out_bias: bool = _key(_bool, True)
    mlp_bias: bool = _key(_bool, True)
    pre_norm: bool = _key(_bool, False)  # a norm before the first layer (CLIP, Pixtral)
    final_norm: bool = _key(_bool, True)  # a norm after the last (SigLIP, CLIP)
    # Qwen2.5-VL: layers attend within square windows of `window` patches a side (a multiple of the
    # merge), but the `full_layers` (indices; None: none), which attend over the whole image
    window: int | None = _key(_optional(_int()), None)
    full_layers: tuple[int, ...] | None = _key(_optional(_pattern(_int(minimum=0, maximum=MAX_LAYERS))), None)

    @property
    def patches(self) -> int:
        """Patches of one image at the default resolution (whole patches: the convolution drops a
        remainder)."""
        assert self.image_size is not None, "a tower without a default resolution"
        return (self.image_size // self.patch_size) ** 2


@dataclass(frozen=True)
class ModelConfig:
    """A model: every config key (README "Config keys"), checked by its field's check; derived sizes below."""

    name: str = _key(_text(True))
    vocab_size: int = _key(_int())
    context_length: int = _key(_int())
    d_model: int = _key(_int())
    n_layers: int = _key(_int(maximum=MAX_LAYERS))
    n_heads: int = _key(_int())
    d_ff: int = _key(_int(0))  # 0: no FFN in any layer (Mamba)
    n_kv_heads: int | None = _key(_optional(_int()), None)
    head_dim: int | None = _key(_optional(_int()), None)
    activation: str = _key(_enum(ACTIVATIONS), "gelu")
    norm: str = _key(_enum(NORMS), "layernorm")
    norm_bias: bool = _key(_bool, True)  # layernorm only
    norm_weight: bool = _key(_bool, True)  # false: a norm without parameters (OLMo 1)
    norm_placement: str = _key(_enum(NORM_PLACEMENTS), "pre")
    parallel_block: bool = _key(_bool, False)
    parallel_norms: int = _key(_one_of(1, 2), 1)  # 1: one norm feeds both branches (GPT-J); 2: NeoX
    final_norm: bool = _key(_bool, True)
    embedding_norm: bool = _key(_bool, False)  # a norm over the embeddings before layer 0 (BLOOM)
    qk_norm: str = _key(_qk_norm, "none")
    position: str = _key(_enum(POSITIONS), "learned")
    position_offset: int = _key(_int(0), 0)  # learned table rows before position 0 (OPT, BioGPT: 2)
    rope_theta: float = _key(_number(), 10000.0)
    rotary_fraction: float = _key(_number(1.0), 1.0)  # share of each head's dims RoPE rotates
    rope_layers: tuple[bool, ...] | None = _key(_optional(_pattern(_bool)), None)  # false: NoPE layer
    ffn_layers: tuple[bool, ...] | None = _key(_optional(_pattern(_bool)), None)  # false: the layer has no FFN
    relative_buckets: int = _key(_int(2), 32)  # T5 relative-position buckets (shared by all layers)
    relative_max_distance: int = _key(_int(), 128)
    qkv_bias: bool = _key(_bool, False)
    out_bias: bool = _key(_bool, False)
    mlp_bias: bool = _key(_bool, False)
    lm_head_bias: bool = _key(_bool, False)
    tie_embeddings: bool = _key(_bool, False)
    embedding_scale: float | None = _key(_optional(_number()), None)  # Gemma: sqrt(d_model)
    sliding_window: int | None = _key(_optional(_int()), None)
    layer_types: tuple[str, ...] | None = _key(_optional(_pattern(_enum(LAYER_TYPES))), None)
    attention: str = _key(_enum(ATTENTION), "mha")
    mla: MLAConfig | None = _key(_mapping(MLAConfig), None)
    dsa: DSAConfig | None = _key(_mapping(DSAConfig), None)  # MLA's lightning indexer and top-k keys
    attention_sinks: bool = _key(_bool, False)  # one learned logit per head joins the softmax
    attention_gate: bool = _key(_bool, False)  # output * sigmoid(x @ w_gate), w_gate: d -> h*hd (AFMoE)
    sub_norms: bool = _key(_bool, False)  # norms before o (over h*hd) and before down (over d_ff) (BitNet)
    attention_chunk: int | None = _key(_optional(_int()), None)  # chunked layers: keys of the query's chunk C
    k_eq_v: bool = _key(_bool, False)  # no v projection: the values are the k projection's output (Gemma 4)
    v_norm: bool = _key(_bool, False)  # a weightless norm over each value head (Gemma 4)
    # `full` layers' own attention shape (Gemma 4's global layers); None/false: the model's
    full_head_dim: int | None = _key(_optional(_int()), None)
    full_kv_heads: int | None = _key(_optional(_int()), None)
    full_k_eq_v: bool = _key(_bool, False)
    layer_scalar: bool = _key(_bool, False)  # each layer's output times one scalar its checkpoint stores (Gemma 4)
    attn_temperature_tuning: bool = _key(_bool, False)  # NoPE layers scale q by position (Llama 4)
    attn_logit_softcap: float | None = _key(_optional(_number()), None)  # Gemma 2: 50
    final_logit_softcap: float | None = _key(_optional(_number()), None)  # Gemma 2: 30
    moe: MoEConfig | None = _key(_mapping(MoEConfig), None)
    mamba: MambaConfig | None = _key(_mapping(MambaConfig), None)  # the mixer of `mamba` layers
    mamba2: Mamba2Config | None = _key(_mapping(Mamba2Config), None)  # the mixer of `mamba2` layers
    short_conv: ShortConvConfig | None = _key(_mapping(ShortConvConfig), None)  # the mixer of `short_conv` layers
    lightning: LightningConfig | None = _key(_mapping(LightningConfig), None)  # the mixer of `lightning` layers
    gated_deltanet: GatedDeltaNetConfig | None = _key(_mapping(GatedDeltaNetConfig), None)  # `gated_deltanet` layers
    rglru: RGLRUConfig | None = _key(_mapping(RGLRUConfig), None)  # the mixer of `rglru` layers
    vision: VisionConfig | None = _key(_mapping(VisionConfig), None)  # a multimodal checkpoint's tower
    dtype: str = _key(_enum((*DTYPE_BITS, *WEIGHT_FORMATS)), "bf16")  # stored weights: a dtype or a format
    quant_group_size: int | None = _key(_optional(_int()), None)  # a format's block or group (None: its default)
    quant_skip: tuple[str, ...] | None = _key(_optional(_names), None)  # linears kept unquantized
    description: str = _key(_text(False), "")

    # -- derived values ------------------------------------------------------------
    @property
    def kv_heads(self) -> int:
        return self.n_kv_heads if self.n_kv_heads is not None else self.n_heads

    @property
    def head_size(self) -> int:
        return self.head_dim if self.head_dim is not None else self.d_model // self.n_heads

    @property
    def q_width(self) -> int:
        """Width of the query projection output, h * hd (MHA)."""
        return self.n_heads * self.head_size

    @property
    def kv_width(self) -> int:
        """Width of each of the key and value projection outputs, g * hd (MHA)."""
        return self.kv_heads * self.head_size

    @property
    def rotary_dims(self) -> int:
        """Dimensions of each MHA head that RoPE rotates: ``int(head_size * rotary_fraction)``."""
        return int(self.head_size * self.rotary_fraction)

    @property
    def gated(self) -> bool:
        return ACTIVATIONS[self.activation].gated

    @property
    def expert_width(self) -> int:
        if self.moe is None or self.moe.expert_d_ff is None:
            return self.d_ff
        return self.moe.expert_d_ff

    @property
    def shared_expert_width(self) -> int:
        if self.moe is None or self.moe.shared_expert_d_ff is None:
            return self.expert_width
        return self.moe.shared_expert_d_ff

    @property
    def mamba_width(self) -> int:
        """E, the Mamba mixer's inner width: ``expand * d_model``."""
        return 0 if self.mamba is None else self.mamba.expand * self.d_model

    @property
    def dt_rank(self) -> int:
        """The Mamba mixer's dt rank: ``mamba.dt_rank``, else ``ceil(d_model / 16)``."""
        if self.mamba is None:
            return 0
        return self.mamba.dt_rank if self.mamba.dt_rank is not None else -(-self.d_model // 16)

    @property
    def has_attention(self) -> bool:
        """Whether some layer attends (the others are mamba layers)."""
        return any(t not in RECURRENT_TYPES for t in self._used_types)

    @property
    def has_mamba2(self) -> bool:
        """Whether some layer is a mamba2 layer."""
        return "mamba2" in self._used_types

    @property
    def has_short_conv(self) -> bool:
        """Whether some layer is a short_conv layer."""
        return "short_conv" in self._used_types

    @property
    def has_lightning(self) -> bool:
        """Whether some layer is a lightning layer."""
        return "lightning" in self._used_types

    @property
    def has_gated_deltanet(self) -> bool:
        """Whether some layer is a gated_deltanet layer."""
        return "gated_deltanet" in self._used_types

    @property
    def has_rglru(self) -> bool:
        """Whether some layer is an rglru layer."""
        return "rglru" in self._used_types

    @property
    def rglru_sizes(self) -> tuple[int, int, int]:
        """The rglru block's (E, H, K): width, gate blocks, conv taps."""
        m = self.rglru
        assert m is not None, "no rglru mapping"
        return (self.d_model if m.width is None else m.width, self.n_heads if m.n_heads is None else m.n_heads,
                m.d_conv)

    @property
    def has_recurrent(self) -> bool:
        """Whether some layer has a recurrent mixer (mamba, mamba2, short_conv): a state per sequence."""
        return any(t in RECURRENT_TYPES for t in self._used_types)

    @property
    def recurrent_kind(self) -> str:
        """The first recurrent layer type a layer has (for messages), else ''."""
        return next((t for t in self._used_types if t in RECURRENT_TYPES), "")

    @property
    def mamba2_sizes(self) -> tuple[int, int, int, int, int, int, int]:
        """The Mamba-2 mixer's (E, H, P, N, G, K, Q): width, heads, head dim, state, groups, taps, chunk."""
        m = self.mamba2
        assert m is not None, "no mamba2 mapping"
        H = m.n_heads if m.n_heads is not None else m.expand * self.d_model // m.head_dim
        return H * m.head_dim, H, m.head_dim, m.d_state, m.n_groups, m.d_conv, m.chunk_size

    def has_ffn(self, i: int) -> bool:
        """Whether layer ``i`` has an FFN: ``d_ff`` > 0 and ``ffn_layers`` (cyclic) true there."""
        return self.d_ff > 0 and (self.ffn_layers is None or self.ffn_layers[i % len(self.ffn_layers)])

    @property
    def has_mamba(self) -> bool:
        """Whether some layer is a mamba layer."""
        return "mamba" in self._used_types

    @property
    def _used_types(self) -> tuple[str, ...]:
        """The layer types some layer has (``layer_types`` repeats cyclically)."""
        types = self.layer_types or ("full",)
        return types[:self.n_layers]

    @property
    def norm_has_bias(self) -> bool:
        return self.norm == "layernorm" and self.norm_bias

    def replace(self, **changes: Any) -> "ModelConfig":
        """A copy with ``changes``, each key's value and the rules between keys checked as in a file
        (ConfigError naming the key). Whether a key applies is a file's rule, not a copy's: code that
        shrinks or varies a model sets keys for whichever model it is given."""
        check = Checker(f"{self.name}.replace()", {})
        cfg = read_fields(ModelConfig, {**as_raw(self), **{k: _raw(v) for k, v in changes.items()}}, check)
        check_rules(cfg, {}, check)
        return cfg


def required(cls) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls) if f.default is dataclasses.MISSING)


REQUIRED = required(ModelConfig)


def as_raw(obj: Any) -> dict[str, Any]:
    """The mapping a file would give for ``obj`` (a ModelConfig or one of its nested configs): its required
    keys and those at other than their defaults, tuples as lists, nested configs as mappings."""
    fields = dataclasses.fields(obj)
    return {f.name: _raw(getattr(obj, f.name)) for f in fields
            if f.default is dataclasses.MISSING or getattr(obj, f.name) != f.default}


def _raw(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return as_raw(value)
    return list(value) if isinstance(value, tuple) else value


def read_fields(cls, raw: Any, check: Checker):
    """``cls`` from a mapping, each value through its field's check (unknown and missing keys
    are errors)."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    if not isinstance(raw, dict):
        if check.prefix:  # a nested mapping (moe, mla): the error names the key holding it
            Checker(check.source, check.lines).fail(check.prefix[:-1], f"must be a mapping, got {brief(raw)}")
        check.fail(None, f"expected a mapping of config keys, got {type(raw).__name__}")
    for key in raw:
        if not isinstance(key, str) or key not in fields:
            check.fail(str(key), "unknown key" + _suggest(str(key), fields))
    for key in required(cls):
        if key not in raw:
            check.fail(key, "missing required key")
    return cls(**{k: fields[k].metadata["check"](check, k, v) for k, v in raw.items()})
