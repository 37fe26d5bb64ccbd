"""A step on a cluster: each pipeline stage's compute, the pipeline bubble and the communication
(DESIGN.md section 9; the layout's conventions are in :mod:`analysis.cluster.sharding`, the collectives in
:mod:`analysis.cluster.comm`).

- compute: the roofline (:mod:`analysis.perf.roofline`) of one micro-batch on the TP rank's model. A
  stage runs its share of each of the layers' components (:mod:`.shares`: of the component's work, so
  uneven layer plans and hybrid ones give uneven stages), the first stage also the embedding, the last
  the LM head and its soft-capping. The optimizer step runs once per step, on the stage's optimizer state (ZeRO-1 and
  up: its ``1/dp`` shard);
- pipeline (1F1B): ``m`` micro-batches through ``p`` stages take ``m + p - 1`` slots of the
  slowest stage (its compute plus its per-micro-batch communication); the bubble is the
  ``p - 1`` idle slots, ``(p - 1) / (m + p - 1)`` of the pipelined time; interleaved over ``v``
  model chunks a stage, ``(p - 1) / v`` idle slots (Narayanan et al. 2021). An inference pass is
  one micro-batch unless ``micro_batches`` says otherwise: ``m`` batches in flight, as a serving engine
  keeps them (vLLM runs ``pp`` of them at once), whose passes follow one another without the pipeline
  draining: a pass of each takes the longer of ``m`` slots of the slowest stage and one batch's way through
  every stage (the sum of the stages' slots), the difference idle (``p - m`` slots of even stages);
- context parallelism: a GPU runs the ``S/cp`` tokens it holds, and its share of the whole sequence's
  attention core (scores, softmax, values), as Megatron's CP splits each sequence into ``2 cp`` chunks,
  the busiest GPU's (:func:`.flops.core_share`: ``1/cp`` but under windows and attention chunks);
- sequence parallelism: the residual stream's elementwise work (:data:`SEQUENCE_SHARDED`, and the
  share of the norms :func:`residual_norms` gives) runs on the ``1/tp`` of the tokens a GPU holds,
  in as many kernels; under fp8 (tensorwise) the casts follow torchao's float8 TP plans
  (:func:`analysis.perf.float8.casts` with ``shard``);
- communication: bytes each GPU sends over its group's link. Ranks are numbered tp fastest, then
  cp, then dp (ep inside it), then pp, so a group spans ``tp`` GPUs (tp), ``tp x cp`` (cp),
  ``tp x cp x dp`` (dp), ``tp x cp x ep`` (ep) or all of them (pp); it uses the hardware's
  ``intra_node`` bandwidth when that span fits in ``gpus_per_node`` (or no node size is given),
  else ``inter_node``. Ideal: communication at the link's peak;
- overlap (:func:`_exposed`): data-parallel communication runs beside the compute Megatron-LM
  (``overlap_grad_reduce``, ``overlap_param_gather``), torchtitan (FSDP2's prefetching) and DeepSpeed
  schedule it with, up to an ``overlap`` fraction of that compute: ZeRO-2/3's per-micro-batch
  gradient reduce-scatters beside the backward (two thirds of the compute), their weights'
  all-gathers with them beside forward and backward; the once-per-step gradient reduction beside the
  last micro-batch's backward, the weights' all-gather beside the next step's first forward (one
  third). Tensor-, context-, expert- and pipeline-parallel communication is on the critical path:
  exposed; but with ``async_tp`` (torchtitan's asynchronous TP: each all-gather before a region's
  column-parallel matmuls and each reduce-scatter after its row-parallel one split into ``tp``
  chunks beside the matmul's chunks, PyTorch's SymmetricMemory collective matmuls) a region's
  collectives hide behind ``(tp - 1) / tp`` of its linears' forward and input-gradient time
  (:func:`_async_tp`). The step reports the exposed part. Ideal: all of it hidden behind the compute it can
  overlap (``overlap`` 1, the most optimistic schedule), so that no expected step beats it.

Expected (DESIGN.md section 11): each stage's compute at its components' expected times; each
collective by the alpha-beta model (:func:`analysis.perf.calibration.collective_s`); the calibration's
``overlap``.
"""

from typing import NamedTuple

from ..count.flops import FIRST_STAGE, LAST_STAGE, core_keys
from ..count.lora import adapter_params
from ..count.params import count_params
from ..count.recompute import rerun_linears
from ..errors import ConfigError
from ..model.architecture import build
from ..model.config import ModelConfig
from ..model.formats import ROUTERS
from ..perf.calibration import Efficiency, Link, collective_s
from ..perf.float8 import CASTS, casts
from ..perf.hardware import Hardware
from ..perf.roofline import Component, Roofline, roofline
from ..spec import Layout, RunSpec
from .comm import DIMENSIONS, REGATHERED, Collective, collective_groups
from .flops import core_share
from .sharding import check_layout, cp_local, gpu_state, stage_keys, tp_local, workload
from .shares import LayerWork, layer_work

MARGIN = 1e-9  # :func:`floors`' below the figures they bound, for sums rounded in another order


class Step(NamedTuple):
    run: RunSpec  # resolved, one GPU's micro-batch, with the layout
    compute_s: tuple[float, ...]  # one micro-batch on each stage
    comm_s: tuple[float, ...]  # each stage's exposed per-micro-batch communication over the step
    drain_comm_s: float  # exposed, once per step, after the pipeline drains (the longest of the stages')
    optimizer_s: float  # the optimizer step (the longest of the stages')
    collectives: tuple[Collective, ...]  # the slowest stage's
    collectives_s: tuple[float, ...]  # each of them at its link's peak, before overlap
    stage: int  # the slowest stage: the longest pipeline slot
    components: dict[str, Component]  # the slowest stage's micro-batch compute, by component
    expected: "Expected"

    @property
    def micro_batches(self) -> int:
        return self.run.layout.steps

    def slot_s(self, stage: int) -> float:
        return slot_s(self.compute_s[stage], self.comm_s[stage], self.micro_batches)

    @property
    def idle_slots(self) -> float:
        return idle_slots(self.run, self.compute_s, self.comm_s)

    @property
    def bubble_s(self) -> float:
        return self.parts_s["bubble"]

    @property
    def bubble(self) -> float:
        return bubble(self.idle_slots, self.micro_batches)

    @property
    def communication_s(self) -> float:
        return self.parts_s["communication"]

    @property
    def time_s(self) -> float:
        return sum(self.parts_s.values())

    @property
    def compute(self) -> Roofline:
        """The slowest stage's compute over the step (every micro-batch), by component."""
        return Roofline(self.run, {k: _scaled(c, self.micro_batches) for k, c in self.components.items()})

    @property
    def parts_s(self) -> dict[str, float]:
        return _parts_s(self)

    @property
    def tokens(self) -> int:
        """Tokens per step over all GPUs (each data-parallel replica runs every micro-batch)."""
        return self.run.layout.dp * self.micro_batches * self.run.tokens

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.time_s

    @property
    def expected_tokens_per_s(self) -> float:
        return self.tokens / self.expected.time_s

    @property
    def sent(self) -> int:
        return sum(c.sent for c in self.collectives)


class Expected(NamedTuple):
    """The calibrated step (module docstring): the same parts, the communication its exposed part."""

    compute_s: tuple[float, ...]  # one micro-batch on each stage
    comm_s: tuple[float, ...]  # each stage's exposed per-micro-batch communication over the step
    drain_comm_s: float  # exposed, once per step
    optimizer_s: float
    collectives_s: tuple[float, ...]  # each of the ideal's slowest stage's collectives, before overlap
    micro_batches: int
    idle_slots: float

    @property
    def stage(self) -> int:
        """The stage with the longest expected slot: it sets the pipeline's pace."""
        return pacing_stage(self.compute_s, self.comm_s, self.micro_batches)

    def slot_s(self, stage: int) -> float:
        return slot_s(self.compute_s[stage], self.comm_s[stage], self.micro_batches)

    @property
    def bubble(self) -> float:
        return bubble(self.idle_slots, self.micro_batches)

    @property
    def parts_s(self) -> dict[str, float]:
        return _parts_s(self)

    @property
    def time_s(self) -> float:
        return sum(self.parts_s.values())


def slot_s(compute_s: float, comm_s: float, micro_batches: int) -> float:
    """One pipeline slot of a stage: a micro-batch's compute and its share of the stage's exposed
    per-micro-batch communication over the step (module docstring)."""
    return compute_s + comm_s / micro_batches


def pacing_stage(compute_s: tuple[float, ...], comm_s: tuple[float, ...], micro_batches: int) -> int:
    """The stage with the longest :func:`slot_s`: it sets the pipeline's pace."""
    return max(range(len(compute_s)), key=lambda s: slot_s(compute_s[s], comm_s[s], micro_batches))


def idle_slots(run: RunSpec, compute_s: tuple[float, ...], comm_s: tuple[float, ...]) -> float:
    """Slots of the pacing stage a pipeline idles in a step of ``run`` (resolved) whose stages take ``compute_s``
    and ``comm_s``: :func:`training_idle_slots`; in inference, with ``m`` batches in flight, what one batch's way
    through every stage takes past ``m`` slots of the slowest (module docstring)."""
    layout = run.layout
    if run.mode == "train":
        return training_idle_slots(layout.pp, layout.vpp)
    m = layout.steps
    slots = [slot_s(c, k, m) for c, k in zip(compute_s, comm_s)]
    return max(0.0, sum(slots) / max(slots) - m)


def bubble(idle_slots: float, micro_batches: int) -> float:
    """The bubble's share of the pipelined time: in training (p - 1) / (m + p - 1), interleaved
    ((p - 1) / v) / (m + (p - 1) / v); in inference what the stages' own slots leave idle (:func:`idle_slots`)."""
    return idle_slots / (micro_batches + idle_slots)


def training_idle_slots(pp: int, vpp: int = 1) -> float:
    """Slots of the pacing stage a training step's pipeline of ``pp`` stages idles: ``p - 1``, ``(p - 1) / v``
    interleaved."""
    return (pp - 1) / vpp


def _parts_s(p: "Step | Expected") -> dict[str, float]:
    """A step's time in four parts: the pacing stage's compute for every micro-batch, the pipeline
    bubble (its idle slots), the communication it waits for, the optimizer step."""
    s = p.stage
    return {"compute": p.micro_batches * p.compute_s[s], "bubble": p.idle_slots * p.slot_s(s),
            "communication": p.comm_s[s] + p.drain_comm_s, "optimizer": p.optimizer_s}


def link(hw: Hardware, layout: Layout, group: str) -> Link:
    """Bytes/s per direction of the link ``group``'s GPUs share, and whether it is within a node
    (module docstring)."""
    tc = layout.tp * layout.cp
    span = {"tp": layout.tp, "cp": tc, "dp": tc * layout.dp, "dp/ep": tc * layout.dp,
            "ep": tc * layout.ep}.get(group, layout.gpus)  # pp, pp ends: across the stages
    inside = hw.gpus_per_node is None or span <= hw.gpus_per_node
    rate = hw.intra_node if inside else hw.inter_node
    if rate is None:
        key = "interconnect.intra_node" if inside else "interconnect.inter_node"
        per_node = "" if hw.gpus_per_node is None else f" ({hw.gpus_per_node} a node)"
        raise ConfigError(f"{hw.name} gives no {'intra' if inside else 'inter'}-node bandwidth, needed for "
                          f"{group} over {span} GPUs{per_node}", *hw.at(key))
    return Link(rate, inside)


def step(cfg: ModelConfig, run: RunSpec, hw: Hardware, eff: Efficiency | None = None,
         shared: dict | None = None) -> Step:
    """A training step (``run.layout.steps`` micro-batches of ``run.batch`` sequences per GPU)
    or an inference pass, on the layout's GPUs. ``shared``: work kept between calls with the same
    ``cfg``, ``hw`` and ``eff`` (`plan`'s candidates): a pass of the TP rank's model depends on
    (tp, cp, sp) and the workload only, a stage's share of it on the layers the stage holds."""
    eff, cal = eff or Efficiency(), hw.calibration
    run.no_images()
    run = run.resolve(cfg)
    layout = run.layout
    check_layout(cfg, run)
    shared = {} if shared is None else shared
    work_key, (local, parts, optimizer, work, trained) = _pass(cfg, run, hw, eff, shared)
    m = layout.steps
    per_stage: dict[tuple, tuple] = {}  # stages holding the same layers (and ends) give the same figures
    stage_figures = []
    for s, key in enumerate(stage_keys(cfg, layout.pp, layout.vpp)):
        first, last, held = key
        if key not in per_stage:
            ck = (work_key, key)
            if ck not in shared:
                shared[ck] = _stage_compute(parts, work, held, first, last)
            mine, compute, micro = shared[ck]
            cs: list[Collective] = []  # each collective, its time at the link's peak, and expected
            ideal: list[float] = []
            times: list[float] = []
            for group_key, group in collective_groups(cfg, run, s, shared):
                group_ideal, group_times = _timed(hw, layout, group_key, group, shared)
                cs += group
                ideal += group_ideal
                times += group_times
            hides = layout.async_tp and layout.tp > 1
            comm, drain = _exposed(cs, ideal, compute, m, 1.0, _async_tp(local, run, cs, ideal, mine, False)
                                   if hides else 0.0)
            optimized = gpu_state(cfg, layout, s, run.lora).optimizer
            opt = 0.0 if optimizer is None else optimizer.time_s * optimized / trained
            # expected: alpha-beta, and the calibration's overlap
            e_comm, e_drain = _exposed(cs, times, micro, m, cal.overlap, _async_tp(local, run, cs, times, mine, True)
                                       if hides else 0.0)
            e_opt = 0.0 if optimizer is None else optimizer.expected_s * optimized / trained
            per_stage[key] = (mine, compute, comm, drain, opt, tuple(cs), tuple(ideal), micro, tuple(times), e_comm,
                              e_drain, e_opt)
        stage_figures.append(per_stage[key])
    (stage_parts, computes, comms, drains, opts, stage_cs, ideal_collectives, e_computes, e_collectives, e_comms,
     e_drains, e_opts) = map(tuple, zip(*stage_figures))
    slowest = pacing_stage(computes, comms, m)
    expected = Expected(e_computes, e_comms, max(e_drains), max(e_opts), e_collectives[slowest], m,
                        idle_slots(run, e_computes, e_comms))
    return Step(run, computes, comms, max(drains), max(opts), stage_cs[slowest], ideal_collectives[slowest], slowest,
                stage_parts[slowest], expected)


class Floor(NamedTuple):
    """:func:`floors`' lower bounds of a step's expected time, and what :func:`data_parallel_floor` adds to."""

    compute: float  # the longest stage's compute over the pipeline's slots
    communication: float  # with that stage's communication no schedule overlaps
    stage: int  # that stage
    micro_s: float  # its micro-batch's compute, a bound
    per_s: float  # its exposed per-micro-batch communication over the step, but the data-parallel
    once_s: float  # and once a step


def floors(cfg: ModelConfig, run: RunSpec, hw: Hardware, eff: Efficiency | None = None,
           shared: dict | None = None) -> Floor:
    """Lower bounds of :func:`step`'s expected time of a training step (``run`` resolved, its
    layout checked; ``shared`` as :func:`step` keeps it, so that a step after them finds their
    work done), `plan`'s pruning: (compute) the stage of the longest expected compute over all
    ``m + (p - 1) / v`` slots of the pipeline, the bubble's included; (communication) that stage's slot
    also holding its per-micro-batch tensor-, context-, expert- and pipeline-parallel communication, which is
    never overlapped, plus that stage's such communication once per step. Each leaves out what is at least 0
    (data-parallel communication, the optimizer step, the other stages), so that a step never beats them: the
    slowest slot sets the pace and the longest once-per-step communication and optimizer step add to it
    (:class:`Expected`)."""
    layout = run.layout
    shared = {} if shared is None else shared
    micros = stage_floors(cfg, run, hw, eff, shared, layout.pp, layout.vpp)
    m, slots = layout.steps, layout.steps + training_idle_slots(layout.pp, layout.vpp)
    key = max(micros, key=micros.__getitem__)
    compute = slots * micros[key] * (1 - MARGIN)
    s = stage_keys(cfg, layout.pp, layout.vpp).index(key)
    per = at_once = 0.0
    for group_key, group in collective_groups(cfg, run, s, shared, DIMENSIONS[:-1]):
        for c, t in zip(group, _timed(hw, layout, group_key, group, shared)[1]):
            if _overlap_kind(c) == "exposed" and not (layout.async_tp and c.what in TP_REGIONS):
                # as _exposed (async TP may hide the regions' all of it)
                if c.per_micro_batch:
                    per += t
                else:
                    at_once += t
    return Floor(compute, (slots * slot_s(micros[key], per, m) + at_once) * (1 - MARGIN), s, micros[key], per,
                 at_once)


def data_parallel_floor(cfg: ModelConfig, run: RunSpec, hw: Hardware, floor: Floor, shared: dict) -> float:
    """:func:`floors`' communication bound of ``run`` with the data-parallel communication of its stage that no
    overlap hides, as :func:`_exposed` leaves it beside the least micro-batch compute ``floor`` bounds. The step
    grows with that compute at least as fast as the exposed part shrinks (an overlap at most 1): ZeRO-0/1's
    once-a-step collectives hide behind one micro-batch of the ``m + idle`` slots, ZeRO-2's per-micro-batch
    gradients behind two thirds of each and its weights behind a third of one, ZeRO-3's all of them behind
    every micro-batch's compute."""
    layout = run.layout
    m, slots = layout.steps, layout.steps + training_idle_slots(layout.pp, layout.vpp)
    ((group_key, group),) = collective_groups(cfg, run, floor.stage, shared, ("dp",))
    per, once = _exposed(list(group), _timed(hw, layout, group_key, group, shared)[1], floor.micro_s, m,
                         hw.calibration.overlap)
    return (slots * slot_s(floor.micro_s, floor.per_s + per, m) + floor.once_s + once) * (1 - MARGIN)


def _timed(hw: Hardware, layout: Layout, group_key: tuple, group: tuple[Collective, ...],
           shared: dict) -> tuple[list[float], list[float]]:
    """Each collective of the group ``group_key`` of :func:`collective_groups` at its link's peak,
    and expected (alpha-beta), kept in ``shared``: the links span the layout's GPUs."""
    timed = ("timed", layout.gpus, group_key)
    if timed not in shared:
        links = [link(hw, layout, c.group) for c in group]
        shared[timed] = ([c.sent / k.rate for c, k in zip(group, links)],
                         [collective_s(hw.calibration, c.calls, c.sent, k) for c, k in zip(group, links)])
    return shared[timed]


def stage_floors(cfg: ModelConfig, run: RunSpec, hw: Hardware, eff: Efficiency | None, shared: dict, pp: int,
                 vpp: int = 1) -> dict[tuple, float]:
    """Each stage's expected micro-batch compute (by :func:`stage_keys`, those alike once) under
    ``pp`` stages of ``vpp`` chunks, of ``run``'s pass (resolved, its layout's tp and cp, and
    :func:`fastest_ep`'s, which bounds every ep's), as :func:`_stage_compute` figures it but summed in
    another order: less a margin for the rounding. Kept in ``shared`` (each pp of a pass is asked for
    again): not to be changed."""
    work_key, (_, parts, _, work, _) = _pass(cfg, run, hw, eff or Efficiency(), shared, fastest_ep(cfg))
    sums_key = ("floor", work_key)
    if sums_key not in shared:  # the expected time of a layer of each group, the first stage's, the last's
        layers = {k: c.expected_s for k, c in parts.items() if k not in FIRST_STAGE + LAST_STAGE}
        shared[sums_key] = ([sum(t * work.share(k, ((i, 1),)) for k, t in layers.items())
                             for i in range(len(work.per_layer))],
                            sum(c.expected_s for k, c in parts.items() if k in FIRST_STAGE),
                            sum(c.expected_s for k, c in parts.items() if k in LAST_STAGE))
    stages_key = ("floors", work_key, pp, vpp)
    if stages_key not in shared:
        per_layer, first, last = shared[sums_key]
        shared[stages_key] = {key: (sum(per_layer[i] * n for i, n in key[2]) + (first if key[0] else 0.0)
                                    + (last if key[1] else 0.0)) * (1 - MARGIN) for key in stage_keys(cfg, pp, vpp)}
    return shared[stages_key]


def fastest_ep(cfg: ModelConfig) -> int:
    """The expert parallelism whose pass is the fastest: a GPU of an expert-parallel group is never slower
    with fewer experts to read (fewer bytes, more rows a GEMM), so one expert a GPU bounds every ep's."""
    return cfg.moe.num_experts if cfg.moe is not None else 1


def _pass(cfg: ModelConfig, run: RunSpec, hw: Hardware, eff: Efficiency, shared: dict,
          ep: int | None = None) -> tuple[tuple, tuple]:
    """One micro-batch on the TP rank's model (``run`` resolved, with its layout): the model, its
    components (context parallel: the busiest GPU's share of the whole sequence's attention core; sequence
    parallel: the residual stream's elementwise ops on 1/tp of the tokens), the optimizer step, the layers'
    work by component (:func:`.shares.layer_work`), and the parameters the optimizer steps; kept in ``shared``
    under the key returned with it (it depends on tp, cp, sp, ep and the workload alone). Expert parallelism:
    the pass of one GPU of its group of ``ep`` (unless given, the layout's), reading the experts it holds."""
    layout = run.layout
    ep = layout.ep if ep is None else ep
    key = ("pass", layout.tp, layout.cp, layout.sp, ep, workload(run))
    if key in shared:
        return key, shared[key]
    local = tp_local(cfg, layout.tp)

    def pass_of(one: RunSpec) -> Roofline:  # whole sequences: also the pass of the layouts without cp
        roofline_key = ("roofline", layout.tp, ep, workload(one))
        if roofline_key not in shared:
            shared[roofline_key] = roofline(local, one, hw, eff)
        return shared[roofline_key]

    experts = Layout.expert_gpu(ep)
    pass_ = pass_of(cp_local(run).replace(layout=experts))
    parts = dict(pass_.components)
    core = None
    if layout.cp > 1:  # ring attention: a GPU computes its share of the whole sequence's attention core
        whole = pass_of(run.replace(layout=experts))
        share_key = ("core share", layout.tp, layout.cp, workload(run))  # neither sp nor ep changes it
        if share_key not in shared:
            shared[share_key] = core_share(local, run.replace(layout=Layout()).executed(), layout.cp)
        share = shared[share_key]
        keys = {k for k in core_keys(local, pass_.run) if k in whole.components}
        parts.update({k: _scaled(whole.components[k], share[k]) for k in keys})
        core = keys, whole.run
    # torchao's float8 TP plans cast a region's input on the GPU's sequence shard (tensorwise, under sp)
    shard = layout.tp if layout.sp and pass_.run.fp8_scaling == "tensorwise" else 1
    if layout.sp:  # the residual stream's elementwise ops run on the 1/tp of the tokens a GPU holds
        for k in SEQUENCE_SHARDED:
            if k in parts:
                parts[k] = _scaled(parts[k], 1 / layout.tp, kernels=1.0)
        if "norm" in parts:
            f = residual_norms(local)
            parts["norm"] = _scaled(parts["norm"], 1 - f + f / layout.tp, kernels=1.0)
        if CASTS in parts and shard > 1:
            parts[CASTS] = _recounted(parts[CASTS], *casts(local, pass_.run, shard))
    optimizer = parts.pop("optimizer") if "optimizer" in parts else None
    trained = count_params(local).total if run.lora is None else sum(adapter_params(local, run.lora).values())
    work = layer_work(local, pass_.run, core, shard)
    shared[key] = local, parts, optimizer, work, trained
    return key, shared[key]


SEQUENCE_SHARDED = ("residual", "layer_scalar")  # elementwise ops on the residual stream alone


def residual_norms(cfg: ModelConfig) -> float:
    """The share of a token's norm elements that are on the residual stream (the layers' norms
    around their branches and the final norm; not per-head q/k norms or other norms inside a
    tensor-parallel region), the part of the ``norm`` component sequence parallelism splits."""
    model = build(cfg)
    final = model.final_norm.size if model.final_norm is not None else 0
    outside = inside = 0
    for group, block in model.blocks:
        for n in block.norms():
            if n.key.startswith("norm/"):
                outside += group.count * n.size * n.rows
            else:
                inside += group.count * n.size * n.rows
    return (outside + final) / (outside + inside + final) if outside + inside + final else 0.0


def _stage_compute(parts: dict[str, Component], work: LayerWork, held: tuple[tuple[int, int], ...],
                   first: bool, last: bool) -> tuple[dict[str, Component], float, float]:
    """A stage's micro-batch: its share of each of the layers' components (:mod:`.shares`), the embedding on the
    first stage, the head on the last; its ideal and expected time."""
    ends = (FIRST_STAGE if first else ()) + (LAST_STAGE if last else ())
    mine = {k: c if k in ends else _scaled(c, work.share(k, held)) for k, c in parts.items()
            if k in ends or k not in FIRST_STAGE + LAST_STAGE}
    return mine, sum(c.time_s for c in mine.values()), sum(c.expected_s for c in mine.values())


# sp: an all-gather before, a reduce-scatter after (per-op checkpointing runs the all-gathers again)
TP_REGIONS = ("tp region outputs", "tp region input gradients", "tp region outputs, rerun")


def _async_tp(local: ModelConfig, run: RunSpec, cs: list[Collective], times: list[float],
              mine: dict[str, Component], expected: bool) -> float:
    """Seconds of a stage's tensor-parallel region collectives (``cs`` taking ``times``, over the step)
    that asynchronous tensor parallelism hides (module docstring): in each region kind (attention,
    FFN; the collectives split evenly between them, as :func:`.comm._tp` counts two regions a layer),
    ``min(comm, (tp - 1) / tp x matmuls)``, the matmuls being the region's linears in the forward
    passes and backward's input gradients (a linear recomputation runs again: its forward twice, and
    the all-gathers per-op checkpointing runs again with it)."""
    tp, m, train = run.layout.tp, run.layout.steps, run.mode == "train"
    comm = sum(t for c, t in zip(cs, times) if c.group == "tp" and c.what in TP_REGIONS) / 2
    rerun = {lin.key for _, block in build(local).blocks for lin in rerun_linears(block, run)} if train else set()

    def overlapped(key: str) -> float:  # forward(s) and dX of fwd (+ its rerun) + dX + dW
        again = key in rerun
        return (2 + again) / (3 + again) if train else 1.0

    attention, ffn = _region_linears(local)
    hidden = 0.0
    for keys in (attention, ffn):
        mm = sum((mine[k].expected_s if expected else mine[k].time_s) * overlapped(k) for k in keys if k in mine)
        hidden += min(comm, (tp - 1) / tp * mm * m)
    return hidden


def _region_linears(local: ModelConfig) -> tuple[set[str], set[str]]:
    """The linears of the attention and of the FFN tensor-parallel regions, by component: not the
    routers (:data:`ROUTERS`, the shared-expert gate with them), which every TP rank holds whole."""
    keys = {m.key for _, block in build(local).blocks for m in block.linears()}
    return ({k for k in keys if k.startswith("attention/")},
            {k for k in keys if k.startswith(("mlp/", "moe/")) and k not in ROUTERS})


def _overlap_kind(c: Collective) -> str:
    """How a collective meets the compute (module docstring): ``hidden`` (backward's re-gather, beside the
    input gradient's GEMM: :data:`.comm.REGATHERED`), ``exposed`` (tensor-, context-, expert- and pipeline-
    parallel; async TP may hide the regions'), or data-parallel ``weights`` (all-gathers) or ``grads``, which
    run beside the compute up to the overlap."""
    if c.what == REGATHERED:
        return "hidden"
    if c.group not in ("dp", "dp/ep"):
        return "exposed"
    return "weights" if c.kind == "all-gather" else "grads"


def _exposed(cs: list[Collective], times: list[float], micro_s: float, m: int, overlap: float,
             hidden: float = 0.0) -> tuple[float, float]:
    """The exposed part of a stage's collectives ``cs`` taking ``times``, (per micro-batch, once per
    step), beside ``m`` micro-batches of ``micro_s`` compute (module docstring), less ``hidden`` of
    the tensor-parallel ones (:func:`_async_tp`). Per micro-batch, the gradients must fit beside the
    backwards and, with the weights, beside the whole compute."""
    per: dict[str, float] = {}
    once: dict[str, float] = {}
    for c, t in zip(cs, times):
        kind = _overlap_kind(c)
        if kind == "hidden":
            continue
        into = per if c.per_micro_batch else once
        into[kind] = into.get(kind, 0.0) + t
    beside = overlap * micro_s
    grads, weights = per.get("grads", 0.0), per.get("weights", 0.0)
    return (per.get("exposed", 0.0) - hidden + max(0.0, grads - beside * m * 2 / 3, grads + weights - beside * m),
            once.get("exposed", 0.0) + max(0.0, once.get("grads", 0.0) - beside * 2 / 3)
            + max(0.0, once.get("weights", 0.0) - beside / 3))


def _recounted(c: Component, elementwise: int, nbytes: int) -> Component:
    """An elementwise component with other counts, at its own rates."""
    ew, mem = elementwise / c.elementwise_flops if c.elementwise_flops else 0.0, nbytes / c.bytes if c.bytes else 0.0
    return Component(0, elementwise, nbytes, c.compute_s * ew, c.memory_s * mem, c.expected_compute_s * ew,
                     c.expected_memory_s * mem, c.latency_s)


def _scaled(c: Component, f: float, kernels: float | None = None) -> Component:
    """A component's work times ``f`` (a stage's share of the layers, a GPU's of the attention, of
    the tokens), its kernels times ``kernels`` (``f`` unless given: a share of the layers runs a
    share of their kernels, a share of the tokens all of them)."""
    return Component(round(c.matmul_flops * f), round(c.elementwise_flops * f), round(c.bytes * f),
                     c.compute_s * f, c.memory_s * f, c.expected_compute_s * f, c.expected_memory_s * f,
                     c.latency_s * (f if kernels is None else kernels))
