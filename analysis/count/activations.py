"""Training activations: the bytes autograd saves for backward, per component and per layer group.

Convention (README "Memory"): every storage autograd saves for backward during the forward
pass and the loss, counted once (a tensor saved by two ops, or saved as two views, is one
storage) under the component that saves it first; parameters and buffers are excluded
(they are not activations). It is exactly what ``analysis.verify.measure.measure_saved_bytes``
measures for llmcalc's reference model; values are in the compute dtype (``b`` bytes), token
ids and indices are int64 (8 bytes), norm statistics, flash's log-sum-exp and the loss fp32 (4 bytes,
as on CUDA and meta; the CPU LayerNorm kernel keeps its mean/rstd in the input dtype).

The model is summed over its layer plan (:func:`analysis.model.layers.layer_plan`): each group's
layers save the same bytes, so one layer is computed per group and multiplied by its count.
What each op keeps (``T = B*S`` tokens, ``x`` an op's input, ``d_qk``/``d_v`` the score and
value head sizes):
- linear layers: their input (shared by q/k/v, by up/gate, by router and experts, and by
  two branches reading one norm); bias adds, residual adds, scalings and mask adds keep
  nothing;
- LayerNorm: input, fp32 mean and rstd per row; RMSNorm: input and fp32 rstd per row (a
  LayerNorm without weight or bias keeps the same);
- activations (hidden width): what :data:`analysis.variants.ACTIVATIONS` lists in ``saves``,
  plus the down projection's input;
- eager attention: q and k as contiguous copies for the batched matmul, k and v expanded to
  all ``h`` heads (with ``B = 1`` and a single K/V head the expansion stays a view of the
  ``g``-head tensor), the ``B*h*S*S`` softmax output (``S + 1`` columns with a sink), tanh's
  output with soft-capping, and the o projection's input;
- flash attention: q, k, v (K/V unexpanded), the output (which the o projection reads as a
  view), the fp32 log-sum-exp, and each distinct additive mask a layer needs (a window shorter
  than the sequence: ``S*S``; ALiBi: ``h*S*S``), once per model. A learned T5 bias runs eager
  attention (no fused kernel gives its gradient);
- MLA: the q and kv_a inputs; the low-rank query's norm; the kv_a norm's input (the latent
  half of kv_a's output, a view); kv_b its input; the per-head split of q and of kv_b's output
  (views) as the attention reads them, and k concatenated from k_nope and the shared k_pe;
- the attention output gate (``attention_gate``): its linear the layer's input (as q), its
  sigmoid its output and the gated product (the o projection's input), ``T*h*hd`` values each;
  the multiply's other factor, the merged heads, is what the o projection keeps without a gate;
- RoPE: the cos and sin tables (``S * rotated dims`` each), once per model;
- MoE: the router input, routing probabilities, expert ids, renormalized weights and their
  sum, the token/choice indices of each expert's slots, and per slot the expert input, the
  activation tensors, the expert output and its weighted copy (the ``index_add`` source);
  shared experts keep their activation tensors; a shared-expert gate its sigmoid's output
  and the shared output it multiplies;
- a MoE beside the MLP (``moe.beside_mlp``): the MLP's tensors; the experts' norm and the router's read
  the residual stream ``norm/mlp`` keeps (one storage) and keep their statistics; the router its own
  input (its norm's output, scaled); the product of the renormalized weights and the scales the
  choices gather both factors (the scales alone under LoRA: frozen, they need no gradient); the norms
  after the two FFNs their inputs and statistics;
- embeddings: the token ids, learned positions' ids (``S``), T5 relative buckets (``S*S``);
  a norm over the embeddings (``embedding_norm``) its input (``T*d``) and its statistics;
  the LM head its input; final soft-capping its tanh output; the loss, computed in fp32 whatever the
  compute dtype (the logits upcast, as transformers, torchtitan and Megatron-LM train), the fp32
  log-softmax over the vocabulary (``T*V*4`` bytes) and an fp32 scalar (with LoRA also the targets).

With ``recompute="full"`` (full activation recomputation: each block checkpointed, backward
runs it again) a block keeps only its input, ``T*d`` values, under ``layer``; the checkpoint
also keeps each distinct mask or position bias a layer passes (eager always builds one) and the
RoPE tables, once; embeddings (and their norm), final norm, LM head and loss keep what they keep
without.
With ``recompute="op"`` (per-op checkpointing, :mod:`analysis.count.recompute`) a block keeps its input
(``layer``), the outputs of the linears the policy keeps (``<key>/output``: every other one, none with fp8
matmuls) and the flash kernel's output and fp32 log-sum-exp (``attention/sdpa``), and the checkpoint the
masks and RoPE tables, once, as with ``full``.
With ``recompute="selective"`` (Korthikanti et al.) eager attention's core (scores, softmax,
values) is checkpointed: instead of the q/k copies, the expanded K/V, the softmax and tanh
outputs, it keeps its inputs, q and k as RoPE (or the projection, or qk-norm) leaves them, v (a
view of its projection; MLA: of kv_b's output), and each distinct mask once, under
``attention``. Flash attention keeps no score matrix: selective changes nothing there.

Korthikanti et al. 2022 count ``sbh(34 + 5as/h)`` bytes per layer for a GPT layer in 16
bits (h = d_model, a = heads, MLP width 4h, materialized attention). They include dropout:
two ``sbh`` one-byte masks (attention output, MLP output) and, for attention dropout, an
``as^2b`` mask and a ``2as^2b`` output. Here there is no dropout, LayerNorm keeps fp32
statistics (8 bytes per token per norm), and widths, GQA, activations, norms and positions
come from the config; for GPT-2 with eager attention in bf16 the two agree exactly as
``ours = sbh(34 + 5as/h) - 2sbh - 3as^2b + 16sb``. Flash attention has no ``as^2b`` term.
"""

from typing import NamedTuple

from ..model.architecture import Block, build
from ..model.config import ModelConfig
from ..model.layers import LayerGroup, layer_specs
from ..model.sizes import FP32, bytes_per
from ..model.tape import FFN_RESIDUAL, INDEX, Tape, norm_stat_bytes
from ..model.variants import POSITIONS
from ..spec import LoRA, RunSpec, check_arguments
from .flops import core_recomputed
from .lora import layer_adapted
from .recompute import kept_bytes


class Activations(NamedTuple):
    groups: tuple[tuple[LayerGroup, dict[str, int]], ...]  # (group, one layer's bytes by component)
    components: dict[str, int]  # the whole model: per-layer bytes x counts plus once-per-model saves

    @property
    def total(self) -> int:
        return sum(self.components.values())

    @property
    def loss(self) -> int:
        """What the loss keeps: the log-softmax over the vocabulary (the CLI's "logits")."""
        return self.components["loss"]


def layer_bytes(layer: Block, batch: int, seq: int, attention: str, b: int,
                lora: LoRA | None = None) -> dict[str, int]:
    """One block's saved bytes by component, in the order of the reference block's forward
    (``analysis.verify.model``); ``attention``: eager, flash or selective (eager, core
    recomputed); ``lora``: adapters on a frozen base."""
    cfg, spec = layer.cfg, layer.spec
    T, d = batch * seq, cfg.d_model
    tape = Tape(cfg, b) if lora is None else Tape(cfg, b, layer_adapted([m.key for m in layer.linears()], lora),
                                                  lora.rank)
    # a learned T5 bias has no fused kernel: eager (core recomputed under selective)
    kind = "eager" if POSITIONS[cfg.position].learned_bias and attention == "flash" else attention
    placement = cfg.norm_placement
    post_norms = placement in ("sandwich", "post_branch")

    def attn(x: str) -> None:
        if spec.recurrent:  # the mamba mixer (analysis.model.mamba)
            layer.recurrent.saves(tape, batch, seq, x)
        else:
            layer.attention.saves(tape, spec, batch, seq, kind, x)
        for mixer in layer.beside:  # beside the attention, on its input (parallel_mixer)
            mixer.saves(tape, batch, seq, x)
        if post_norms:
            tape.norm("norm/attention_post", None, T, d)

    def ffn(x: str) -> None:
        if spec.ffn is None:  # no FFN (and no norm around it)
            return
        layer.ffn.saves(tape, T, x)
        if post_norms:
            tape.norm("norm/mlp_post", None, T, d)

    if cfg.gemma3n is not None:  # Gemma 3n's layer (sandwich: a rule) around its attention and FFN
        from ..model.gemma3n import layer_saves
        layer_saves(tape, T, attn, ffn, spec.sparse)
    elif cfg.hyper is not None:  # hyper-connections (sequential pre-norm layers: a rule)
        from ..model.hyper import coefficient_saves, expansion_saves
        for branch, run, x in (("attention", attn, "x"), ("mlp", ffn, "x + attention")):
            if branch in layer.branches:
                coefficient_saves(tape, f"hyper/{branch}", T, x)
                run(tape.norm(f"norm/{branch}", None, T, d))
                expansion_saves(tape, branch, T, x)
    elif spec.attention == "none":  # no mixer (nor its norm): the FFN branch alone
        if placement == "post":
            ffn("x")
            tape.norm("norm/mlp", None, T, d)
        elif placement == "post_branch":
            ffn("x")
        else:
            ffn(tape.norm("norm/mlp", FFN_RESIDUAL, T, d))
    elif placement == "post":
        attn("x")
        ffn(tape.norm("norm/attention", None, T, d))
        if spec.ffn is not None:
            tape.norm("norm/mlp", None, T, d)
    elif placement == "post_branch":
        attn("x")
        ffn("x + attention")
    elif cfg.parallel_block:
        h = tape.norm("norm/attention", "x", T, d)
        h_mlp = tape.norm("norm/mlp", "x", T, d) if cfg.parallel_norms == 2 else h
        attn(h)
        ffn(h_mlp)
    else:
        for shared in layer.shared:  # a shared transformer block, whose output joins the mixer's input
            shared.saves(tape, batch, seq, kind)
        attn(tape.norm("norm/attention", None, T, d))
        if spec.ffn is not None:
            ffn(tape.norm("norm/mlp", FFN_RESIDUAL, T, d))
    if cfg.layer_scalar and lora is None:  # the layer's output, which the scalar's gradient reads (frozen: none)
        tape.save("layer", T * d * b)
    return {k: v for k, v in tape.bytes.items() if v}


def _masks(cfg: ModelConfig, seq: int, attention: str, b: int) -> int:
    """Bytes of the distinct additive masks/position biases the layers read (the model builds
    one per window or chunk that binds, ``W < seq`` or ``C < seq``, and one for the others); 0 for a layer where
    flash uses its causal flag instead (no position bias, no binding window)."""
    position = POSITIONS[cfg.position]
    biased = position.score_bias  # a bias per head
    eager = attention == "eager" or position.learned_bias
    specs = [s for s in layer_specs(cfg) if not s.recurrent]
    specs += [s.spec for _, block in build(cfg).blocks for s in block.shared]  # a shared block's attention
    keys = {tuple(w if w is not None and w < seq else None for w in s.span) for s in specs}
    n = sum(1 for w in keys if eager or biased or w != (None, None))
    return n * (cfg.n_heads if biased else 1) * seq * seq * b


def activation_bytes(cfg: ModelConfig, run: RunSpec) -> Activations:
    """Saved bytes of one model replica's training step (``run``: batch, seq, attention, recompute,
    dtype; a GPU's share under a layout: ``memory``'s activations)."""
    check_arguments(cfg, run)
    run.one_device("activation_bytes")
    run.no_images()
    run = run.resolve(cfg)
    batch, seq, attention, full, op = run.batch, run.seq, run.attention, run.recompute == "full", run.recompute == "op"
    selective = core_recomputed(cfg, run)
    b = bytes_per(run.dtype)
    T, d = batch * seq, cfg.d_model
    model = build(cfg)
    # every attention layer has the model's attention kind (recurrent layers have no RoPE)
    # a cos and a sin table per distinct rotated width (full_head_dim: the full layers' own)
    # (and a shared transformer block's attention's)
    attentions = [(k.attention, g.spec) for g, k in model.blocks if not g.spec.recurrent] + [
        (s.attention, s.spec) for _, k in model.blocks for s in k.shared]
    rope = sum(2 * seq * dims * b for dims in {a.rope_dims for a, spec in attentions if spec.rope})
    masks = _masks(cfg, seq, attention, b)
    comps: dict[str, int] = {}
    if run.lora is None:  # frozen embeddings keep no ids (their lookups need no gradient)
        comps["embedding/token"] = T * INDEX
        if cfg.position == "learned":
            comps["embedding/position"] = seq * INDEX
        elif cfg.position == "relative":
            comps["embedding/position"] = seq * seq * INDEX
    if model.embedding_norm is not None:  # its input (the summed embeddings) and its statistics
        comps[model.embedding_norm.key] = T * (d * b + norm_stat_bytes(cfg))
    groups = []
    for group, block in model.blocks:
        if full:
            per_layer = {"layer": T * d * cfg.streams * b}  # the block's input: every residual stream
        elif op:
            per_layer = kept_bytes(block, run, b)
        else:
            per_layer = layer_bytes(block, batch, seq, "selective" if selective else attention, b, run.lora)
        groups.append((group, per_layer))
        for key, n in per_layer.items():
            comps[key] = comps.get(key, 0) + n * group.count
    if full or op:
        shared = {"layer": rope + masks}  # the checkpoints keep them with the blocks' inputs
    elif selective:
        shared = {"attention": rope + masks}  # the core's checkpoints keep the masks as inputs
    else:
        flash = attention == "flash" and not POSITIONS[cfg.position].learned_bias
        shared = {"attention": rope, "attention/sdpa": masks if flash else 0}  # saved by the first layer
    for key, n in shared.items():
        if n:
            comps[key] = comps.get(key, 0) + n
    if model.hyper_head is not None:  # the streams' collapse: as a branch's, over the last layer's output
        from ..model.hyper import head_saves
        comps[model.hyper_head.key] = head_saves(cfg, T, b)
    if cfg.gemma3n is not None:  # the per-layer inputs, the streams' embedding and unembedding
        from ..model.gemma3n import model_saves
        for key, n in model_saves(cfg, T, T, b).items():
            comps[key] = comps.get(key, 0) + n
    if model.final_norm is not None:
        comps[model.final_norm.key] = T * (d * b + norm_stat_bytes(cfg))
    if run.lora is None:  # a frozen head keeps nothing: its input gradient needs only its weight
        comps[model.head.linear.key] = T * d * b
    if cfg.final_logit_softcap is not None:
        comps["logit_softcap"] = T * cfg.vocab_size * b  # tanh's output
    # the loss upcasts the logits to fp32 (as transformers, torchtitan and Megatron-LM train): its log-softmax and
    # nll_loss's total weight are fp32 whatever the compute dtype (the cast itself keeps nothing)
    comps["loss"] = T * cfg.vocab_size * FP32 + FP32
    if run.lora is not None:  # the targets, which are the token ids the trained embedding keeps otherwise
        comps["loss"] += T * INDEX
    return Activations(tuple(groups), comps)


def korthikanti_bytes(cfg: ModelConfig, batch: int, seq: int) -> int:
    """Korthikanti et al. 2022, one layer without recomputation: ``sbh(34 + 5as/h)``."""
    s, b, h, a = seq, batch, cfg.d_model, cfg.n_heads
    return s * b * h * 34 + 5 * a * s * s * b
