"""ModelConfig: one flat, frozen description of a decoder-only transformer, and the check of each key.

Fields are exactly the YAML keys (DESIGN.md section 2, the docs' "Config keys"); values a user
may omit are ``None`` or a documented default, and everything derived from them (KV heads,
head size, widths, expert width, the layer plan) is computed, never a field that gets
rewritten.

Validation is driven by the dataclass fields: every field carries its own check in its
metadata (:mod:`.keys`), so a key exists in YAML exactly when it exists here and can never be silently
dropped (:func:`.keys.read_fields`); the rules between keys are in :mod:`analysis.model.checks`. Every
problem with user input is a :class:`ConfigError` naming the file, the key and, where known, the
YAML line. The nested mappings of attention and MoE are here; those of the variants most models lack
(a recurrent mixer's, the vision tower's) are in the variant's module beside its descriptor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import SpecError, brief
from .attention import ATTENTION
from .formats import WEIGHT_FORMATS
from .keys import (
    Checker,
    as_raw,
    boolean,
    checked,
    choice,
    integer,
    names,
    nested,
    number,
    one_of,
    optional,
    pattern,
    raw_value,
    read_fields,
    required,
    text,
)
from .mixer import RECURRENT_TYPES
from .rules import check_rules
from .sizes import DTYPE_BITS, MAX_LAYERS
from .variants import ACTIVATIONS, NORMS, POSITIONS

if TYPE_CHECKING:  # the nested schemas, each in its own module (:func:`.keys.nested`)
    from .gated_deltanet import GatedDeltaNetConfig
    from .gemma3n import Gemma3nConfig
    from .hyper import HyperConfig
    from .kda import KDAConfig
    from .lightning import LightningConfig
    from .mamba import MambaConfig
    from .mamba2 import Mamba2Config
    from .mla import DSAConfig, MLAConfig
    from .moe import MoEConfig
    from .rglru import RGLRUConfig
    from .shared_transformer import SharedTransformerConfig
    from .short_conv import ShortConvConfig
    from .vision import VisionConfig

NORM_PLACEMENTS = ("pre", "post", "sandwich", "post_branch")
LAYER_TYPES = ("full", "sliding", "chunked", *RECURRENT_TYPES)
# a recurrent mixer beside every attention layer's attention, on the same normed input, the two outputs summed
# (Falcon-H1: Mamba-2 and attention in parallel in each layer)
PARALLEL_MIXERS = tuple(t for t in RECURRENT_TYPES if t != "none")
QK_NORMS = ("none", "head", "full", "l2")



def _qk_norm(c: Checker, key: str, value: Any) -> str:
    """``true`` is ``head`` (per head, Qwen 3), ``false`` is ``none``; ``full``: over the whole
    q and k projections (OLMo 2); ``l2``: a weightless RMSNorm per head on the RoPE layers (Llama 4)."""
    if isinstance(value, bool):
        return "head" if value else "none"
    return choice(QK_NORMS)(c, key, value)


@dataclass(frozen=True, repr=False)  # its own __repr__ (dataclass would write one and then drop it)
class ModelConfig:
    """A model: every config key (README "Config keys"), checked by its field's check; derived sizes below."""

    name: str = checked(text(True))
    vocab_size: int = checked(integer())
    context_length: int = checked(integer())
    d_model: int = checked(integer())
    n_layers: int = checked(integer(maximum=MAX_LAYERS))
    n_heads: int = checked(integer())
    d_ff: int = checked(integer(0))  # 0: no FFN in any layer (Mamba)
    n_kv_heads: int | None = checked(optional(integer()), None)
    head_dim: int | None = checked(optional(integer()), None)
    activation: str = checked(choice(ACTIVATIONS), "gelu")
    norm: str = checked(choice(NORMS), "layernorm")
    norm_bias: bool = checked(boolean, True)  # layernorm only
    norm_weight: bool = checked(boolean, True)  # false: a norm without parameters (OLMo 1)
    norm_placement: str = checked(choice(NORM_PLACEMENTS), "pre")
    # the placement in the layers without attention (a recurrent mixer, or none); None: norm_placement (OLMo
    # Hybrid: its Gated DeltaNet layers pre-norm, its attention layers post_branch)
    recurrent_norm_placement: str | None = checked(optional(choice(NORM_PLACEMENTS)), None)
    parallel_block: bool = checked(boolean, False)
    parallel_norms: int = checked(one_of(1, 2), 1)  # 1: one norm feeds both branches (GPT-J); 2: NeoX
    final_norm: bool = checked(boolean, True)
    embedding_norm: bool = checked(boolean, False)  # a norm over the embeddings before layer 0 (BLOOM)
    qk_norm: str = checked(_qk_norm, "none")
    position: str = checked(choice(POSITIONS), "learned")
    position_offset: int = checked(integer(0), 0)  # learned table rows before position 0 (OPT, BioGPT: 2)
    rope_theta: float = checked(number(), 10000.0)
    rotary_fraction: float = checked(number(1.0), 1.0)  # share of each head's dims RoPE rotates
    rope_layers: tuple[bool, ...] | None = checked(optional(pattern(boolean)), None)  # false: NoPE layer
    ffn_layers: tuple[bool, ...] | None = checked(optional(pattern(boolean)), None)  # false: the layer has no FFN
    relative_buckets: int = checked(integer(2), 32)  # T5 relative-position buckets (shared by all layers)
    relative_max_distance: int = checked(integer(), 128)
    qkv_bias: bool = checked(boolean, False)
    out_bias: bool = checked(boolean, False)
    mlp_bias: bool = checked(boolean, False)
    lm_head_bias: bool = checked(boolean, False)
    tie_embeddings: bool = checked(boolean, False)
    embedding_scale: float | None = checked(optional(number()), None)  # Gemma: sqrt(d_model)
    sliding_window: int | None = checked(optional(integer()), None)
    layer_types: tuple[str, ...] | None = checked(optional(pattern(choice(LAYER_TYPES))), None)
    attention: str = checked(choice(ATTENTION), "mha")
    mla: MLAConfig | None = checked(nested("mla", "MLAConfig"), None)
    dsa: DSAConfig | None = checked(nested("mla", "DSAConfig"), None)  # MLA's lightning indexer and top-k keys
    attention_sinks: bool = checked(boolean, False)  # one learned logit per head joins the softmax
    attention_gate: bool = checked(boolean, False)  # output * sigmoid(x @ w_gate), w_gate: d -> h*hd (AFMoE)
    sub_norms: bool = checked(boolean, False)  # norms before o (over h*hd) and before down (over d_ff) (BitNet)
    attention_chunk: int | None = checked(optional(integer()), None)  # chunked layers: keys of the query's chunk C
    k_eq_v: bool = checked(boolean, False)  # no v projection: the values are the k projection's output (Gemma 4)
    v_norm: bool = checked(boolean, False)  # a weightless norm over each value head (Gemma 4)
    # `full` layers' own attention shape (Gemma 4's global layers); None/false: the model's
    full_head_dim: int | None = checked(optional(integer()), None)
    full_kv_heads: int | None = checked(optional(integer()), None)
    full_k_eq_v: bool = checked(boolean, False)
    layer_scalar: bool = checked(boolean, False)  # each layer's output times one scalar its checkpoint stores (Gemma 4)
    # the last k layers attend to the K/V of the last earlier layer of their span, computing and caching none (Gemma 3n)
    kv_shared_layers: int = checked(integer(0), 0)
    attn_temperature_tuning: bool = checked(boolean, False)  # NoPE layers scale q by position (Llama 4)
    attn_logit_softcap: float | None = checked(optional(number()), None)  # Gemma 2: 50
    final_logit_softcap: float | None = checked(optional(number()), None)  # Gemma 2: 30
    moe: MoEConfig | None = checked(nested("moe", "MoEConfig"), None)
    # the mixers of `mamba`, `mamba2`, `short_conv`, `lightning`, `gated_deltanet`, `rglru` and `kda` layers, and a
    # multimodal checkpoint's tower: each schema in its variant's module
    mamba: MambaConfig | None = checked(nested("mamba", "MambaConfig"), None)
    mamba2: Mamba2Config | None = checked(nested("mamba2", "Mamba2Config"), None)
    short_conv: ShortConvConfig | None = checked(nested("short_conv", "ShortConvConfig"), None)
    lightning: LightningConfig | None = checked(nested("lightning", "LightningConfig"), None)
    gated_deltanet: GatedDeltaNetConfig | None = checked(nested("gated_deltanet", "GatedDeltaNetConfig"), None)
    rglru: RGLRUConfig | None = checked(nested("rglru", "RGLRUConfig"), None)
    kda: KDAConfig | None = checked(nested("kda", "KDAConfig"), None)
    parallel_mixer: str | None = checked(optional(choice(PARALLEL_MIXERS)), None)  # beside attention (Falcon-H1)
    # transformer blocks whose weights the layers that use them share, run before their mixers (Zamba)
    shared_transformer: SharedTransformerConfig | None = checked(
        nested("shared_transformer", "SharedTransformerConfig"), None)
    vision: VisionConfig | None = checked(nested("vision", "VisionConfig"), None)
    hyper: HyperConfig | None = checked(nested("hyper", "HyperConfig"), None)  # residual streams (DeepSeek V4, Hy4)
    # AltUp's streams, Laurel, per-layer inputs, activation sparsity (Gemma 3n)
    gemma3n: Gemma3nConfig | None = checked(nested("gemma3n", "Gemma3nConfig"), None)
    dtype: str = checked(choice((*DTYPE_BITS, *WEIGHT_FORMATS)), "bf16")  # stored weights: a dtype or a format
    quant_group_size: int | None = checked(optional(integer()), None)  # a format's block or group (None: its default)
    quant_skip: tuple[str, ...] | None = checked(optional(names), None)  # linears kept unquantized
    description: str = checked(text(False), "")

    def __hash__(self) -> int:
        """The dataclass's hash (of every field), kept on the config: it is frozen, and the analysis's
        caches hash it thousands of times a `plan`. Not pickled (:meth:`__getstate__`): a string's hash
        differs from one process to another."""
        cached = self.__dict__.get("_hash")
        if cached is None:
            cached = hash(tuple(getattr(self, name) for name in self.__dataclass_fields__))
            object.__setattr__(self, "_hash", cached)
        return cached

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}

    def __repr__(self) -> str:
        """The keys a file would give (:func:`.keys.as_raw`), not every one of the fields at its default."""
        return f"ModelConfig({', '.join(f'{k}={v!r}' for k, v in as_raw(self).items())})"

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
    def has_kda(self) -> bool:
        """Whether some layer is a kda layer."""
        return "kda" in self._used_types

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
        """Whether some layer has a recurrent mixer (mamba, mamba2, short_conv, ..., or one beside its
        attention): a state per sequence."""
        return any(t in RECURRENT_TYPES for t in self._used_types)

    @property
    def has_recurrent_layers(self) -> bool:
        """Whether some layer has no attention: a recurrent mixer in its place, or none."""
        return any(t in RECURRENT_TYPES for t in (self.layer_types or ())[:self.n_layers])

    @property
    def recurrent_kind(self) -> str:
        """The first recurrent layer type a layer has (for messages), a mixer before ``none`` (no mixer), else ''."""
        kinds = [t for t in self._used_types if t in RECURRENT_TYPES]
        return next((t for t in kinds if t != "none"), kinds[0] if kinds else "")

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
    def type_pattern(self) -> tuple[str, ...]:
        """The layer types, repeating cyclically over the layers: ``layer_types``, else every layer sliding
        with a ``sliding_window`` and full without."""
        return self.layer_types or (("sliding",) if self.sliding_window is not None else ("full",))

    @property
    def _used_types(self) -> tuple[str, ...]:
        """The layer types some layer has (``layer_types`` repeats cyclically), and the mixer beside
        attention (``parallel_mixer``) where some layer attends."""
        types = (self.layer_types or ("full",))[:self.n_layers]
        if self.parallel_mixer is not None and any(t not in RECURRENT_TYPES for t in types):
            types += (self.parallel_mixer,)
        return types

    @property
    def streams(self) -> int:
        """Residual streams per token: ``hyper.streams`` (hyper-connections), else 1."""
        return 1 if self.hyper is None else self.hyper.streams

    @property
    def norm_has_bias(self) -> bool:
        return self.norm == "layernorm" and self.norm_bias

    def replace(self, **changes: Any) -> "ModelConfig":
        """A copy with ``changes``, each key's value and the rules between keys checked as in a file
        (ConfigError naming the key). Whether a key applies is a file's rule, not a copy's: code that
        shrinks or varies a model sets keys for whichever model it is given."""
        check = Checker(f"{self.name}.replace()", {})
        cfg = read_fields(ModelConfig, {**as_raw(self), **{k: raw_value(v) for k, v in changes.items()}}, check)
        check_rules(cfg, {}, check)
        return cfg


REQUIRED = required(ModelConfig)


def check_config(cfg: object) -> None:
    """SpecError unless ``cfg`` is a ModelConfig: the public API checks what it is given, as the command line does."""
    if not isinstance(cfg, ModelConfig):
        raise SpecError("cfg", f"must be a ModelConfig (llmcalc.load_model reads one), got {brief(cfg)}")
