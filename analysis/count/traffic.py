"""Bytes moved: the memory traffic (HBM reads and writes) of a pass, per component.

The model (README "How long"), one kernel per op as PyTorch runs a transformer:

- a matrix reads its weights once, its input rows once and writes its output rows once. A
  mixture of experts reads the experts its tokens reach at random, ``E (1 - (1 - k/E)^tokens)`` of them
  rounded (on a GPU of an expert-parallel group, of the ``E / ep`` it holds, which the group's tokens reach:
  ``count.flops.copies_read``). The embedding reads the rows of its tokens;
- an elementwise op reads and writes each element the number of times its
  :class:`~analysis.variants.Op` says (a norm reads and writes once; a gated activation reads
  two and writes one; a bias add is fused into its matmul and moves nothing of its own);
- eager attention writes the score matrix, each op on it (scale, soft-cap, position bias,
  softmax) reads and writes it once, and the values matmul reads it: the traffic FlashAttention
  removes. Flash attention is one kernel that keeps the scores on chip: it reads Q once, writes O
  once and reads from HBM each K and V row its queries attend to once. Its thread blocks (one a
  tile of query rows, FlashAttention-2's loop order, Dao 2023) run the tiles of a head together
  and re-read the same K/V blocks, which L2 serves (FlashAttention-2/3 reach 50-75% of tensor
  peak on long sequences, which re-reading K/V from HBM per tile would not allow): the compulsory
  traffic, so the ideal stays a bound on speed. The query heads that share a K/V head share its
  reads (GQA), so a decode step reads each cached K/V head once. The kernel's bytes go to its two
  products in proportion to their FLOPs, so that both have the kernel's intensity and their times add
  up to the one kernel's roofline: Q and K's to the scores (``score_dim`` wide), V and O's to the values
  (``value_dim``). MLA's absorbed decode step (:func:`~analysis.count.flops.absorbed`) reads each latent
  it attends to once, for its scores and its values (the values are the latents' first columns: that read
  shared between the two as their FLOPs are), and its two ``kv_b`` matmuls read ``kv_b``'s weights once
  and each head's query and output (:attr:`~analysis.model.attention.AbsorbedMLA.kv_b_io`);
- inference writes each new token's KV-cache entry (``kv_cache``); attention reads K and V in the
  KV-cache dtype (inference) or the compute dtype (training);
- a recurrent mixer (in place of attention, or beside it: ``parallel_mixer``) runs its linears and its
  elementwise ops as above and its **core** (the conv, the scan or rule, the ops between them) as one
  fused kernel a layer (:mod:`analysis.model.mixer`), its bytes under the first of its ``core`` keys:
  it reads its inputs once, writes its outputs once and reads its own vectors once; a pass continuing
  cached sequences (a decode step, a later prefill chunk) reads each sequence's conv and recurrent
  state first, and an inference pass writes it back, in ``run.state_dtype`` (the cache's size, from
  the descriptor's ``state_values``); training keeps no state. A shared transformer block (Zamba)
  moves its attention's bytes and writes its K/V as an attention layer's;
- backward moves twice the forward's bytes per component (each matmul's input and weight
  gradients are two matmuls of the forward's size; each elementwise op reads its saved input and
  the incoming gradient and writes one); full recomputation adds one more forward of the layers,
  per-op checkpointing one of what it does not keep (:func:`rerun_bytes`);
  the optimizer step reads the weights, gradients and optimizer state and writes the weights and
  the state back (``optimizer``);
- LoRA: an adapter's two matrices move their bytes as any matrix does (``<key>/lora``); a frozen
  matrix's backward is its input gradient only, once its forward's bytes; the frozen embedding
  has no backward; the optimizer steps the adapters only. A format that dequantizes (QLoRA's
  bitsandbytes) is counted reading its packed weights, not the expanded copy.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from types import MappingProxyType

from ..model.architecture import Block, build
from ..model.attention import AbsorbedMLA, AttentionKind
from ..model.config import ModelConfig
from ..model.formats import FORMATS
from ..model.layers import LayerSpec
from ..model.parts import Linear
from ..model.sizes import bytes_per, weight_bytes
from ..model.variants import Op
from ..spec import RunSpec
from .flops import (
    _add,
    absorbed,
    attended_keys,
    attended_pairs,
    copies_read,
    core_keys,
    core_recomputed,
    layer_ops,
    linear_rows,
    model_ops,
    run_attentions,
)
from .lora import frozen_keys, layer_adapted
from .memory import trained_state
from .quant import linear_weight_bytes
from .recompute import rerun_core, rerun_linears, rerun_ops


def attended_span(past: int, n: int, window: int | None, chunk: int | None) -> int:
    """Keys the queries at positions ``past..past+n-1`` attend to at all, each read once: from the
    first query's window (or chunk) start to the last query."""
    if chunk is not None:
        return past + n - chunk * (past // chunk)
    return past + n if window is None else min(past + n, n + window - 1)


def flash_kv_bytes(attn: AttentionKind, spec: LayerSpec, run: RunSpec, kv: int) -> tuple[int, int]:
    """(K, V) bytes one layer's flash kernel reads from HBM (module docstring), ``kv`` bytes an element. Values
    read with the keys (absorbed MLA's latents: a decode step's one query reads its keys, its top-k with DSA)
    cost nothing more: each key's one read is shared by the scores and the values in proportion to their
    FLOPs (``score_dim : value_dim``, to the byte), as Q and K are to V and O's."""
    n = run.query_len
    if attn.values_in_keys:
        unit = attn.score_dim * kv  # one key's latent, read once
        scores = unit * attn.score_dim // (attn.score_dim + attn.value_dim)
        reads = run.batch * attn.kv_heads * attended_pairs(spec, run)
        return reads * scores, reads * (unit - scores)
    reads = run.batch * attn.kv_heads * attended_span(run.seq - n, n, spec.window, spec.chunk)
    return reads * attn.score_dim * kv, reads * attn.value_dim * kv


def _attention_bytes(attn: AttentionKind, spec: LayerSpec, run: RunSpec, b: int, kv: int) -> dict[str, int]:
    """Scores and values of one attention: flash (one kernel) or eager (module docstring)."""
    B, n, h, heads = run.batch, run.query_len, attn.heads, attn.kv_heads
    q, o = B * n * h * attn.score_dim * b, B * n * h * attn.value_dim * b
    if run.attention == "flash":
        k, v = flash_kv_bytes(attn, spec, run, kv)
        return {"attention/scores": q + k, "attention/values": v + o}
    seen = attended_keys(spec, run)
    keys = B * heads * seen
    scores = B * h * n * seen * b  # the dense matrix eager kernels hold
    return {"attention/scores": q + keys * attn.score_dim * kv + scores,
            "attention/values": scores + keys * attn.value_dim * kv + o}


@functools.lru_cache(maxsize=1024)  # a pass's time and a stage's share of it (analysis.cluster.shares) both ask
def layer_bytes(layer: Block, run: RunSpec) -> Mapping[str, int]:
    """Forward bytes of one layer, by component (``run`` resolved)."""
    b, T = bytes_per(run.dtype), run.tokens
    kv = b if run.mode == "train" else bytes_per(run.kv_dtype)
    out: dict[str, int] = {}
    lora = layer_adapted([m.key for m in layer.linears()], run.lora)
    for m in layer.linears():
        _add(out, m.key, _linear_bytes(layer, m, run, b))
        if m.key in lora:  # A (d_in -> r) and B (r -> d_out), each read once per copy read
            rows, r = linear_rows(m, layer, run), run.lora.rank
            read = copies_read(m, rows, run)
            _add(out, m.key + "/lora", read * r * (m.d_in + m.d_out) * b
                 + rows * m.active * (m.d_in + 2 * r + m.d_out) * b)
    for attn, spec in run_attentions(layer, run):
        for key, n in _attention_bytes(attn, spec, run, b, kv).items():
            _add(out, key, n)
    table = run.dtype if run.weights_dtype in FORMATS else run.weights_dtype  # a format leaves vectors unquantized
    for mixer in layer.mixers:
        if mixer.core:  # a none layer's mixer has none
            _add(out, mixer.core[0], mixer.core_bytes(run, table))
    if layer.cfg.hyper is not None:  # the hyper-connections' matmuls (their elementwise ops are layer_ops')
        from ..model.hyper import branch_bytes
        for key, n in branch_bytes(layer.cfg, T, layer.branches, b).items():
            _add(out, key, n)
    _add_ops(out, run, layer_ops(layer, run), b, layer.fused())
    if run.mode != "train":
        _add(out, "kv_cache", sum(weight_bytes(T * attn.kv_values_per_token, run.kv_dtype)
                                  for attn, _ in layer.attentions()))
    return MappingProxyType(out)


def _linear_bytes(layer: Block, m: Linear, run: RunSpec, b: int) -> int:
    """A linear's forward bytes: the weights of the copies its rows reach, its input and output rows (MLA's
    absorbed ``kv_b``: each head's query and output, :attr:`~analysis.model.attention.AbsorbedMLA.kv_b_io`)."""
    rows = linear_rows(m, layer, run)
    read = copies_read(m, rows, run)
    width = AbsorbedMLA(layer.cfg).kv_b_io if m.over_keys and absorbed(layer, run) else m.d_in + m.d_out
    return linear_weight_bytes(layer.cfg, m, read, run.weights_dtype, run.dtype) + rows * m.active * width * b


def _add_ops(out: dict[str, int], run: RunSpec, ops: Sequence[Op], b: int, fused: set[str]) -> None:
    """Elementwise ops' bytes (flash fuses the ops on the scores into its kernel, a recurrent mixer's core
    kernel those of its ``fused`` keys)."""
    flash = run.attention == "flash"
    for op in ops:
        _add(out, op.key, 0 if (flash and op.scores) or op.key in fused else op.io * op.elements * b)


def rerun_bytes(layer: Block, run: RunSpec) -> dict[str, int]:
    """Bytes of what backward runs again of one layer under ``op`` (``run`` resolved): the linears it
    does not keep, eager attention's core and the elementwise ops it runs again (:mod:`.recompute`)."""
    b = bytes_per(run.dtype)
    out: dict[str, int] = {}
    for m in rerun_linears(layer, run):
        _add(out, m.key, _linear_bytes(layer, m, run, b))
    if rerun_core(layer.cfg, run):
        for attn, spec in layer.attentions():
            for key, n in _attention_bytes(attn, spec, run, b, b).items():
                _add(out, key, n)
    _add_ops(out, run, rerun_ops(layer, run, layer_ops(layer, run)), b, layer.fused())
    return out


def forward_bytes(cfg: ModelConfig, run: RunSpec) -> tuple[dict[str, int], dict[str, int]]:
    """(the layers', the rest's) forward bytes by component (``run`` resolved)."""
    model = build(cfg)
    layers: dict[str, int] = {}
    for group, block in model.blocks:
        for key, n in layer_bytes(block, run).items():
            _add(layers, key, n * group.count)
    b, T, d, V, n = bytes_per(run.dtype), run.tokens, cfg.d_model, cfg.vocab_size, run.logit_tokens
    # a format leaves the embedding rows in the compute dtype
    table = run.dtype if run.weights_dtype in FORMATS else run.weights_dtype
    rest = {"embedding": weight_bytes(T * d, table) + T * d * b}
    if n:  # no logits: a chunk before the last of a chunked prefill
        head = model.head
        weights = weight_bytes(head.linear.params, table) if head.tied else linear_weight_bytes(
            cfg, head.linear, 1, run.weights_dtype, run.dtype)  # tied: the embedding's table (and its bias)
        rest[head.linear.key] = weights + n * (d + V) * b
    if model.hyper_head is not None:  # its weights, the streams it reads, its N outputs
        N = cfg.streams
        rest[model.hyper_head.key] = model.hyper_head.params * b + n * (N * d + N) * b
    for op in model_ops(cfg, run):
        _add(rest, op.key, op.io * op.elements * b)
    return layers, rest


def pass_bytes(cfg: ModelConfig, run: RunSpec) -> dict[str, int]:
    """Bytes moved by the whole pass (forward; training adds backward and the optimizer step)."""
    run.no_images()
    run = run.resolve(cfg)
    layers, rest = forward_bytes(cfg, run)
    out: dict[str, int] = {}
    factor = 3 if run.mode == "train" else 1  # forward + twice it in backward
    # LoRA: frozen matrices compute their input gradient only; the frozen embedding nothing
    frozen = {} if run.lora is None else {**dict.fromkeys(frozen_keys(cfg), 2), "embedding": 1}
    for part in (layers, rest):
        for key, n in part.items():
            _add(out, key, frozen.get(key, factor) * n)
    if run.mode == "train":
        if run.recompute == "op":
            for group, block in build(cfg).blocks:
                for key, n in rerun_bytes(block, run).items():
                    _add(out, key, n * group.count)
        elif run.recompute == "full" or core_recomputed(cfg, run):
            core = core_keys(cfg, run)
            for key, n in layers.items():
                if run.recompute == "full" or key in core:
                    _add(out, key, n)
        state = trained_state(cfg, run)  # LoRA: the adapters alone
        _add(out, "optimizer", 2 * (state.weights + state.optimizer) + state.gradients)
    return out
