"""A step on a cluster: each pipeline stage's compute, the pipeline bubble and the communication
(DESIGN.md section 9; the layout's conventions are in :mod:`analysis.parallel`, the collectives in
:mod:`analysis.comm`).

- compute: the roofline (:mod:`analysis.timing`) of one micro-batch on the TP rank's model. A
  stage runs its share of the layers' time (by their forward matmul FLOPs, so uneven layer plans
  give uneven stages), the first stage also the embedding, the last the LM head and its
  soft-capping. The optimizer step runs once per step, on the stage's optimizer state (ZeRO-1 and
  up: its ``1/dp`` shard);
- pipeline (1F1B): ``m`` micro-batches through ``p`` stages take ``m + p - 1`` slots of the
  slowest stage (its compute plus its per-micro-batch communication); the bubble is the
  ``p - 1`` idle slots, ``(p - 1) / (m + p - 1)`` of the pipelined time; interleaved over ``v``
  model chunks a stage, ``(p - 1) / v`` idle slots (Narayanan et al. 2021). An inference pass is
  one micro-batch unless ``micro_batches`` says otherwise;
- context parallelism: a GPU runs the ``S/cp`` tokens it holds, and ``1/cp`` of the whole
  sequence's attention core (scores, softmax, values: causal load balancing, as Megatron's CP
  splits each sequence into ``2 cp`` chunks);
- communication: bytes each GPU sends over its group's link. Ranks are numbered tp fastest, then
  cp, then dp (ep inside it), then pp, so a group spans ``tp`` GPUs (tp), ``tp x cp`` (cp),
  ``tp x cp x dp`` (dp), ``tp x cp x ep`` (ep) or all of them (pp); it uses the hardware's
  ``intra_node`` bandwidth when that span fits in ``gpus_per_node`` (or no node size is given),
  else ``inter_node``. Communication is not overlapped with compute: the step time is an upper
  bound, the same for every layout compared.
"""

import dataclasses
from typing import NamedTuple

from ..count.flops import core_keys, count_flops
from ..count.params import count_params
from ..errors import ConfigError
from ..model.config import ModelConfig
from ..perf.hardware import Hardware
from ..perf.roofline import Component, Efficiency, Roofline, roofline
from ..spec import Layout, RunSpec
from .comm import Collective, collectives
from .sharding import check_layout, cp_local, gpu_state, in_stage, tp_local

FIRST_STAGE = ("embedding", "embedding/scale", "position", "norm/embedding")
LAST_STAGE = ("lm_head", "lm_head/softcap")


class Step(NamedTuple):
    run: RunSpec  # resolved, one GPU's micro-batch, with the layout
    compute_s: tuple[float, ...]  # one micro-batch on each stage
    comm_s: tuple[float, ...]  # each stage's per-micro-batch communication over the step
    drain_comm_s: float  # once per step, after the pipeline drains (the longest of the stages')
    optimizer_s: float  # the optimizer step (the longest of the stages')
    collectives: tuple[Collective, ...]  # the slowest stage's
    stage: int  # the slowest stage: the longest pipeline slot
    components: dict[str, Component]  # the slowest stage's micro-batch compute, by component

    @property
    def micro_batches(self) -> int:
        return self.run.layout.steps

    def slot_s(self, stage: int) -> float:
        """One pipeline slot of ``stage``: a micro-batch's compute and communication."""
        return self.compute_s[stage] + self.comm_s[stage] / self.micro_batches

    @property
    def idle_slots(self) -> float:
        """Slots of the slowest stage the pipeline idles: ``p - 1``, ``(p - 1) / v`` interleaved."""
        return (self.run.layout.pp - 1) / self.run.layout.vpp

    @property
    def bubble_s(self) -> float:
        return self.idle_slots * self.slot_s(self.stage)

    @property
    def bubble(self) -> float:
        """The bubble's share of the pipelined time, (p - 1) / (m + p - 1); interleaved,
        ((p - 1) / v) / (m + (p - 1) / v)."""
        return self.idle_slots / (self.micro_batches + self.idle_slots)

    @property
    def communication_s(self) -> float:
        return self.comm_s[self.stage] + self.drain_comm_s

    @property
    def time_s(self) -> float:
        m = self.micro_batches
        return m * self.compute_s[self.stage] + self.bubble_s + self.communication_s + self.optimizer_s

    @property
    def compute(self) -> Roofline:
        """The slowest stage's compute over the step (every micro-batch), by component."""
        return Roofline(self.run, {k: _scaled(c, self.micro_batches) for k, c in self.components.items()})

    @property
    def parts_s(self) -> dict[str, float]:
        """The step's time in four parts: the slowest stage's compute for every micro-batch, the
        pipeline bubble, the communication it waits for, the optimizer step."""
        return {"compute": self.micro_batches * self.compute_s[self.stage], "bubble": self.bubble_s,
                "communication": self.communication_s, "optimizer": self.optimizer_s}

    @property
    def tokens(self) -> int:
        """Tokens per step over all GPUs (each data-parallel replica runs every micro-batch)."""
        return self.run.layout.dp * self.micro_batches * self.run.tokens

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.time_s

    @property
    def sent(self) -> int:
        return sum(c.sent for c in self.collectives)


def link(hw: Hardware, layout: Layout, group: str) -> float:
    """Bytes/s per direction of the link ``group``'s GPUs share (module docstring)."""
    tc = layout.tp * layout.cp
    span = {"tp": layout.tp, "cp": tc, "dp": tc * layout.dp, "dp/ep": tc * layout.dp,
            "ep": tc * layout.ep}.get(group, layout.gpus)  # pp, pp ends: across the stages
    inside = hw.gpus_per_node is None or span <= hw.gpus_per_node
    rate = hw.intra_node if inside else hw.inter_node
    if rate is None:
        key = "interconnect.intra_node" if inside else "interconnect.inter_node"
        raise ConfigError(f"{hw.name} gives no {'intra' if inside else 'inter'}-node bandwidth, needed for "
                          f"{group} over {span} GPUs (per node: {hw.gpus_per_node})", hw.name, key)
    return rate


def step(cfg: ModelConfig, run: RunSpec, hw: Hardware, eff: Efficiency | None = None) -> Step:
    """A training step (``run.layout.steps`` micro-batches of ``run.batch`` sequences per GPU)
    or an inference pass, on the layout's GPUs."""
    eff = eff or Efficiency()
    run.no_images("step")
    run = run.resolve(cfg)
    layout = run.layout
    if run.mode != "train" and layout.micro_batches is None:
        layout = dataclasses.replace(layout, micro_batches=1)
        run = run.replace(layout=layout)
    check_layout(cfg, run)
    local = tp_local(cfg, layout.tp)
    pass_ = roofline(local, cp_local(run).replace(layout=Layout()), hw, eff)
    parts = dict(pass_.components)
    if layout.cp > 1:  # ring attention: each GPU computes 1/cp of the whole sequence's attention
        sequence = roofline(local, run.replace(layout=Layout()), hw, eff).components
        parts.update({k: _scaled(sequence[k], 1 / layout.cp) for k in core_keys(local, pass_.run) if k in sequence})
    optimizer = parts.pop("optimizer").time_s if "optimizer" in parts else 0.0

    groups = count_flops(local, pass_.run).groups
    work = [sum(mm.values()) for _, mm in groups]
    whole = sum(w * g.count for w, (g, _) in zip(work, groups))
    total_params = count_params(local).total
    compute, comm, drain, opt, stage_collectives, stage_parts = [], [], [], [], [], []
    for s in range(layout.pp):
        share = sum(work[i] * n for i, n in in_stage(local, layout, s)) / whole
        ends = (FIRST_STAGE if s == 0 else ()) + (LAST_STAGE if s == layout.pp - 1 else ())
        mine = {k: c if k in ends else _scaled(c, share) for k, c in parts.items()
                if k in ends or k not in FIRST_STAGE + LAST_STAGE}
        stage_parts.append(mine)
        compute.append(sum(c.time_s for c in mine.values()))
        cs = collectives(cfg, run, s)
        comm.append(sum(c.sent / link(hw, layout, c.group) for c in cs if c.per_micro_batch))
        drain.append(sum(c.sent / link(hw, layout, c.group) for c in cs if not c.per_micro_batch))
        opt.append(optimizer * gpu_state(cfg, layout, s).optimizer / total_params)
        stage_collectives.append(tuple(cs))
    m = layout.steps
    slowest = max(range(layout.pp), key=lambda s: compute[s] + comm[s] / m)  # it sets the pipeline's pace
    return Step(run, tuple(compute), tuple(comm), max(drain), max(opt), stage_collectives[slowest], slowest,
                stage_parts[slowest])


def _scaled(c: Component, f: float) -> Component:
    """A component's work times ``f`` (a stage's share of the layers, a GPU's of the attention)."""
    return Component(round(c.matmul_flops * f), round(c.elementwise_flops * f), round(c.bytes * f),
                     c.compute_s * f, c.memory_s * f)
