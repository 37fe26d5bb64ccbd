"""Parallel layouts: what one GPU holds (DESIGN.md section 9).

A :class:`Layout` splits a model over ``tp * cp * pp * dp`` GPUs:

- tensor parallel (Megatron), ``tp``: each GPU runs the same layer with ``h/tp`` query heads,
  ``g/tp`` KV heads (one head, replicated ``tp/g`` times, when ``tp > g``), ``1/tp`` of every
  FFN and expert width and ``1/tp`` of the vocabulary (token embedding, LM head and the
  cross-entropy's log-softmax are vocab-parallel). That is :func:`tp_local`: the layer a TP rank
  runs is the model's layer at those sizes, so parameters, KV cache and the activations inside
  the TP region come from the ordinary analytic functions over it. Everything on the residual
  stream is replicated: norms, routers, position tables, row-parallel biases (o, down), MLA's
  latent projections (q_a, kv_a and their norms: their outputs are not split by heads), DSA's indexer
  (each rank scores every key with all its heads, ``ReplicatedLinear`` in vLLM and SGLang), and the
  activations saved outside the TP region (norm inputs, the inputs of q/k/v, up/gate and the
  router). With ``sp`` (Megatron sequence parallelism) those activations are split over ``tp``
  too. Widths that ``tp`` does not divide go as ``torch.chunk`` splits them: the first ranks
  get ``ceil(n/tp)``, and the figures are those of rank 0, the largest. A vision tower's layers split as
  vLLM shards the encoder, its stem, norms and projector whole (:func:`_tower_tensors`);
- pipeline parallel, ``pp``: stage ``s`` holds consecutive layers of the layer plan, ``L/pp`` of
  them when ``pp`` divides ``L`` (else :func:`analysis.cluster.pipeline.split`), or ``vpp`` model
  chunks of them (interleaved 1F1B: :mod:`analysis.cluster.pipeline`); the embedding is on the
  first stage (and a vision tower with its projector, :func:`_tower_tensors`), the final norm and LM head on
  the last (a tied head keeps its own copy of the
  embedding there when ``pp > 1``, as Megatron does). Under 1F1B stage ``s`` keeps the
  activations of ``min(pp - s, m)`` micro-batches (``m`` micro-batches per step, ``pp`` by
  default), under interleaving as :func:`analysis.cluster.pipeline.held` counts them;
- data parallel, ``dp``: every GPU runs ``batch`` sequences (the micro-batch). ZeRO stage 1
  shards the optimizer state (fp32 master weights and moments) over ``dp``, stage 2 also the
  gradients, stage 3 (FSDP full sharding) also the weights; a tensor is split on its first
  dimension as FSDP2 does (``ceil(rows/dp)`` rows on rank 0), or, when that has fewer rows than
  GPUs (stacked experts), on a later one that splits evenly (:meth:`Tensor.shard`);
- context parallel, ``cp`` (ring attention, as Megatron-Core's CP): each sequence is split over
  ``cp`` GPUs, which hold ``S/cp`` of its tokens each (every activation, and the KV cache, of a
  sequence of ``S/cp`` tokens: :func:`cp_local`) and pass K and V around the ring; they hold the
  same parameters, so ZeRO shards, and gradients are reduced, over the ``dp x cp`` replicas.
  Ring attention needs flash attention (no score matrix, masks applied by position), and a
  decode step has one token to split: training and prefill only;
- expert parallel, ``ep``: the routed experts of each MoE layer are dealt over ``ep`` GPUs of the
  data-parallel group (``ep`` divides ``dp``), each expert then split over ``tp``. The ``ep`` GPUs
  route their own micro-batches' token-slots to one another, so a GPU's experts process as many
  token-slots as its own micro-batch routes (routing balanced): their FLOPs and saved activations
  are those of one GPU without ``ep``. Expert weights are ZeRO-sharded over the ``dp/ep`` GPUs that
  hold the same experts;
- LoRA (``run.lora``): each adapted linear of a GPU's layers gains its adapters as PEFT's
  ``LoraParallelLinear`` splits them (``peft/tuners/lora/tp_layer.py``): on a column-parallel
  linear ``A`` is whole and ``B`` split over ``tp``, on a row-parallel one ``A`` split and ``B``
  whole, on a replicated one both whole; that is ``r (d_in + d_out)`` of the TP rank's linear
  (:func:`_adapter_tensors`), a routed expert's over ``ep`` as the expert. The frozen base is held
  as without LoRA (split over tp and pp, over dp by ZeRO-3 as FSDP shards it); gradients and
  optimizer state are the adapters' alone, ZeRO-sharded as any trained tensor.
"""

import collections
import dataclasses
import functools
import math
from collections.abc import Sequence
from typing import NamedTuple, TypeVar

from ..count.activations import activation_bytes
from ..count.flops import held_copies
from ..count.kvcache import KVCache, kv_cache, of_groups
from ..count.lora import adapted
from ..count.memory import RERUN
from ..count.quant import storage
from ..errors import SpecError
from ..model.architecture import Block, build
from ..model.config import ModelConfig
from ..model.ffn import ROUTED_EXPERTS
from ..model.formats import ROUTERS, WEIGHT_FORMATS
from ..model.layers import LayerSpec, layer_plan, layer_specs
from ..model.parts import Norm, Table, Vector
from ..model.sizes import ceil_div
from ..model.variants import POSITIONS
from ..spec import Layout, LoRA, RunSpec
from .pipeline import chunks, held

T = TypeVar("T")


def one_gpu_only(cfg: ModelConfig) -> str | None:
    """What of ``cfg`` no split here divides, each sized on one GPU only (the first, as a message's
    words), else None."""
    moe = cfg.moe
    one_gpu = [
        (moe is not None and moe.beside_mlp, "a dense MLP beside its experts (moe.beside_mlp), which is"),
        (cfg.hyper is not None, "hyper-connections (hyper), which are"),
        (cfg.gemma3n is not None, "Gemma 3n's streams and per-layer inputs (gemma3n), which are"),
        (cfg.kv_shared_layers > 0, "layers reading an earlier layer's K/V (kv_shared_layers), which are"),
        (cfg.shared_transformer is not None, "a transformer block several layers share (shared_transformer), "
                                             "which is"),
        (moe is not None and bool(moe.zero_experts or moe.shortcut),
         "LongCat-Flash's MoE (moe.zero_experts, moe.shortcut), which is"),
    ]
    return next((what for has, what in one_gpu if has), None)


def zero_stages(pp: int) -> tuple[int, ...]:
    """The ZeRO stages a layout of ``pp`` pipeline stages can take: with stages, 0 and 1. ZeRO-2/3 shard
    the gradients or weights anew each micro-batch, which no pipeline runs: DeepSpeed refuses them with
    pipeline parallelism, and torchtitan's FSDP under PP keeps a stage's weights gathered and its gradients
    unreduced from the first micro-batch to the last (``reshard_after_forward`` off, PyTorch pipelining's
    ``backward_maybe_with_nosync``), ZeRO-1's traffic and memory."""
    return (0, 1) if pp > 1 else (0, 1, 2, 3)


def check_layout(cfg: ModelConfig, run: RunSpec) -> None:
    """SpecError naming the field whose rule ``run.layout`` breaks for ``cfg`` and ``run``."""
    layout, seq, name = run.layout, run.seq or cfg.context_length, cfg.name
    tp, g, cp = layout.tp, cfg.kv_heads, layout.cp
    ring = cp == 1 or (run.attention == "flash" and not POSITIONS[cfg.position].learned_bias)
    experts = cfg.moe.num_experts if cfg.moe else 0
    rules = [
        (cfg.n_heads % tp == 0, "layout.tp", f"{tp} must divide the {cfg.n_heads} attention heads of {name}"),
        (cfg.attention == "mla" or g % tp == 0 or tp % g == 0, "layout.tp",
         f"{tp} and the {g} KV heads of {name} must divide one another"),
        (cfg.full_kv_heads is None or cfg.full_kv_heads % tp == 0 or tp % cfg.full_kv_heads == 0, "layout.tp",
         f"{tp} and the {cfg.full_kv_heads} KV heads of the full layers of {name} must divide one another"),
        (cfg.vision is None or cfg.vision.n_heads % tp == 0, "layout.tp",
         f"{tp} must divide the {cfg.vision and cfg.vision.n_heads} attention heads of {name}'s vision tower"),
        (layout.pp <= cfg.n_layers, "layout.pp", f"{layout.pp} must be at most the {cfg.n_layers} layers of {name}"),
        (layout.pp * layout.vpp <= cfg.n_layers, "layout.vpp",
         f"{layout.vpp}: {layout.pp} x {layout.vpp} virtual stages need a layer each, and {name} has "
         f"{cfg.n_layers}"),
        (layout.zero in zero_stages(layout.pp), "layout.zero",
         f"{layout.zero} with {layout.pp} pipeline stages: ZeRO-2/3 shard anew each micro-batch, which pipelines do "
         "not do (DeepSpeed refuses it; torchtitan's FSDP under PP gathers a stage's weights and reduces its "
         "gradients once a step, as --zero 1 counts them)"),
        (layout.ep == 1 or cfg.moe is not None, "layout.ep", f"{layout.ep} needs a mixture-of-experts model, "
                                                             f"and {name} has no experts"),
        (experts == 0 or experts % layout.ep == 0, "layout.ep", f"{layout.ep} must divide the {experts} experts "
                                                                 f"of {name}"),
        (cp == 1 or run.mode != "decode", "layout.cp", f"{cp}: context parallelism splits a sequence's new "
                                                       "tokens, and a decode step has one"),
        (not layout.sp or run.mode != "decode", "layout.sp", "(sequence parallelism) splits a sequence's new tokens "
                                                             "over tp, and a decode step has one"),
        (seq % (2 * cp) == 0 or cp == 1, "layout.cp", f"{cp} splits each sequence into {2 * cp} chunks (Megatron's "
                                                      "load balancing of causal attention), which must divide the "
                                                      f"{seq:,} tokens of a sequence"),
        (not layout.sp or (seq // cp) % tp == 0, "layout.sp",
         f"(sequence parallelism) needs tp {tp} to divide the {seq // cp:,} tokens of a sequence"
         + (" on a GPU" if cp > 1 else "")),
        (ring, "layout.cp", f"{cp}: context parallelism runs ring flash attention, not eager attention or a "
                            "learned T5 bias"),
        (cp == 1 or cfg.dsa is None, "layout.cp", f"{cp}: DSA's indexer (dsa) picks each query's keys among all of "
                                                  "a sequence's, which ring attention passes around: not sized here"),
        (run.chunk is None, "chunk", "(chunked prefill) runs on one GPU: not with a parallel layout"),
        # a recurrent mixer's projections and state are not split over TP ranks here, and its state runs through
        # the whole sequence, which context parallelism would hand from GPU to GPU; the TP and CP collectives count
        # an attention and an FFN region a layer, which a layer without a mixer (none) has not: data, pipeline and
        # expert parallelism alone, which hold whole layers and whole sequences
        (tp == 1 or not cfg.has_recurrent, "layout.tp", f"{tp}: {name} has {cfg.recurrent_kind} layers, which are "
                                                        "not split over tensor-parallel GPUs here"),
        (cp == 1 or not cfg.has_recurrent, "layout.cp", f"{cp}: {name} has {cfg.recurrent_kind} layers, which are "
                                                        "not split over context-parallel GPUs here"),
    ]
    what = one_gpu_only(cfg)
    if what is not None and not layout.trivial:  # named by the first split the layout makes
        split = next(k for k in ("tp", "pp", "dp", "ep", "cp") if getattr(layout, k) > 1)
        rules.append((False, f"layout.{split}", f"{getattr(layout, split)}: {name} has {what} sized on one GPU "
                                                "only: not with a parallel layout"))
    for ok, field, rule in rules:
        if not ok:
            raise SpecError(field, rule)
    if run.weights_dtype in WEIGHT_FORMATS and tp > 1:  # only a quantized base has groups to split
        check_splits(cfg, run.weights_dtype, tp)


def check_splits(cfg: ModelConfig, weights: str, tp: int) -> None:
    """SpecError (layout.tp) when ``tp`` splits a matrix that format ``weights`` quantizes into shards
    that are not a whole number of its units (:mod:`.stored`'s docstring)."""
    s = storage(cfg, weights)
    full, local = build(cfg), build(tp_local(cfg, tp))
    pairs = [(m, n) for (_, a), (_, b) in zip(full.blocks, local.blocks) for m, n in zip(a.linears(), b.linears())]
    pairs.append((full.head.linear, local.head.linear))
    out_unit = s.group if s.format.out_blocks else s.format.pack
    for m, n in pairs:
        if not s.quantizes(m.key):
            continue
        for dim, size, shard, unit in (("input", m.d_in, n.d_in, s.group), ("output", m.d_out, n.d_out, out_unit)):
            if shard < size and unit > 1 and (shard % unit or size % unit):
                noun = "blocks" if s.format.out_blocks else "words" if dim == "output" else "groups"
                engine = "vLLM refuses it" if s.format.pads == 1 else (
                    f"vLLM pads each shard to a multiple of {s.format.pads}, which llmcalc does not size yet")
                raise SpecError("layout.tp", f"{tp} splits the {size:,} {dim}s of {m.key} into shards of "
                                             f"{shard:,}, not a whole number of {weights}'s {unit}-wide {noun} "
                                             f"({engine})")


@functools.lru_cache(maxsize=64)  # configs are frozen; `plan` asks for the same few many times
def tp_local(cfg: ModelConfig, tp: int) -> ModelConfig:
    """The model as one tensor-parallel rank runs it (module docstring)."""
    if tp == 1:
        return cfg
    moe = cfg.moe
    if moe is not None:
        moe = dataclasses.replace(moe, expert_d_ff=ceil_div(cfg.expert_width, tp),
                                  shared_expert_d_ff=ceil_div(cfg.shared_expert_width, tp))
    # a rank's slice, not a config anyone wrote (not checked as one: under MLA its head_dim means nothing)
    return dataclasses.replace(cfg, n_heads=cfg.n_heads // tp, n_kv_heads=max(cfg.kv_heads // tp, 1),
                               head_dim=cfg.head_size, d_ff=ceil_div(cfg.d_ff, tp),
                               vocab_size=ceil_div(cfg.vocab_size, tp), moe=moe,
                               full_kv_heads=cfg.full_kv_heads and max(cfg.full_kv_heads // tp, 1))


def stages(cfg: ModelConfig, layout: Layout) -> tuple[tuple[int, ...], ...]:
    """Layer indices of each pipeline stage (all its model chunks)."""
    return _stages(cfg.n_layers, layout.pp, layout.vpp)


@functools.lru_cache(maxsize=256)  # `plan` asks for every stage of every candidate
def _stages(n_layers: int, pp: int, vpp: int) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(i for chunk in stage for i in chunk) for stage in chunks(n_layers, Layout(pp=pp, vpp=vpp)))


# Activations saved outside the TP region (on the residual stream), by component: replicated over
# tp, split over tp with sequence parallelism. Every other layer component is inside the region.
# Token ids (embedding/) are whole on every TP rank: the vocab-parallel lookup needs them all.
RESIDUAL_STREAM = ("norm/", "attention/q", "attention/q_a", "attention/kv_a", "attention/q_a_norm",
                   "attention/q_b", "attention/kv_a_norm", "attention/kv_b", "mlp/up", "moe/router", "moe",
                   "layer", "lm_head",
                   # per-op checkpointing's (analysis/count/recompute.py): the replicated linears' outputs, the
                   # reduce-scatters' (REDUCE_SCATTERED)
                   "attention/q_a/output", "attention/kv_a/output", "moe/router/output", "layer/reduce-scatter")
REDUCE_SCATTERED = "layer/reduce-scatter"  # per-op checkpointing under sp keeps the regions' reduce-scattered outputs


@functools.lru_cache(maxsize=1024)
def on_residual_stream(key: str) -> bool:
    return any(key == k or (k.endswith("/") and key.startswith(k)) for k in RESIDUAL_STREAM)


class Tensor(NamedTuple):
    """A parameter tensor as one GPU holds it, shaped as the reference model stores it
    (``analysis.verify``): a linear's weight ``(d_out, d_in)``, stacked experts ``(n, d_in, d_out)`` (their keys
    start ``moe/``), a linear's copies side by side ``(copies, d_out, d_in)`` (Zamba's per-head x_proj)."""

    key: str
    shape: tuple[int, ...]
    expert: bool = False  # a routed expert tensor: split over ep, ZeRO-sharded over dp / ep
    linear: bool = False  # a linear's weight, which a quantized format can store (analysis.cluster.stored)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def matrix(self) -> tuple[int, int, int]:
        """A linear's (copies, d_in, d_out), read from its shape as the class docstring gives it."""
        if len(self.shape) == 2:
            return 1, self.shape[1], self.shape[0]
        copies, a, b = self.shape
        return (copies, a, b) if self.key.startswith("moe/") else (copies, b, a)

    def shard(self, n: int) -> int:
        """Elements on rank 0 when split over ``n`` GPUs: on the first dimension (FSDP2), unless it has
        fewer rows than GPUs (stacked experts) and a later one splits evenly, as torchtitan places
        experts (FSDP2 splits other dimensions only evenly); a share then shrinks as ``n`` grows."""
        rows = self.shape[0]
        if rows < n:
            rows = next((r for r in self.shape[1:] if r % n == 0), rows)
        return ceil_div(rows, n) * (self.numel // rows)


def _norm_tensors(norm: Norm) -> list[Tensor]:
    return [Tensor(norm.key, (norm.size,))] * (int(norm.weight) + int(norm.bias))


def _layer_tensors(layer: Block, ep: int) -> list[Tensor]:
    out = []
    for m in layer.linears():
        expert = m.key == ROUTED_EXPERTS
        if m.key.startswith("moe/") and m.key not in ROUTERS:
            n = held_copies(m, ep)
            out.append(Tensor(m.key, (n, m.d_in, m.d_out), expert, True))
            if m.bias:
                out.append(Tensor(m.key, (n, m.d_out), expert))
        else:
            copies = (m.copies,) if m.copies > 1 else ()
            out.append(Tensor(m.key, (*copies, m.d_out, m.d_in), linear=True))
            if m.bias:
                out.append(Tensor(m.key, (*copies, m.d_out)))
    for norm in layer.norms():
        out += _norm_tensors(norm)
    return out + [Tensor(v.key, shape) for v in layer.vectors() for shape in v.tensors]


def stage_units(cfg: ModelConfig, layout: Layout, stage: int) -> tuple[tuple[Tensor, ...], ...]:
    """The parameter tensors one GPU of pipeline stage ``stage`` holds (rank 0 of its TP and EP
    groups), before ZeRO, by FSDP unit: first the stage's tensors outside its layers (embedding,
    positions, final norm, LM head: the root unit, possibly empty), then one unit per layer
    (layers of one spec share one tuple)."""
    return _units(cfg, layout.tp, layout.pp, layout.ep, stage, layout.vpp)


@functools.lru_cache(maxsize=256)
def _units(cfg: ModelConfig, tp: int, pp: int, ep: int, stage: int, vpp: int) -> tuple[tuple[Tensor, ...], ...]:
    return _root_tensors(cfg, tp, pp, stage), *_layer_units(cfg, _spec_tensors(cfg, tp, ep), tp, pp, stage, vpp)


def _root_tensors(cfg: ModelConfig, tp: int, pp: int, stage: int) -> tuple[Tensor, ...]:
    """The tensors of ``stage`` outside its layers (:func:`stage_units`)."""
    model = build(tp_local(cfg, tp))
    root = []
    if stage == 0:
        root += [Tensor(t.key, (t.rows, t.width)) for t in (model.token, model.position) if t is not None]
        if model.embedding_norm is not None:
            root += _norm_tensors(model.embedding_norm)
        root += _tower_tensors(cfg, tp)
    if stage == pp - 1:
        if model.final_norm is not None:
            root += _norm_tensors(model.final_norm)
        head = model.head.linear
        if not model.head.tied or pp > 1:  # a tied head on its own stage keeps a copy
            root.append(Tensor(head.key, (head.d_out, head.d_in), linear=not model.head.tied))
        if head.bias:
            root.append(Tensor(head.key, (head.d_out,)))
    return tuple(root)


TOWER_COLUMNS = ("vision/attention/q", "vision/attention/k", "vision/attention/v", "vision/mlp/up", "vision/mlp/gate")
TOWER_ROWS = ("vision/attention/o", "vision/mlp/down")


def _tower_tensors(cfg: ModelConfig, tp: int) -> list[Tensor]:
    """The vision tower and projector, on the first stage (module docstring): each layer's tensors (one a layer,
    as the reference stores them), its linears split over ``tp`` as vLLM shards the encoder (q, k, v, up and gate
    column-parallel, o and down row-parallel with their biases whole), everything else whole."""
    vision = build(cfg).vision
    out: list[Tensor] = []
    for part, copies in vision.parts() if vision is not None else ():
        if isinstance(part, Norm):
            tensors = _norm_tensors(part)
        elif isinstance(part, Table):
            tensors = [Tensor(part.key, (part.rows, part.width))]
        elif isinstance(part, Vector):
            tensors = [Tensor(part.key, (part.size,))]
        else:
            column, row = part.key in TOWER_COLUMNS, part.key in TOWER_ROWS
            d_out = ceil_div(part.d_out, tp) if column else part.d_out
            d_in = ceil_div(part.d_in, tp) if row else part.d_in
            tensors = [Tensor(part.key, (d_out, d_in))] + ([Tensor(part.key, (d_out,))] if part.bias else [])
        out += tensors * copies
    return out


def _layer_units(cfg: ModelConfig, per_spec: dict[LayerSpec, T], tp: int, pp: int, stage: int, vpp: int) -> list[T]:
    """What ``per_spec`` gives each layer of ``stage`` (the TP rank's layer specs), in order."""
    specs = layer_specs(tp_local(cfg, tp))
    return [per_spec[specs[i]] for i in stages(cfg, Layout(pp=pp, vpp=vpp))[stage]]


@functools.lru_cache(maxsize=256)  # every stage of every pp holds these
def _spec_tensors(cfg: ModelConfig, tp: int, ep: int) -> dict[LayerSpec, tuple[Tensor, ...]]:
    """The tensors of one layer of each spec, on rank 0 of its TP and EP groups."""
    return {group.spec: tuple(_layer_tensors(block, ep)) for group, block in build(tp_local(cfg, tp)).blocks}


@functools.lru_cache(maxsize=256)
def _adapter_tensors(cfg: ModelConfig, lora: LoRA, tp: int, ep: int) -> dict[LayerSpec, tuple[Tensor, ...]]:
    """The adapter tensors of one layer of each spec, on rank 0 of its TP and EP groups: ``A`` (``r x d_in``)
    and ``B`` (``d_out x r``) of each adapted linear of the TP rank's layer (module docstring), stacked for
    stacked experts."""
    model = build(tp_local(cfg, tp))
    keys, r = adapted(model.cfg, lora), lora.rank
    per_spec = {}
    for group, block in model.blocks:
        out = []
        for m in block.linears():
            if m.key not in keys:
                continue
            expert = m.key == ROUTED_EXPERTS
            if m.key.startswith("moe/") and m.key not in ROUTERS:
                n = held_copies(m, ep)
                out += [Tensor(m.key + "/lora_A", (n, r, m.d_in), expert),
                        Tensor(m.key + "/lora_B", (n, m.d_out, r), expert)]
            else:
                out += [Tensor(m.key + "/lora_A", (r, m.d_in)), Tensor(m.key + "/lora_B", (m.d_out, r))]
        per_spec[group.spec] = tuple(out)
    return per_spec


def stage_tensors(cfg: ModelConfig, layout: Layout, stage: int) -> list[Tensor]:
    """The parameter tensors one GPU of pipeline stage ``stage`` holds, before ZeRO."""
    return [t for unit in stage_units(cfg, layout, stage) for t in unit]


def unit_sizes(cfg: ModelConfig, layout: Layout, stage: int, lora: LoRA | None = None, frozen: bool = False,
               expert: bool | None = None) -> tuple[tuple[int, int], ...]:
    """(elements, elements of its ZeRO shard) of each FSDP unit of one GPU of ``stage``: of what
    the optimizer trains (every parameter, or LoRA's adapters), or with ``frozen`` of LoRA's frozen
    base (none without LoRA); routed experts' tensors alone, or the others, when ``expert`` says."""
    return _unit_sizes(cfg, lora, layout.tp, layout.pp, layout.ep, layout.vpp, stage, layout.replicas, frozen,
                       expert)


@functools.lru_cache(maxsize=4096)  # `plan` asks for the same stage under many layouts
def _unit_sizes(cfg: ModelConfig, lora: LoRA | None, tp: int, pp: int, ep: int, vpp: int, stage: int, replicas: int,
                frozen: bool, expert: bool | None) -> tuple[tuple[int, int], ...]:
    if lora is None and frozen:
        return ()
    adapters = None if frozen else lora  # the units of LoRA's adapters; None: of the base
    root = _sizes(() if adapters else _root_distinct(cfg, tp, pp, stage), replicas, ep, expert)
    return root, *_layer_units(cfg, _spec_sizes(cfg, adapters, tp, ep, replicas, expert), tp, pp, stage, vpp)


@functools.lru_cache(maxsize=256)
def _root_distinct(cfg: ModelConfig, tp: int, pp: int, stage: int) -> tuple[tuple[Tensor, int], ...]:
    """:func:`_root_tensors`, each distinct tensor once with how many there are (a vision tower's layers are
    alike: hundreds of tensors, a score of kinds)."""
    return tuple(collections.Counter(_root_tensors(cfg, tp, pp, stage)).items())


@functools.lru_cache(maxsize=1024)  # every stage of a pp holds these
def _spec_sizes(cfg: ModelConfig, adapters: LoRA | None, tp: int, ep: int, replicas: int,
                expert: bool | None) -> dict[LayerSpec, tuple[int, int]]:
    """:func:`_sizes` of one layer of each spec: of its tensors, or of LoRA ``adapters``' on it."""
    per_spec = _spec_tensors(cfg, tp, ep) if adapters is None else _adapter_tensors(cfg, adapters, tp, ep)
    return {spec: _sizes([(t, 1) for t in unit], replicas, ep, expert) for spec, unit in per_spec.items()}


def _sizes(unit: Sequence[tuple[Tensor, int]], replicas: int, ep: int, expert: bool | None) -> tuple[int, int]:
    """(elements, elements of its ZeRO shard over ``replicas``) of an FSDP unit's tensors (each with how many
    there are): routed experts' alone, or the others, when ``expert`` says."""
    mine = [(t, n) for t, n in unit if expert is None or t.expert == expert]
    return (sum(n * t.numel for t, n in mine),
            sum(n * t.shard(replicas // ep if t.expert else replicas) for t, n in mine))


def cp_local(run: RunSpec) -> RunSpec:
    """One GPU's share of the run under context parallelism: ``S/cp`` tokens of each sequence."""
    cp = run.layout.cp
    return run if cp == 1 else run.replace(seq=run.seq // cp)


def workload(run: RunSpec) -> tuple:
    """Every field of ``run`` but its layout: what a GPU's share of the work depends on besides the
    layout (a key for the work `plan`'s candidates share)."""
    return tuple(v for k, v in vars(run).items() if k != "layout")


class GpuState(NamedTuple):
    """Training state of one GPU, in elements (weights are stored in the compute dtype, gradients in
    the run's gradient dtype, the optimizer state in fp32)."""

    weights: int  # of what the optimizer trains
    gradients: int
    optimizer: int  # elements the fp32 master weights and moments are kept for
    frozen: int = 0  # LoRA's frozen base, stored in the weights dtype


def gpu_state(cfg: ModelConfig, layout: Layout, stage: int, lora: LoRA | None = None) -> GpuState:
    """Elements of weights, gradients and optimizer state on one GPU of ``stage`` under ZeRO."""
    trained = unit_sizes(cfg, layout, stage, lora)
    full, sharded = sum(n for n, _ in trained), sum(s for _, s in trained)
    base = unit_sizes(cfg, layout, stage, lora, frozen=True)
    frozen = sum(s if layout.zero >= 3 else n for n, s in base)
    return GpuState(sharded if layout.zero >= 3 else full, sharded if layout.zero >= 2 else full,
                    sharded if layout.zero >= 1 else full, frozen)


def in_stage(cfg: ModelConfig, layout: Layout, stage: int) -> tuple[tuple[int, int], ...]:
    """(group index in the layer plan, layers of that group in ``stage``)."""
    return in_layers(cfg, stages(cfg, layout)[stage])


@functools.lru_cache(maxsize=1024)
def in_layers(cfg: ModelConfig, indices: Sequence[int]) -> tuple[tuple[int, int], ...]:
    """(group index in the layer plan, layers of that group among ``indices``)."""
    layers = set(indices)
    return tuple((i, sum(1 for j in g.layers if j in layers)) for i, g in enumerate(layer_plan(cfg)))


@functools.lru_cache(maxsize=256)
def stage_keys(cfg: ModelConfig, pp: int, vpp: int) -> tuple[tuple[bool, bool, tuple[tuple[int, int], ...]], ...]:
    """Each stage's (first, last, :func:`in_stage`): stages with equal keys hold the same layers
    and ends, so the same state, work and collectives (`plan` figures each such stage once)."""
    layout = Layout(pp=pp, vpp=vpp)
    return tuple((s == 0, s == pp - 1, in_stage(cfg, layout, s)) for s in range(pp))


class ChunkSaves(NamedTuple):
    """What one micro-batch saves in one model chunk of a stage, and how many micro-batches' a stage keeps."""

    kept: int
    saves: tuple[tuple[str, int], ...]  # (component, bytes)
    total: int


def stage_saves(cfg: ModelConfig, run: RunSpec) -> list[list[ChunkSaves]]:
    """What one GPU of each stage keeps for backward, by model chunk (:func:`saved` sums a stage's
    by component): its layers' saves for each micro-batch in flight, on the TP rank's model;
    residual-stream saves over ``tp`` with sequence parallelism (``ep`` splits none: module docstring).
    Once-per-forward saves (RoPE tables, masks) on every chunk, embeddings on the first stage's
    first, final norm, LM head and loss on the last stage's last."""
    layout = run.layout
    mine = cp_local(run).replace(layout=Layout())
    out = []
    seen: dict[tuple, tuple[tuple[tuple[str, int], ...], int]] = {}  # chunks of the same layers and ends
    for stage, model_chunks in enumerate(_chunk_layers(cfg, layout.pp, layout.vpp)):
        per_chunk = []
        for j, layers in enumerate(model_chunks):
            key = (layers, stage == j == 0, stage == layout.pp - 1 and j == layout.vpp - 1)
            if key not in seen:
                seen[key] = _chunk_saves(cfg, mine, layout.tp, layout.sp, *key)
            per_chunk.append(seen[key])
        out.append([ChunkSaves(kept, saves, total) for kept, (saves, total)
                    in zip(held(layout, stage, [total for _, total in per_chunk]), per_chunk)])
    return out


@functools.lru_cache(maxsize=256)
def distinct_stages(cfg: ModelConfig, pp: int) -> tuple[tuple[int, tuple[tuple[int, int], ...]], ...]:
    """The first of each run of ``pp`` stages (no interleaving) holding the same layers and ends,
    by :func:`stage_keys` and their model chunks, with its layers (:func:`in_layers`): the others
    hold and save what it does."""
    seen: dict[tuple, tuple[int, tuple[tuple[int, int], ...]]] = {}
    for s, key in enumerate(zip(stage_keys(cfg, pp, 1), _chunk_layers(cfg, pp, 1))):
        seen.setdefault(key, (s, key[1][0]))
    return tuple(seen.values())


# (bytes no layout splits, (bytes, tp) of each save sequence parallelism splits)
Terms = tuple[int, tuple[tuple[int, int], ...]]
Kinds = tuple[tuple[bool, tuple[int, ...]], ...]  # (on the residual stream, sizes)


class SaveTerms(NamedTuple):
    """What one micro-batch saves on one GPU of a TP rank, with or without sequence parallelism,
    in :func:`_chunk_saves`' terms (`plan` weighs every layout by them): of each layer group per
    layer, and once per forward on every chunk, on the first stage's first and on the last's last
    (:func:`_once_on`)."""

    groups: tuple[Terms, ...]
    every: Terms
    first: Terms
    last: Terms

    def chunk(self, layers: tuple[tuple[int, int], ...], first: bool, last: bool) -> int:
        """What one micro-batch saves in a model chunk of ``layers`` (layer-plan group, count), the first
        stage's first or the last's last, as :func:`_chunk_saves` sums it."""
        parts = [(self.every, 1), *([(self.first, 1)] if first else []), *([(self.last, 1)] if last else []),
                 *((self.groups[i], count) for i, count in layers)]
        return sum(count * whole + sum(ceil_div(n * count, d) for n, d in split) for (whole, split), count in parts)


@functools.lru_cache(maxsize=1024)
def save_terms(cfg: ModelConfig, mine: RunSpec, tp: int, sp: bool) -> SaveTerms:
    """:class:`SaveTerms` of the TP rank's model, ``mine`` one GPU's share of the run
    (:func:`cp_local`, resolved, no layout)."""
    groups, once = _save_kinds(cfg, mine, tp, sp)

    def terms(kinds: Kinds) -> Terms:
        whole, split = 0, []
        for residual, sizes in kinds:
            d = _divisor(residual, tp, sp)
            if d > 1:
                split += [(n, d) for n in sizes]
            else:
                whole += sum(sizes)
        return whole, tuple(split)

    return SaveTerms(tuple(map(terms, groups)), *(terms(once[where]) for where in ("every", "first", "last")))


@functools.lru_cache(maxsize=256)
def _save_kinds(cfg: ModelConfig, mine: RunSpec, tp: int, sp: bool) -> tuple[tuple[Kinds, ...], dict[str, Kinds]]:
    """The TP rank's saves (``mine``: one GPU's share of the run) by how a layout splits them: of
    each layer group per layer, and once per forward by where (:func:`_once_on`), each as
    (on the residual stream, bytes of each such save)."""
    groups, once = _activations(tp_local(cfg, tp), mine, sp)

    def kinds(saves: list[tuple[str, int]]) -> Kinds:
        out: dict[bool, list[int]] = {}
        for key, n in saves:
            out.setdefault(on_residual_stream(key), []).append(n)
        return tuple((kind, tuple(sizes)) for kind, sizes in out.items())

    return (tuple(kinds(list(per_layer.items())) for _, per_layer in groups),
            {where: kinds([(k, n) for k, n in once.items() if _once_on(k) == where])
             for where in ("every", "first", "last")})


@functools.lru_cache(maxsize=256)
def _chunk_layers(cfg: ModelConfig, pp: int, vpp: int) -> tuple[tuple[tuple[tuple[int, int], ...], ...], ...]:
    """:func:`in_layers` of each model chunk of each stage."""
    return tuple(tuple(in_layers(cfg, chunk) for chunk in stage)
                 for stage in chunks(cfg.n_layers, Layout(pp=pp, vpp=vpp)))


@functools.lru_cache(maxsize=1024)
def _activations(cfg: ModelConfig, run: RunSpec, sp: bool = False) -> tuple[tuple, dict[str, int]]:
    """The TP rank's per-layer saves by group, and its once-per-forward saves (``run``: one GPU's share;
    ``sp``: under sequence parallelism, where per-op checkpointing also keeps each region's reduce-scattered
    output, :data:`REDUCE_SCATTERED`)."""
    acts = activation_bytes(cfg, run)
    once = dict(acts.components)
    for group, per_layer in acts.groups:
        for key, n in per_layer.items():
            once[key] -= n * group.count
    groups = tuple(acts.groups)
    if sp and run.recompute == "op":  # a region's output is T x d as the block's input (before the tp split)
        groups = tuple((group, {**per_layer, REDUCE_SCATTERED: per_layer["layer"] * (
            (group.spec.attention != "none") + (group.spec.ffn is not None))}) for group, per_layer in groups)
    return groups, once


@functools.lru_cache(maxsize=16384)  # `plan`: chunks of the same layers under many layouts
def _chunk_saves(cfg: ModelConfig, run: RunSpec, tp: int, sp: bool, layers: tuple[tuple[int, int], ...],
                 first: bool, last: bool) -> tuple[tuple[tuple[str, int], ...], int]:
    """(component, bytes) one micro-batch saves in a model chunk of ``layers`` (layer-plan group,
    count), the first model chunk of the first stage or the last of the last, and their sum."""
    local = tp_local(cfg, tp)
    groups, once = _activations(local, run, sp)

    def split(key: str, n: int) -> int:
        return _split(key, n, tp, sp)

    def on_chunk(key: str) -> bool:
        where = _once_on(key)
        return first if where == "first" else last if where == "last" else True

    saves = tuple((key, split(key, n)) for key, n in [(key, n * count) for i, count in layers
                                                      for key, n in groups[i][1].items()]
                  + [(k, n) for k, n in once.items() if on_chunk(k)])
    return saves, sum(n for _, n in saves)


def recomputed_layer(cfg: ModelConfig, mine: RunSpec, tp: int, sp: bool, layers: tuple[tuple[int, int], ...]) -> int:
    """Recomputation's transient on one GPU (:func:`analysis.count.memory.recomputed_layer`): the largest per-layer
    save without recomputation less what the recomputation keeps, among ``layers`` ((layer-plan group, count) of a
    stage), one micro-batch on the TP rank (``mine``: :func:`cp_local`, resolved, no layout), split as
    :func:`stage_saves` splits it; 0 without a recomputation that reruns layers."""
    if mine.mode != "train" or mine.recompute not in RERUN:
        return 0
    saved, kept = (save_terms(cfg, r, tp, sp).groups for r in (mine.replace(recompute="none"), mine))

    def layer(terms: Terms) -> int:
        whole, split = terms
        return whole + sum(ceil_div(n, d) for n, d in split)

    return max((layer(saved[i]) - layer(kept[i]) for i, count in layers if count), default=0)


def _once_on(key: str) -> str:
    """The model chunks a once-per-forward save ``key`` is on: the embeddings' on the first stage's
    first ("first"), the final norm's, LM head's, soft-capping's and loss's on the last stage's last
    ("last"), RoPE tables' and masks' on each ("every": each chunk's forward saves its own)."""
    if key.startswith("embedding/"):
        return "first"
    return "every" if key in ("attention", "attention/sdpa", "layer") else "last"


def _divisor(residual: bool, tp: int, sp: bool) -> int:
    """GPUs a save is split over: one on the residual stream over ``tp`` with sequence parallelism."""
    return tp if sp and residual else 1


def _split(key: str, n: int, tp: int, sp: bool) -> int:
    """Bytes ``n`` a save ``key`` takes on one GPU."""
    return ceil_div(n, _divisor(on_residual_stream(key), tp, sp))


def saved(stage: Sequence[ChunkSaves]) -> dict[str, int]:
    """One stage's saves by component, over the micro-batches it keeps."""
    out: dict[str, int] = {}
    for c in stage:
        for key, n in c.saves:
            out[key] = out.get(key, 0) + n * c.kept
    return {k: v for k, v in out.items() if v}


def stage_kv_bytes(cfg: ModelConfig, run: RunSpec) -> list[int]:
    """KV cache one GPU of each stage holds: its layers, its KV heads (or MLA's replicated latent)."""
    return [stage_kv_cache(cfg, run, stage).bytes for stage in range(run.layout.pp)]


def stage_kv_cache(cfg: ModelConfig, run: RunSpec, stage: int) -> KVCache:
    """The cache one GPU of ``stage`` holds, as :func:`kv_cache` gives one replica's: the layer groups of its
    layers, each at the TP rank's KV heads (``run`` resolved; one GPU: :func:`kv_cache`'s)."""
    local = tp_local(cfg, run.layout.tp)
    cache = kv_cache(local, cp_local(run).replace(layout=Layout()))
    mine = set(stages(cfg, run.layout)[stage])
    groups = [g._replace(group=dataclasses.replace(g.group, layers=tuple(i for i in g.group.layers if i in mine)))
              for g in cache.groups]
    return of_groups(cache.seq, cache.batch, cache.kv_dtype, [g for g in groups if g.group.count], cache.state_dtype)
