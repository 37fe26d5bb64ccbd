"""FLOPs of a forward and backward pass, per component, in two families.

Conventions (README "FLOPs"):
- one add or one multiply is one FLOP; ``(m x k) @ (k x n)`` is ``2mkn`` FLOPs, as
  PyTorch's ``FlopCounterMode`` counts it. Biases, norms, activations, softmax and the
  like are *elementwise* FLOPs, reported apart and never folded into the matmul figure;
- attention is ``dense`` (the full ``S x S_kv`` score matrix, as dense kernels execute it
  and as FlopCounterMode, PaLM and Chinchilla count it) or ``causal`` (only the unmasked
  query-key pairs: the causal triangle intersected with the sliding-window band);
- backward is counted per operation: a linear layer costs 2x its forward (input and
  weight gradients); attention 2x with eager attention (dQ, dK, dP, dV) and 2.5x with
  flash attention, which also recomputes the scores (charged to ``attention/scores``;
  not with ``relative`` positions, whose learned bias needs a gradient no fused kernel
  gives, so those models run the eager backward);
  ``recompute`` (full activation recomputation) adds one more forward of every layer
  (not the LM head, whose input is kept). Elementwise backward is estimated as 2x its
  forward.
"""

from __future__ import annotations

from dataclasses import dataclass

from .config import ModelConfig
from .layout import layer_linears, layer_norms

MODES = ("train", "prefill", "decode")
ATTENTION_IMPLS = ("eager", "flash")

# Elementwise cost per element, forward (README "Elementwise FLOPs").
NORM_COST = {"layernorm": 7, "layernorm_nobias": 6, "rmsnorm": 4}  # mean/var, normalize, scale(, shift)
ACTIVATION_COST = {"relu": 1, "gelu": 8, "silu": 4, "sqrelu": 2,  # tanh-GELU: 8 ops; SiLU: x*sigmoid(x)
                   "swiglu": 5, "geglu": 9, "reglu": 2}  # gated: + 1 multiply by the up branch
SOFTMAX_COST = 5  # max, subtract, exp, sum, divide
ROPE_COST = 3  # x*cos + rotate(x)*sin per element of q and k
SCORE_SCALE_COST = 1  # scores / sqrt(hd)
POSITION_BIAS_COST = 1  # ALiBi or T5 relative bias added to each score


@dataclass(frozen=True)
class Workload:
    """``train``: forward+backward over ``batch x seq`` tokens, logits everywhere.
    ``prefill``: forward over the prompt, logits for the last position unless ``all_logits``.
    ``decode``: one new token per sequence whose context (cache plus itself) is ``seq``."""

    mode: str = "train"
    seq: int = 1024
    batch: int = 1
    all_logits: bool = False

    @property
    def query_len(self) -> int:
        return 1 if self.mode == "decode" else self.seq

    @property
    def tokens(self) -> int:
        return self.batch * self.query_len

    @property
    def logit_tokens(self) -> int:
        if self.mode == "prefill" and not self.all_logits:
            return self.batch
        return self.tokens


def _triangle(n: int, window: int | None) -> int:
    """sum_{m=1..n} min(m, W): keys seen by the first n positions under causal masking."""
    if window is None or n <= window:
        return n * (n + 1) // 2
    return window * (window + 1) // 2 + (n - window) * window


def attended_pairs(cfg: ModelConfig, w: Workload, causal: bool) -> int:
    """Query-key pairs one sequence computes in one head.

    Dense: every query against every key the kernel holds (``S x S`` for train and
    prefill; the ``min(seq, W)`` cached keys for decode). Causal: query at position p
    sees ``min(p + 1, W)`` keys.
    """
    if w.mode == "decode":
        return cfg.window(w.seq)
    if not causal:
        return w.seq * w.seq
    return _triangle(w.seq, cfg.sliding_window)


@dataclass(frozen=True)
class FlopBreakdown:
    matmul: dict[str, int]  # model totals by component key
    elementwise: dict[str, int]  # model totals by op

    @property
    def matmul_total(self) -> int:
        return sum(self.matmul.values())

    @property
    def elementwise_total(self) -> int:
        return sum(self.elementwise.values())

    @property
    def total(self) -> int:
        return self.matmul_total + self.elementwise_total


@dataclass(frozen=True)
class FlopReport:
    workload: Workload
    causal: bool
    attention: str
    recompute: bool
    forward: FlopBreakdown
    backward: FlopBreakdown

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


def layer_matmul(cfg: ModelConfig, w: Workload, causal: bool) -> dict[str, int]:
    """Forward matmul FLOPs of one layer, by component."""
    T = w.tokens
    out: dict[str, int] = {}
    for m in layer_linears(cfg):
        _add(out, m.key, 2 * T * m.d_in * m.d_out * m.active)
    attn = 2 * w.batch * cfg.n_heads * attended_pairs(cfg, w, causal) * cfg.head_size
    out["attention/scores"] = attn
    out["attention/values"] = attn
    return out


def _norm_cost(cfg: ModelConfig) -> int:
    if cfg.norm == "rmsnorm":
        return NORM_COST["rmsnorm"]
    return NORM_COST["layernorm" if cfg.norm_bias else "layernorm_nobias"]


def layer_elementwise(cfg: ModelConfig, w: Workload, causal: bool) -> dict[str, int]:
    """Forward elementwise FLOPs of one layer, by op (costs in the module constants)."""
    T, d = w.tokens, cfg.d_model
    out: dict[str, int] = {}
    norm_cost = _norm_cost(cfg)
    for n in layer_norms(cfg):
        width = {"attention/q_norm": cfg.q_width, "attention/k_norm": cfg.kv_width}.get(n.key, d)
        _add(out, "norm", norm_cost * T * width)
    for m in layer_linears(cfg):
        if m.bias:
            _add(out, "bias", T * m.d_out * m.active)
    scores = w.batch * cfg.n_heads * attended_pairs(cfg, w, causal)
    _add(out, "attention/scale", SCORE_SCALE_COST * scores)
    _add(out, "attention/softmax", SOFTMAX_COST * scores)
    if cfg.position in ("alibi", "relative"):
        _add(out, "attention/position_bias", POSITION_BIAS_COST * scores)
    if cfg.position == "rope":
        _add(out, "attention/rope", ROPE_COST * T * (cfg.q_width + cfg.kv_width))
    moe = cfg.moe
    if moe is None:
        _add(out, "activation", ACTIVATION_COST[cfg.activation] * T * cfg.d_ff)
    else:
        active = moe.experts_per_token + moe.shared_experts
        _add(out, "activation", ACTIVATION_COST[cfg.activation] * T * cfg.expert_width * active)
        _add(out, "moe/routing", SOFTMAX_COST * T * moe.num_experts)
        # weight each routed expert's output and accumulate; add the shared experts
        _add(out, "moe/combine", 2 * moe.experts_per_token * T * d + moe.shared_experts * T * d)
    _add(out, "residual", 2 * T * d)
    return out


def _scaled(d: dict[str, int], factor: int, n_layers: int = 1) -> dict[str, int]:
    return {k: v * factor * n_layers for k, v in d.items()}


def count_flops(cfg: ModelConfig, w: Workload, *, causal: bool = False, attention: str = "flash",
                recompute: bool = False) -> FlopReport:
    L, T, d = cfg.n_layers, w.tokens, cfg.d_model
    layer_mm = layer_matmul(cfg, w, causal)
    layer_ew = layer_elementwise(cfg, w, causal)
    head = {"lm_head": 2 * w.logit_tokens * d * cfg.vocab_size}
    fwd_mm = {**_scaled(layer_mm, 1, L), **head}
    fwd_ew = _scaled(layer_ew, 1, L)
    if cfg.final_norm:
        _add(fwd_ew, "norm", _norm_cost(cfg) * w.logit_tokens * d)
    if cfg.lm_head_bias:
        _add(fwd_ew, "bias", w.logit_tokens * cfg.vocab_size)
    if cfg.position in ("learned", "sinusoidal"):
        _add(fwd_ew, "position", T * d)
    forward = FlopBreakdown(fwd_mm, fwd_ew)
    if w.mode != "train":
        return FlopReport(w, causal, attention, recompute, forward, FlopBreakdown({}, {}))
    bwd_mm = _scaled(fwd_mm, 2)
    if attention == "flash" and cfg.position != "relative":
        # scores recomputed from the saved log-sum-exp. A learned T5 bias needs its
        # gradient, which fused kernels do not give: such models run eager attention.
        bwd_mm["attention/scores"] += fwd_mm["attention/scores"]
    bwd_ew = _scaled(fwd_ew, 2)
    if recompute:
        for k, v in _scaled(layer_mm, 1, L).items():
            _add(bwd_mm, k, v)
        for k, v in _scaled(layer_ew, 1, L).items():
            _add(bwd_ew, k, v)
    return FlopReport(w, causal, attention, recompute, forward, FlopBreakdown(bwd_mm, bwd_ew))


@dataclass(frozen=True)
class Approximations:
    """The rules of thumb, for comparison with the exact figure."""

    six_n: int  # 6 * N * tokens (2 * N * tokens without backward), N non-embedding (active)
    six_n_with_embeddings: int
    palm: int  # PaLM appendix B: (6N + 12 L H Q T) per token; (2N + 4 L H Q T) forward only


def approximations(cfg: ModelConfig, w: Workload, n_non_embedding: int, n_embedding: int) -> Approximations:
    factor = 6 if w.mode == "train" else 2
    keys = cfg.window(w.seq) if w.mode == "decode" else w.seq  # decode: the cached keys
    attn = (12 if w.mode == "train" else 4) * cfg.n_layers * cfg.n_heads * cfg.head_size * keys
    return Approximations(factor * n_non_embedding * w.tokens,
                          factor * (n_non_embedding + n_embedding) * w.tokens,
                          (factor * n_non_embedding + attn) * w.tokens)
