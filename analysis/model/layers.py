"""The layer plan: what each layer of a model is, derived once from its ModelConfig.

A layer is described by a :class:`LayerSpec`: its attention kind (``mha`` or ``mla``), its
window (``None``: full causal attention), whether it applies RoPE (``False`` on NoPE layers
and for models without rotary positions), and its FFN kind (``dense``, ``moe``, ``dense+moe`` or
``dense+shortcut_moe``: :data:`analysis.model.ffn.FFN`). Layers with equal specs form a
:class:`LayerGroup`; every analytic family computes one layer of each group and multiplies by its
count, and the reference model builds layer ``i`` from ``specs[i]``.

Per-layer rules (DESIGN.md section 2):
- ``layer_types`` (``full``/``sliding``) repeats cyclically over the layers; absent, every
  layer is ``sliding`` when ``sliding_window`` is set, else ``full``;
- a ``chunked`` layer (``layer_types``) attends within its chunk (``chunk``, ``attention_chunk``):
  the query at position i sees key j iff j <= i and j // C == i // C (Llama 4);
- ``rope_layers`` (true/false) repeats cyclically; absent, every layer applies RoPE when the
  model's positions are ``rope``;
- layer ``i`` is MoE when ``i >= moe.first_dense_layers`` and ``(i + 1) % moe.step == 0`` (``dense+moe``
  with ``moe.beside_mlp``: the experts beside the layer's dense MLP); with ``moe.shortcut`` (LongCat-Flash)
  every even layer is ``dense+shortcut_moe``: its dense MLP and, beside it, the MoE whose output joins the
  residual stream after the next layer;
- ``ffn_layers`` (true/false) repeats cyclically; a false layer has no FFN (nor its norm), as every
  layer with ``d_ff: 0``; a ``none`` layer (``layer_types``) has no mixer (nor its norm): its FFN alone;
- ``parallel_mixer`` puts a recurrent mixer beside the attention of every attention layer (``beside``):
  both read the layer's normed input and their outputs are summed (Falcon-H1); the mixer is built from the
  layer's config, as its attention (:func:`layer_config`);
- a layer listed in ``shared_transformer.layers`` runs a shared transformer block before its recurrent
  mixer (``shared``; Zamba: :mod:`.shared_transformer`);
- the last ``kv_shared_layers`` layers reuse K and V (``kv_reuse``; Gemma 3n): each attends to those of the last
  layer before them with its span (:func:`kv_source`), with no k or v projection, k or v norm, or cache of its own
  (:mod:`.kv_sharing`).
"""

import dataclasses
import functools
from dataclasses import dataclass
from typing import NamedTuple

from .config import RECURRENT_TYPES, ModelConfig, check_config


class LayerSpec(NamedTuple):
    """What makes one layer differ from another: attention kind, window, RoPE, FFN kind."""

    attention: str  # the mixer kind: "mha" | "mla" (attention) or "mamba" (recurrent, RECURRENT_TYPES)
    window: int | None  # sliding window W; None: full causal attention (and every recurrent layer)
    rope: bool  # rotates q and k (False: NoPE layer, or no rotary positions)
    ffn: str | None  # the FFN kind (MoEConfig.layer_ffn: dense, moe, dense+moe, dense+shortcut_moe); None: no FFN
    chunk: int | None = None  # chunked attention C: keys of the query's own chunk only; None: no chunk
    topk: int | None = None  # DSA (``dsa``): its indexer scores every key seen, attention reads the best topk
    beside: str | None = None  # a recurrent mixer beside the attention, summed with it (``parallel_mixer``)
    shared_topk: bool = False  # DSA: the top-k of the previous indexed layer, no indexer of its own (dsa.shared)
    shared: bool = False  # a shared transformer block runs before the (recurrent) mixer (``shared_transformer``)
    kv_reuse: bool = False  # attends to an earlier layer's K and V, computing and caching none (``kv_shared_layers``)
    sparse: bool = False  # its FFN's gate output cut at a Gaussian top-k (``gemma3n.sparse_layers``)

    @property
    def mixer(self) -> str:
        """The layer's mixer kind (``attention`` holds it): an attention kind or a recurrent one."""
        return self.attention

    @property
    def recurrent(self) -> bool:
        """A recurrent mixer: a state per sequence instead of KV per token."""
        return self.attention in RECURRENT_TYPES

    @property
    def attends(self) -> bool:
        """Runs attention: its own, or (a recurrent layer) a shared transformer block's."""
        return not self.recurrent or self.shared

    def keys_seen(self, kv_len: int) -> int:
        """Keys one query can see out of ``kv_len`` (the query is the last of them): bounded by
        the window, or the keys of its chunk up to itself."""
        if self.chunk is not None:
            return (kv_len - 1) % self.chunk + 1 if kv_len else 0
        return kv_len if self.window is None else min(kv_len, self.window)

    def cached(self, kv_len: int) -> int:
        """Tokens the layer's cache holds at context ``kv_len``: all of them, the last W of a sliding
        window, or C on a chunked layer (the buffer a server keeps for it: the keys of a chunk fill it
        by the chunk's end, so a budget is the peak, not the current chunk's share)."""
        bound = self.window if self.chunk is None else self.chunk
        return kv_len if bound is None else min(kv_len, bound)

    @property
    def span(self) -> tuple[int | None, int | None]:
        """What bounds the keys a query sees: (window, chunk); (None, None) for full attention."""
        return self.window, self.chunk

    def describe(self) -> str:
        window = "full attention" if self.window is None else f"sliding window {self.window:,}"
        if self.chunk is not None:
            window = f"chunked attention {self.chunk:,}"
        rope = "" if self.rope else ", no RoPE"
        rope += ", an earlier layer's K/V" if self.kv_reuse else ""
        ffn_sparse = ", sparse" if self.sparse else ""
        if self.topk is not None:
            rope += f", top-{self.topk:,} keys" + (" (the previous indexer's)" if self.shared_topk else "")
        ffn = "no FFN" if self.ffn is None else f"{self.ffn} FFN{ffn_sparse}"
        if self.attention == "none":
            return f"no mixer, {ffn}"
        if self.recurrent:
            shared = " after a shared transformer block" if self.shared else ""
            return f"{self.attention} mixer{shared}, {ffn}"
        beside = "" if self.beside is None else f" + {self.beside} mixer"
        return f"{self.attention} {window}{rope}{beside}, {ffn}"

    def as_dict(self) -> dict:
        out = {"attention": self.attention, "window": self.window, "rope": self.rope, "ffn": self.ffn}
        out = out if self.topk is None else {**out, "topk": self.topk}
        out = out if self.beside is None else {**out, "beside": self.beside}
        out = {**out, "shared_topk": True} if self.shared_topk else out
        out = {**out, "shared": True} if self.shared else out
        out = {**out, "kv_reuse": True} if self.kv_reuse else out
        out = {**out, "sparse": True} if self.sparse else out
        return out if self.chunk is None else {**out, "chunk": self.chunk}


@dataclass(frozen=True)  # not a NamedTuple: its count is not tuple.count
class LayerGroup:
    """The layers that share one spec: counted once, multiplied by their number."""

    spec: LayerSpec
    layers: tuple[int, ...]  # layer indices, ascending

    @property
    def count(self) -> int:
        return len(self.layers)


@functools.lru_cache(maxsize=256)  # configs are frozen; `plan` asks for the same few many times
def layer_specs(cfg: ModelConfig) -> tuple[LayerSpec, ...]:
    types = cfg.type_pattern
    rope = cfg.rope_layers or (cfg.position == "rope",)
    specs = []
    uses = set(() if cfg.shared_transformer is None else cfg.shared_transformer.layers)
    for i in range(cfg.n_layers):
        window = cfg.sliding_window if types[i % len(types)] == "sliding" else None
        ffn = cfg.moe.layer_ffn(i) if cfg.moe is not None else "dense"
        ffn = ffn if cfg.has_ffn(i) else None
        if types[i % len(types)] in RECURRENT_TYPES:  # a recurrent mixer: no window, no RoPE
            specs.append(LayerSpec(types[i % len(types)], None, False, ffn, shared=i in uses))
            continue
        chunk = cfg.attention_chunk if types[i % len(types)] == "chunked" else None
        topk = cfg.dsa.topk if cfg.dsa is not None and cfg.attention == "mla" else None
        shared = topk is not None and cfg.dsa.shared is not None and cfg.dsa.shared[i % len(cfg.dsa.shared)]
        specs.append(LayerSpec(cfg.attention, window, rope[i % len(rope)], ffn, chunk, topk, cfg.parallel_mixer,
                               shared, kv_reuse=i >= cfg.n_layers - cfg.kv_shared_layers,
                               sparse=cfg.gemma3n is not None and cfg.gemma3n.sparse(i)))
    return tuple(specs)


@functools.lru_cache(maxsize=1024)
def layer_config(cfg: ModelConfig, spec: LayerSpec) -> ModelConfig:
    """The config a layer is built from: on a full-attention layer (no window, no chunk)
    ``full_head_dim``, ``full_kv_heads`` and ``full_k_eq_v`` replace ``head_dim``, ``n_kv_heads`` and
    ``k_eq_v`` (Gemma 4's global layers); a layer reusing another's top-k (``shared_topk``) has no ``dsa``
    indexer of its own; on a layer without attention ``recurrent_norm_placement`` replaces
    ``norm_placement`` (OLMo Hybrid); every other layer, and a model without them, keeps ``cfg``."""
    if spec.shared_topk:
        return dataclasses.replace(cfg, dsa=None)
    if spec.recurrent and cfg.recurrent_norm_placement is not None:
        return dataclasses.replace(cfg, norm_placement=cfg.recurrent_norm_placement)
    full = not spec.recurrent and spec.window is None and spec.chunk is None
    if not full or (cfg.full_head_dim is None and cfg.full_kv_heads is None and not cfg.full_k_eq_v):
        return cfg
    return dataclasses.replace(cfg, head_dim=cfg.full_head_dim or cfg.head_size,
                               n_kv_heads=cfg.full_kv_heads or cfg.kv_heads, k_eq_v=cfg.k_eq_v or cfg.full_k_eq_v)


def topk_source(cfg: ModelConfig, i: int) -> int:
    """The layer whose indexer's top-k layer ``i`` reuses (``shared_topk``): the last indexed one before it."""
    specs = layer_specs(cfg)
    return next(j for j in range(i - 1, -1, -1) if specs[j].topk is not None and not specs[j].shared_topk)


def kv_source(cfg: ModelConfig, i: int) -> int:
    """The layer whose K and V layer ``i`` reads (``kv_reuse``): the last one before the shared tail with the same
    span (window, chunk), as transformers' ``kv_sharing_modes`` picks the last of the same layer type."""
    specs = layer_specs(cfg)
    return next(j for j in range(cfg.n_layers - cfg.kv_shared_layers - 1, -1, -1) if specs[j].span == specs[i].span)


def layer_plan(cfg: ModelConfig) -> tuple[LayerGroup, ...]:
    """Groups of identical layers, in order of first appearance."""
    check_config(cfg)
    return _layer_plan(cfg)


@functools.lru_cache(maxsize=256)
def _layer_plan(cfg: ModelConfig) -> tuple[LayerGroup, ...]:
    members: dict[LayerSpec, list[int]] = {}
    for i, spec in enumerate(layer_specs(cfg)):
        members.setdefault(spec, []).append(i)
    return tuple(LayerGroup(spec, tuple(layers)) for spec, layers in members.items())
