"""A pipeline stage's share of each component of a pass (:mod:`.step`): the share of that component's work that
the stage's layers do. A component runs in the layers that have it (a Mamba-2 scan in the Mamba-2 layers, an
attention core in the attention layers, an expert GEMM in the MoE layers), so a stage of recurrent layers alone
takes none of the attention's time, and a stage of attention layers the whole model's at long contexts. The work
that measures a component: its forward matmul FLOPs, else its elementwise FLOPs, else its bytes (the cache
writes); a stage's share of a component no layer has (fp8's casts) is its share of the layers' matmul FLOPs.
"""

from typing import NamedTuple

from ..count.flops import layer_elementwise, layer_matmul
from ..count.traffic import layer_bytes
from ..model.architecture import build
from ..model.config import ModelConfig
from ..spec import RunSpec

Held = tuple[tuple[int, int], ...]  # (layer-plan group, layers of it): a stage's (.sharding.in_stage)


class LayerWork(NamedTuple):
    per_layer: tuple[dict[str, int], ...]  # a layer of each layer-plan group: its work by component
    whole: dict[str, int]  # every layer's, by component
    matmul: tuple[int, ...]  # a layer of each group: its forward matmul FLOPs
    whole_matmul: int

    def share(self, key: str, held: Held) -> float:
        """The share of component ``key`` that the layers ``held`` run."""
        if self.whole.get(key):
            return sum(self.per_layer[i].get(key, 0) * n for i, n in held) / self.whole[key]
        return sum(self.matmul[i] * n for i, n in held) / self.whole_matmul


def layer_work(cfg: ModelConfig, run: RunSpec) -> LayerWork:
    """The layers' work of a pass of ``run`` (resolved, executed) on ``cfg`` (a TP rank's model), by component."""
    blocks = build(cfg).blocks  # count_flops' layer groups
    per_layer, matmul = [], []
    for _, layer in blocks:
        flops = layer_matmul(layer, run)
        measures = (layer_bytes(layer, run), layer_elementwise(layer, run), flops)  # the last given wins
        per_layer.append({k: v for measure in measures for k, v in measure.items() if v})
        matmul.append(sum(flops.values()))
    whole: dict[str, int] = {}
    for (group, _), work in zip(blocks, per_layer):
        for k, v in work.items():
            whole[k] = whole.get(k, 0) + v * group.count
    return LayerWork(tuple(per_layer), whole, tuple(matmul), sum(m * g.count for m, (g, _) in zip(matmul, blocks)))
