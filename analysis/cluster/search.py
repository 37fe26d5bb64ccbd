"""`llmcalc plan`: the ways to split a training run over N GPUs, ranked by expected step time.

Enumerated (every combination the model allows, :func:`analysis.cluster.sharding.check_layout`):

- ``tp``: divisors of N up to a node (``gpus_per_node``; all N when the hardware gives none),
  dividing the heads;
- ``cp``: divisors of N / tp that split each sequence into chunks of at least
  :data:`MIN_CP_CHUNK` tokens (context parallelism pays off on long sequences only);
- ``pp``: divisors of N / (tp x cp) up to the layer count (stages split the layers as
  :func:`analysis.cluster.pipeline.split` does, unevenly where ``pp`` does not divide them), plain
  1F1B (no interleaving: ``llmcalc time --vpp`` prices it for a chosen layout); ``dp`` the rest;
- ``ep`` (MoE): divisors of dp dividing the experts;
- ZeRO 0 to 3; with pipelining 0 and 1 only (as DeepSpeed: ZeRO-2 and -3 shard what every
  micro-batch of a pipeline needs again);
- ``sp`` off and on when tp > 1; full recomputation off and on (selective recomputation changes
  nothing under flash attention, which ``plan`` assumes);
- micro-batch sizes ``b``, powers of two, with ``b x dp`` dividing the global batch:
  ``global / (b x dp)`` micro-batches per step; up to the first size that fits neither with nor
  without recomputation (a GPU's memory grows with ``b``: under 1F1B a stage keeps
  ``min(p - s, m)`` micro-batches, and ``b x m`` is fixed).

A layout is kept when its peak GPU (:func:`analysis.cluster.memory.memory`) fits in the hardware's
memory; kept layouts are ranked by expected step time (:mod:`analysis.cluster.step`: calibrated
compute, exposed communication), then by memory. With LoRA adapters every layout trains them on
the frozen base (:mod:`analysis.cluster.sharding`). The candidates share one store of the work
they have in common (``shared`` of :func:`memory` and :func:`step`: a TP rank's pass, a stage's
layers, a dimension's collectives), so each is figured once.

:func:`ranked` (`plan`, but with ``--all``) gives the first ``top`` of them without figuring every step: each
candidate's memory from each distinct stage's state and saves (:func:`_weigh`), then steps, best
bound first, only for those whose lower bounds (:func:`analysis.cluster.step.floors`,
:func:`analysis.cluster.step.data_parallel_floor`) can still reach the ``top``, and the memory breakdown
of the ``top`` alone.
"""

import dataclasses
import functools
import heapq
import math
from collections.abc import Callable
from typing import NamedTuple

from ..count.memory import MemoryReport
from ..errors import SpecError
from ..model.config import ModelConfig
from ..perf.calibration import Efficiency
from ..perf.hardware import Hardware
from ..perf.roofline import Utilization, utilization
from ..spec import Layout, LoRA, RunSpec, in_flight
from .memory import memory, stage_states, transient
from .sharding import (
    check_layout,
    cp_local,
    distinct_stages,
    one_gpu_only,
    recomputed_layer,
    save_terms,
    zero_stages,
)
from .step import MARGIN, Floor, Step, data_parallel_floor, floors, stage_floors, step, training_idle_slots

MAX_GPUS = 1 << 20
MIN_CP_CHUNK = 4096  # tokens of a sequence per context-parallel GPU


class Candidate(NamedTuple):
    run: RunSpec  # one GPU's micro-batch, with the layout
    memory: MemoryReport  # the peak GPU's
    step: Step | None  # None: it does not fit
    mfu: float | None  # at the ideal throughput
    expected_mfu: float | None  # at the expected throughput

    @property
    def fits(self) -> bool:
        return self.step is not None


def divisors(n: int) -> list[int]:
    """Ascending: those up to the square root, then their cofactors."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return small + [n // d for d in reversed(small) if d * d != n]


class Split(NamedTuple):
    """A :class:`Layout` before micro-batches, as :func:`layouts` enumerates them (a plain tuple: cheap)."""

    tp: int
    pp: int
    dp: int
    ep: int
    zero: int
    sp: bool
    cp: int

    def layout(self, micro_batches: int | None = None) -> Layout:
        return Layout(self.tp, self.pp, self.dp, self.ep, self.zero, self.sp, micro_batches, self.cp)


def layouts(cfg: ModelConfig, gpus: int, per_node: int | None, seq: int) -> list[Layout]:
    """Every (tp, cp, pp, dp, ep, zero, sp) for ``gpus`` GPUs and sequences of ``seq`` tokens
    (module docstring), before micro-batches."""
    return [split.layout() for split in splits(cfg, gpus, per_node, seq)]


def splits(cfg: ModelConfig, gpus: int, per_node: int | None, seq: int) -> list[Split]:
    """:func:`layouts` as :class:`Split` tuples."""
    out = []
    for tp in divisors(gpus):
        if (per_node and tp > per_node) or cfg.n_heads % tp:
            continue
        for cp in divisors(gpus // tp):
            if cp > 1 and (seq % cp or seq // cp < MIN_CP_CHUNK):
                continue
            for pp in divisors(gpus // (tp * cp)):
                if pp > cfg.n_layers:  # uneven stages are fine (analysis.cluster.pipeline); empty ones are not
                    continue
                dp = gpus // (tp * cp * pp)
                moe = cfg.moe
                eps = [ep for ep in divisors(dp) if moe.num_experts % ep == 0] if moe is not None else [1]
                for ep in eps:
                    for zero in zero_stages(pp):
                        if zero and dp * cp == 1:
                            continue
                        for sp in (False, True) if tp > 1 else (False,):
                            out.append(Split(tp, pp, dp, ep, zero, sp, cp))
    return out


def _check(cfg: ModelConfig, gpus: int) -> None:
    if not 0 < gpus <= MAX_GPUS:
        raise SpecError("gpus", f"must be 1 to {MAX_GPUS:,}, got {gpus:,}")
    what = one_gpu_only(cfg)
    if what is not None and gpus > 1:  # as sharding.check_layout refuses each layout
        raise SpecError("gpus", f"{gpus}: {cfg.name} has {what} sized on one GPU only")


def candidates(cfg: ModelConfig, hw: Hardware, gpus: int, seq: int, global_batch: int,
               dtype: str | None = None, eff: Efficiency | None = None, lora: LoRA | None = None,
               weights_dtype: str | None = None, optimizer: str = "adam",
               grad_dtype: str | None = None) -> list[Candidate]:
    """Every valid layout with its peak memory, and step time and MFU where it fits; fitting
    layouts first, fastest (expected) first. ``lora``: adapters on a frozen base stored as
    ``weights_dtype`` (QLoRA), as :func:`analysis.cluster.memory.memory` and :func:`step` size them."""
    _check(cfg, gpus)
    runs = _workloads(cfg, seq, dtype, weights_dtype, lora, optimizer, grad_dtype)
    out = []
    shared: dict = {}  # work the candidates share (memory, step)
    per_gpu: dict[tuple[int, str], Utilization] = {}  # MFU's FLOPs per token, by micro-batch and recomputation
    for layout in layouts(cfg, gpus, hw.gpus_per_node, seq):
        b, fitted = 1, True
        while fitted and global_batch % (b * layout.dp) == 0:
            micro = dataclasses.replace(layout, micro_batches=global_batch // (b * layout.dp))
            fitted = False
            for recompute in ("none", "full"):  # selective changes nothing under flash attention
                run = runs(b, recompute).replace(layout=micro)
                try:
                    report = memory(cfg, run, shared)
                except SpecError as e:  # a rule of this model (sp needing tp to divide seq, KV heads)
                    if not e.field.startswith("layout."):  # one of the run's (QLoRA's format): every layout breaks it
                        raise
                    break
                fits = report.total <= hw.memory
                s = step(cfg, report.run, hw, eff, shared) if fits else None
                mfus = _mfus(cfg, hw, s, gpus, per_gpu) if s is not None else (None, None)
                out.append(Candidate(report.run, report, s, *mfus))
                fitted |= fits
            b *= 2  # memory grows with the micro-batch: past one that fits neither way, none will
    return sorted(out, key=lambda c: (not c.fits, c.step.expected.time_s if c.step else 0.0, c.memory.total))


class Ranking(NamedTuple):
    best: list[Candidate]  # the first ``top`` fitting candidates, as :func:`candidates` ranks them
    fitting: int  # candidates that fit
    weighed: int  # every candidate (``len(candidates(...))``)
    evaluated: int  # those whose step was figured; the others could not rank among the best


class _Weighed(NamedTuple):
    layout: Split
    batch: int
    steps: int  # micro-batches a step: the global batch over batch x dp
    recompute: str
    total: int  # the peak GPU's bytes


def ranked(cfg: ModelConfig, hw: Hardware, gpus: int, seq: int, global_batch: int, top: int,
           dtype: str | None = None, eff: Efficiency | None = None, lora: LoRA | None = None,
           weights_dtype: str | None = None, optimizer: str = "adam", grad_dtype: str | None = None) -> Ranking:
    """The first ``top`` of :func:`candidates` that fit, the same candidates in the same order,
    and how many fit of how many, without figuring every step: every candidate's peak memory (its
    totals alone), then the fitting ones best first by a lower bound of their expected step time
    (:func:`analysis.cluster.step.floors`: the compute, then with the communication no schedule
    overlaps, figured when the compute's comes first; then with the data-parallel communication no overlap
    hides, :func:`analysis.cluster.step.data_parallel_floor`), each step figured when its last bound comes
    first, until the next bound is past the ``top``-th step so far."""
    _check(cfg, gpus)
    shared: dict = {}
    runs = _workloads(cfg, seq, dtype, weights_dtype, lora, optimizer, grad_dtype)
    weighed = _weigh(cfg, gpus, seq, global_batch, hw.gpus_per_node, hw.memory, runs, shared)

    def spec(w: _Weighed) -> RunSpec:
        return runs(w.batch, w.recompute).replace(layout=w.layout.layout(w.steps))

    passes: dict[tuple, RunSpec] = {}  # by (tp, cp, sp, b, recompute): a run of that pass
    computes: dict[tuple, float] = {}  # by (tp, cp, sp, pp, b, recompute): the longest stage's compute
    bounds: dict[tuple, Floor] = {}  # by what they depend on: not dp's collectives, not ZeRO

    def compute_bound(w: _Weighed) -> float:  # floors()' first, figured for each pp of a pass alone
        lay = w.layout
        key = (lay.tp, lay.cp, lay.sp, lay.pp, w.batch, w.recompute)  # sp shortens the elementwise work
        if key not in computes:
            run_key = (lay.tp, lay.cp, lay.sp, w.batch, w.recompute)
            if run_key not in passes:
                passes[run_key] = spec(w)
            computes[key] = max(stage_floors(cfg, passes[run_key], hw, eff, shared, lay.pp).values())
        return (w.steps + training_idle_slots(lay.pp)) * computes[key] * (1 - MARGIN)  # vpp 1

    def floor(w: _Weighed) -> Floor:
        lay = w.layout
        key = (lay.tp, lay.cp, lay.pp, w.batch, w.recompute, lay.ep, lay.sp)
        if key not in bounds:
            bounds[key] = floors(cfg, spec(w), hw, eff, shared)
        return bounds[key]

    # best first: a candidate comes out with its compute's bound, goes back with the communication's, then with
    # the data-parallel communication's, then has its step figured; past the ``top``-th step so far, no bound
    # left can rank
    queue = [(compute_bound(w), i, 0) for i, w in enumerate(weighed) if w.total <= hw.memory]
    fitting = len(queue)
    heapq.heapify(queue)
    kept: list[tuple[float, int, int]] = []  # the best so far, negated: kept[0] is the worst of them
    steps: dict[int, Step] = {}
    while queue and (len(kept) < top or queue[0][0] <= -kept[0][0]):
        _, i, bounded = heapq.heappop(queue)
        w = weighed[i]
        if bounded == 0:
            heapq.heappush(queue, (floor(w).communication, i, 1))
            continue
        if bounded == 1:
            heapq.heappush(queue, (data_parallel_floor(cfg, spec(w), hw, floor(w), shared), i, 2))
            continue
        s = steps[i] = step(cfg, spec(w), hw, eff, shared)
        key = (-s.expected.time_s, -w.total, -i)  # candidates()' order: step, memory, enumeration
        if len(kept) < top:
            heapq.heappush(kept, key)
        elif key > kept[0]:
            heapq.heapreplace(kept, key)
    best = []
    per_gpu: dict[tuple[int, str], Utilization] = {}
    for _, _, i in sorted(kept, reverse=True):
        w, s = weighed[-i], steps[-i]
        report = memory(cfg, spec(w), shared)
        best.append(Candidate(report.run, report, s, *_mfus(cfg, hw, s, gpus, per_gpu)))
    return Ranking(best, fitting, len(weighed), len(steps))


def _mfus(cfg: ModelConfig, hw: Hardware, s: Step, gpus: int,
          per_gpu: dict[tuple[int, str], Utilization]) -> tuple[float, float]:
    """A layout's MFU at its ideal and at its expected throughput (``per_gpu``: a micro-batch's utilization
    on one GPU, by micro-batch size and recomputation, kept between layouts)."""
    key = (s.run.batch, s.run.recompute)
    if key not in per_gpu:
        per_gpu[key] = utilization(cfg, s.run.replace(layout=Layout()), hw, 1.0)
    u = per_gpu[key]._replace(gpus=gpus)
    return u._replace(tokens_per_s=s.tokens_per_s).mfu, u._replace(tokens_per_s=s.expected_tokens_per_s).mfu


def _workloads(cfg: ModelConfig, seq: int, dtype: str | None, weights_dtype: str | None,
               lora: LoRA | None, optimizer: str, grad_dtype: str | None) -> Callable[[int, str], RunSpec]:
    """One GPU's micro-batch of ``b`` sequences under ``recompute``, resolved, before its layout
    (which ``replace`` gives it: resolving does not read the layout), each made once."""
    @functools.cache
    def run(b: int, recompute: str) -> RunSpec:
        return RunSpec("train", seq, b, recompute=recompute, dtype=dtype, weights_dtype=weights_dtype,
                       lora=lora, optimizer=optimizer, grad_dtype=grad_dtype).resolve(cfg)
    return run


def _weigh(cfg: ModelConfig, gpus: int, seq: int, global_batch: int, per_node: int | None, budget: int,
           runs: Callable[[int, str], RunSpec], shared: dict) -> list[_Weighed]:
    """The candidates of :func:`candidates` in its order, each with its peak GPU's total bytes,
    :func:`memory`'s, from each stage's state and what one micro-batch saves on it, of which 1F1B
    keeps ``min(p - s, m)`` (:func:`analysis.cluster.pipeline.held`), plus the attention transient and full
    recomputation's (:func:`.sharding.recomputed_layer`) (``runs``: :func:`_workloads`). The model's rules a
    layout breaks (:func:`check_layout`, whose refusal ends a layout in :func:`candidates`) hang on its (tp, cp,
    pp, ep, sp) alone: checked once for each."""
    out: list[_Weighed] = []
    broken: dict[tuple, bool] = {}  # (tp, cp, pp, ep, sp): breaks one of the model's rules
    states: dict[tuple, list[int]] = {}  # by (tp, pp, ep, zero): each distinct stage's state
    mine: dict[tuple, RunSpec] = {}  # by (b, recompute, tp, cp): a GPU's share of the run
    saves: dict[tuple, list[tuple[int, int]]] = {}  # by (b, recompute, tp, cp, sp, pp): each distinct stage's saves
    # a micro-batch, and its full recomputation's and attention's transients
    for layout in splits(cfg, gpus, per_node, seq):
        tp, cp, pp, ep, sp = rules = layout.tp, layout.cp, layout.pp, layout.ep, layout.sp
        if broken.get(rules):
            continue
        firsts = distinct_stages(cfg, pp)  # the first stage of those alike keeps the most
        # cp changes no state: the GPUs holding the same parameters, dp x cp, are gpus / (tp x pp)
        state_key = (tp, pp, ep, layout.zero)
        b, fitted = 1, True
        while fitted and global_batch % (b * layout.dp) == 0:
            m = global_batch // (b * layout.dp)
            fitted = False
            for recompute in ("none", "full"):  # selective changes nothing under flash attention
                if gpus == 1:
                    total = memory(cfg, runs(b, recompute).replace(layout=layout.layout(m))).total
                else:
                    run = None  # made when a figure below needs it
                    if rules not in broken:  # the first run of these rules: does memory() refuse it?
                        run = runs(b, recompute).replace(layout=layout.layout(m))
                        try:
                            check_layout(cfg, run)
                        except SpecError as e:  # as candidates(): a rule of this model, or one of the run's
                            if not e.field.startswith("layout."):
                                raise
                            broken[rules] = True
                            break
                        broken[rules] = False
                    mine_key = (b, recompute, tp, cp)
                    if state_key not in states or mine_key not in mine:
                        if run is None:
                            run = runs(b, recompute).replace(layout=layout.layout(m))
                        if state_key not in states:
                            states[state_key] = stage_states(cfg, run, shared, [s for s, _ in firsts])
                        if mine_key not in mine:
                            mine[mine_key] = cp_local(run).replace(layout=Layout())
                    one = mine[mine_key]
                    saves_key = (b, recompute, tp, cp, sp, pp)
                    if saves_key not in saves:
                        terms, whole = save_terms(cfg, one, tp, sp), runs(b, recompute)  # whole sequences
                        saves[saves_key] = [(terms.chunk(layers, s == 0, s == pp - 1), recomputed_layer(
                            cfg, one, tp, sp, layers) + transient(cfg, whole, tp, layers)) for s, layers in firsts]
                    state, saved = states[state_key], saves[saves_key]
                    total = max(state[j] + in_flight(pp, s, m) * kept + rerun
                                for j, ((s, _), (kept, rerun)) in enumerate(zip(firsts, saved)))
                out.append(_Weighed(layout, b, m, recompute, total))
                fitted |= total <= budget
            b *= 2
    return out
