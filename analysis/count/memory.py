"""Memory: training state, attention working memory, activations and inference totals.

Conventions (the docs' "Conventions: memory"):
- weights in the compute dtype, gradients in ``run.grad_dtype`` (by default the compute dtype);
  mixed precision (any dtype but fp32) adds fp32 master weights; Adam/AdamW keep two fp32 moments,
  SGD with momentum one, SGD none. bf16 + Adam = 2 + 2 + 4 + 8 = 16 bytes per parameter before
  activations, 2 + 4 + 4 + 8 = 18 with fp32 gradients (Megatron-LM's ``--bf16`` default);
- attention working memory is one layer's transient peak on top of weights and cache:
  eager attention holds the ``B*h*S*S_kv`` scores and the softmax output at once (the
  softmax reads one and writes the other); flash attention keeps only ``B*h*S`` fp32
  log-sum-exp values (its tiles live in on-chip memory). In training the softmax output
  and the log-sum-exp are counted with the saved activations; only the eager scores add.
  A sink logit per row is not counted here (one column out of ``S_kv``);
- chunked prefill runs queries in chunks of C tokens against ``min(cached, W) + C`` keys
  on a layer with window W (``cached + C`` on a full layer; ``o % A + C`` at offset o on a layer
  with attention chunks of A); the peak is over chunks and layers;
- full recomputation (``recompute="full"``) keeps each layer's input, per-op (``"op"``) some outputs more;
  backward reruns one layer's forward at a time, which saves what the layer saves without recomputation but
  keeps until its backward is done: the largest layer's such saves, ``recomputed``, on top of the kept ones
  (Korthikanti et al.'s 2sbhL counts the kept inputs alone), summed with the loss's saves as every part is,
  though the loss frees them before backward reruns a layer (a bound by the smaller of the two);
- inference (``prefill`` and ``decode``): weights in their stored dtype, the KV cache for
  ``seq`` tokens, the attention peak, and the logits of the last position of each sequence (of every
  position with ``all_logits``);
- MoE: every expert's weights, gradients and optimizer state, activations for the
  ``experts_per_token`` experts each token visits;
- LoRA (``run.lora``): the frozen base in ``weights_dtype`` (the compute dtype, or a quantized
  format: QLoRA) with no gradients or optimizer state; the adapters as any trained parameter
  (bf16 + Adam: 16 bytes each); activations as :mod:`analysis.activations` says;
- dequantization: a format that expands each matrix to the compute dtype before its matmul
  (bitsandbytes 4-bit) holds its largest quantized matrix so, transiently, once.
"""

import math
from collections.abc import Collection
from typing import NamedTuple

from ..model.config import ModelConfig
from ..model.layers import LayerSpec, layer_plan
from ..model.sizes import FP32, weight_bytes
from ..spec import OPTIMIZER_STATES, RunSpec
from .activations import activation_bytes, korthikanti_bytes
from .kvcache import kv_cache
from .lora import adapter_params
from .params import count_params
from .quant import dequantized_bytes, weights_bytes

# `llmcalc memory --mode` -> the RunSpec mode: inference is a prefill of the sequence (weights,
# KV cache, attention working memory, the logits it returns)
MEMORY_MODES = {"train": "train", "inference": "prefill"}
PARTS = ("weights", "gradients", "optimizer", "activations", "recomputed", "attention", "dequantization", "kv_cache",
         "logits")


class TrainingState(NamedTuple):
    weights: int
    gradients: int
    optimizer: int  # moments plus fp32 master weights under mixed precision


def trained_state(cfg: ModelConfig, run: RunSpec) -> TrainingState:
    """The state of what the optimizer steps: every parameter, or LoRA's adapters alone (whose
    frozen base holds only its weights, :func:`memory`); run resolved."""
    n = count_params(cfg).total if run.lora is None else sum(adapter_params(cfg, run.lora).values())
    return state_bytes(n, n, n, run)


def state_bytes(weights: int, gradients: int, optimized: int, run: RunSpec) -> TrainingState:
    """Bytes of the training state for these element counts (each can be a shard of the model) under
    ``run`` (resolved): its compute dtype, gradient dtype and optimizer."""
    master = FP32 if run.dtype != "fp32" else 0
    return TrainingState(weight_bytes(weights, run.dtype), weight_bytes(gradients, run.grad_dtype),
                         optimized * (OPTIMIZER_STATES[run.optimizer] * FP32 + master))


def chunk_spans(cfg: ModelConfig, seq: int, chunk: int | None,
                specs: Collection[LayerSpec] | None = None) -> list[tuple[int, int]]:
    """(queries, keys) of the attention calls that can be the largest when prefilling ``seq``
    tokens on layers of ``specs`` (None: every layer's): ``(seq, seq)`` unchunked; with chunks of C,
    the chunk at offset o attends to ``min(o, W) + len(chunk)`` keys on each layer, and the largest
    is the last or the last full chunk."""
    if chunk is None or chunk >= seq:
        return [(seq, seq)]
    last = chunk * ((seq - 1) // chunk)
    windows = set(_or_every(cfg, specs))
    out = [(min(chunk, seq - o), spec.keys_seen(o) + min(chunk, seq - o))
           for o in (last - chunk, last) for spec in windows if spec.chunk is None]
    for C in {spec.chunk for spec in windows if spec.chunk is not None}:
        # a chunked layer: the call at offset o reads the o % C cached keys of its first query's
        # chunk; the offsets of one period of o % C, and the last call
        period = C // math.gcd(chunk, C)
        offsets = {*range(0, min(last, period * chunk) + 1, chunk), last}
        out += [(min(chunk, seq - o), o % C + min(chunk, seq - o)) for o in offsets]
    return out


def attention_bytes(cfg: ModelConfig, batch: int, queries: int, keys: int, attention: str,
                    dtype: str, training: bool = False) -> int:
    """One layer's transient attention memory (see the module docstring). In training the
    softmax output (eager) and the log-sum-exp (flash) are saved activations already, so
    only eager's pre-softmax scores are extra."""
    if attention == "flash":
        return 0 if training else batch * cfg.n_heads * queries * FP32
    scores = batch * cfg.n_heads * queries * keys * weight_bytes(1, dtype)
    return scores if training else 2 * scores


RERUN = ("full", "op")  # recomputations that rerun a layer's forward in backward (selective: eager's core alone)


def recomputed_layer(cfg: ModelConfig, run: RunSpec) -> int:
    """Recomputation's transient (``run`` resolved): backward reruns one layer's forward at a time (full, or
    per-op), which saves again what the layer saves without recomputation but keeps (its input, per-op's kept
    outputs: the same storage), held while its backward runs; the largest layer's."""
    if run.mode != "train" or run.recompute not in RERUN:
        return 0
    kept = activation_bytes(cfg, run).groups
    return max(sum(saved.values()) - sum(mine.values())
               for (_, saved), (_, mine) in zip(activation_bytes(cfg, run.replace(recompute="none")).groups, kept))


def attention_peak(cfg: ModelConfig, run: RunSpec, specs: Collection[LayerSpec] | None = None) -> tuple[int, int, int]:
    """(bytes, queries, keys) of the largest attention call of an inference run on the layers of ``specs`` (None:
    every layer's); (0, 0, 0) where none attends (recurrent layers alone)."""
    run.no_images()
    run = run.resolve(cfg)
    attending = [s for s in _or_every(cfg, specs) if s.attends]
    if not attending:
        return 0, 0, 0
    if run.mode == "decode":
        spans = [(1, s.keys_seen(run.seq)) for s in attending]
    else:
        spans = chunk_spans(cfg, run.seq, run.chunk, attending)
    return max((attention_bytes(cfg, run.batch, q, k, run.attention, run.dtype), q, k) for q, k in spans)


def training_transient(cfg: ModelConfig, run: RunSpec, specs: Collection[LayerSpec] | None = None) -> int:
    """The attention transient of a training pass (``run`` resolved) on the layers of ``specs`` (None: every
    layer's): one layer's, 0 where none attends."""
    scores = attention_bytes(cfg, run.batch, run.seq, run.seq, run.attention, run.dtype, training=True)
    return scores if scores and any(s.attends for s in _or_every(cfg, specs)) else 0


def _or_every(cfg: ModelConfig, specs: Collection[LayerSpec] | None) -> Collection[LayerSpec]:
    """``specs``, or (None) every layer's of ``cfg``."""
    return [g.spec for g in layer_plan(cfg)] if specs is None else specs


def logits_bytes(cfg: ModelConfig, batch: int, positions: int, dtype: str) -> int:
    return batch * positions * cfg.vocab_size * weight_bytes(1, dtype)


def held_logits(cfg: ModelConfig, run: RunSpec) -> int:
    """Bytes of the logits an inference holds at once: each sequence's last position's (none for a prefill's chunk
    before the last, as the FLOPs count them: ``logit_tokens``), or with ``all_logits`` a prefill's every
    position's (a chunked prefill's, a chunk's at a time)."""
    every = run.mode == "prefill" and run.all_logits
    positions = min(run.chunk or run.query_len, run.query_len) if every else run.logit_tokens // run.batch
    return logits_bytes(cfg, run.batch, positions, run.dtype)


class MemoryReport(NamedTuple):
    run: RunSpec  # resolved
    parts: dict[str, int]  # every name of PARTS, 0 where it does not apply
    activation_components: dict[str, int]  # train: saved bytes by component
    activations_per_layer: dict[str, int]  # train: one layer of each group, by group description
    korthikanti_per_layer: int  # train: sbh(34 + 5as/h), for comparison
    attention_queries: int  # the largest attention call: queries x keys
    attention_keys: int
    stage: int = 0  # with parallelism: the pipeline stage of the GPU the figures are for (the peak)
    stage_totals: tuple[int, ...] = ()  # with parallelism: one GPU's total on each stage

    @property
    def total(self) -> int:
        return sum(self.parts.values())

    @property
    def peak_stage(self) -> int:
        """The pipeline stage of the GPU that needs the most (0 on one GPU)."""
        totals = self.stage_totals
        return max(range(len(totals)), key=totals.__getitem__) if totals else 0


def device_memory(cfg: ModelConfig, run: RunSpec = RunSpec()) -> MemoryReport:
    """Bytes by part (PARTS) for a training step or an inference run of one model replica on one
    device (with a layout, every GPU's: :func:`analysis.cluster.memory.memory`)."""
    run.one_device("device_memory")
    run.no_images()
    run = run.resolve(cfg)
    parts = dict.fromkeys(PARTS, 0)
    parts["dequantization"] = dequantized_bytes(cfg, run.weights_dtype, run.dtype)
    if run.mode == "train":
        state = trained_state(cfg, run)
        base = 0 if run.lora is None else weights_bytes(cfg, run.weights_dtype, run.dtype)  # frozen (QLoRA: a format)
        acts = activation_bytes(cfg, run)
        parts.update(weights=base + state.weights, gradients=state.gradients, optimizer=state.optimizer,
                     activations=acts.total - acts.loss, logits=acts.loss, recomputed=recomputed_layer(cfg, run),
                     attention=training_transient(cfg, run))
        per_layer = {group.spec.describe(): sum(saved.values()) for group, saved in acts.groups}
        return MemoryReport(run, parts, acts.components, per_layer,
                            korthikanti_bytes(cfg, run.batch, run.seq), run.seq, run.seq)
    peak, queries, keys = attention_peak(cfg, run)
    parts.update(weights=weights_bytes(cfg, run.weights_dtype, run.dtype),
                 kv_cache=kv_cache(cfg, run).bytes, attention=peak,
                 logits=held_logits(cfg, run))
    return MemoryReport(run, parts, {}, {}, 0, queries, keys)
