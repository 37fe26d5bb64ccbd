"""Exact parameter counts, per component, per layer group and in total.

Conventions:
- every tensor a trained checkpoint stores as a parameter counts; buffers (RoPE
  frequencies, sinusoidal tables, causal masks) do not;
- a tied LM head shares the token embedding and is counted once, under
  ``embedding/token``; ``lm_head`` then holds only its bias, if any;
- ``active`` is what one token touches: for MoE layers the router, ``experts_per_token``
  routed experts and the shared experts; equal to ``total`` for dense models;
- ``embedding`` counts the token and position tables (and Gemma 3n's per-layer table); ``non_embedding`` is the rest
  (the N of ``6 * N * tokens``), LM head included;
- a shared transformer block's weights (Zamba) count once per block, in the model's components, not
  in the layer groups of the layers that use it (a use's own adapters and projection do);
- a multimodal checkpoint's vision tower (``vision/...``) and projector (``projector/...``) count in
  ``total`` and, being dense, in ``active``; ``language_model`` is the rest.
"""

import functools
from typing import NamedTuple

from ..model.architecture import Block, build
from ..model.config import ModelConfig
from ..model.layers import LayerGroup
from ..spec import check_arguments


class ParamCount(NamedTuple):
    """A model's parameters: by layer group and by breakdown key, total and active (MoE top-k)."""

    groups: tuple[tuple[LayerGroup, dict[str, int]], ...]  # each group with one layer's parameters by key
    components: dict[str, int]  # the whole model by key (layer keys summed over layers)
    total: int
    active: int
    vision_layer: dict[str, int]  # one layer of the vision tower by key (empty without one)

    @property
    def embedding(self) -> int:
        return sum(self.components.get(k, 0) for k in ("embedding/token", "embedding/position", "embedding/per_layer"))

    @property
    def non_embedding(self) -> int:
        return self.total - self.embedding

    def _prefixed(self, prefix: str) -> int:
        return sum(n for k, n in self.components.items() if k.startswith(prefix))

    @property
    def vision_tower(self) -> int:
        return self._prefixed("vision/")

    @property
    def projector(self) -> int:
        return self._prefixed("projector/")

    @property
    def language_model(self) -> int:
        return self.total - self.vision_tower - self.projector


def _add(into: dict[str, int], key: str, n: int) -> None:
    into[key] = into.get(key, 0) + n


def layer_params(block: Block) -> dict[str, int]:
    """One layer's parameters by key (linears, then norms, then learned vectors), those it holds."""
    out: dict[str, int] = {}
    for part in block.held():
        _add(out, part.key, part.params)
    return out


def _inactive(block: Block) -> int:
    """Parameters of the experts a token does not visit."""
    return sum((m.copies - m.active) * m.per_copy for m in block.linears())


def count_params(cfg: ModelConfig) -> ParamCount:
    """The model's parameters by component and layer group, total and active (module docstring): the caller's
    own dicts, so that changing them leaves the count kept for the next call as it was."""
    check_arguments(cfg)
    p = _count_params(cfg)
    return p._replace(groups=tuple((g, dict(per_layer)) for g, per_layer in p.groups),
                      components=dict(p.components), vision_layer=dict(p.vision_layer))


@functools.lru_cache(maxsize=256)  # configs are frozen; memory, quant and plan ask again and again
def _count_params(cfg: ModelConfig) -> ParamCount:
    model = build(cfg)
    comps: dict[str, int] = {}
    for table in (model.token, model.position):
        if table is not None:
            comps[table.key] = table.params
    if model.embedding_norm is not None and model.embedding_norm.params:
        comps[model.embedding_norm.key] = model.embedding_norm.params
    groups, inactive = [], 0
    for group, block in model.blocks:
        per_layer = layer_params(block)
        groups.append((group, per_layer))
        for key, n in per_layer.items():
            _add(comps, key, n * group.count)
        inactive += _inactive(block) * group.count
    for weight, blocks in model.shared:  # the shared transformer blocks' weights, once per block
        _add(comps, weight.key, weight.params * blocks)
    for g3n in model.gemma3n:  # Gemma 3n's per-layer inputs and streams' (un)embedding
        comps[g3n.key] = g3n.params
    if model.hyper_head is not None:
        comps[model.hyper_head.key] = model.hyper_head.params
    if model.final_norm is not None and model.final_norm.params:
        comps[model.final_norm.key] = model.final_norm.params
    if model.head.params:
        comps[model.head.linear.key] = model.head.params
    vision_layer: dict[str, int] = {}
    if model.vision is not None:
        for part, copies in model.vision.parts():
            _add(comps, part.key, part.params * copies)
        for part in model.vision.layer:
            _add(vision_layer, part.key, part.params)
    total = sum(comps.values())
    return ParamCount(tuple(groups), comps, total, total - inactive, vision_layer)
