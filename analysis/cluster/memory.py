"""Memory per GPU: what the GPU that needs the most holds under a parallel layout (the conventions
are :mod:`analysis.cluster.sharding`'s; on one device, :func:`analysis.count.memory.device_memory`'s),
and the largest batch that fits in a GPU's memory.

``memory`` is the one memory function of the Python API: on one device it is ``device_memory``.
``fit`` is the one definition of "the largest batch that fits": the largest batch (per GPU) whose
``memory`` total is at most the budget, used by ``llmcalc memory --budget`` and
``llmcalc kvcache --budget`` alike; ``cache_budget`` adds the cached tokens that fit beside the weights.
"""

from collections.abc import Sequence
from typing import NamedTuple

from ..count.kvcache import KVCache
from ..count.memory import (
    PARTS,
    MemoryReport,
    attention_peak,
    device_memory,
    held_logits,
    state_bytes,
    training_transient,
)
from ..count.quant import component_bytes, dequantized_bytes
from ..errors import SpecError, brief
from ..model.config import ModelConfig
from ..model.formats import FORMATS
from ..model.layers import LayerSpec, layer_plan
from ..model.sizes import weight_bytes
from ..spec import Layout, RunSpec, check_arguments, check_new
from .sharding import (
    check_layout,
    cp_local,
    gpu_state,
    in_stage,
    recomputed_layer,
    saved,
    stage_keys,
    stage_kv_bytes,
    stage_kv_cache,
    stage_saves,
    tp_local,
    workload,
)
from .stored import held_bytes

VOCABULARY = ("embedding/token", "lm_head")  # the tensors tp splits by vocabulary


def _train_state(cfg: ModelConfig, run: RunSpec, stage: int) -> dict[str, int]:
    """The training state of a GPU of ``stage``: weights (LoRA: the frozen base in its stored
    dtype and the adapters), gradients and optimizer state."""
    state = gpu_state(cfg, run.layout, stage, run.lora)
    train = state_bytes(state.weights, state.gradients, state.optimizer, run)
    return {"weights": base_bytes(cfg, run, stage, state.frozen) + train.weights, "gradients": train.gradients,
            "optimizer": train.optimizer}


def base_bytes(cfg: ModelConfig, run: RunSpec, stage: int, elements: int) -> int:
    """Bytes of the base weights (every weight in inference, LoRA's frozen base in training) one GPU of
    ``stage`` holds in ``run.weights_dtype``: ``elements`` of a plain dtype, or as a quantized format
    stores them (:mod:`.stored`; ZeRO-3 shards its codes)."""
    if run.weights_dtype not in FORMATS:
        return weight_bytes(elements, run.weights_dtype)
    sharded = run.mode == "train" and run.layout.zero >= 3
    return held_bytes(cfg, run.layout, stage, run.weights_dtype, run.dtype, sharded)


def _stage_memory(cfg: ModelConfig, run: RunSpec, stage: int, acts: dict[str, int], kv: int) -> MemoryReport:
    """One GPU of pipeline stage ``stage``, which saves ``acts`` (train) or caches ``kv`` bytes
    (inference)."""
    layout = run.layout
    local = tp_local(cfg, layout.tp)
    parts = dict.fromkeys(PARTS, 0)
    parts["dequantization"] = dequantized_bytes(local, run.weights_dtype, run.dtype)  # the TP rank's largest matrix
    state = gpu_state(cfg, layout, stage)
    if run.mode == "train":
        parts.update(_train_state(cfg, run, stage),
                     attention=transient(cfg, run, layout.tp, in_stage(cfg, layout, stage)),
                     activations=sum(v for k, v in acts.items() if k != "loss"), logits=acts.get("loss", 0))
        return MemoryReport(run, parts, acts, {}, 0, run.seq, run.seq, stage)
    peak, queries, keys = attention_peak(local, cp_local(run), held_specs(cfg, in_stage(cfg, layout, stage)))
    last = stage == layout.pp - 1
    parts.update(weights=base_bytes(cfg, run, stage, state.weights), kv_cache=kv, attention=peak,
                 # the vocab-parallel head's logits, all-gathered whole on every GPU (comm's "tp logits")
                 logits=layout.tp * held_logits(local, cp_local(run)) if last else 0)
    return MemoryReport(run, parts, {}, {}, 0, queries, keys, stage)


def stage_states(cfg: ModelConfig, run: RunSpec, shared: dict, stages: Sequence[int] | None = None) -> list[int]:
    """Bytes of the training state (:func:`_train_state`) of each stage, or of each of ``stages``,
    ``run`` resolved with its layout: stages holding the same layers (and ends) hold the same,
    figured once in ``shared``; none hangs on the micro-batch or recomputation."""
    layout, work = run.layout, (run.dtype, run.grad_dtype, run.optimizer, run.weights_dtype, run.lora)
    keys = stage_keys(cfg, layout.pp, layout.vpp)
    out = []
    for s in range(layout.pp) if stages is None else stages:
        state_key = ("state", work, layout.tp, layout.pp, layout.vpp, layout.ep, layout.zero, layout.replicas, keys[s])
        if state_key not in shared:
            shared[state_key] = sum(_train_state(cfg, run, s).values())
        out.append(shared[state_key])
    return out


def transient(cfg: ModelConfig, run: RunSpec, tp: int, layers: tuple[tuple[int, int], ...]) -> int:
    """The attention transient of a training GPU of a TP group of ``tp`` (``run`` resolved, whole sequences)
    holding ``layers`` (:func:`.sharding.in_stage`): one attending layer's, 0 on a stage of recurrent layers alone."""
    return training_transient(tp_local(cfg, tp), run, held_specs(cfg, layers))


def held_specs(cfg: ModelConfig, layers: tuple[tuple[int, int], ...]) -> list[LayerSpec]:
    """The layer specs of ``layers`` ((layer-plan group, count)) that some layer has."""
    plan = layer_plan(cfg)
    return [plan[i].spec for i, n in layers if n]


def memory(cfg: ModelConfig, run: RunSpec = RunSpec(), shared: dict | None = None,
           stage: int | None = None) -> MemoryReport:
    """Bytes by part (PARTS) for a training step or an inference run; with a parallel layout, of
    the GPU that needs the most (the peak pipeline stage's) or of a GPU of ``stage``, ``stage_totals``
    giving every stage's. ``shared``: work kept between calls on the same ``cfg`` (`plan`'s candidates):
    the saves of a layout's stages are those of its ZeRO variants, a stage's state that of its sp variant."""
    check_arguments(cfg, run)
    run.no_images()
    run = run.resolve(cfg)
    pp = run.layout.pp
    if stage is not None and not 0 <= stage < pp:
        raise SpecError("stage", f"{stage}: the layout has {pp} pipeline stage{'s' * (pp > 1)}, "
                                 f"{'0' if pp == 1 else f'0 to {pp - 1}'}")
    if run.layout.trivial:
        return device_memory(cfg, run)
    check_layout(cfg, run)
    if run.mode == "train":  # every stage's total, then the breakdown of the peak's alone (`plan` asks often)
        layout, shared = run.layout, {} if shared is None else shared
        work = workload(run)
        saves_key = ("saves", work, layout.tp, layout.cp, layout.ep, layout.sp, pp, layout.vpp, layout.steps)
        if saves_key not in shared:
            shared[saves_key] = stage_saves(cfg, run)
        saves = shared[saves_key]
        state = stage_states(cfg, run, shared)
        mine = cp_local(run).replace(layout=Layout())
        held = [in_stage(cfg, layout, s) for s in range(pp)]
        rerun = [recomputed_layer(cfg, mine, layout.tp, layout.sp, held[s]) for s in range(pp)]
        totals = [state[s] + transient(cfg, run, layout.tp, held[s]) + rerun[s]
                  + sum(c.kept * c.total for c in saves[s]) for s in range(pp)]
        shown = max(range(pp), key=totals.__getitem__) if stage is None else stage
        report = _stage_memory(cfg, run, shown, saved(saves[shown]), 0)
        return report._replace(parts={**report.parts, "recomputed": rerun[shown]}, stage_totals=tuple(totals))
    reports = _inference_stages(cfg, run)
    shown_report = max(reports, key=lambda m: m.total) if stage is None else reports[stage]
    return shown_report._replace(stage_totals=tuple(m.total for m in reports))


def _inference_stages(cfg: ModelConfig, run: RunSpec) -> list[MemoryReport]:
    """Every stage's report of an inference ``run`` (resolved, its layout checked): a stage's GPUs hold the
    cache of every batch in flight through the pipeline (``RunSpec.resolve``: 1 unless given), and work on one."""
    if run.layout.trivial:
        return [device_memory(cfg, run)]
    kv = stage_kv_bytes(cfg, run)
    return [_stage_memory(cfg, run, s, {}, run.layout.steps * kv[s]) for s in range(run.layout.pp)]


def generation_memory(cfg: ModelConfig, run: RunSpec, prompt: int, new: int) -> int:
    """What a generation of ``new`` tokens after a ``prompt`` needs of the GPU that needs the most: the larger
    of its prompt's prefill and its last decode step (the cache of ``prompt + new`` tokens). Under ``tp``, the
    model generation times (:func:`.generation.shard`, gpt-fast's): the token embedding and LM head whole on
    every GPU, where :func:`memory` splits their vocabulary."""
    check_new(new)
    tp = run.layout.tp
    whole_vocabulary = 0
    if tp > 1:
        resolved = run.resolve(cfg)
        split, whole = (component_bytes(c, resolved.weights_dtype, resolved.dtype) for c in (tp_local(cfg, tp), cfg))
        whole_vocabulary = sum(whole[k] - split[k] for k in VOCABULARY if k in whole)
    return whole_vocabulary + max(memory(cfg, run.replace(mode="prefill", seq=prompt)).total,
                                  memory(cfg, run.replace(mode="decode", seq=prompt + new, chunk=None)).total)


class Fit(NamedTuple):
    budget: int  # bytes of one GPU's memory
    total: int  # the run's total
    max_batch: int  # the largest batch (per GPU) whose total fits, at most MAX_BATCH; 0: not even one

    @property
    def fits(self) -> bool:
        return self.total <= self.budget


MAX_BATCH = 2**40  # the search's ceiling: a batch past any real GPU


def fit(cfg: ModelConfig, run: RunSpec, budget: int) -> Fit:
    """Whether ``run`` fits in ``budget`` bytes, and the largest batch that does (every part of
    :func:`memory` grows with the batch, so a doubling then bisection finds it). The layout's
    micro-batches per step stay those of ``run``."""
    def total(batch: int) -> int:
        return memory(cfg, run.replace(batch=batch)).total

    low = 0  # fits (0: nothing yet)
    high = 1  # the first candidate past low
    while total(high) <= budget:
        low, high = high, 2 * high
        if low == MAX_BATCH:
            return Fit(budget, memory(cfg, run).total, MAX_BATCH)
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if total(mid) <= budget else (low, mid)
    return Fit(budget, memory(cfg, run).total, low)


class CacheBudget(NamedTuple):
    budget: int  # bytes of one GPU's memory
    weights: int  # the weights' bytes, what the cache shares the budget with (on ``stage``'s GPUs)
    max_batch: int  # fit's: the largest batch whose inference memory fits
    max_tokens: int | None  # cached tokens (every layer's entry each) beside the weights; None: none cached per token
    stage: int = 0  # the pipeline stage whose GPUs fit the fewest tokens

    @property
    def weights_fit(self) -> bool:
        """Whether any memory is left beside the weights."""
        return self.weights < self.budget


def cache_budget(cfg: ModelConfig, run: RunSpec, budget: int) -> CacheBudget:
    """What ``budget`` bytes of each GPU serve of the decode ``run``: the largest batch whose inference memory
    (its prefill's, as ``llmcalc memory --mode inference`` counts it) fits, and the cached tokens that fit
    beside the weights (0 when the weights do not fit): ``(budget - weights) // bytes per token``; with
    recurrent layers, whose state each sequence keeps, or windows that bound some layers' caches and not
    others' (Gemma 3), sequences of ``run.seq`` tokens, each with its cache and state, and the cached tokens
    of each, the last sequence cut short. Under a layout, a GPU's weights and cache on each pipeline stage,
    and the stage that fits the fewest tokens (its weights reported)."""
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise SpecError("budget", f"must be a positive number of bytes, got {brief(budget)}")
    serving, resolved = run.replace(mode="prefill"), run.resolve(cfg)
    check_arguments(cfg, serving)
    serving.no_images()
    if not resolved.layout.trivial:
        check_layout(cfg, resolved)
    weights = [r.parts["weights"] for r in _inference_stages(cfg, serving.resolve(cfg))]
    stages = [(_cached_tokens(stage_kv_cache(cfg, resolved, s), max(budget - w, 0)), s) for s, w in enumerate(weights)]
    limited = [t for t in stages if t[0] is not None]  # a stage of recurrent layers alone caches no token
    tokens, stage = min(limited) if limited else (None, max(range(len(weights)), key=weights.__getitem__))
    return CacheBudget(budget, weights[stage], fit(cfg, serving, budget).max_batch, tokens, stage)


def _cached_tokens(cache: KVCache, free: int) -> int | None:
    """The cached tokens ``free`` bytes hold (:func:`cache_budget`); None where no token is cached."""
    per_token, state = cache.bytes_per_token, cache.state_bytes // cache.batch
    if not per_token:
        return None
    if not state and cache.kv_bytes == cache.batch * cache.cached_tokens * per_token:  # a token: every layer's entry
        return free // per_token
    full, rest = divmod(free, cache.bytes // cache.batch)
    return full * cache.cached_tokens + min(cache.cached_tokens, max(rest - state, 0) // per_token)


class GpuCache(NamedTuple):
    cache: KVCache  # one GPU's, of ``stage``
    stage: int  # the pipeline stage whose GPUs hold the most
    stage_totals: tuple[int, ...]  # one GPU's cache bytes on each stage


def gpu_kv_cache(cfg: ModelConfig, run: RunSpec) -> GpuCache:
    """The KV cache under ``run``'s layout: one GPU's of the stage that holds the most (its layers, its KV
    heads: :func:`.sharding.stage_kv_cache`), and every stage's bytes."""
    check_arguments(cfg, run)
    run = run.resolve(cfg)
    check_layout(cfg, run)
    caches = [stage_kv_cache(cfg, run, stage) for stage in range(run.layout.pp)]
    peak = max(range(len(caches)), key=lambda s: caches[s].bytes)
    return GpuCache(caches[peak], peak, tuple(c.bytes for c in caches))
