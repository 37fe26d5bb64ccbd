"""The reference transformer, built from a ModelConfig and its layer plan alone.

Layer ``i`` is built from ``analysis.plan.layer_specs(cfg)[i]`` (attention kind, window,
RoPE on/off, FFN kind); nothing is taken from the analytic inventory. Module paths are the
breakdown keys (``layers.<i>.`` dropped, '.' read as '/'): ``embedding.token``,
``embedding.position``, ``layers.<i>.attention.{q,k,v,o}`` with ``attention.{q_norm,k_norm,gate,sub_norm}``
(MHA) or ``attention.{q,q_a,q_a_norm,q_b,kv_a,kv_a_norm,kv_b,o}`` (MLA), the parameter
``attention.sinks``, ``attention.{scores,values}`` (eager) or ``attention.sdpa`` (flash),
``mlp.{up,gate,down,sub_norm}`` and/or ``moe.{router,experts,shared_experts,shared_expert_gate}`` (beside the
MLP also ``moe.{router_norm,expert_scale}`` and ``norm.{moe,dense_post,moe_post}``: :func:`.ffn.dense_and_moe`),
``layers.<i>.norm.{attention,mlp,attention_post,mlp_post}``, ``norm.embedding``, ``norm.final``, ``lm_head``,
``logit_softcap`` (no parameters); a multimodal checkpoint's ``vision`` and ``projector``
(:mod:`.vision`).

Conventions:
- positions: ``learned`` and ``sinusoidal`` (Vaswani: sin on even, cos on odd dimensions)
  are added to the token embeddings (a learned table holds ``position_offset`` rows before
  position 0: position ``i`` reads row ``i + position_offset``, as OPT and BioGPT do);
  ``rope`` rotates q and k (rotate-half, base ``rope_theta``); ``alibi`` adds
  ``-slope_h * (i - j)`` to the scores (Press et al. slopes);
  ``relative`` adds a learned T5 bias from unidirectional buckets of ``i - j``, one table
  (relative_buckets, n_heads) shared by all layers. Tables are float64 buffers, computed once
  and cast to the activations' dtype when used; none is a parameter.
- token embeddings are multiplied by ``embedding_scale`` (Gemma) before positions are added;
  ``embedding_norm`` (BLOOM) then norms the sum, before layer 0;
  logits are soft-capped, ``cap * tanh(logits / cap)``, after the LM head (Gemma 2).
- masking: query at absolute position i sees key j iff ``i - W < j <= i`` (``W`` the layer's
  window, none for full layers), and on a chunked layer (chunk ``C``) iff also
  ``j // C == i // C``; the mask and position biases are one additive bias built
  once per forward per distinct window that binds (a window no shorter than the keys' span
  shares the full layers' mask), shared by the layers with that window.
- blocks (``x`` the residual stream; ``n_a``/``n_m`` the attention/MLP norms):
  sequential ``pre``: ``x += attn(n_a(x)); x += ffn(n_m(x))``;
  ``post``: ``x = n_a(x + attn(x)); x = n_m(x + ffn(x))``;
  ``sandwich``: ``x += n_a_post(attn(n_a(x))); x += n_m_post(ffn(n_m(x)))``;
  ``post_branch`` (OLMo 2): ``x += n_a_post(attn(x)); x += n_m_post(ffn(x))``;
  parallel ``pre``: ``x += attn(n_a(x)) + ffn(n_m(x))``, with ``n_m = n_a`` when
  ``parallel_norms`` is 1 (GPT-J, PaLM) and a separate norm when it is 2 (GPT-NeoX);
  parallel ``sandwich``: as parallel ``pre`` with a post norm on each branch output. A layer with a
  recurrent mixer beside its attention (``parallel_mixer``, Falcon-H1) reads ``attn(h) + mixer(h)`` for
  ``attn(h)``, the mixer a submodule named by its kind (``mamba2``) and its state in the cache's ``beside``;
  a ``dense+shortcut_moe`` layer (``moe.shortcut``, LongCat-Flash; sequential ``pre``): ``h = n_m(x);
  x += mlp(h)``, and ``moe(h)`` joins the residual stream after the next layer, ``x += ffn(n_m(x)) + moe(h)``
  there (:func:`.ffn.dense_and_shortcut_moe`); with hyper-connections (``hyper``, sequential ``pre``) ``x`` is
  N streams (:mod:`.hyper`): each branch reads their collapse through its norm and returns through
  ``hyper.<branch>_mix``; ``hyper.head`` collapses them before the final norm.
- a tied LM head *is* ``embedding.token.weight``; the embedding is registered first, so
  deduplicated ``named_parameters`` name it ``embedding.token.weight``.
- ``logits="last"`` keeps only the last position before the final norm (norms act per
  token, so the result is the same) and the LM head.
- ``recompute="selective"`` runs eager attention's core (scores to values) under the same
  checkpoint, with the layer's q, k, v and mask as its arguments; flash attention is left as it
  is (it recomputes its scores already).
- ``recompute="op"`` (per-op selective checkpointing) runs each block under the same checkpoint as
  full recomputation, with the policy of :mod:`.per_op`: the forward keeps the checkpoint's tensor
  arguments and the outputs the policy keeps (:meth:`Transformer.kept`), and backward reruns the rest.
- ``recompute="full"`` (full activation recomputation) runs each block under
  ``torch.utils.checkpoint.checkpoint(use_reentrant=False)``: backward recomputes the block,
  every op of it (early stop off), so the forward keeps only what the checkpoint saves, its
  tensor arguments (the block input
  and the Context's mask and RoPE tables, passed as arguments so they are saved like the
  input rather than kept alive by reference, unseen by saved-tensor hooks).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint, set_checkpoint_early_stop

from ..model.config import ModelConfig
from ..model.layers import LayerSpec, kv_source, layer_config, layer_specs, topk_source
from . import gemma3n
from .attention import LayerContext, make_attention
from .ffn import MLP, MoE, dense_and_moe, dense_and_shortcut_moe
from .gated_deltanet import GatedDeltaNetMixer
from .hyper import HyperConnection, Mix
from .kda import KDAMixer
from .lightning import LightningMixer
from .mamba import MambaMixer
from .mamba2 import Mamba2Mixer
from .norms import make_norm
from .per_op import PerOp
from .rglru import RGLRUMixer
from .shared_transformer import SharedBlock, Use, UseCache, attention_config
from .short_conv import ShortConvMixer
from .vision import add_vision

# the recurrent mixers' reference modules, by layer type
MIXERS = {"mamba": MambaMixer, "mamba2": Mamba2Mixer, "short_conv": ShortConvMixer, "lightning": LightningMixer,
          "gated_deltanet": GatedDeltaNetMixer, "rglru": RGLRUMixer, "kda": KDAMixer}


@dataclass
class Context:
    """What every layer needs from the model for one forward call."""

    biases: dict  # layer span (window, chunk) -> (1, h or 1, S, S_kv) additive bias, or None
    rope: dict[int, tuple[torch.Tensor, torch.Tensor]] | None  # rotated dims -> cos, sin (S, rotated dims)
    cache: object | None  # a KVCache
    start_pos: int
    carry: list = field(default_factory=list)  # moe.shortcut: the MoE output a dense+shortcut_moe layer leaves
    indices: dict = field(default_factory=dict)  # DSA: each indexed layer's top-k, for the shared layers
    embeddings: torch.Tensor | None = None  # shared_transformer: the embeddings entering layer 0
    kv: dict = field(default_factory=dict)  # kv_shared_layers: each source layer's K and V, for the layers reusing them
    per_layer: list = field(default_factory=list)  # gemma3n: each layer's per-layer input


def sinusoid_table(n: int, d: int) -> torch.Tensor:
    pos = torch.arange(n, dtype=torch.float64)[:, None]
    freq = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # (ceil(d/2),)
    table = torch.zeros(n, d, dtype=torch.float64)
    table[:, 0::2] = torch.sin(pos * freq)
    table[:, 1::2] = torch.cos(pos * freq[: d // 2])
    return table  # (n, d)


def rope_tables(n: int, hd: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    inv_freq = theta ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)  # (hd/2,)
    angles = torch.arange(n, dtype=torch.float64)[:, None] * inv_freq
    angles = torch.cat([angles, angles], dim=-1)  # (n, hd), rotate-half layout
    return angles.cos(), angles.sin()


def alibi_slopes(h: int) -> torch.Tensor:
    """Press et al.: geometric 2^(-8/n) for a power of two n, else interleave from 2n."""
    def geometric(n):
        return [2.0 ** (-8.0 * (i + 1) / n) for i in range(n)]

    m = 2 ** math.floor(math.log2(h))
    slopes = geometric(m) + geometric(2 * m)[0::2][: h - m]
    return torch.tensor(slopes, dtype=torch.float64)  # (h,)


def relative_bucket(distance: torch.Tensor, buckets: int, max_distance: int) -> torch.Tensor:
    """T5 unidirectional buckets of ``distance = i - j >= 0`` (future keys are masked anyway):
    half the buckets exact, the rest log-spaced up to ``max_distance``."""
    n = distance.clamp(min=0)
    exact = buckets // 2
    log_ratio = torch.log(n.double().clamp(min=1) / exact) / math.log(max_distance / exact)
    large = (exact + log_ratio * (buckets - exact)).long()
    return torch.where(n < exact, n, large).clamp(0, buckets - 1)


def block_norms(cfg: ModelConfig) -> tuple[str, ...]:
    """Names of a block's norms (``norm.<name>``), from the placement (module docstring)."""
    if cfg.norm_placement == "post_branch":
        return ("attention_post", "mlp_post")
    names = ["attention"]
    if not (cfg.parallel_block and cfg.parallel_norms == 1):
        names.append("mlp")
    if cfg.norm_placement == "sandwich":
        names += ["attention_post", "mlp_post"]
    return tuple(names)


def rope_dims(cfg: ModelConfig) -> int:
    """Dimensions of each head RoPE rotates: MLA its rope part, MHA ``rotary_dims``."""
    return cfg.mla.qk_rope_head_dim if cfg.attention == "mla" else cfg.rotary_dims


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig, index: int, spec: LayerSpec, attention: str, routing: str,
                 recompute: str = "none", shared: SharedBlock | None = None):
        super().__init__()
        self.spec, self.index = spec, index
        self.rotates = spec.rope  # whether an attention of the layer rotates q and k
        placement = layer_config(cfg, spec).norm_placement  # a layer without attention may have its own
        self.placement, self.parallel = placement, cfg.parallel_block
        self.recompute = recompute in ("full", "op")  # the block under a checkpoint
        if spec.attention == "none":  # no mixer: the layer is its FFN alone
            pass
        elif spec.recurrent:  # a recurrent mixer in attention's place, named by its kind
            setattr(self, spec.attention, MIXERS[spec.attention](cfg, index))
        else:  # full_head_dim, full_kv_heads, full_k_eq_v: a full layer's own shape
            self.attention = make_attention(layer_config(cfg, spec), index, spec, attention)
            self.attention.selective = recompute == "selective"
            if spec.shared_topk:  # DSA: the indexer whose top-k the layer reuses
                self.attention.source = topk_source(cfg, index)
            if spec.kv_reuse:  # kv_shared_layers: the layer whose K and V it attends to
                self.attention.source = kv_source(cfg, index)
            elif cfg.kv_shared_layers:  # a source leaves its K and V to the layers reusing them
                self.attention.store = any(kv_source(cfg, i) == index for i, s in enumerate(layer_specs(cfg))
                                           if s.kv_reuse)
            self.rope_dims = rope_dims(layer_config(cfg, spec))
            if spec.beside is not None:  # a recurrent mixer beside it (parallel_mixer), its state in cache.beside
                setattr(self, spec.beside, MIXERS[spec.beside](layer_config(cfg, spec), index))
        if shared is not None:  # a shared transformer block before the mixer: its modules, the use's own
            self.block, self.attention, self.mlp = shared, shared.attention, shared.mlp
            self.shared = Use(cfg, shared)
            self.rotates, self.rope_dims = cfg.position == "rope", attention_config(cfg).rotary_dims
        if spec.ffn in ("moe", "dense+moe", "dense+shortcut_moe"):
            self.moe = MoE(cfg, routing)
        if spec.ffn in ("dense", "dense+moe", "dense+shortcut_moe"):
            self.mlp = MLP(cfg)
        if cfg.layer_scalar:  # Gemma 4: the block's output times one stored scalar
            self.layer_scalar = nn.Parameter(torch.ones(1))
        if cfg.hyper is not None:  # a hyper-connection per branch, and the mix after each
            branches = [b for b, on in (("attention", spec.attention != "none"), ("mlp", spec.ffn is not None)) if on]
            self.hyper = nn.ModuleDict({k: v for b in branches for k, v in ((b, HyperConnection(cfg)),
                                                                             (b + "_mix", Mix()))})
        names = [n for n in block_norms(layer_config(cfg, spec)) if spec.ffn is not None or not n.startswith("mlp")]
        names = [n for n in names if spec.attention != "none" or not n.startswith("attention")]
        if spec.ffn == "dense+moe":  # the experts' input norm, and one after each of the two FFNs
            names += ["moe", "dense_post", "moe_post"]
        self.norm = nn.ModuleDict({name: make_norm(cfg, cfg.d_model) for name in names})
        if shared is not None:
            self.norm.update(shared.norms)
        if cfg.gemma3n is not None:  # AltUp, Laurel, the per-layer input, the MLP's sparsity
            gemma3n.add_layer(self, cfg, spec.sparse)
        # per-op checkpointing: the policy's contexts (a plain checkpoint's for full recomputation)
        self.per_op = PerOp(self) if recompute == "op" else None

    def forward(self, x: torch.Tensor, ctx: Context) -> torch.Tensor:
        """The block; a dense layer after a ``dense+shortcut_moe`` one (moe.shortcut) adds the MoE output it left."""
        carry = ctx.carry.pop() if ctx.carry and self.spec.ffn == "dense" else None
        x = self.checkpointed(x, ctx)
        return x if carry is None else x + carry

    def checkpointed(self, x: torch.Tensor, ctx: Context) -> torch.Tensor:
        if self.spec.recurrent and not hasattr(self, "shared"):
            if not self.recompute:
                return self.run(x, LayerContext(None, None, ctx.cache, ctx.start_pos))
            with set_checkpoint_early_stop(False):
                return checkpoint(lambda x: self.run(x, LayerContext(None, None, ctx.cache, ctx.start_pos)), x,
                                  use_reentrant=False, preserve_rng_state=False, **self._policy())
        bias = ctx.biases[self.spec.span]
        rope = ctx.rope[self.rope_dims] if self.rotates and ctx.rope is not None else None
        e = ctx.embeddings if hasattr(self, "shared") else None  # a shared block reads them
        if hasattr(self, "altup"):  # Gemma 3n's layer over the streams (full and op recomputation: refused)
            lctx = LayerContext(bias, rope, ctx.cache, ctx.start_pos, kv=ctx.kv)
            return gemma3n.run_layer(self, x, lambda h: self.attention(h, lctx), ctx.per_layer[self.index])
        if not self.recompute:
            return self.run(x, LayerContext(bias, rope, ctx.cache, ctx.start_pos, ctx.carry, ctx.indices, e, ctx.kv))

        # the layer's mask and RoPE tables (and the embeddings a shared block reads) go in as arguments, so the
        # checkpoint saves them like x (visible to saved-tensor hooks) instead of keeping them alive by reference
        # (a dense+shortcut_moe layer's MoE output leaves through ctx.carry; a recomputation appends it again, unread)
        def run(x, e, bias, *rope):
            return self.run(x, LayerContext(bias, rope or None, ctx.cache, ctx.start_pos, ctx.carry, ctx.indices, e,
                                            ctx.kv))

        # no dropout: nothing random to replay, so the RNG state need not be stashed.
        # Early stop would skip recomputing ops whose outputs backward does not need (the
        # block's last matmul); off, backward reruns the whole block, the convention of
        # "full recomputation adds one forward" that the analytic FLOPs state.
        with set_checkpoint_early_stop(False):
            return checkpoint(run, x, e, bias, *(rope or ()), use_reentrant=False,
                              preserve_rng_state=False, **self._policy())

    def _policy(self) -> dict:
        """The checkpoint's ``context_fn`` under per-op checkpointing (none under full recomputation)."""
        return {} if self.per_op is None else {"context_fn": self.per_op.contexts}

    def run(self, x: torch.Tensor, ctx: LayerContext) -> torch.Tensor:
        if hasattr(self, "layer_scalar"):
            return self.unscaled(x, ctx) * self.layer_scalar
        return self.unscaled(x, ctx)

    def ffn(self, x: torch.Tensor, ctx: LayerContext):
        """The FFN as a function of its input; a ``dense+moe`` one also reads the residual ``x``, a
        ``dense+shortcut_moe`` one leaves its MoE's output in ``ctx.carry``."""
        if self.spec.ffn == "dense+moe":
            return lambda h: dense_and_moe(self.mlp, self.moe, self.norm, h, x)
        if self.spec.ffn == "dense+shortcut_moe":
            return lambda h: dense_and_shortcut_moe(self.mlp, self.moe, h, ctx.carry)
        if self.spec.ffn is None:  # none (a shared block's mlp is not the layer's FFN)
            return None
        return self.moe if hasattr(self, "moe") else self.mlp

    def unscaled(self, x: torch.Tensor, ctx: LayerContext) -> torch.Tensor:
        n = self.norm
        ffn = self.ffn(x, ctx)

        def attn(h):
            if self.spec.recurrent:
                return getattr(self, self.spec.attention)(h, ctx.cache, ctx.start_pos)
            out = self.attention(h, ctx)
            if self.spec.beside is None:
                return out
            beside = None if ctx.cache is None else ctx.cache.beside
            return out + getattr(self, self.spec.beside)(h, beside, ctx.start_pos)

        if hasattr(self, "hyper"):  # x: (B, S, N, d), the residual streams (sequential pre-norm: a rule)
            for branch, run in (("attention", attn), ("mlp", ffn)):
                if branch in self.hyper:
                    h, post, comb = self.hyper[branch](x)
                    x = self.hyper[branch + "_mix"](post, comb, run(n[branch](h)), x)
            return x
        if ffn is None:  # a mixer alone (a mamba layer with d_ff 0)
            return self.mixer_only(x, attn, ctx)
        if self.spec.attention == "none":  # an FFN alone
            return self.ffn_only(x, ffn)

        if self.placement == "post":
            x = n["attention"](x + attn(x))
            return n["mlp"](x + ffn(x))
        if self.placement == "post_branch":
            x = x + n["attention_post"](attn(x))
            return x + n["mlp_post"](ffn(x))

        def branch(f, key, h):  # sandwich: a post norm on the branch output
            y = f(h)
            return n[key + "_post"](y) if self.placement == "sandwich" else y

        if self.parallel:
            h = n["attention"](x)
            h_mlp = n["mlp"](x) if "mlp" in n else h  # parallel_norms 1: one shared norm
            return x + branch(attn, "attention", h) + branch(ffn, "mlp", h_mlp)
        x = x + branch(attn, "attention", n["attention"](x))
        return x + branch(self.ffn(x, ctx), "mlp", n["mlp"](x))


    def ffn_only(self, x: torch.Tensor, ffn) -> torch.Tensor:
        """A ``none`` layer, without a mixer: its FFN branch under the placement (parallel blocks are refused)."""
        n = self.norm
        if self.placement == "post":
            return n["mlp"](x + ffn(x))
        if self.placement == "post_branch":
            return x + n["mlp_post"](ffn(x))
        y = ffn(n["mlp"](x))
        return x + (n["mlp_post"](y) if self.placement == "sandwich" else y)

    def mixer_only(self, x: torch.Tensor, attn, ctx: LayerContext) -> torch.Tensor:
        """The block without an FFN: its mixer branch under the placement (parallel blocks are refused); a
        shared transformer block's output joins the mixer's input (pre-norm: a rule)."""
        n = self.norm
        if self.placement == "post":
            return n["attention"](x + attn(x))
        if self.placement == "post_branch":
            return x + n["attention_post"](attn(x))
        h = x
        if hasattr(self, "shared"):
            cache = None if ctx.cache is None else UseCache(ctx.cache, self.index)
            h = x + self.shared(self.block, n, x, ctx, cache)
        y = attn(n["attention"](h))
        return x + (n["attention_post"](y) if self.placement == "sandwich" else y)


class SoftCap(nn.Module):
    """``cap * tanh(x / cap)``: the final logits' soft-capping (Gemma 2)."""

    def __init__(self, cap: float):
        super().__init__()
        self.cap = cap

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x / self.cap) * self.cap


class Transformer(nn.Module):
    def __init__(self, cfg: ModelConfig, attention: str = "eager", routing: str = "auto",
                 recompute: str = "none"):
        super().__init__()
        self.cfg, self.kind, self.recompute = cfg, attention, recompute
        self.specs = layer_specs(cfg)
        d, V, ctx_len = cfg.d_model, cfg.vocab_size, cfg.context_length
        embedding = {"token": nn.Embedding(V, d)}
        if cfg.position == "learned":
            embedding["position"] = nn.Embedding(ctx_len + cfg.position_offset, d)  # offset rows first
        elif cfg.position == "relative":
            embedding["position"] = nn.Embedding(cfg.relative_buckets, cfg.n_heads)
        self.embedding = nn.ModuleDict(embedding)
        if cfg.position == "sinusoidal":
            self.register_buffer("sinusoid", sinusoid_table(ctx_len, d), persistent=False)
        elif cfg.position == "rope":
            self.rope_widths = sorted({rope_dims(layer_config(cfg, s)) for s in self.specs if s.rope}
                                      | {attention_config(cfg).rotary_dims for s in self.specs if s.shared}
                                      or {rope_dims(cfg)})  # a table per rotated width (full_head_dim, shared)
            for dims in self.rope_widths:
                cos, sin = rope_tables(ctx_len, dims, cfg.rope_theta)
                suffix = "" if dims == rope_dims(cfg) else f"_{dims}"
                self.register_buffer("rope_cos" + suffix, cos, persistent=False)
                self.register_buffer("rope_sin" + suffix, sin, persistent=False)
        elif cfg.position == "alibi":
            self.register_buffer("alibi", alibi_slopes(cfg.n_heads), persistent=False)
        self.layers = nn.ModuleList(Block(cfg, i, spec, attention, routing, recompute, self._shared_block(i))
                                    for i, spec in enumerate(self.specs))
        norms = {"embedding": cfg.embedding_norm, "final": cfg.final_norm}
        self.norm = nn.ModuleDict({k: make_norm(cfg, d) for k, on in norms.items() if on})
        self.lm_head = nn.Linear(d, V, bias=cfg.lm_head_bias)
        if cfg.tie_embeddings:
            self.lm_head.weight = self.embedding["token"].weight
        if cfg.final_logit_softcap is not None:
            self.logit_softcap = SoftCap(cfg.final_logit_softcap)
        add_vision(self, cfg)  # parameters only: no image runs through it
        if cfg.hyper is not None:  # the residual streams' collapse after the last layer
            self.hyper = nn.ModuleDict({"head": HyperConnection(cfg, head=True)})
        if cfg.gemma3n is not None:  # the per-layer inputs and the streams' ends
            gemma3n.add_model(self, cfg)

    def _shared_block(self, index: int) -> SharedBlock | None:
        """The shared transformer block layer ``index`` runs, or None: the j-th using layer runs block
        ``j % blocks``, each block built once (the first using layer registers its modules)."""
        s = self.cfg.shared_transformer
        if s is None or index not in s.layers:
            return None
        if not hasattr(self, "shared_blocks"):
            self.shared_blocks = [SharedBlock(self.cfg, self.kind, self.recompute == "selective")
                                  for _ in range(s.blocks)]
        return self.shared_blocks[s.layers.index(index) % s.blocks]

    def position_bias(self, distance: torch.Tensor, dtype) -> torch.Tensor | None:
        """ALiBi or T5 bias (1, h, S, S_kv) for ``distance = i - j``; None for other positions."""
        cfg = self.cfg
        if cfg.position == "alibi":
            return -self.alibi.to(dtype)[None, :, None, None] * distance.to(dtype)
        if cfg.position == "relative":
            buckets = relative_bucket(distance, cfg.relative_buckets, cfg.relative_max_distance)
            return self.embedding["position"](buckets).permute(2, 0, 1)[None]
        return None

    def attention_biases(self, qpos: torch.Tensor, cache, start_pos: int, dtype) -> dict:
        """One additive mask plus position bias per distinct window (module docstring); None
        where flash can use its own causal flag (no position bias, keys = queries, no binding
        window). Eager always gets a tensor."""
        cfg, device = self.cfg, qpos.device
        biased = cfg.position in ("alibi", "relative")
        built: dict = {}  # mask key -> bias
        position: dict = {}  # "q": the position bias over the queries' own keys

        def build(window, kpos, chunk=None):
            if self.kind == "flash" and not biased and kpos is qpos and window is None and chunk is None:
                return None
            distance = qpos[:, None] - kpos[None, :]  # (S, S_kv), i - j
            allowed = distance >= 0
            if window is not None:
                allowed &= distance < window
            if chunk is not None:  # a chunked layer: keys of the query's own chunk
                allowed &= (qpos[:, None] // chunk) == (kpos[None, :] // chunk)
            bias = torch.zeros(allowed.shape, dtype=dtype, device=device)
            bias = bias.masked_fill(~allowed, float("-inf"))[None, None]  # (1, 1, S, S_kv)
            if biased:  # over the queries' own keys (training), one position bias for all masks
                if kpos is not qpos:
                    bias = bias + self.position_bias(distance, dtype)  # (1, h, S, S_kv)
                else:
                    if "q" not in position:
                        position["q"] = self.position_bias(distance, dtype)
                    bias = bias + position["q"]  # (1, h, S, S_kv)
            return bias

        out = {}
        for window, chunk in dict.fromkeys(spec.span for spec in self.specs if not spec.recurrent or spec.shared):
            kpos = qpos  # the positions of the keys this layer attends to
            if cache is not None and start_pos > 0:
                kpos = torch.cat([cache.past_positions(start_pos, window, len(qpos), device, chunk), qpos])
            # layers share a mask when they read the same keys and their window cuts none off;
            # cached keys are the most recent ones, so the widest distance is len(kpos) - 1;
            # a chunk cuts keys off when the first key and the last query lie in different chunks
            binds = window is not None and len(kpos) - 1 >= window
            first = start_pos - len(kpos) + len(qpos)  # a chunked layer's keys are in position order
            cuts = chunk is not None and first // chunk != (start_pos + len(qpos) - 1) // chunk
            key = (window if binds else None, len(kpos), chunk if cuts else None)
            if key not in built:
                built[key] = build(key[0], kpos, key[2])
            out[(window, chunk)] = built[key]
        return out

    def kept(self) -> list[tuple[str, torch.Tensor]]:
        """(component, tensor) of each output per-op checkpointing kept in the last forward (:mod:`.per_op`)."""
        return [(key, t) for layer in self.layers if layer.per_op is not None for key, out in layer.per_op.kept
                for t in (out if isinstance(out, (tuple, list)) else (out,)) if isinstance(t, torch.Tensor)]

    def forward(self, tokens: torch.Tensor, cache=None, start_pos: int = 0, logits: str = "all"):
        B, S = tokens.shape
        cfg = self.cfg
        x = self.embedding["token"](tokens)  # (B, S, d)
        if cfg.embedding_scale is not None:
            x = x * cfg.embedding_scale
        qpos = torch.arange(start_pos, start_pos + S, device=tokens.device)
        if cfg.position == "learned":
            x = x + self.embedding["position"](qpos + cfg.position_offset if cfg.position_offset else qpos)
        elif cfg.position == "sinusoidal":
            x = x + self.sinusoid[qpos].to(x.dtype)
        if "embedding" in self.norm:
            x = self.norm["embedding"](x)
        rope = None
        if cfg.position == "rope" and any(spec.rope or spec.shared for spec in self.specs):
            rope = {}
            for dims in self.rope_widths:
                suffix = "" if dims == rope_dims(cfg) else f"_{dims}"
                rope[dims] = (getattr(self, "rope_cos" + suffix)[qpos].to(x.dtype),
                              getattr(self, "rope_sin" + suffix)[qpos].to(x.dtype))  # (S, r)
        ctx = Context(self.attention_biases(qpos, cache, start_pos, x.dtype), rope, cache, start_pos, embeddings=x)
        if cfg.hyper is not None:  # the embeddings copied into every residual stream
            x = x.unsqueeze(-2).expand(B, S, cfg.hyper.streams, cfg.d_model).contiguous()
        if cfg.gemma3n is not None:  # the per-layer inputs, then the streams
            ctx.per_layer = gemma3n.layer_inputs(self, tokens, x)
            x = gemma3n.embed(self, x)
        for layer in self.layers:
            x = layer(x, ctx)
        if logits == "last":
            x = x[:, -1:]
        if cfg.hyper is not None:
            x = self.hyper["head"](x)[0]
        if cfg.gemma3n is not None:
            x = gemma3n.unembed(self, x)
        if "final" in self.norm:
            x = self.norm["final"](x)
        x = self.lm_head(x)  # (B, S or 1, V)
        return self.logit_softcap(x) if hasattr(self, "logit_softcap") else x
