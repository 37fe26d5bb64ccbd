"""Training activations: the bytes autograd saves for backward, per component and per layer group.

Convention (README "Memory"): every storage autograd saves for backward during the forward
pass and the loss, counted once (a tensor saved by two ops, or saved as two views, is one
storage) under the component that saves it first; parameters and buffers are excluded
(they are not activations). It is exactly what ``analysis.verify.measure.measure_saved_bytes``
measures for llmcalc's reference model; values are in the compute dtype (``b`` bytes), token
ids and indices are int64 (8 bytes), norm statistics and flash's log-sum-exp fp32 (4 bytes,
as on CUDA and meta; the CPU LayerNorm kernel keeps its mean/rstd in the input dtype).

The model is summed over its layer plan (:func:`analysis.plan.layer_plan`): each group's
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
- RoPE: the cos and sin tables (``S * rotated dims`` each), once per model;
- MoE: the router input, routing probabilities, expert ids, renormalized weights and their
  sum, the token/choice indices of each expert's slots, and per slot the expert input, the
  activation tensors, the expert output and its weighted copy (the ``index_add`` source);
  shared experts keep their activation tensors; a shared-expert gate its sigmoid's output
  and the shared output it multiplies;
- embeddings: the token ids, learned positions' ids (``S``), T5 relative buckets (``S*S``);
  the LM head its input; final soft-capping its tanh output; the loss the log-softmax over the
  vocabulary (``T*V``) and a scalar.

With ``recompute`` (full activation recomputation: each block checkpointed, backward runs
it again) a block keeps only its input, ``T*d`` values, under ``layer``; the checkpoint also
keeps each distinct mask or position bias a layer passes (eager always builds one) and the
RoPE tables, once; embeddings, final norm, LM head and loss keep what they keep without.

Korthikanti et al. 2022 count ``sbh(34 + 5as/h)`` bytes per layer for a GPT layer in 16
bits (h = d_model, a = heads, MLP width 4h, materialized attention). They include dropout:
two ``sbh`` one-byte masks (attention output, MLP output) and, for attention dropout, an
``as^2b`` mask and a ``2as^2b`` output. Here there is no dropout, LayerNorm keeps fp32
statistics (8 bytes per token per norm), and widths, GQA, activations, norms and positions
come from the config; for GPT-2 with eager attention in bf16 the two agree exactly as
``ours = sbh(34 + 5as/h) - 2sbh - 3as^2b + 16sb``. Flash attention has no ``as^2b`` term.
"""

from __future__ import annotations

from dataclasses import dataclass

from .config import ModelConfig
from .plan import LayerGroup, LayerSpec, layer_plan, layer_specs
from .run import RunSpec, bytes_per
from .variants import ACTIVATIONS, norm_stat_values

INDEX = 8  # int64 token ids and indices
STAT = 4  # fp32 norm statistics and log-sum-exp


@dataclass(frozen=True)
class Activations:
    groups: tuple[tuple[LayerGroup, dict[str, int]], ...]  # (group, one layer's bytes by component)
    components: dict[str, int]  # the whole model: per-layer bytes x counts plus once-per-model saves

    @property
    def total(self) -> int:
        return sum(self.components.values())

    @property
    def loss(self) -> int:
        """What the loss keeps: the log-softmax over the vocabulary (the CLI's "logits")."""
        return self.components["loss"]


class _Tape:
    """Saved storages in forward order. A storage several ops save is named, and counts once,
    under the first component saving it; unnamed saves are storages no other op saves."""

    def __init__(self, cfg: ModelConfig, b: int):
        self.cfg, self.b = cfg, b  # b: bytes per value
        self.bytes: dict[str, int] = {}
        self._seen: set[str] = set()

    def save(self, key: str, nbytes: int, name: str | None = None) -> None:
        if name is not None:
            if name in self._seen:
                return
            self._seen.add(name)
        self.bytes[key] = self.bytes.get(key, 0) + nbytes

    def norm(self, key: str, x: str | None, rows: int, width: int, storage: int | None = None) -> str:
        """Saves the input ``x`` (``storage`` values when it is a view of a larger tensor) and
        fp32 statistics per row; returns the name of the output."""
        self.save(key, (rows * width if storage is None else storage) * self.b, x)
        self.save(key, rows * norm_stat_bytes(self.cfg))
        return key + " output"


def norm_stat_bytes(cfg: ModelConfig) -> int:
    """fp32 statistics a norm keeps per row: LayerNorm mean and rstd, RMSNorm rstd."""
    return STAT * norm_stat_values(cfg.norm)


def _eager_core(tape: _Tape, cfg: ModelConfig, B: int, S: int, d_qk: int, k: int, v: int) -> None:
    """Eager scores, softmax and values over ``h`` heads: q (``T*h*d_qk`` values, a copy or
    its own storage), ``k`` and ``v`` values of K and V as the batched matmuls read them."""
    T, h, b = B * S, cfg.n_heads, tape.b
    tape.save("attention/scores", (T * h * d_qk + k) * b)  # q and k
    if cfg.attn_logit_softcap is not None:
        tape.save("attention", B * h * S * S * b)  # tanh's output
    tape.save("attention", B * h * S * (S + cfg.attention_sinks) * b)  # softmax output
    tape.save("attention/values", v * b)


def _heads_first_q(cfg: ModelConfig, spec: LayerSpec) -> bool:
    """q is laid out (B, h, S, d) (concatenated: MLA, or partial RoPE) rather than as a
    transposed view of its (B, S, h, d) projection; flash lays its output out like q."""
    return spec.attention == "mla" or (spec.rope and cfg.rotary_dims < cfg.head_size)


def _merge_copies(B: int, S: int, h: int, d: int) -> bool:
    """Whether an output laid out heads-first, (B, h, S, d), reaches the o projection's
    (B*S, h*d) matrix only through a copy (the o projection then keeps the copy). Size-1
    dimensions can make the strides agree: a view when S or h is 1, or when d and B are."""
    return S > 1 and h > 1 and (d > 1 or B > 1)


def _mha(tape: _Tape, cfg: ModelConfig, spec: LayerSpec, B: int, S: int, kind: str, x: str) -> None:
    T, h, g, b, hd = B * S, cfg.n_heads, cfg.kv_heads, tape.b, cfg.head_size
    qw, kw = cfg.q_width, cfg.kv_width
    for p in "qkv":
        tape.save(f"attention/{p}", T * cfg.d_model * b, x)
    if cfg.qk_norm == "full":
        tape.norm("attention/q_norm", None, T, qw)
        tape.norm("attention/k_norm", None, T, kw)
    elif cfg.qk_norm == "head":
        tape.norm("attention/q_norm", None, T * h, hd)
        tape.norm("attention/k_norm", None, T * g, hd)
    if kind == "flash":
        tape.save("attention/sdpa", T * (2 * qw + 2 * kw) * b)  # q, k, v and the output
        tape.save("attention/sdpa", B * h * S * STAT)  # log-sum-exp
        if _heads_first_q(cfg, spec) and _merge_copies(B, S, h, hd):
            tape.save("attention/o", T * qw * b)
        return  # else the output is laid out (B, S, h, hd): the o projection keeps a view of it
    # K/V heads are expanded to h; with B = 1 and one K/V head the expansion stays a view
    kv = T * (kw if B == 1 and g == 1 else qw)
    _eager_core(tape, cfg, B, S, hd, kv, kv)
    tape.save("attention/o", T * qw * b)  # heads merged back: a copy


def _mla(tape: _Tape, cfg: ModelConfig, spec: LayerSpec, B: int, S: int, kind: str, x: str) -> None:
    m, T, h, b = cfg.mla, B * S, cfg.n_heads, tape.b
    nope, d_v = m.qk_nope_head_dim, m.v_head_dim
    d_qk = nope + m.qk_rope_head_dim
    if m.q_lora_rank is not None:
        tape.save("attention/q_a", T * cfg.d_model * b, x)
        tape.norm("attention/q_a_norm", None, T, m.q_lora_rank)
        tape.save("attention/q_b", T * m.q_lora_rank * b, "attention/q_a_norm output")
    else:
        tape.save("attention/q", T * cfg.d_model * b, x)
    tape.save("attention/kv_a", T * cfg.d_model * b, x)
    # the norm reads the latent half of kv_a's output: a view, whose whole storage counts
    tape.norm("attention/kv_a_norm", None, T, m.kv_lora_rank, T * (m.kv_lora_rank + m.qk_rope_head_dim))
    tape.save("attention/kv_b", T * m.kv_lora_rank * b, "attention/kv_a_norm output")
    kv_b_out = T * h * (nope + d_v)  # v is a view of it
    if kind == "flash":
        # q and k concatenated from their nope and rope parts, v (kv_b's output), the output
        tape.save("attention/sdpa", (T * h * (2 * d_qk + d_v) + kv_b_out) * b)
        tape.save("attention/sdpa", B * h * S * STAT)  # log-sum-exp
        if _merge_copies(B, S, h, d_v):  # the output is laid out like q, (B, h, S, d_v)
            tape.save("attention/o", T * h * d_v * b)
        return
    # the values matmul reads v in place when (B, h) merge into one batch dim, else a copy
    v = kv_b_out if B == 1 or S == 1 or h == 1 else T * h * d_v
    _eager_core(tape, cfg, B, S, d_qk, T * h * d_qk, v)
    tape.save("attention/o", T * h * d_v * b)  # heads merged back: a copy


def _hidden(tape: _Tape, cfg: ModelConfig, act_key: str, down_key: str, tag: str, rows: int,
            width: int) -> None:
    """The activation's saved tensors and the down projection's input, ``rows x width`` each."""
    for name in ACTIVATIONS[cfg.activation].saves:  # "out" (relu) is saved by relu itself
        tape.save(act_key, rows * width * tape.b, tag + name)
    tape.save(down_key, rows * width * tape.b, tag + "out")


def _ffn(tape: _Tape, cfg: ModelConfig, spec: LayerSpec, T: int, x: str) -> None:
    d, b, moe = cfg.d_model, tape.b, cfg.moe
    if spec.ffn == "dense":
        for key in ("mlp/up", "mlp/gate") if cfg.gated else ("mlp/up",):
            tape.save(key, T * d * b, x)
        _hidden(tape, cfg, "mlp", "mlp/down", "mlp ", T, cfg.d_ff)
        return
    E, k = moe.num_experts, moe.experts_per_token
    slots = T * k  # token slots, summed over the experts that receive them
    tape.save("moe/router", T * d * b, x)
    # probabilities, their sum after top-k, expert ids, renormalized weights, slot token/choice
    tape.save("moe", T * E * b + T * b + slots * (3 * INDEX + b))
    # per slot: the expert input, its weight, the expert output and the weighted output
    tape.save("moe/experts", slots * (3 * d + 1) * b)
    _hidden(tape, cfg, "moe/experts", "moe/experts", "experts ", slots, cfg.expert_width)
    if moe.shared_experts:
        tape.save("moe/shared_experts", T * d * b, x)  # every token: the router's input
        _hidden(tape, cfg, "moe/shared_experts", "moe/shared_experts", "shared ",
                T * moe.shared_experts, cfg.shared_expert_width)
    if moe.shared_expert_gate:
        tape.save("moe/shared_expert_gate", T * d * b, x)
        tape.save("moe", T * b + T * d * b)  # the sigmoid's output and the shared output it scales


def layer_bytes(cfg: ModelConfig, spec: LayerSpec, batch: int, seq: int, attention: str,
                b: int) -> dict[str, int]:
    """One block's saved bytes by component, in the order of the reference block's forward
    (``analysis.verify.model``)."""
    T, d = batch * seq, cfg.d_model
    tape = _Tape(cfg, b)
    kind = "eager" if cfg.position == "relative" else attention  # a learned bias runs eager
    placement = cfg.norm_placement
    post_norms = placement in ("sandwich", "post_branch")
    attention_fn = _mla if spec.attention == "mla" else _mha

    def attn(x: str) -> None:
        attention_fn(tape, cfg, spec, batch, seq, kind, x)
        if post_norms:
            tape.norm("norm/attention_post", None, T, d)

    def ffn(x: str) -> None:
        _ffn(tape, cfg, spec, T, x)
        if post_norms:
            tape.norm("norm/mlp_post", None, T, d)

    if placement == "post":
        attn("x")
        ffn(tape.norm("norm/attention", None, T, d))
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
        attn(tape.norm("norm/attention", None, T, d))
        ffn(tape.norm("norm/mlp", None, T, d))
    return {k: v for k, v in tape.bytes.items() if v}


def _masks(cfg: ModelConfig, seq: int, attention: str, b: int) -> int:
    """Bytes of the distinct additive masks/position biases the layers read (the model builds
    one per window that binds, ``W < seq``, and one for the others); 0 for a layer where
    flash uses its causal flag instead (no position bias, no binding window)."""
    biased = cfg.position in ("alibi", "relative")  # a bias per head
    eager = attention == "eager" or cfg.position == "relative"
    keys = {w if w is not None and w < seq else None for w in (s.window for s in layer_specs(cfg))}
    n = sum(1 for w in keys if eager or biased or w is not None)
    return n * (cfg.n_heads if biased else 1) * seq * seq * b


def _rope_dims(cfg: ModelConfig) -> int:
    return cfg.mla.qk_rope_head_dim if cfg.attention == "mla" else cfg.rotary_dims


def activation_bytes(cfg: ModelConfig, run: RunSpec) -> Activations:
    """Saved bytes of one training step (``run``: batch, seq, attention, recompute, dtype)."""
    run = run.resolve(cfg)
    batch, seq, attention, recompute = run.batch, run.seq, run.attention, run.recompute
    b = bytes_per(run.dtype)
    T, d = batch * seq, cfg.d_model
    plan = layer_plan(cfg)
    rope = 2 * seq * _rope_dims(cfg) * b if any(g.spec.rope for g in plan) else 0
    masks = _masks(cfg, seq, attention, b)
    comps: dict[str, int] = {"embedding/token": T * INDEX}
    if cfg.position == "learned":
        comps["embedding/position"] = seq * INDEX
    elif cfg.position == "relative":
        comps["embedding/position"] = seq * seq * INDEX
    groups = []
    for group in plan:
        if recompute:
            per_layer = {"layer": T * d * b}
        else:
            per_layer = layer_bytes(cfg, group.spec, batch, seq, attention, b)
        groups.append((group, per_layer))
        for key, n in per_layer.items():
            comps[key] = comps.get(key, 0) + n * group.count
    if recompute:
        shared = {"layer": rope + masks}  # the checkpoints keep them with the blocks' inputs
    else:
        flash = attention == "flash" and cfg.position != "relative"
        shared = {"attention": rope, "attention/sdpa": masks if flash else 0}  # saved by the first layer
    for key, n in shared.items():
        if n:
            comps[key] = comps.get(key, 0) + n
    if cfg.final_norm:
        comps["norm/final"] = T * (d * b + norm_stat_bytes(cfg))
    comps["lm_head"] = T * d * b
    if cfg.final_logit_softcap is not None:
        comps["logit_softcap"] = T * cfg.vocab_size * b  # tanh's output
    comps["loss"] = T * cfg.vocab_size * b + b  # log-softmax, and nll_loss's total weight
    return Activations(tuple(groups), comps)


def korthikanti_bytes(cfg: ModelConfig, batch: int, seq: int) -> int:
    """Korthikanti et al. 2022, one layer without recomputation: ``sbh(34 + 5as/h)``."""
    s, b, h, a = seq, batch, cfg.d_model, cfg.n_heads
    return s * b * h * 34 + 5 * a * s * s * b
