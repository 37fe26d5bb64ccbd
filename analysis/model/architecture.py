"""The model as llmcalc sees it, built once from its config: the token and position embeddings
(and a norm over them, ``embedding_norm``),
one :class:`Block` per group of identical layers (the layer plan), the final norm and the LM head
(tied or not), and a multimodal checkpoint's vision tower and projector (:mod:`.vision`).
Parameters, FLOPs, memory, bytes moved and the parallel layouts all ask
:func:`build`'s :class:`Model` what it holds, so none of them describes a part twice.

A block's matrices, norms and vectors come from its attention and FFN descriptors
(:mod:`analysis.model.attention`, :mod:`analysis.model.ffn`); this module adds the block's norms,
which depend on the placement. Keys are the stable breakdown paths (``attention/q``, ``mlp/up``,
``moe/experts``, ``norm/attention``) that the reference modules of ``analysis.verify`` use as
their submodule names.

Block structure (``x`` is the residual stream; ``n_a``/``n_m`` the attention/MLP norms):

- sequential, ``pre``:         ``x += attn(n_a(x)); x += mlp(n_m(x))``
- sequential, ``post``:        ``x = n_a(x + attn(x)); x = n_m(x + mlp(x))``
- sequential, ``sandwich``:    ``x += n_a_post(attn(n_a(x))); x += n_m_post(mlp(n_m(x)))`` (Gemma 2/3)
- sequential, ``post_branch``: ``x += n_a_post(attn(x)); x += n_m_post(mlp(x))`` (OLMo 2)
- parallel, ``pre``:           ``x += attn(n_a(x)) + mlp(n_m(x))``, with ``n_m = n_a`` when
  ``parallel_norms`` is 1 (GPT-J, PaLM) and a separate norm when it is 2 (GPT-NeoX)
- parallel, ``sandwich``:      as parallel ``pre`` with a post norm on each branch output

A layer with a mixer beside its attention (``parallel_mixer``, Falcon-H1) reads ``attn(h) + mixer(h)``
wherever ``attn(h)`` stands above. A layer that uses a shared transformer block (Zamba,
:mod:`.shared_transformer`) runs ``x += mixer(n_a(x + shared(x)))``: the block's weights are the
model's (:attr:`Model.shared`, counted once), what each use runs is the layer's.
"""

import functools
from importlib import import_module
from typing import TYPE_CHECKING, NamedTuple, TypeAlias

from .attention import ATTENTION, AttentionKind, rope_norms
from .config import ModelConfig, check_config
from .ffn import FFN, FFNKind
from .layers import LayerGroup, LayerSpec, layer_config, layer_plan
from .mixer import Mixer
from .parts import Linear, Norm, Table, Vector, make_norm

if TYPE_CHECKING:  # imported when a model has them (:data:`MIXERS`, :func:`build`)
    from .gated_deltanet import GatedDeltaNet
    from .kda import KDA
    from .lightning import Lightning
    from .mamba import Mamba
    from .mamba2 import Mamba2
    from .rglru import RGLRU
    from .shared_transformer import SharedTransformer
    from .short_conv import ShortConv
    from .vision import Vision


def block_norms(cfg: ModelConfig) -> list[Norm]:
    """The norms around the attention and FFN branches (module docstring)."""
    keys = {"pre": ["attention", "mlp"], "post": ["attention", "mlp"],
            "sandwich": ["attention", "mlp", "attention_post", "mlp_post"],
            "post_branch": ["attention_post", "mlp_post"]}[cfg.norm_placement]
    if cfg.parallel_block and cfg.parallel_norms == 1:
        keys.remove("mlp")
    return [make_norm(cfg, "norm/" + k, cfg.d_model) for k in keys]


def sub_norms(cfg: ModelConfig) -> list[Norm]:
    """``sub_norms`` (BitNet): a norm over the merged heads before ``o`` (``h*hd``) and one over the
    MLP's hidden product before ``down`` (``d_ff``), in the model's norm; MHA and dense layers only
    (rules.py)."""
    if not cfg.sub_norms:
        return []
    return [make_norm(cfg, "attention/sub_norm", cfg.q_width), make_norm(cfg, "mlp/sub_norm", cfg.d_ff)]


class NoMixer(Mixer):
    """A ``none`` layer's mixer: none (the layer is its FFN alone). Nothing to hold, run, save or cache."""

    state_values = 0

    def linears(self) -> list[Linear]:
        return []

    def norms(self) -> list[Norm]:
        return []

    def vectors(self) -> list[Vector]:
        return []

    def matmul(self, batch: int, query_len: int, past: int) -> dict[str, int]:
        return {}

    def pass_ops(self, run) -> list:
        return []

    def saves(self, tape, B: int, S: int, x: str) -> None:
        return None


Recurrent: TypeAlias = "Mamba | Mamba2 | ShortConv | NoMixer | Lightning | GatedDeltaNet | RGLRU | KDA"  # mixer kinds


class Block:
    """One layer of a spec: its attention and FFN descriptors and what it holds."""

    __slots__ = ("cfg", "spec", "_linears")

    def __init__(self, cfg: ModelConfig, spec: LayerSpec) -> None:
        self.cfg, self.spec = cfg, spec
        self._linears: tuple[Linear, ...] | None = None

    @property
    def attention(self) -> AttentionKind:
        if self.spec.recurrent:
            raise ValueError(f"a {self.spec.attention} layer has no attention")
        if self.spec.kv_reuse:  # an earlier layer's K and V (kv_shared_layers), its module imported for one only
            from .kv_sharing import Reuser
            return Reuser(self.cfg)
        return ATTENTION[self.spec.attention](self.cfg)

    @property
    def mixer(self) -> "AttentionKind | Recurrent":
        """The layer's mixer: its attention kind, or a recurrent kind (:mod:`.mamba`)."""
        return mixer_kind(self.spec.attention)(self.cfg) if self.spec.recurrent else self.attention

    @property
    def recurrent(self) -> Recurrent:
        """The layer's recurrent mixer (ValueError on an attention layer)."""
        if not self.spec.recurrent:
            raise ValueError(f"a {self.spec.attention} layer has no recurrent mixer")
        return mixer_kind(self.spec.attention)(self.cfg)

    @property
    def beside(self) -> "list[Recurrent]":
        """The recurrent mixer beside the attention (``parallel_mixer``), or none."""
        return [] if self.spec.beside is None else [mixer_kind(self.spec.beside)(self.cfg)]

    @property
    def mixers(self) -> "list[Recurrent]":
        """The recurrent mixers the layer runs: in place of attention, or beside it (``parallel_mixer``)."""
        return [self.recurrent] if self.spec.recurrent else self.beside

    def attentions(self) -> list[tuple[AttentionKind, LayerSpec]]:
        """The attentions the layer runs, each with its span: its own, or a recurrent layer's shared block's."""
        if self.spec.recurrent:
            return [(s.attention, s.spec) for s in self.shared]
        return [(self.attention, self.spec)]

    def fused(self) -> set[str]:
        """The keys of the ops its recurrent mixers' core kernels fuse (:mod:`.mixer`)."""
        return {key for mixer in self.mixers for key in mixer.core}

    @property
    def ffn(self) -> FFNKind:
        if self.spec.ffn is None:
            raise ValueError("the layer has no FFN")
        return FFN[self.spec.ffn](self.cfg)

    @property
    def ffns(self) -> list[FFNKind]:
        """The layer's FFN, or none."""
        return [] if self.spec.ffn is None else [self.ffn]

    @property
    def shared(self) -> "list[SharedTransformer]":
        """The shared transformer block the layer runs before its mixer (``shared_transformer``), or none."""
        if not self.spec.shared:
            return []
        from .shared_transformer import SharedTransformer
        return [SharedTransformer(self.cfg)]

    def linears(self) -> list[Linear]:
        """Every linear the layer runs (a shared block's too: :meth:`held` for what it holds)."""
        if self._linears is None:  # kept: a block is built once per config (build), and `plan` asks thousands of times
            self._linears = tuple(self.mixer.linears() + [m for b in self.beside for m in b.linears()] + [
                m for f in self.ffns for m in f.linears()] + [m for s in self.shared for m in s.linears()]
                + self._gemma3n("layer_linears"))
        return list(self._linears)

    def norms(self) -> list[Norm]:
        norms = block_norms(self.cfg)
        if self.spec.ffn is None:  # no FFN: no norm around it
            norms = [n for n in norms if not n.key.startswith("norm/mlp")]
        if self.spec.attention == "none":  # no mixer: no norm around it
            norms = [n for n in norms if not n.key.startswith("norm/attention")]
        return (norms + self.mixer.norms() + [n for b in self.beside for n in b.norms()]
                + rope_norms(self.cfg, self.spec) + sub_norms(self.cfg) + [n for f in self.ffns for n in f.norms()]
                + [n for s in self.shared for n in s.norms()] + self._gemma3n("layer_norms"))

    def vectors(self) -> list[Vector]:
        scalar = [Vector("layer_scalar", 1)] if self.cfg.layer_scalar else []  # Gemma 4: the output's scale
        return (self.mixer.vectors() + [v for b in self.beside for v in b.vectors()]
                + [v for f in self.ffns for v in f.vectors()] + scalar + self.hyper()
                + [v for s in self.shared for v in s.vectors()] + self._gemma3n("layer_vectors"))

    def _gemma3n(self, parts: str) -> list:
        """Gemma 3n's parts of a layer (``gemma3n``: :mod:`.gemma3n`, imported for a model with them)."""
        if self.cfg.gemma3n is None:
            return []
        from . import gemma3n
        return getattr(gemma3n, parts)(self.cfg)

    def held(self) -> list[Linear | Norm | Vector]:
        """The parts the layer holds, its parameters: all it runs but a shared block's weights, which the
        model holds once (:attr:`Model.shared`)."""
        shared = [p for s in self.shared for p in s.weights()]
        parts: list[Linear | Norm | Vector] = [*self.linears(), *self.norms(), *self.vectors()]
        return [p for p in parts if p not in shared]

    @property
    def branches(self) -> tuple[str, ...]:
        """The layer's residual branches: ``attention`` (its mixer) unless it has none, ``mlp`` (its FFN)."""
        return (("attention",) if self.spec.attention != "none" else ()) + (("mlp",) if self.ffns else ())

    def hyper(self) -> list[Vector]:
        """A hyper-connection per branch (``hyper``: :mod:`.hyper`, imported for a model with them)."""
        if self.cfg.hyper is None:
            return []
        from .hyper import branch_vector
        return [branch_vector(self.cfg, b) for b in self.branches]


# the recurrent mixer kinds (layer_types) but none: each layer type's descriptor, in the module of that name
# beside its config's schema
MIXERS = {"mamba": "Mamba", "mamba2": "Mamba2", "short_conv": "ShortConv", "lightning": "Lightning",
          "gated_deltanet": "GatedDeltaNet", "rglru": "RGLRU", "kda": "KDA"}


@functools.cache
def mixer_kind(layer_type: str) -> "type[Recurrent]":
    """The descriptor of a recurrent layer type, its module imported when a model has such a layer (most
    have none: start-up, DESIGN.md section 6)."""
    if layer_type == "none":
        return NoMixer
    return getattr(import_module(f".{layer_type}", __package__), MIXERS[layer_type])


class Head(NamedTuple):
    """The LM head, ``d -> V``. Tied, its weight is the token embedding's (counted once, under
    ``embedding/token``) and only its bias is its own."""

    linear: Linear
    tied: bool

    @property
    def params(self) -> int:
        return self.linear.params - (self.linear.d_in * self.linear.d_out if self.tied else 0)


class Model(NamedTuple):
    """What a model holds, part by part (module docstring)."""

    cfg: ModelConfig
    token: Table  # embedding/token: a row per vocabulary entry
    position: Table | None  # embedding/position: learned positions, or T5's bucket table; None: no parameters
    blocks: tuple[tuple[LayerGroup, Block], ...]  # a block per group of identical layers, in plan order
    final_norm: Norm | None
    head: Head
    vision: "Vision | None"  # a multimodal checkpoint's vision tower and projector
    embedding_norm: Norm | None = None  # norm/embedding: over the embeddings, before layer 0 (BLOOM)
    hyper_head: Vector | None = None  # hyper/head: the residual streams' collapse before the final norm
    # the shared transformer blocks' weights (Zamba), each part with the number of blocks holding it
    shared: tuple[tuple[Linear | Norm | Vector, int], ...] = ()
    gemma3n: tuple[Table | Linear | Norm, ...] = ()  # Gemma 3n's per-layer inputs and streams (:mod:`.gemma3n`)

    def layer_linears(self) -> list[tuple[Linear, int]]:
        """Every layer linear, one per group, with the number of layers holding it (a shared block's:
        the number of blocks)."""
        return [(m, group.count) for group, block in self.blocks for m in block.held() if isinstance(m, Linear)] + [
            (m, n) for m, n in self.shared if isinstance(m, Linear)]

    def linears(self) -> list[tuple[Linear, int]]:
        """What a weight format can quantize: the layer linears and an untied LM head (a vision tower
        stays in the compute dtype, as quantized multimodal checkpoints keep it)."""
        return self.layer_linears() + ([] if self.head.tied else [(self.head.linear, 1)])


def position_table(cfg: ModelConfig) -> Table | None:
    """Learned positions: a row per position, after ``position_offset`` rows no position reads (OPT,
    BioGPT); T5's relative bias: a row per bucket, a column per head (shared by all layers); other
    positions hold no parameters."""
    if cfg.position == "learned":
        return Table("embedding/position", cfg.context_length + cfg.position_offset, cfg.d_model)
    if cfg.position == "relative":
        return Table("embedding/position", cfg.relative_buckets, cfg.n_heads)
    return None


def _shared(cfg: ModelConfig) -> tuple[tuple[Linear | Norm | Vector, int], ...]:
    """The shared transformer blocks' weights, ``blocks`` copies of each (their module imported for one only)."""
    if cfg.shared_transformer is None:
        return ()
    from .shared_transformer import SharedTransformer
    return tuple((p, cfg.shared_transformer.blocks) for p in SharedTransformer(cfg).weights())


def _vision(cfg: ModelConfig) -> "Vision | None":
    """A multimodal checkpoint's tower and projector (their module imported for one only)."""
    if cfg.vision is None:
        return None
    from .vision import build_vision
    return build_vision(cfg)


def build(cfg: ModelConfig) -> Model:
    """The model ``cfg`` describes, part by part (module docstring)."""
    check_config(cfg)
    return _build(cfg)


@functools.lru_cache(maxsize=256)  # configs are frozen; `plan` asks for the same few many times
def _build(cfg: ModelConfig) -> Model:
    final = make_norm(cfg, "norm/final", cfg.d_model) if cfg.final_norm else None
    return Model(cfg, Table("embedding/token", cfg.vocab_size, cfg.d_model), position_table(cfg),
                 tuple((group, Block(layer_config(cfg, group.spec), group.spec)) for group in layer_plan(cfg)), final,
                 Head(Linear("lm_head", cfg.d_model, cfg.vocab_size, cfg.lm_head_bias), cfg.tie_embeddings),
                 _vision(cfg),
                 make_norm(cfg, "norm/embedding", cfg.d_model) if cfg.embedding_norm else None, _hyper_head(cfg),
                 _shared(cfg), _gemma3n(cfg))


def _gemma3n(cfg: ModelConfig) -> tuple[Table | Linear | Norm, ...]:
    if cfg.gemma3n is None:
        return ()
    from .gemma3n import model_parts
    return model_parts(cfg)


def _hyper_head(cfg: ModelConfig) -> Vector | None:
    if cfg.hyper is None:
        return None
    from .hyper import head_vector
    return head_vector(cfg)
