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
"""

import dataclasses
from typing import NamedTuple

from ..count.memory import MemoryReport
from ..errors import SpecError
from ..model.config import ModelConfig
from ..perf.calibration import Efficiency
from ..perf.hardware import Hardware
from ..perf.roofline import Utilization, utilization
from ..spec import Layout, LoRA, RunSpec
from .memory import memory
from .step import Step, step

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


def layouts(cfg: ModelConfig, gpus: int, per_node: int | None, seq: int) -> list[Layout]:
    """Every (tp, cp, pp, dp, ep, zero, sp) for ``gpus`` GPUs and sequences of ``seq`` tokens
    (module docstring), before micro-batches."""
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
                            out.append(Layout(tp, pp, dp, ep, zero, sp, cp=cp))
    return out


def candidates(cfg: ModelConfig, hw: Hardware, gpus: int, seq: int, global_batch: int,
               dtype: str | None = None, eff: Efficiency | None = None, lora: LoRA | None = None,
               weights_dtype: str | None = None) -> list[Candidate]:
    """Every valid layout with its peak memory, and step time and MFU where it fits; fitting
    layouts first, fastest (expected) first. ``lora``: adapters on a frozen base stored as
    ``weights_dtype`` (QLoRA), as :func:`analysis.memory.memory` and :func:`step` size them."""
    if not 0 < gpus <= MAX_GPUS:
        raise SpecError("gpus", f"must be 1 to {MAX_GPUS:,}, got {gpus:,}")
    if cfg.vision is not None and gpus > 1:  # as sharding.check_layout refuses each layout
        raise SpecError("gpus", f"{gpus}: {cfg.name} has a vision tower, which is sized on one GPU only")
    if cfg.has_recurrent and gpus > 1:  # as sharding.check_layout refuses each layout
        raise SpecError("gpus", f"{gpus}: {cfg.name} has {cfg.recurrent_kind} layers, which are sized on one GPU only")
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
