"""Training activations: the bytes autograd saves for backward, per component.

Convention (README "Memory"): every storage autograd saves for backward during the forward
pass and the loss, counted once (a tensor saved by two ops, or saved as two views, is one
storage) under the component that saves it first; parameters and buffers are excluded
(they are not activations). It is exactly what ``analysis.verify.measure.measure_saved_bytes``
measures for llmcalc's reference model; values are in the model's dtype (``b`` bytes), token
ids and indices are int64 (8 bytes), norm statistics and flash's log-sum-exp fp32 (4 bytes,
as on CUDA and meta; the CPU LayerNorm kernel keeps its mean/rstd in the input dtype).

What each op keeps (``T = B*S`` tokens, ``x`` an op's input):
- linear layers: their input (shared by q/k/v, by up/gate, and by two branches reading one
  norm); bias adds, residual adds, scalings and mask adds keep nothing;
- LayerNorm: input, fp32 mean and rstd per row; RMSNorm: input and fp32 rstd per row;
- activations (hidden width): relu its output (also the down projection's input), gelu and
  silu their input, sqrelu the relu output, gated ones the gate pre-activation (reglu: the
  relu output instead), the activation and the up projection; plus the down projection's input;
- eager attention: q, k and v as contiguous copies for the batched matmuls, k and v
  expanded to all ``h`` heads (with ``B = 1`` and a single K/V head the expansion stays a
  view of the ``g``-head tensor), the ``B*h*S*S`` softmax output, and the o projection's input;
- flash attention: q, k, v (``g`` K/V heads), the output (which the o projection reads as a
  view), the fp32 log-sum-exp, and the additive mask when it needs one (sliding window
  shorter than the sequence: ``S*S``; ALiBi: ``h*S*S``), once per model. A learned T5 bias
  makes SDPA take its math path, which keeps what eager attention keeps (k and v always
  expanded) in at least fp32;
- RoPE: the cos and sin tables (``S*hd`` each), once per model;
- MoE: the router input, routing probabilities, expert ids, renormalized weights and their
  sum, the token/choice indices of each expert's slots, and per slot the expert input, the
  activation tensors, the expert output and its weighted copy (the ``index_add`` source);
  shared experts keep their activation tensors;
- embeddings: the token ids, learned positions' ids (``S``), T5 relative buckets (``S*S``);
  the LM head its input; the loss the log-softmax over the vocabulary (``T*V``) and a scalar.

With ``recompute`` (full activation recomputation: each block checkpointed, backward runs
it again) a block keeps only its input, ``T*d`` values, under ``layer``; the checkpoint also
keeps the mask or position bias (eager always builds one) and the RoPE tables, once;
embeddings, final norm, LM head and loss keep what they keep without.

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

from .config import FLOAT_DTYPES, ModelConfig
from .flops import ATTENTION_IMPLS
from .params import weight_bytes

INDEX = 8  # int64 token ids and indices
STAT = 4  # fp32 norm statistics and log-sum-exp

# Hidden-width tensors an activation keeps, besides the down projection's input ("out").
_ACT_SAVES = {
    "relu": ("out",),  # its output *is* the down projection's input
    "gelu": ("pre",), "silu": ("pre",),  # their input
    "sqrelu": ("relu",),  # relu keeps its output, square the same tensor
    "reglu": ("act", "up"),  # relu keeps its output; the product both factors
    "geglu": ("pre", "act", "up"), "swiglu": ("pre", "act", "up"),
}


@dataclass(frozen=True)
class Activations:
    per_layer: dict[str, int]  # one layer's saved bytes by component key (layers are identical)
    components: dict[str, int]  # the whole model: layer keys x n_layers plus once-per-model saves

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

    def norm(self, key: str, x: str | None, rows: int, width: int) -> str:
        """Saves the input ``x`` and fp32 statistics; returns the name of the output."""
        self.save(key, rows * width * self.b, x)
        self.save(key, rows * norm_stat_bytes(self.cfg))
        return key + " output"


def norm_stat_bytes(cfg: ModelConfig) -> int:
    """fp32 statistics a norm keeps per row: LayerNorm mean and rstd, RMSNorm rstd."""
    return STAT * (2 if cfg.norm == "layernorm" else 1)


def _attention(tape: _Tape, cfg: ModelConfig, B: int, S: int, kind: str, x: str) -> None:
    T, h, b = B * S, cfg.n_heads, tape.b
    qw, kw = cfg.q_width, cfg.kv_width
    for p in "qkv":
        tape.save(f"attention/{p}", T * cfg.d_model * b, x)
    if cfg.qk_norm:
        tape.norm("attention/q_norm", None, T * h, cfg.head_size)
        tape.norm("attention/k_norm", None, T * cfg.kv_heads, cfg.head_size)
    if kind == "flash" and cfg.position != "relative":
        tape.save("attention/sdpa", T * (2 * qw + 2 * kw) * b)  # q, k, v and the output
        tape.save("attention/sdpa", B * h * S * STAT)  # log-sum-exp
        return  # the output is laid out (B, S, h, hd): the o projection keeps a view of it
    if kind == "eager":
        keys, c = ("attention/scores", "attention", "attention/values"), b
        # K/V heads are expanded to h; with B = 1 and one K/V head the expansion stays a view
        kv = T * (kw if B == 1 and cfg.kv_heads == 1 else qw) * b
    else:  # the learned T5 bias takes SDPA's math path, which computes in fp32 at least
        keys, c = ("attention/sdpa",) * 3, max(b, STAT)
        kv = T * qw * c
    tape.save(keys[0], T * qw * c + kv)  # q and k, copied for the batched matmul
    tape.save(keys[1], B * h * S * S * c)  # softmax output
    tape.save(keys[2], kv)  # v
    tape.save("attention/o", T * qw * b)  # heads merged back: a copy


def _hidden(tape: _Tape, cfg: ModelConfig, act_key: str, down_key: str, tag: str, rows: int,
            width: int) -> None:
    """The activation's saved tensors and the down projection's input, ``rows x width`` each."""
    for name in _ACT_SAVES[cfg.activation]:
        tape.save(act_key, rows * width * tape.b, tag + name)
    tape.save(down_key, rows * width * tape.b, tag + "out")


def _ffn(tape: _Tape, cfg: ModelConfig, T: int, x: str) -> None:
    d, b, moe = cfg.d_model, tape.b, cfg.moe
    if moe is None:
        for key in ("mlp/up", "mlp/gate") if cfg.gated else ("mlp/up",):
            tape.save(key, T * d * b, x)
        _hidden(tape, cfg, "mlp", "mlp/down", "mlp ", T, cfg.d_ff)
        return
    E, k, f = moe.num_experts, moe.experts_per_token, cfg.expert_width
    slots = T * k  # token slots, summed over the experts that receive them
    tape.save("moe/router", T * d * b, x)
    # probabilities, their sum after top-k, expert ids, renormalized weights, slot token/choice
    tape.save("moe", T * E * b + T * b + slots * (3 * INDEX + b))
    # per slot: the expert input, its weight, the expert output and the weighted output
    tape.save("moe/experts", slots * (3 * d + 1) * b)
    _hidden(tape, cfg, "moe/experts", "moe/experts", "experts ", slots, f)
    tape.save("moe/shared_experts", T * d * b, x)  # every token: the router's input
    _hidden(tape, cfg, "moe/shared_experts", "moe/shared_experts", "shared ",
            T * moe.shared_experts, f)


def layer_bytes(cfg: ModelConfig, batch: int, seq: int, attention: str, b: int) -> dict[str, int]:
    """One block's saved bytes by component, in the order of ``analysis.layout``'s block forms."""
    T, d = batch * seq, cfg.d_model
    tape = _Tape(cfg, b)
    sandwich = cfg.norm_placement == "sandwich"

    def attn(x: str) -> None:
        _attention(tape, cfg, batch, seq, attention, x)
        if sandwich:
            tape.norm("norm/attention_post", None, T, d)

    def ffn(x: str) -> None:
        _ffn(tape, cfg, T, x)
        if sandwich:
            tape.norm("norm/mlp_post", None, T, d)

    if cfg.norm_placement == "post":
        attn("x")
        ffn(tape.norm("norm/attention", None, T, d))
        tape.norm("norm/mlp", None, T, d)
    elif cfg.parallel_block:
        h = tape.norm("norm/attention", "x", T, d)
        h_mlp = tape.norm("norm/mlp", "x", T, d) if cfg.parallel_norms == 2 else h
        attn(h)
        ffn(h_mlp)
    else:
        attn(tape.norm("norm/attention", None, T, d))
        ffn(tape.norm("norm/mlp", None, T, d))
    return {k: v for k, v in tape.bytes.items() if v}


def _mask_bytes(cfg: ModelConfig, seq: int, attention: str, b: int) -> int:
    """The additive mask/position bias the model builds once per forward; 0 when flash uses
    its causal flag instead (no position bias, window not shorter than the sequence)."""
    biased = cfg.position in ("alibi", "relative")  # a bias per head
    if attention == "flash" and not biased and seq <= cfg.window(seq):
        return 0
    return (cfg.n_heads if biased else 1) * seq * seq * b


def activation_bytes(cfg: ModelConfig, batch: int, seq: int, attention: str = "flash",
                     dtype: str = "bf16", recompute: bool = False) -> Activations:
    if attention not in ATTENTION_IMPLS:
        raise ValueError(f"attention must be one of {', '.join(ATTENTION_IMPLS)}, got {attention!r}")
    if dtype not in FLOAT_DTYPES:
        raise ValueError(f"activations are kept in fp32, bf16 or fp16, got {dtype!r}")
    b = weight_bytes(1, dtype)
    T, d, L = batch * seq, cfg.d_model, cfg.n_layers
    rope = 2 * seq * cfg.head_size * b if cfg.position == "rope" else 0
    mask = _mask_bytes(cfg, seq, attention, b)
    comps: dict[str, int] = {"embedding/token": T * INDEX}
    if cfg.position == "learned":
        comps["embedding/position"] = seq * INDEX
    elif cfg.position == "relative":
        comps["embedding/position"] = seq * seq * INDEX
    if recompute:
        per_layer = {"layer": T * d * b}
        shared = {"layer": rope + mask}  # the checkpoint keeps them with the first block's input
    else:
        per_layer = layer_bytes(cfg, batch, seq, attention, b)
        flash_mask = mask if attention == "flash" and cfg.position != "relative" else 0
        shared = {"attention": rope, "attention/sdpa": flash_mask}  # saved by the first layer
    for key, n in per_layer.items():
        comps[key] = n * L
    for key, n in shared.items():
        if n:
            comps[key] = comps.get(key, 0) + n
    if cfg.final_norm:
        comps["norm/final"] = T * (d * b + norm_stat_bytes(cfg))
    comps["lm_head"] = T * d * b
    comps["loss"] = T * cfg.vocab_size * b + b  # log-softmax, and nll_loss's total weight
    return Activations(per_layer, comps)


def korthikanti_bytes(cfg: ModelConfig, batch: int, seq: int) -> int:
    """Korthikanti et al. 2022, one layer without recomputation: ``sbh(34 + 5as/h)``."""
    s, b, h, a = seq, batch, cfg.d_model, cfg.n_heads
    return s * b * h * 34 + 5 * a * s * s * b
