"""One GPU's FLOPs under a parallel layout (`llmcalc flops --tp --pp --cp ...`, DESIGN.md section 5).

A GPU runs its tensor-parallel rank's slice of the layers its pipeline stage holds (:func:`.sharding.tp_local`,
:func:`.sharding.stages`), the parts before layer 0 on the first stage and the final norm and LM head on the
last (:data:`~analysis.count.flops.FIRST_STAGE`), over the tokens it holds:

- ``dp`` and ``zero`` change no FLOPs (ZeRO shards state, not work);
- ``ep``: a GPU of an expert-parallel group runs the token slots routed to the experts it holds; with balanced
  routing, as many as its own tokens send (``tokens x top-k``): the figures without ``ep``;
- ``cp``, as Megatron balances a causal sequence: each sequence in ``2 cp`` chunks, GPU ``r`` holding chunks
  ``r`` and ``2 cp - 1 - r``, its linears over its ``S / cp`` tokens, attention's core over its queries against
  the keys before them (the chunks' pairs: equal on every GPU for full layers, not under a window or attention
  chunks), every key in the dense convention (``S / cp x S`` pairs a head). In a prefill the LM head reads the
  last position, which GPU 0 holds (with ``--all-logits``, every GPU its tokens').

The figures are the busiest GPU's: the stage, and under ``cp`` the rank, with the most FLOPs (the first of
equals), unless ``stage`` and ``rank`` name one.
"""

from typing import NamedTuple

from ..count.flops import SCORES_VALUES, FlopBreakdown, FlopReport, core_keys, part_flops
from ..errors import SpecError, brief
from ..model.config import ModelConfig
from ..spec import Layout, RunSpec, check_arguments
from .sharding import check_layout, stages, tp_local


class GpuFlops(NamedTuple):
    report: FlopReport  # one GPU's pass; its run the one asked for (resolved, with its layout)
    stage: int  # its pipeline stage
    rank: int  # its context-parallel rank (0 without cp)
    stage_totals: tuple[int, ...]  # the busiest GPU's total of each stage


def gpu_flops(cfg: ModelConfig, run: RunSpec, stage: int | None = None, rank: int | None = None) -> GpuFlops:
    """One GPU's FLOPs of a pass of ``run`` under its layout (module docstring): the busiest's, or that of
    pipeline stage ``stage`` and context-parallel rank ``rank`` where they are given."""
    check_arguments(cfg, run)
    if run.images and not run.layout.trivial:
        raise SpecError("images", "with a parallel layout: the vision tower's share of a GPU is not counted by flops "
                                  "(without a layout, flops counts the tower)")
    run = run.resolve(cfg)
    check_layout(cfg, run)
    layout = run.layout
    cp = layout.cp
    for name, value, n in (("stage", stage, layout.pp), ("rank", rank, cp)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < n):
            raise SpecError(name, f"must be a whole number from 0 to {n - 1}, got {brief(value)}")
    local, one = tp_local(cfg, layout.tp), run.replace(layout=Layout())
    per_stage = [_stage(local, one, cp, frozenset(held), s == 0, s == layout.pp - 1)
                 for s, held in enumerate(stages(cfg, layout))]
    totals = [[r.total.total for r in ranks] for ranks in per_stage]
    if stage is None:
        stage = max(range(layout.pp), key=lambda s: max(totals[s]))
    if rank is None:
        rank = max(range(cp), key=totals[stage].__getitem__)
    mine = per_stage[stage][rank]
    return GpuFlops(mine._replace(run=run), stage, rank, tuple(max(t) for t in totals))


def core_share(cfg: ModelConfig, run: RunSpec, cp: int) -> dict[str, float]:
    """Of each component of attention's core, the share of the whole sequence's that the busiest of ``cp``
    context-parallel GPUs computes (its FLOPs, forward and backward; ``cfg`` the TP rank's model, ``run``
    resolved, on one GPU): ``1/cp`` where every GPU computes alike (module docstring), for a step's time."""
    keys, cores = _rank_cores(cfg, run, cp, None)
    whole = _core(part_flops(cfg, run), keys)
    busiest = max(cores, key=lambda c: sum(sum(d.values()) for d in c[:4]))
    return {k: sum(d.get(k, 0) for d in busiest[:4]) / n for k in keys
            if (n := sum(d.get(k, 0) for d in whole[:4]))}


def _stage(cfg: ModelConfig, run: RunSpec, cp: int, layers: frozenset[int], first: bool,
           last: bool) -> list[FlopReport]:
    """Each context-parallel GPU's pass of a stage (``cfg`` the TP rank's model, ``run`` resolved, on one GPU): the
    stage's FLOPs over ``S / cp`` tokens, attention's core replaced by that of the GPU's queries."""
    heads = [last and (rank == 0 or run.mode == "train" or run.all_logits) for rank in range(cp)]  # its logits
    passes = {head: part_flops(cfg, run.replace(seq=run.seq // cp), layers, first, head) for head in set(heads)}
    if cp == 1:
        return [passes[heads[0]]]
    keys, cores = _rank_cores(cfg, run, cp, layers)
    return [_with_core(passes[head], core, keys) for head, core in zip(heads, cores)]


def _rank_cores(cfg: ModelConfig, run: RunSpec, cp: int,
                layers: frozenset[int] | None) -> tuple[set[str], list["_Core"]]:
    """Attention's core components, and each context-parallel GPU's core over ``layers``: in the dense convention
    1/cp of the whole sequence's (every query against every key); causal, the pairs of its two chunks, differences
    of the core of passes over the first ``j`` chunks."""
    keys = set(SCORES_VALUES) | core_keys(cfg, run)
    if not run.causal:
        return keys, [_core(part_flops(cfg, run, layers, False, False), keys, cp)] * cp
    c = run.seq // (2 * cp)
    prefix = [None, *(_core(part_flops(cfg, run.replace(seq=c * j), layers, False, False), keys)
                      for j in range(1, 2 * cp + 1))]

    def chunk(j: int) -> _Core:
        return _sum(prefix[j + 1], prefix[j], -1)  # type: ignore[arg-type]

    return keys, [_sum(chunk(r), chunk(2 * cp - 1 - r)) for r in range(cp)]


class _Core(NamedTuple):
    """A pass's attention core: forward and backward, matmul and elementwise; each layer group's forward matmul."""

    fwd_mm: dict[str, int]
    fwd_ew: dict[str, int]
    bwd_mm: dict[str, int]
    bwd_ew: dict[str, int]
    groups: tuple[dict[str, int], ...]


def _core(r: FlopReport, keys: set[str], divisor: int = 1) -> _Core:
    def part(d: dict[str, int]) -> dict[str, int]:
        out = {}
        for k, v in d.items():
            if k in keys:
                out[k], rest = divmod(v, divisor)
                assert not rest, (k, v, divisor)  # S / cp x S pairs a head: cp divides the sequence
        return out

    return _Core(part(r.forward.matmul), part(r.forward.elementwise), part(r.backward.matmul),
                 part(r.backward.elementwise), tuple(part(mm) for _, mm in r.groups))


def _sum(a: _Core, b: _Core | None, sign: int = 1) -> _Core:
    """``a + sign * b`` part by part (``b`` None: nothing, a pass over no token)."""
    if b is None:
        return a
    return _Core(_add(a.fwd_mm, b.fwd_mm, sign), _add(a.fwd_ew, b.fwd_ew, sign), _add(a.bwd_mm, b.bwd_mm, sign),
                 _add(a.bwd_ew, b.bwd_ew, sign), tuple(_add(x, y, sign) for x, y in zip(a.groups, b.groups)))


def _add(a: dict[str, int], b: dict[str, int], sign: int) -> dict[str, int]:
    return {k: a.get(k, 0) + sign * b.get(k, 0) for k in {**a, **b}}


def _with_core(r: FlopReport, core: _Core, keys: set[str]) -> FlopReport:
    """``r`` with its attention core's figures (``keys``) those of ``core`` (the breakdowns' order kept)."""
    def mixed(d: dict[str, int], by: dict[str, int]) -> dict[str, int]:
        return {k: by.get(k, 0) if k in keys else v for k, v in d.items()}

    return r._replace(
        forward=FlopBreakdown(mixed(r.forward.matmul, core.fwd_mm), mixed(r.forward.elementwise, core.fwd_ew)),
        backward=FlopBreakdown(mixed(r.backward.matmul, core.bwd_mm), mixed(r.backward.elementwise, core.bwd_ew)),
        groups=tuple((g, mixed(mm, mine)) for (g, mm), mine in zip(r.groups, core.groups)))
