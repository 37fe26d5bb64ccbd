"""The layer plan: what each layer of a model is, derived once from its ModelConfig.

A layer is described by a :class:`LayerSpec`: its attention kind (``mha`` or ``mla``), its
window (``None``: full causal attention), whether it applies RoPE (``False`` on NoPE layers
and for models without rotary positions), and its FFN kind (``dense`` or ``moe``). Layers with
equal specs form a :class:`LayerGroup`; every analytic family computes one layer of each group
and multiplies by its count, and the reference model builds layer ``i`` from ``specs[i]``.

Per-layer rules (DESIGN.md section 2):
- ``layer_types`` (``full``/``sliding``) repeats cyclically over the layers; absent, every
  layer is ``sliding`` when ``sliding_window`` is set, else ``full``;
- ``rope_layers`` (true/false) repeats cyclically; absent, every layer applies RoPE when the
  model's positions are ``rope``;
- layer ``i`` is MoE when ``i >= moe.first_dense_layers`` and ``(i + 1) % moe.step == 0``.
"""

import functools
from dataclasses import dataclass
from typing import NamedTuple

from .config import ModelConfig

RECURRENT = ("mamba",)  # mixer kinds that keep a state per sequence (layer_types names them)


class LayerSpec(NamedTuple):
    """What makes one layer differ from another: attention kind, window, RoPE, FFN kind."""

    attention: str  # the mixer kind: "mha" | "mla" (attention) or "mamba" (recurrent, RECURRENT)
    window: int | None  # sliding window W; None: full causal attention (and every recurrent layer)
    rope: bool  # rotates q and k (False: NoPE layer, or no rotary positions)
    ffn: str | None  # "dense" | "moe"; None: the layer has no FFN (d_ff 0)

    @property
    def mixer(self) -> str:
        """The layer's mixer kind (``attention`` holds it): an attention kind or a recurrent one."""
        return self.attention

    @property
    def recurrent(self) -> bool:
        """A recurrent mixer: a state per sequence instead of KV per token."""
        return self.attention in RECURRENT

    def keys_seen(self, kv_len: int) -> int:
        """Keys one query can see out of ``kv_len``: bounded by the window."""
        return kv_len if self.window is None else min(kv_len, self.window)

    def describe(self) -> str:
        window = "full attention" if self.window is None else f"sliding window {self.window:,}"
        rope = "" if self.rope else ", no RoPE"
        ffn = "no FFN" if self.ffn is None else f"{self.ffn} FFN"
        if self.recurrent:
            return f"{self.attention} mixer, {ffn}"
        return f"{self.attention} {window}{rope}, {ffn}"

    def as_dict(self) -> dict:
        return {"attention": self.attention, "window": self.window, "rope": self.rope, "ffn": self.ffn}


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
    types = cfg.layer_types or (("sliding",) if cfg.sliding_window is not None else ("full",))
    rope = cfg.rope_layers or (cfg.position == "rope",)
    specs = []
    for i in range(cfg.n_layers):
        window = cfg.sliding_window if types[i % len(types)] == "sliding" else None
        moe = cfg.moe is not None and cfg.moe.is_moe_layer(i)
        ffn = None if cfg.d_ff == 0 else "moe" if moe else "dense"
        if types[i % len(types)] in RECURRENT:  # a recurrent mixer: no window, no RoPE
            specs.append(LayerSpec(types[i % len(types)], None, False, ffn))
            continue
        specs.append(LayerSpec(cfg.attention, window, rope[i % len(rope)], ffn))
    return tuple(specs)


@functools.lru_cache(maxsize=256)
def layer_plan(cfg: ModelConfig) -> tuple[LayerGroup, ...]:
    """Groups of identical layers, in order of first appearance."""
    members: dict[LayerSpec, list[int]] = {}
    for i, spec in enumerate(layer_specs(cfg)):
        members.setdefault(spec, []).append(i)
    return tuple(LayerGroup(spec, tuple(layers)) for spec, layers in members.items())
