"""FLOPs of a forward and backward pass, per component, in two families.

Conventions (README "FLOPs"):
- one add or one multiply is one FLOP; ``(m x k) @ (k x n)`` is ``2mkn`` FLOPs, as
  PyTorch's ``FlopCounterMode`` counts it. Biases, norms, activations, softmax and the
  like are *elementwise* FLOPs, reported apart and never folded into the matmul figure;
- attention is ``dense`` (the full ``S x S_kv`` score matrix, as dense kernels execute it
  and as FlopCounterMode, PaLM and Chinchilla count it) or ``causal`` (only the unmasked
  query-key pairs: the causal triangle intersected with each layer's sliding-window band);
  scores cost ``2*B*h*pairs*score_dim`` and values ``2*B*h*pairs*value_dim`` with the head
  sizes of the layer's attention kind (MLA: ``nope + rope`` and ``v_head_dim``);
- backward is counted per operation: a linear layer costs 2x its forward (input and
  weight gradients); attention 2x with eager attention (dQ, dK, dP, dV); flash
  attention also recomputes the scores (charged to ``attention/scores``: 3x scores + 2x
  values, 2.5x the attention forward when both head sizes are equal;
  not with ``relative`` positions, whose learned bias needs a gradient no fused kernel
  gives, so those models run the eager backward);
  ``recompute="full"`` (full activation recomputation) adds one more forward of every layer
  (not the LM head, whose input is kept); ``"selective"`` one more forward of eager
  attention's core (scores, their elementwise ops, values: Korthikanti et al.'s selective
  recomputation), nothing with flash attention, which recomputes its scores anyway; ``"op"``
  (per-op checkpointing, :mod:`analysis.count.recompute`) one more forward of the linears it does
  not keep, of eager attention's core and of the layers' elementwise ops (not those a flash kernel
  whose output it keeps fuses, nor a kept linear's bias add).
  Elementwise backward is estimated as 2x its forward;
- MLA runs a pass of one new token after cached ones under flash attention absorbed (:func:`absorbed`,
  :class:`~analysis.model.attention.AbsorbedMLA`), as serving engines run it: ``attention/kv_b`` over the new tokens
  (W_UK on the query, W_UV on the output), the scores and values over the cached latents (``kv_lora_rank +
  qk_rope_head_dim`` and ``kv_lora_rank`` wide, one K/V head); everywhere else (prefill, training, eager attention)
  as transformers runs it, ``kv_b`` decompressing every key;
- a prefill is one pass over the prompt: ``run.chunk`` (chunked prefill) changes the memory
  peak (:mod:`analysis.memory`), not these counts.
"""

import functools
import math
from collections.abc import Sequence
from typing import NamedTuple

from ..model.architecture import Block, build
from ..model.attention import AbsorbedMLA, AttentionKind, temperature_ops
from ..model.config import ModelConfig
from ..model.ffn import ROUTED_EXPERTS, SIGMOID_COST
from ..model.layers import LayerGroup, LayerSpec
from ..model.parts import Linear
from ..model.variants import (
    POSITION_BIAS_COST,
    POSITIONS,
    ROPE_COST,
    SCORE_SCALE_COST,
    SOFTCAP_COST,
    SOFTMAX_COST,
    Op,
    norm_cost,
)
from ..spec import RunSpec, check_arguments
from .lora import frozen_keys, layer_adapted
from .params import count_params
from .recompute import rerun_core, rerun_linears, rerun_ops


def _triangle(n: int, window: int | None, chunk: int | None = None, topk: int | None = None) -> int:
    """sum_{m=1..n} min(m, W): keys seen by the first n positions under causal masking; with a
    chunk C, sum_{m=1..n} ((m - 1) % C + 1): each position sees its chunk up to itself; with a
    DSA ``topk`` K, each position reads min(seen, K) of them."""
    if topk is not None:
        if chunk is not None:
            return sum(min((m - 1) % chunk + 1, topk) for m in range(1, n + 1))
        window = topk if window is None else min(window, topk)
    if chunk is not None:
        full, rest = divmod(n, chunk)
        return full * chunk * (chunk + 1) // 2 + rest * (rest + 1) // 2
    if window is None or n <= window:
        return n * (n + 1) // 2
    return window * (window + 1) // 2 + (n - window) * window


def attended_pairs(spec: LayerSpec, run: RunSpec) -> int:
    """Query-key pairs one sequence computes in one head of a layer.

    Dense: every query against every key the kernel holds (``S x S`` for train and
    prefill; the ``min(seq, W)`` cached keys for decode). Causal: query at position p
    sees ``min(p + 1, W)`` keys. A chunk (``run.past``) runs the queries ``past..seq-1``.
    """
    n = run.query_len
    if spec.topk is not None:  # DSA: each query reads at most topk of the keys it sees (its indexer all)
        if run.mode == "decode" or run.causal:  # min(seen, topk) per query: topk bounds like a window
            return (_triangle(run.seq, spec.window, spec.chunk, spec.topk)
                    - _triangle(run.seq - n, spec.window, spec.chunk, spec.topk))
        return n * min(attended_keys(spec, run), spec.topk)
    if run.mode == "decode" or run.causal:
        return _triangle(run.seq, spec.window, spec.chunk) - _triangle(run.seq - n, spec.window, spec.chunk)
    return n * attended_keys(spec, run)


def indexed_pairs(spec: LayerSpec, run: RunSpec) -> int:
    """Query-key pairs a DSA indexer scores in one sequence: every key each query sees, as dense or
    causal attention would (:func:`attended_pairs` without the top-k)."""
    return attended_pairs(spec._replace(topk=None), run)


def attended_keys(spec: LayerSpec, run: RunSpec) -> int:
    """Keys one sequence's forward reads: all ``seq`` without a window; with one, those of the
    last query's window and of the ``query_len - 1`` before it (decode: ``min(seq, W)``)."""
    return spec.keys_seen(run.seq + 1 - run.query_len) + run.query_len - 1


SCORES_VALUES = ("attention/scores", "attention/values")  # attention's core: its two matmuls, over the keys
# The families breakdown keys fall into, by their prefix alone (any attention kind's projections
# are ``attention/*``, any FFN kind's matrices ``mlp/*`` or ``moe/*``): the share columns of
# `llmcalc flops` and the lines of `llmcalc plot flops`.
FAMILIES = ("attn proj", "attn scores+values", "mlp", "lm head")


def family(key: str) -> str:
    """``attention/q`` -> ``attn proj``; ``moe/experts`` -> ``mlp``; ``lm_head`` -> ``lm head``. A mamba
    mixer stands where attention does: its linears are ``attn proj``, its conv and scan ``attn scores+values``.
    A layer's parts for a shared transformer block go with the block's (its projection back: ``mlp``)."""
    if key.startswith("shared/"):  # shared/attention/q_adapter/a, shared/mlp/adapter/b, shared/proj
        return "mlp" if key == "shared/proj" else family(key.removeprefix("shared/"))
    if key == "rglru/conv1d":  # the rglru block's conv; its gates project as its linears do
        return "attn scores+values"
    if key.startswith("rglru/"):
        return "attn proj"
    if key in ("mamba/conv1d", "mamba/scan", "mamba2/conv1d", "mamba2/scan", "short_conv/conv1d",
               "lightning/attention", "gated_deltanet/conv1d", "gated_deltanet/scan", "kda/conv1d", "kda/scan"):
        return "attn scores+values"
    if key.startswith(("mamba/", "mamba2/", "short_conv/", "lightning/", "gated_deltanet/", "kda/")):
        return "attn proj"
    if key in SCORES_VALUES or key == "attention/indexer":
        return "attn scores+values"
    if key.startswith("laurel/"):  # Gemma 3n: Laurel reads the attention's input beside it; AltUp's streams
        return "attn proj"  # and the per-layer inputs go with the MLP
    if key.startswith(("altup/", "per_layer/")):
        return "mlp"
    if key.startswith("hyper/"):  # a branch's hyper-connection goes with it; the final collapse with the head
        return {"attention": "attn proj", "mlp": "mlp", "head": "lm head"}[key[6:].partition("_")[0]]
    return {"attention": "attn proj", "mlp": "mlp", "moe": "mlp"}.get(key.split("/")[0], key.replace("_", " "))


class FlopBreakdown(NamedTuple):
    """One pass's FLOPs: matmuls by breakdown key, elementwise ops by name."""

    matmul: dict[str, int]  # model totals by component key
    elementwise: dict[str, int]  # model totals by op

    def family_matmul(self, name: str) -> int:
        """Matmul FLOPs of one of :data:`FAMILIES`."""
        return sum(v for k, v in self.matmul.items() if family(k) == name)

    @property
    def matmul_total(self) -> int:
        return sum(self.matmul.values())

    @property
    def elementwise_total(self) -> int:
        return sum(self.elementwise.values())

    @property
    def total(self) -> int:
        return self.matmul_total + self.elementwise_total


class FlopReport(NamedTuple):
    """A run's FLOPs: forward, backward (empty outside training), and one layer's forward matmuls per group."""

    run: RunSpec  # resolved
    forward: FlopBreakdown
    backward: FlopBreakdown
    groups: tuple[tuple[LayerGroup, dict[str, int]], ...]  # one layer's forward matmul FLOPs per group

    @property
    def total(self) -> FlopBreakdown:
        keys = list(dict.fromkeys([*self.forward.matmul, *self.backward.matmul]))
        ops = list(dict.fromkeys([*self.forward.elementwise, *self.backward.elementwise]))
        return FlopBreakdown(
            {k: self.forward.matmul.get(k, 0) + self.backward.matmul.get(k, 0) for k in keys},
            {k: self.forward.elementwise.get(k, 0) + self.backward.elementwise.get(k, 0) for k in ops})


def _add(d: dict[str, int], key: str, n: int) -> None:
    if n:
        d[key] = d.get(key, 0) + n


def absorbed(layer: Block, run: RunSpec) -> bool:
    """Whether the layer's MLA runs absorbed (:class:`~analysis.model.attention.AbsorbedMLA`): in a pass of one
    new token a sequence after cached ones (a decode step, or a one-token chunk of a chunked prefill) under
    flash attention, as serving engines route such passes (vLLM's MLA backend, SGLang, FlashMLA) and as the
    reference runs them. Eager attention is transformers' way, which decompresses (LoRA adapters, training
    only, never meet such a pass)."""
    return (layer.spec.attention == "mla" and run.query_len == 1 and run.seq > 1 and run.attention == "flash"
            and not POSITIONS[layer.cfg.position].learned_bias)  # a learned bias runs eager attention


def mla_absorbed(cfg: ModelConfig, run: RunSpec) -> bool:
    """Whether some MLA layer of ``cfg`` runs absorbed in ``run`` (:func:`absorbed`): the titles say so."""
    run = run.resolve(cfg)
    return any(absorbed(block, run) for _, block in build(cfg).blocks)


def run_attentions(layer: Block, run: RunSpec) -> list[tuple[AttentionKind, LayerSpec]]:
    """The attentions the layer runs in ``run``, each with its span: MLA absorbed where :func:`absorbed` says."""
    if absorbed(layer, run):
        return [(AbsorbedMLA(layer.cfg), layer.spec)]
    return layer.attentions()


def linear_rows(m: Linear, layer: Block, run: RunSpec) -> int:
    """Rows a linear runs over: every new token, or every attended key (``over_keys``, but absorbed)."""
    return run.batch * attended_keys(layer.spec, run) if m.over_keys and not absorbed(layer, run) else run.tokens


def held_copies(m: Linear, ep: int) -> int:
    """The copies of ``m`` one GPU of an expert-parallel group of ``ep`` holds: ``E / ep`` routed experts, every
    copy of any other matrix."""
    return m.copies // ep if m.key == ROUTED_EXPERTS else m.copies


def copies_read(m: Linear, rows: int, run: RunSpec) -> int:
    """The copies of ``m`` a pass over ``rows`` rows reads: every copy of a matrix all tokens use; of
    routed experts, those the rows' choices reach (:func:`experts_reached`), on a GPU of an expert-parallel
    group (``run.layout.ep``) among the ``E / ep`` it holds, which the whole group's rows route to."""
    if m.key != ROUTED_EXPERTS:  # every other matrix's copies (shared experts) are each token's
        return m.copies
    ep = run.layout.ep
    return experts_reached(held_copies(m, ep), m.copies, m.active, rows * ep)


def experts_reached(held: int, experts: int, k: int, tokens: int) -> int:
    """How many of ``held`` experts (of ``experts``) the top-``k`` choices of ``tokens`` tokens reach, each token
    choosing ``k`` distinct experts at random, alike: each expert is missed by all with probability
    ``(1 - k/E)^tokens``, so ``held (1 - (1 - k/E)^tokens)`` are reached, rounded half up (one token: ``k`` of ``E``; a
    decode batch of 16 on Qwen3-30B-A3B's 128 experts, top 8: 82, where balanced routing would reach all)."""
    return math.floor(held * (1 - (1 - k / experts) ** tokens) + 0.5)


def _scores_values(out: dict[str, int], attn: AttentionKind, spec: LayerSpec, run: RunSpec) -> None:
    """An attention's two matmuls over the query-key pairs its spec lets it see."""
    pairs = run.batch * attn.heads * attended_pairs(spec, run)
    out["attention/scores"] = 2 * pairs * attn.score_dim
    out["attention/values"] = 2 * pairs * attn.value_dim


def layer_matmul(layer: Block, run: RunSpec) -> dict[str, int]:
    """Forward matmul FLOPs of one layer, by component; a LoRA adapter's two matmuls
    (``A``: d_in -> r, ``B``: r -> d_out) under ``key/lora``."""
    out: dict[str, int] = {}
    lora = layer_adapted([m.key for m in layer.linears()], run.lora)
    for m in layer.linears():
        rows = linear_rows(m, layer, run) * m.active
        _add(out, m.key, 2 * rows * m.d_in * m.d_out)
        if m.key in lora:
            _add(out, m.key + "/lora", 2 * rows * run.lora.rank * (m.d_in + m.d_out))
    if layer.cfg.hyper is not None:  # the hyper-connections' linears and stream mixes (analysis.model.hyper)
        from ..model.hyper import branch_matmul
        out.update(branch_matmul(layer.cfg, run.tokens, layer.branches))
    if layer.cfg.gemma3n is not None:  # AltUp's router, coefficients and predictions (analysis.model.gemma3n)
        from ..model.gemma3n import layer_matmul as altup_matmul
        out.update(altup_matmul(layer.cfg, run.tokens))
    if layer.spec.recurrent:  # the mamba mixer's conv and scan (analysis.model.mamba)
        out.update(layer.recurrent.matmul(run.batch, run.query_len, run.seq - run.query_len))
        for shared in layer.shared:  # a shared transformer block's attention, run by this layer
            _scores_values(out, shared.attention, shared.spec, run)
        return out
    for attn, spec in run_attentions(layer, run):
        _scores_values(out, attn, spec, run)
    if layer.cfg.dsa is not None and layer.spec.topk is not None:  # the indexer: q.k, then its heads' weighted sum
        dsa = layer.cfg.dsa
        out["attention/indexer"] = 2 * run.batch * dsa.n_heads * indexed_pairs(layer.spec, run) * (dsa.head_dim + 1)
    for mixer in layer.beside:  # a recurrent mixer beside the attention (parallel_mixer)
        out.update(mixer.matmul(run.batch, run.query_len, run.seq - run.query_len))
    return out


@functools.lru_cache(maxsize=1024)  # a pass asks for each layer's ops several times (FLOPs, bytes, rates, reruns)
def layer_ops(layer: Block, run: RunSpec) -> tuple[Op, ...]:
    """Forward elementwise ops of one layer (costs in :mod:`analysis.variants`)."""
    return tuple(_layer_ops(layer, run))


def _layer_ops(layer: Block, run: RunSpec) -> list[Op]:
    cfg, T = layer.cfg, run.tokens
    ops = [Op("norm", T * n.size * n.rows, norm_cost(cfg.norm, n.weight, n.bias), 2) for n in layer.norms()]
    ops += [Op("bias", linear_rows(m, layer, run) * m.d_out * m.active, 1, 0) for m in layer.linears() if m.bias]
    if layer.spec.recurrent:
        return _recurrent_ops(layer, run, ops)
    ops += attention_ops(cfg, layer.attention, layer.spec, run)
    for mixer in layer.beside:
        ops += mixer.pass_ops(run)
    for ffn in layer.ffns:
        ops += ffn.ops(T)
    lora = layer_adapted([m.key for m in layer.linears()], run.lora)
    if lora:  # an adapter's output scaled by alpha / r and added to the base's
        ops += [Op("lora", linear_rows(m, layer, run) * m.d_out * m.active, 2, 3) for m in layer.linears()
                if m.key in lora]
    # two adds (one without an FFN; one more for a mixer beside the attention), each reads two and writes one; over
    # every residual stream
    ops.append(Op("residual", (1 + len(layer.beside) + len(layer.ffns)) * T * cfg.d_model * cfg.streams, 1, 3))
    if cfg.layer_scalar:  # the layer's output times its scalar
        ops.append(Op("layer_scalar", T * cfg.d_model, 1, 2))
    if cfg.hyper is not None:
        from ..model.hyper import branch_ops
        ops += branch_ops(cfg, T, layer.branches)
    if cfg.gemma3n is not None:
        from ..model.gemma3n import layer_ops as altup_ops
        ops += altup_ops(cfg, T, layer.spec.sparse)
    return ops


def attention_ops(cfg: ModelConfig, attn: AttentionKind, spec: LayerSpec, run: RunSpec) -> list[Op]:
    """Forward elementwise ops of one attention (``cfg`` its config) over the pairs ``spec`` lets it see."""
    T = run.tokens
    scores = run.batch * attn.heads * attended_pairs(spec, run)
    ops = [Op("attention/scale", scores, SCORE_SCALE_COST, 2, True)]
    if cfg.attn_logit_softcap is not None:
        ops.append(Op("attention/softcap", scores, SOFTCAP_COST, 2, True))
    ops.append(Op("attention/softmax", scores, SOFTMAX_COST, 2, True))
    if cfg.attention_sinks:  # one more logit in every softmax row, read with it
        ops.append(Op("attention/sinks", T * attn.heads, SOFTMAX_COST, 0, True))
    if cfg.attention_gate:  # sigmoid of each gate element, times the attention output's element
        n = T * attn.heads * attn.value_dim
        ops += [Op("attention/gate", n, SIGMOID_COST, 2), Op("attention/gate", n, 1, 3)]
    if POSITIONS[cfg.position].score_bias:  # reads the bias and the scores, writes the scores
        ops.append(Op("attention/position_bias", scores, POSITION_BIAS_COST, 3, True))
    if cfg.dsa is not None and spec.topk is not None:  # the indexer's scale and relu per head and pair
        ops.append(Op("attention/indexer", run.batch * cfg.dsa.n_heads * indexed_pairs(spec, run), 2, 2))
    if spec.rope:
        ops.append(Op("attention/rope", T * attn.rope_elements_per_token, ROPE_COST, 2))
    return ops + temperature_ops(cfg, spec, T)


def _recurrent_ops(layer: Block, run: RunSpec, ops: list[Op]) -> list[Op]:
    """A recurrent layer's elementwise ops after its norms and biases: the mixer's, a shared transformer
    block's, the FFN's (if any), LoRA's, and one residual add per branch."""
    cfg, T = layer.cfg, run.tokens
    mixer = layer.recurrent
    ops += mixer.pass_ops(run)
    for shared in layer.shared:  # its attention's, its MLP's, its adapters' and its projection's add
        ops += attention_ops(shared.attention_cfg, shared.attention, shared.spec, run) + shared.ops(T)
    for ffn in layer.ffns:
        ops += ffn.ops(T)
    lora = layer_adapted([m.key for m in layer.linears()], run.lora)
    if lora:
        ops += [Op("lora", linear_rows(m, layer, run) * m.d_out * m.active, 2, 3) for m in layer.linears()
                if m.key in lora]
    mixers = int(layer.spec.attention != "none")  # a none layer: its FFN's add alone
    ops.append(Op("residual", (mixers + len(layer.ffns)) * T * cfg.d_model, 1, 3))
    return ops


def totals(ops: Sequence[Op]) -> dict[str, int]:
    """FLOPs by key."""
    out: dict[str, int] = {}
    for op in ops:
        _add(out, op.key, op.cost * op.elements)
    return out


def layer_elementwise(layer: Block, run: RunSpec) -> dict[str, int]:
    """Forward elementwise FLOPs of one layer, by op."""
    return totals(layer_ops(layer, run))


def model_ops(cfg: ModelConfig, run: RunSpec) -> list[Op]:
    """The elementwise ops outside the layers (run resolved)."""
    T, d, V, n = run.tokens, cfg.d_model, cfg.vocab_size, run.logit_tokens
    ops = []
    model = build(cfg)
    final = model.final_norm
    if model.hyper_head is not None:  # the streams' collapse, over the tokens the head reads
        from ..model.hyper import head_ops
        ops += head_ops(cfg, n)
    if final is not None:
        ops.append(Op("norm", n * d, norm_cost(cfg.norm, final.weight, final.bias), 2))
    if model.head.linear.bias:
        ops.append(Op("bias", n * V, 1, 0))
    if cfg.final_logit_softcap is not None:
        ops.append(Op("lm_head/softcap", n * V, SOFTCAP_COST, 2))
    if POSITIONS[cfg.position].embedding:
        ops.append(Op("position", T * d, 1, 3))
    if cfg.embedding_scale is not None:
        ops.append(Op("embedding/scale", T * d, 1, 2))
    if model.embedding_norm is not None:  # every token, after the scale and positions
        norm = model.embedding_norm
        ops.append(Op(norm.key, T * d, norm_cost(cfg.norm, norm.weight, norm.bias), 2))
    if cfg.gemma3n is not None:  # the per-layer inputs, the streams' embedding and unembedding
        from ..model.gemma3n import model_ops as gemma3n_ops
        ops += gemma3n_ops(cfg, T, n)
    return ops


def _scaled(d: dict[str, int], factor: int) -> dict[str, int]:
    return {k: v * factor for k, v in d.items()}


def _accumulate(into: dict[str, int], d: dict[str, int], factor: int = 1) -> None:
    for k, v in d.items():
        _add(into, k, v * factor)


def core_recomputed(cfg: ModelConfig, run: RunSpec) -> bool:
    """Whether backward reruns eager attention's core (selective recomputation); flash keeps no
    score matrix, so it changes nothing there. A learned T5 bias always runs eager attention."""
    return run.recompute == "selective" and (run.attention == "eager" or POSITIONS[cfg.position].learned_bias)


def core_ops(ops: Sequence[Op]) -> list[Op]:
    return [op for op in ops if op.scores]


def core_keys(cfg: ModelConfig, run: RunSpec) -> set[str]:
    """Components of attention's core: its two matmuls and the ops on the scores."""
    return set(SCORES_VALUES) | {op.key for _, block in build(cfg).blocks for op in core_ops(layer_ops(block, run))}


def tower_forward(cfg: ModelConfig, run: RunSpec, gradient: bool = False) -> tuple[dict[str, int], dict[str, int]]:
    """(matmul, elementwise) forward FLOPs of the run's images through the vision tower and the
    projector (none in a decode: its images are in the cache already); ``run`` resolved."""
    if not run.images or run.mode == "decode":
        return {}, {}
    from ..model.vision import vision_forward
    return vision_forward(cfg, run.image_size, run.batch * run.images, gradient)


# the model's parts outside its layers by the pipeline stage that runs them: what precedes layer 0 on the first
# (these breakdown keys; the vision tower), the final norm and the LM head with what follows them on the last
FIRST_STAGE = ("embedding", "embedding/scale", "position", "norm/embedding")
LAST_STAGE = ("lm_head", "lm_head/softcap")


def count_flops(cfg: ModelConfig, run: RunSpec = RunSpec()) -> FlopReport:
    """The FLOPs of one model replica's pass (one GPU's under a layout: :func:`analysis.cluster.flops.gpu_flops`)."""
    check_arguments(cfg, run)
    run.one_device("count_flops")
    return part_flops(cfg, run.resolve(cfg))


def rerun_matmuls(layer: Block, run: RunSpec) -> set[str]:
    """The matmul components of one layer that backward runs again (``run`` resolved): its rerun linears', and
    attention's core where that runs again (:mod:`.recompute`)."""
    return {m.key for m in rerun_linears(layer, run)} | set(SCORES_VALUES if rerun_core(layer.cfg, run) else ())


def part_flops(cfg: ModelConfig, run: RunSpec, layers: frozenset[int] | None = None, first: bool = True,
               last: bool = True) -> FlopReport:
    """The FLOPs of ``run`` (resolved, its layout ignored) over the layers ``layers`` (indices; None: every
    one), with the parts before layer 0 if ``first`` and those after the last layer if ``last``
    (:data:`FIRST_STAGE`, :data:`LAST_STAGE`): a pipeline stage's share of the pass."""
    model = build(cfg)
    blocks = [(g if layers is None else LayerGroup(g.spec, tuple(i for i in g.layers if i in layers)), layer)
              for g, layer in model.blocks]
    blocks = [(g, layer) for g, layer in blocks if g.count]
    layers_mm: dict[str, int] = {}
    layers_ew: dict[str, int] = {}
    core_ew: dict[str, int] = {}
    op_mm: dict[str, int] = {}  # what backward runs again under op
    op_ew: dict[str, int] = {}
    groups = []
    for group, layer in blocks:
        mm = layer_matmul(layer, run)
        groups.append((group, mm))
        _accumulate(layers_mm, mm, group.count)
        if run.recompute == "op" and run.mode == "train":
            rerun = rerun_matmuls(layer, run)
            _accumulate(op_mm, {k: v for k, v in mm.items() if k in rerun}, group.count)
            _accumulate(op_ew, totals(rerun_ops(layer, run, layer_ops(layer, run))), group.count)
        _accumulate(layers_ew, layer_elementwise(layer, run), group.count)
        _accumulate(core_ew, totals(core_ops(layer_ops(layer, run))), group.count)
    head = model.head.linear
    vision_mm, vision_ew = tower_forward(cfg, run) if first else ({}, {})
    fwd_mm = {**vision_mm, **layers_mm}
    if last:
        fwd_mm[head.key] = 2 * run.logit_tokens * head.d_in * head.d_out
    if model.hyper_head is not None and last:  # the streams' collapse, over the tokens the head reads
        from ..model.hyper import head_matmul
        fwd_mm[model.hyper_head.key] = head_matmul(cfg, run.logit_tokens)
    if cfg.gemma3n is not None:  # the per-layer inputs' projection, the streams' embedding and unembedding
        from ..model.gemma3n import model_matmul  # (on one GPU only: both ends)
        fwd_mm.update(model_matmul(cfg, run.tokens, run.logit_tokens))
    fwd_ew = {**vision_ew, **layers_ew}
    _accumulate(fwd_ew, totals([op for op in model_ops(cfg, run) if (first if op.key in FIRST_STAGE else last)]))
    forward = FlopBreakdown(fwd_mm, fwd_ew)
    if run.mode != "train":
        return FlopReport(run, forward, FlopBreakdown({}, {}), tuple(groups))
    bwd_mm = _scaled(fwd_mm, 2)
    for group, layer in blocks:  # a mixer whose backward is not twice its forward (lightning, gated_deltanet)
        for mixer in [layer.recurrent] if group.spec.recurrent else layer.beside:
            _accumulate(bwd_mm, mixer.backward_matmul(run.batch, run.seq), group.count)
    if vision_mm:  # the layers no feature reads get no gradient
        grad_mm, grad_ew = tower_forward(cfg, run, gradient=True)
        bwd_mm.update(_scaled(grad_mm, 2))
        fwd_ew = {**fwd_ew, **grad_ew}  # (only for the backward's estimate below)
        # the pixels need no gradient: the patch linear computes its weight's alone; nor does Gemma 4's
        # averaging matrix: its pooling computes the patches' gradient alone
        for key in ("vision/patch", "vision/pool"):
            if key in grad_mm:
                bwd_mm[key] = grad_mm[key]
        if run.attention == "flash":  # the tower's flash kernel recomputes its scores too
            bwd_mm["vision/attention/scores"] += grad_mm["vision/attention/scores"]
        if run.lora is not None:  # a frozen tower whose input needs no gradient: no backward at all
            for key in vision_mm:
                del bwd_mm[key]
    if run.lora is not None:  # frozen: the base linears and the head compute input gradients only
        for key in frozen_keys(cfg):
            if key in fwd_mm:  # (the stage's)
                bwd_mm[key] = fwd_mm[key]
    for key in [k for k in bwd_mm if k.startswith("attention/indexer")]:  # DSA's indexer: no gradient
        del bwd_mm[key]
    if run.attention == "flash" and not POSITIONS[cfg.position].learned_bias and "attention/scores" in fwd_mm:
        # scores recomputed from the saved log-sum-exp. A learned T5 bias needs its
        # gradient, which fused kernels do not give: such models run eager attention.
        bwd_mm["attention/scores"] += fwd_mm["attention/scores"]
    bwd_ew = _scaled(fwd_ew, 2)
    bwd_ew.pop("attention/indexer", None)  # DSA's indexer: no gradient
    if run.lora is not None:
        for key in vision_ew:
            del bwd_ew[key]
    if run.recompute == "full":
        _accumulate(bwd_mm, layers_mm)
        _accumulate(bwd_ew, layers_ew)
    elif run.recompute == "op":
        _accumulate(bwd_mm, op_mm)
        _accumulate(bwd_ew, op_ew)
    elif core_recomputed(cfg, run):
        _accumulate(bwd_mm, {k: layers_mm[k] for k in SCORES_VALUES if k in layers_mm})
        _accumulate(bwd_ew, core_ew)
    return FlopReport(run, forward, FlopBreakdown(bwd_mm, bwd_ew), tuple(groups))


class Approximations(NamedTuple):
    """The rules of thumb, for comparison with the exact figure."""

    six_n: int  # 6 * N * tokens (2 * N * tokens without backward), N non-embedding (active)
    six_n_with_embeddings: int
    palm: int  # PaLM appendix B: (6N + 12 L H Q T) per token; (2N + 4 L H Q T) forward only


def approximations(cfg: ModelConfig, run: RunSpec) -> Approximations:
    """N is the non-embedding parameter count, active ones for MoE (LM head included)."""
    run = run.resolve(cfg)
    p = count_params(cfg)
    n_non_embedding, n_embedding = p.active - p.embedding, p.embedding
    factor = 6 if run.mode == "train" else 2
    # H*Q is the query width; T the keys (decode: the cached keys of each layer)
    attn = 0
    for group, block in build(cfg).blocks:
        # its attention, or a recurrent layer's shared transformer block's (or none)
        kinds = [(s.attention, s.spec) for s in block.shared] if group.spec.recurrent else [
            (block.attention, group.spec)]
        for kind, spec in kinds:
            attn += group.count * kind.heads * kind.score_dim * attended_keys(spec, run)
    attn *= 12 if run.mode == "train" else 4
    return Approximations(factor * n_non_embedding * run.tokens,
                          factor * (n_non_embedding + n_embedding) * run.tokens,
                          (factor * n_non_embedding + attn) * run.tokens)
