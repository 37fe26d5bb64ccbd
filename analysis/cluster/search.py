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

A layout is kept when its peak GPU (:func:`analysis.memory.memory`) fits in the hardware's
memory; kept layouts are ranked by expected step time (:mod:`analysis.cluster.step`: calibrated
compute, exposed communication), then by memory. With LoRA adapters every layout trains them on
the frozen base (:mod:`analysis.cluster.sharding`). The candidates share one store of the work
they have in common (``shared`` of :func:`memory` and :func:`step`: a TP rank's pass, a stage's
layers, a dimension's collectives), so each is figured once.

:func:`ranked` (`plan`'s table) gives the first ``top`` of them without figuring every step: each
candidate's memory from each distinct stage's state and saves (:func:`_weigh`), then steps only for
those whose lower bound (:func:`analysis.cluster.step.floors`) can still reach the ``top``.
"""

import dataclasses
import heapq
from typing import NamedTuple

from ..count.memory import MemoryReport
from ..errors import SpecError
from ..model.config import ModelConfig
from ..perf.calibration import Efficiency
from ..perf.hardware import Hardware
from ..perf.roofline import Utilization, utilization
from ..spec import Layout, LoRA, RunSpec
from .memory import memory, stage_states, transient
from .sharding import check_layout, cp_local, distinct_stages, stage_save_totals
from .step import MARGIN, Step, floors, stage_floors, step

MAX_GPUS = 1 << 20
MIN_CP_CHUNK = 4096  # tokens of a sequence per context-parallel GPU


class Candidate(NamedTuple):
    run: RunSpec  # one GPU's micro-batch, with the layout
    memory: MemoryReport  # the peak GPU's
    step: Step | None  # None: it does not fit
    mfu: float | None  # at the expected throughput

    @property
    def fits(self) -> bool:
        return self.step is not None


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


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
                    for zero in (0, 1) if pp > 1 else (0, 1, 2, 3):
                        if zero and dp * cp == 1:
                            continue
                        for sp in (False, True) if tp > 1 else (False,):
                            out.append(Split(tp, pp, dp, ep, zero, sp, cp))
    return out


def _check(cfg: ModelConfig, gpus: int) -> None:
    if not 0 < gpus <= MAX_GPUS:
        raise SpecError("gpus", f"must be 1 to {MAX_GPUS:,}, got {gpus:,}")
    if cfg.vision is not None and gpus > 1:  # as sharding.check_layout refuses each layout
        raise SpecError("gpus", f"{gpus}: {cfg.name} has a vision tower, which is sized on one GPU only")
    if cfg.has_recurrent and gpus > 1:  # as sharding.check_layout refuses each layout
        raise SpecError("gpus", f"{gpus}: {cfg.name} has {cfg.recurrent_kind} layers, which are sized on one GPU only")


def candidates(cfg: ModelConfig, hw: Hardware, gpus: int, seq: int, global_batch: int,
               dtype: str | None = None, eff: Efficiency | None = None, lora: LoRA | None = None,
               weights_dtype: str | None = None) -> list[Candidate]:
    """Every valid layout with its peak memory, and step time and MFU where it fits; fitting
    layouts first, fastest (expected) first. ``lora``: adapters on a frozen base stored as
    ``weights_dtype`` (QLoRA), as :func:`analysis.memory.memory` and :func:`step` size them."""
    _check(cfg, gpus)
    out = []
    shared: dict = {}  # work the candidates share (memory, step)
    per_gpu: dict[tuple[int, str], Utilization] = {}  # MFU's FLOPs per token, by micro-batch and recomputation
    for layout in layouts(cfg, gpus, hw.gpus_per_node, seq):
        b, fitted = 1, True
        while fitted and global_batch % (b * layout.dp) == 0:
            micro = dataclasses.replace(layout, micro_batches=global_batch // (b * layout.dp))
            fitted = False
            for recompute in ("none", "full"):  # selective changes nothing under flash attention
                run = RunSpec("train", seq, b, recompute=recompute, dtype=dtype, weights_dtype=weights_dtype,
                              layout=micro, lora=lora)
                try:
                    report = memory(cfg, run, shared)
                except SpecError as e:  # a rule of this model (sp needing tp to divide seq, KV heads)
                    if not e.field.startswith("layout."):  # one of the run's (QLoRA's format): every layout breaks it
                        raise
                    break
                fits = report.total <= hw.memory
                s = step(cfg, report.run, hw, eff, shared) if fits else None
                if s is not None and (b, recompute) not in per_gpu:
                    per_gpu[b, recompute] = utilization(cfg, s.run.replace(layout=Layout()), hw, 1.0)
                mfu = per_gpu[b, recompute]._replace(tokens_per_s=s.expected_tokens_per_s, gpus=gpus).mfu if s else None
                out.append(Candidate(report.run, report, s, mfu))
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
    recompute: str
    total: int  # the peak GPU's bytes


def ranked(cfg: ModelConfig, hw: Hardware, gpus: int, seq: int, global_batch: int, top: int,
           dtype: str | None = None, eff: Efficiency | None = None, lora: LoRA | None = None,
           weights_dtype: str | None = None) -> Ranking:
    """The first ``top`` of :func:`candidates` that fit, the same candidates in the same order,
    and how many fit of how many, without figuring every step: every candidate's peak memory (its
    totals alone), then the fitting ones in the order of a lower bound of their expected step time
    (:func:`analysis.cluster.step.floors`: the compute, then with the communication no schedule
    overlaps), each step figured only while its bound can still rank it among the best ``top``."""
    _check(cfg, gpus)
    shared: dict = {}
    weighed = _weigh(cfg, gpus, seq, global_batch, hw.gpus_per_node, hw.memory, dtype, lora, weights_dtype, shared)
    fitting = [(i, w) for i, w in enumerate(weighed) if w.total <= hw.memory]

    def spec(w: _Weighed) -> RunSpec:
        m = global_batch // (w.batch * w.layout.dp)
        return _spec(w.layout, w.batch, w.recompute, m, seq, dtype, weights_dtype, lora)

    passes: dict[tuple, RunSpec] = {}  # by (tp, cp, b, recompute): a run of that pass
    computes: dict[tuple, float] = {}  # by (tp, cp, pp, b, recompute): the longest stage's compute
    bounds: dict[tuple, float] = {}  # by what they depend on: not dp's collectives, not ZeRO

    def compute_bound(w: _Weighed) -> float:  # floors()' first, figured for each pp of a pass alone
        lay = w.layout
        key = (lay.tp, lay.cp, lay.pp, w.batch, w.recompute)
        if key not in computes:
            run_key = (lay.tp, lay.cp, w.batch, w.recompute)
            if run_key not in passes:
                passes[run_key] = spec(w).resolve(cfg)
            computes[key] = max(stage_floors(cfg, passes[run_key], hw, eff, shared, lay.pp).values())
        return (global_batch // (w.batch * lay.dp) + lay.pp - 1) * computes[key] * (1 - MARGIN)

    def bound(w: _Weighed) -> float:
        lay = w.layout
        key = (lay.tp, lay.cp, lay.pp, w.batch, w.recompute, lay.ep, lay.sp)
        if key not in bounds:
            bounds[key] = floors(cfg, spec(w).resolve(cfg), hw, eff, shared)[1]
        return bounds[key]

    order = sorted((compute_bound(w), i, w) for i, w in fitting)
    kept: list[tuple[float, int, int]] = []  # the best so far, negated: kept[0] is the worst of them
    found: dict[int, Candidate] = {}
    per_gpu: dict[tuple[int, str], Utilization] = {}
    for floor, i, w in order:
        if len(kept) >= top and floor > -kept[0][0]:  # nor any after it
            break
        if len(kept) >= top and bound(w) > -kept[0][0]:
            continue
        report = memory(cfg, spec(w), shared)
        s = step(cfg, report.run, hw, eff, shared)
        if (w.batch, w.recompute) not in per_gpu:
            per_gpu[w.batch, w.recompute] = utilization(cfg, s.run.replace(layout=Layout()), hw, 1.0)
        mfu = per_gpu[w.batch, w.recompute]._replace(tokens_per_s=s.expected_tokens_per_s, gpus=gpus).mfu
        found[i] = Candidate(report.run, report, s, mfu)
        key = (-s.expected.time_s, -report.total, -i)
        if len(kept) < top:
            heapq.heappush(kept, key)
        elif key > kept[0]:
            heapq.heapreplace(kept, key)
    best = [found[-i] for _, _, i in sorted(kept, reverse=True)]
    return Ranking(best, len(fitting), len(weighed), len(found))


def _spec(split: Split, b: int, recompute: str, m: int, seq: int, dtype: str | None, weights_dtype: str | None,
          lora: LoRA | None) -> RunSpec:
    return RunSpec("train", seq, b, recompute=recompute, dtype=dtype, weights_dtype=weights_dtype,
                   layout=split.layout(m), lora=lora)


def _weigh(cfg: ModelConfig, gpus: int, seq: int, global_batch: int, per_node: int | None, budget: int,
           dtype: str | None, lora: LoRA | None, weights_dtype: str | None, shared: dict) -> list[_Weighed]:
    """The candidates of :func:`candidates` in its order, each with its peak GPU's total bytes,
    :func:`memory`'s, from each stage's state and what one micro-batch saves on it, of which 1F1B
    keeps ``min(p - s, m)`` (:func:`analysis.cluster.pipeline.held`), plus the attention transient.
    The model's rules a layout breaks (:func:`check_layout`, whose refusal ends a layout in
    :func:`candidates`) hang on its (tp, cp, pp, ep, sp) alone: checked once for each."""
    out: list[_Weighed] = []
    broken: dict[tuple, bool] = {}  # (tp, cp, pp, ep, sp): breaks one of the model's rules
    states: dict[tuple, list[int]] = {}
    saves: dict[tuple, list[int]] = {}
    mine: dict[tuple, tuple[RunSpec, int]] = {}  # by (b, recompute, tp, cp): a GPU's share of the run, its transient
    for layout in splits(cfg, gpus, per_node, seq):
        tp, cp, pp, ep, sp = rules = layout.tp, layout.cp, layout.pp, layout.ep, layout.sp
        if broken.get(rules):
            continue
        b, fitted = 1, True
        while fitted and global_batch % (b * layout.dp) == 0:
            m = global_batch // (b * layout.dp)
            fitted = False
            for recompute in ("none", "full"):  # selective changes nothing under flash attention
                state_key, saves_key = (tp, cp, pp, ep, layout.zero), (b, recompute, tp, cp, ep, sp, pp)
                if gpus == 1:
                    total = memory(cfg, _spec(layout, b, recompute, m, seq, dtype, weights_dtype, lora)).total
                else:
                    if rules not in broken:  # the first run of these rules: does memory() refuse it?
                        run = _spec(layout, b, recompute, m, seq, dtype, weights_dtype, lora)
                        try:
                            check_layout(cfg, run.resolve(cfg))
                        except SpecError as e:  # as candidates(): a rule of this model, or one of the run's
                            if not e.field.startswith("layout."):
                                raise
                            broken[rules] = True
                            break
                        broken[rules] = False
                    firsts = distinct_stages(cfg, pp)  # the first stage of those alike keeps the most
                    if state_key not in states or (b, recompute, tp, cp) not in mine:
                        run = _spec(layout, b, recompute, m, seq, dtype, weights_dtype, lora).resolve(cfg)
                        if state_key not in states:
                            state = stage_states(cfg, run, shared)
                            states[state_key] = [state[s] for s in firsts]
                        if (b, recompute, tp, cp) not in mine:
                            mine[b, recompute, tp, cp] = (cp_local(run).replace(layout=Layout()), transient(cfg, run))
                    one, attention = mine[b, recompute, tp, cp]
                    if saves_key not in saves:
                        saves[saves_key] = stage_save_totals(cfg, one, tp, ep, sp, pp, firsts)
                    state, saved = states[state_key], saves[saves_key]
                    total = attention + max(state[j] + min(pp - s, m) * saved[j] for j, s in enumerate(firsts))
                out.append(_Weighed(layout, b, recompute, total))
                fitted |= total <= budget
            b *= 2
    return out
