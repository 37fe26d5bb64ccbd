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
from ..errors import SpecError
from ..model.config import ModelConfig
from ..spec import Layout, RunSpec, check_arguments, lora_refusal
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
    if run.lora is not None and (why := lora_refusal(cfg)) is not None:
        raise SpecError("lora", why)
    if run.images:
        raise SpecError("images", "with a parallel layout: the vision tower's split over tp is not counted by flops "
                                  "(without a layout, flops counts the tower)")
    run = run.resolve(cfg)
    check_layout(cfg, run)
    layout = run.layout
    cp = layout.cp
    if run.causal and cp > 1 and run.seq % (2 * cp):
        raise SpecError("layout.cp", f"{cp} splits each sequence in {2 * cp} chunks (Megatron's causal load "
                                     f"balancing), which must divide the {run.seq:,} tokens of a sequence")
    for name, value, n in (("stage", stage, layout.pp), ("rank", rank, cp)):
        if value is not None and not 0 <= value < n:
            raise SpecError(name, f"must be 0 to {n - 1}, got {value}")
    local, one = tp_local(cfg, layout.tp), run.replace(layout=Layout())
    per_stage = [[_rank(local, one, cp, frozenset(held), s == 0, s == layout.pp - 1, r) for r in range(cp)]
                 for s, held in enumerate(stages(cfg, layout))]
    totals = [[r.total.total for r in ranks] for ranks in per_stage]
    if stage is None:
        stage = max(range(layout.pp), key=lambda s: max(totals[s]))
    if rank is None:
        rank = max(range(cp), key=totals[stage].__getitem__)
    mine = per_stage[stage][rank]
    return GpuFlops(mine._replace(run=run), stage, rank, tuple(max(t) for t in totals))


def _rank(cfg: ModelConfig, run: RunSpec, cp: int, layers: frozenset[int], first: bool, last: bool,
          rank: int) -> FlopReport:
    """Context-parallel GPU ``rank``'s pass of a stage (``cfg`` the TP rank's model, ``run`` resolved, on one
    GPU): the stage's FLOPs over ``S / cp`` tokens, attention's core replaced by that of the GPU's queries."""
    head = last and (rank == 0 or run.mode == "train" or run.all_logits)  # the logits of its positions
    mine = part_flops(cfg, run.replace(seq=run.seq // cp), layers, first, head)
    if cp == 1:
        return mine
    keys = set(SCORES_VALUES) | core_keys(cfg, run)
    if not run.causal:  # every query against every key: 1/cp of the whole sequence's
        core = _core(part_flops(cfg, run, layers, False, False), keys, cp)
    else:  # its chunks' pairs: differences of the core of passes over the first n chunks
        c = run.seq // (2 * cp)
        bounds = (rank, rank + 1, 2 * cp - 1 - rank, 2 * cp - rank)
        prefix = {j: _core(part_flops(cfg, run.replace(seq=c * j), layers, False, False), keys) if j else None
                  for j in bounds}
        core = _sum(_sum(prefix[bounds[1]], prefix[bounds[0]], -1), _sum(prefix[bounds[3]], prefix[bounds[2]], -1))
    return _with_core(mine, core, keys)


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
