"""A pipeline stage's share of each component of a pass (:mod:`.step`): the share of that component's work that
the stage's layers do. A component runs in the layers that have it (a Mamba-2 scan in the Mamba-2 layers, an
attention core in the attention layers, an expert GEMM in the MoE layers), so a stage of recurrent layers alone
takes none of the attention's time, and a stage of attention layers the whole model's at long contexts. The work
that measures a component: its forward matmul FLOPs (with per-op recomputation, a rerun linear's counted again:
Gemma 4's sliding and full layers rerun different ones), else its elementwise FLOPs, else its bytes (the cache
writes); fp8's casts by each layer's casts' bytes (:func:`analysis.perf.float8.layer_casts`). A stage's share of a
component no layer has is its share of the layers' linears' FLOPs. The final norm and the LM head's bias, in the
layers' ``norm`` and ``bias`` components, go with the stages' norms and biases.
"""

from typing import NamedTuple

from ..count.flops import layer_elementwise, layer_matmul, rerun_matmuls
from ..count.traffic import layer_bytes
from ..model.architecture import Block, build
from ..model.config import ModelConfig
from ..perf.float8 import CASTS, layer_casts
from ..spec import RunSpec

Held = tuple[tuple[int, int], ...]  # (layer-plan group, layers of it): a stage's (.sharding.in_stage)


class LayerWork(NamedTuple):
    per_layer: tuple[dict[str, int], ...]  # a layer of each layer-plan group: its work by component
    whole: dict[str, int]  # every layer's, by component
    linears: tuple[int, ...]  # a layer of each group: its linears' forward FLOPs
    whole_linears: int

    def share(self, key: str, held: Held) -> float:
        """The share of component ``key`` that the layers ``held`` run."""
        if self.whole.get(key):
            return sum(self.per_layer[i].get(key, 0) * n for i, n in held) / self.whole[key]
        return sum(self.linears[i] * n for i, n in held) / self.whole_linears


def layer_work(cfg: ModelConfig, run: RunSpec, core: tuple[set[str], RunSpec] | None = None,
               shard: int = 1) -> LayerWork:
    """The layers' work of a pass of ``run`` (resolved, executed) on ``cfg`` (a TP rank's model), by component;
    ``core``: components (attention's core under context parallelism, a GPU's share of the whole sequence's) and
    the pass they are measured on (the whole sequence's: a sliding layer's core grows with the sequence as a
    full layer's does not); ``shard``: the casts' (:func:`analysis.perf.float8.casts`)."""
    blocks = build(cfg).blocks  # count_flops' layer groups
    per_layer, linears = [], []
    for _, layer in blocks:
        flops = layer_matmul(layer, run)
        work = _measured(layer, run, flops)
        if core is not None:
            keys, sequence = core
            work = {k: v for k, v in work.items() if k not in keys}
            work.update({k: v for k, v in _measured(layer, sequence, layer_matmul(layer, sequence)).items()
                         if k in keys})
        if run.matmul_dtype == "fp8":
            work[CASTS] = layer_casts(layer, run, shard)[1]
        per_layer.append(work)
        linears.append(sum(flops.get(k, 0) for k in {m.key for m in layer.linears()}))
    whole: dict[str, int] = {}
    for (group, _), work in zip(blocks, per_layer):
        for k, v in work.items():
            whole[k] = whole.get(k, 0) + v * group.count
    return LayerWork(tuple(per_layer), whole, tuple(linears), sum(n * g.count for n, (g, _) in zip(linears, blocks)))


def _measured(layer: Block, run: RunSpec, flops: dict[str, int]) -> dict[str, int]:
    """One layer's work by component (module docstring), ``flops`` its forward matmul FLOPs."""
    if run.mode == "train" and run.recompute == "op":  # forward and backward, the rerun matmuls once more
        rerun = rerun_matmuls(layer, run)
        flops = {k: 3 * v + (v if k in rerun else 0) for k, v in flops.items()}
    measures = (layer_bytes(layer, run), layer_elementwise(layer, run), flops)  # the last given wins
    return {k: v for measure in measures for k, v in measure.items() if v}
