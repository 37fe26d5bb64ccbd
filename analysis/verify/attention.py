"""Attention of the reference model: multi-head (MHA/GQA/MQA) and multi-head latent (MLA),
eager or flash, with qk-norm, full or partial RoPE, attention sinks and logit soft-capping.

Conventions:
- heads: q has ``h = n_heads`` heads, k and v ``g = n_kv_heads``; query head ``i`` reads
  key/value head ``i // (h // g)`` (the ``repeat_interleave`` grouping of Llama / Mistral);
- scale ``1/sqrt(d_qk)``, ``d_qk`` the score head size (MHA: ``head_size``; MLA:
  ``qk_nope_head_dim + qk_rope_head_dim``); values have their own head size ``d_v``;
- logits: ``scores = q @ k^T * scale``, then soft-capping ``cap * tanh(scores / cap)``
  (Gemma 2), then the additive ``bias`` (mask and position bias, shape (1, h or 1, S, S_kv),
  built once per forward per distinct window by the model, so eager and flash see the same
  mask and a mask never costs saved activations: an add saves nothing); attention sinks
  (GPT-OSS) are one learned logit per head that joins the softmax and has no value;
- RoPE is rotate-half (GPT-NeoX / Llama) over the first ``rotary_dims`` of each head; the
  other dimensions pass through unrotated (partial rotary: NeoX/Pythia, Phi-2);
- eager materializes the scores in two tiny submodules, ``scores`` (q @ k^T, scaled) and
  ``values`` (probs @ v), so FLOP counters attribute the two matmuls by name; GQA expands
  K/V to ``h`` heads first (the dense matmul FLOPs are ``2*B*h*S*S_kv*d`` either way);
- flash calls the CPU flash kernel ``aten._scaled_dot_product_flash_attention_for_cpu``
  directly, with native GQA, on the cpu *and* the meta device, because
  ``F.scaled_dot_product_attention`` silently takes the math path on meta. Where that kernel
  cannot express the attention (soft-capping, sinks, a value head size different from the
  score head size: MLA) flash runs :func:`reference_flash`, one op that keeps and recomputes exactly
  what a flash kernel does;
- a learned position bias (T5 ``relative``) needs a gradient that no fused kernel gives, so
  such a model runs eager attention even when flash is asked for (PyTorch's SDPA falls back
  to its math path, an eager computation, in that case too).
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint, set_checkpoint_early_stop
from torch.utils.flop_counter import register_flop_formula

from ..model.config import ModelConfig
from ..model.layers import LayerSpec
from .norms import L2Norm, LayerNorm, RMSNorm, make_norm


@dataclass
class LayerContext:
    """What one layer's attention needs from the model for one forward call."""

    bias: torch.Tensor | None  # (1, h or 1, S, S_kv) additive; None: plain causal, S_kv == S
    rope: tuple[torch.Tensor, torch.Tensor] | None  # cos, sin (S, rotated dims); None: no RoPE
    cache: object | None  # a KVCache
    start_pos: int
    carry: list | None = None  # moe.shortcut: the MoE output a dense+shortcut_moe layer leaves the next layer
    indices: dict | None = None  # DSA: each indexed layer's top-k (idx, valid), which shared layers reuse
    embeddings: torch.Tensor | None = None  # shared_transformer: the embeddings entering layer 0
    kv: dict | None = None  # kv_shared_layers: each source layer's K and V, which the layers after it reuse


# -- the matmul family a reference_flash matmul belongs to, read by the FLOP counter ---------

_FAMILY: list[str] = []


@contextlib.contextmanager
def matmul_family(name: str):
    """Label the matmuls run inside as ``scores`` or ``values`` (measure.py attributes the
    FLOPs of ``attention/sdpa`` by it: one fused op holds both families)."""
    _FAMILY.append(name)
    try:
        yield
    finally:
        _FAMILY.pop()


def current_family() -> str | None:
    return _FAMILY[-1] if _FAMILY else None


# -- RoPE ---------------------------------------------------------------------------------

def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate-half RoPE over the first ``r = cos.shape[-1]`` dims of each head (pair ``i``
    with ``i + r/2``); the remaining dims pass through."""
    r = cos.shape[-1]
    if r == x.shape[-1]:
        return x * cos + rotate_half(x) * sin  # (B, heads, S, hd)
    rot, rest = x[..., :r], x[..., r:]
    return torch.cat([rot * cos + rotate_half(rot) * sin, rest], dim=-1)  # (B, heads, S, hd)


def repeat_kv(x: torch.Tensor, groups: int) -> torch.Tensor:
    """(B, g, S, d) -> (B, g*groups, S, d), each K/V head repeated for its query heads."""
    if groups == 1:
        return x
    B, g, S, d = x.shape
    return x[:, :, None].expand(B, g, groups, S, d).reshape(B, g * groups, S, d)


# -- eager --------------------------------------------------------------------------------

class Scores(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return (q @ k.transpose(-2, -1)) * self.scale  # (B, h, S, S_kv)


class Values(nn.Module):
    def forward(self, probs: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return probs @ v  # (B, h, S, d_v)


def softcap(scores: torch.Tensor, cap: float | None) -> torch.Tensor:
    return scores if cap is None else torch.tanh(scores / cap) * cap


# -- flash --------------------------------------------------------------------------------

def _logits(s: torch.Tensor, scale: float, cap: float | None, bias: torch.Tensor | None,
            causal: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Scaled, capped, biased (or causally masked) logits in at least fp32, and tanh's output."""
    s = s.to(torch.promote_types(s.dtype, torch.float32)) * scale
    t = None
    if cap is not None:
        t = torch.tanh(s / cap)
        s = t * cap
    if bias is not None:
        s = s + bias
    elif causal:
        S, S_kv = s.shape[-2:]
        future = torch.ones(S, S_kv, dtype=torch.bool, device=s.device).triu(1)
        s = s.masked_fill(future, float("-inf"))
    return s, t  # (B, h, S, S_kv)


# Flash attention as a flash kernel computes it, for what the aten kernel cannot express: one op
# (``llmcalc::reference_flash``), as the aten kernel is one, so that per-op checkpointing (.per_op) keeps
# its outputs as it keeps the kernel's, and FlopCounterMode counts it by the formula registered below.

def _flash_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: Optional[torch.Tensor],
                     sinks: Optional[torch.Tensor], scale: float, cap: Optional[float],
                     causal: bool) -> tuple[torch.Tensor, torch.Tensor]:
    B, h, S, _ = q.shape
    s = q @ repeat_kv(k, h // k.shape[1]).transpose(-2, -1)  # (B, h, S, S_kv)
    logits, _ = _logits(s, scale, cap, bias, causal)
    full = logits
    if sinks is not None:
        full = torch.cat([logits, sinks.to(logits.dtype).view(1, h, 1, 1).expand(B, h, S, 1)], -1)
    lse = full.logsumexp(dim=-1)  # (B, h, S), fp32
    probs = (logits - lse[..., None]).exp().to(v.dtype)
    out = probs @ repeat_kv(v, h // v.shape[1])  # (B, h, S, d_v)
    if q.transpose(1, 2).is_contiguous():  # as the aten kernel: the output laid out like q
        out = out.transpose(1, 2).contiguous().transpose(1, 2)  # memory layout (B, S, h, d_v)
    return out, lse


_reference_flash = torch.library.custom_op("llmcalc::reference_flash", _flash_forward, mutates_args=())
_reference_flash.register_fake(_flash_forward)  # shapes from the same code (the meta device)


def _reference_flash_setup(ctx, inputs, output) -> None:
    q, k, v, bias, sinks, scale, cap, causal = inputs
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse, bias, sinks)
    ctx.scale, ctx.cap, ctx.causal = scale, cap, causal


def _reference_flash_backward(ctx, dout, _dlse):
    """Recomputes the scores from q and k and runs four gradient matmuls: dV = P^T dO and dP = dO V^T
    (``values``), dQ = dS K and dK = dS^T Q (``scores``)."""
    q, k, v, out, lse, bias, sinks = ctx.saved_tensors
    B, h, S, _ = q.shape
    gk, gv = h // k.shape[1], h // v.shape[1]
    ke, ve = repeat_kv(k, gk), repeat_kv(v, gv)
    with matmul_family("scores"):
        s = q @ ke.transpose(-2, -1)  # recomputed (B, h, S, S_kv)
    logits, t = _logits(s, ctx.scale, ctx.cap, bias, ctx.causal)
    probs = (logits - lse[..., None]).exp()  # fp32
    with matmul_family("values"):
        dv = probs.to(dout.dtype).transpose(-2, -1) @ dout  # (B, h, S_kv, d_v)
        dp = dout @ ve.transpose(-2, -1)  # (B, h, S, S_kv)
    delta = (dout.to(lse.dtype) * out.to(lse.dtype)).sum(-1, keepdim=True)  # (B, h, S, 1)
    ds = probs * (dp.to(lse.dtype) - delta)
    dsinks = None
    if sinks is not None:  # the sink's probability times (its zero value - delta)
        p_sink = (sinks.to(lse.dtype).view(1, h, 1) - lse).exp()  # (B, h, S)
        dsinks = -(p_sink * delta[..., 0]).sum(dim=(0, 2)).to(sinks.dtype)
    if t is not None:
        ds = ds * (1 - t * t)
    ds = (ds * ctx.scale).to(q.dtype)
    with matmul_family("scores"):
        dq = ds @ ke  # (B, h, S, d_qk)
        dk = ds.transpose(-2, -1) @ q  # (B, h, S_kv, d_qk)
    dk = dk.unflatten(1, (k.shape[1], gk)).sum(2)  # GQA: sum over each K/V head's queries
    dv = dv.unflatten(1, (v.shape[1], gv)).sum(2)
    return dq, dk, dv, None, dsinks, None, None, None


_reference_flash.register_autograd(_reference_flash_backward, setup_context=_reference_flash_setup)


@register_flop_formula(torch.ops.llmcalc.reference_flash)
def _reference_flash_flop(q_shape, k_shape, v_shape, *args, out_shape=None, **kwargs) -> int:
    """Its two matmuls over every query-key pair: ``2*B*h*S*S_kv*(d_qk + d_v)``."""
    B, h, S, d_qk = q_shape
    return 2 * B * h * S * k_shape[-2] * (d_qk + v_shape[-1])


def reference_flash(q, k, v, bias, sinks, scale: float, cap: float | None, causal: bool) -> torch.Tensor:
    """Flash attention as a flash kernel computes it, for what the aten kernel cannot express.

    Forward keeps no score matrix: it saves q, k, v (K/V unexpanded), the output (laid out like q,
    as the aten kernel lays it out: (B, S, h, d_v) when q is a transposed view of its projection,
    so the o projection reads a view of it), the fp32 log-sum-exp over the keys and the sink, and
    the additive bias when there is one; the sinks are a parameter. Its two matmuls are ``scores``
    and ``values`` (:func:`_reference_flash_flop`). Backward recomputes the scores from q and k and
    runs four gradient matmuls: 2.5x the forward, as the aten flash kernel. Inputs are (B, h, S, d_qk),
    (B, g, S_kv, d_qk), (B, g_v, S_kv, d_v); the bias gets no gradient."""
    return _reference_flash(q, k, v, bias, sinks, scale, cap, causal)[0]


class SDPA(nn.Module):
    """Flash attention: the aten flash kernel, or :func:`reference_flash` where it cannot
    express the attention (see the module docstring)."""

    def __init__(self, scale: float, cap: float | None):
        super().__init__()
        self.scale, self.cap = scale, cap

    def forward(self, q, k, v, bias: torch.Tensor | None, sinks: torch.Tensor | None = None):
        if self.cap is not None or sinks is not None or q.shape[-1] != v.shape[-1]:
            return reference_flash(q, k, v, bias, sinks, self.scale, self.cap, bias is None)
        if q.device.type not in ("cpu", "meta"):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=bias, is_causal=bias is None,
                                                  scale=self.scale, enable_gqa=True)
        out, _lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            q, k, v, 0.0, bias is None, attn_mask=bias, scale=self.scale)
        return out  # (B, h, S, d_v)


class _Attention(nn.Module):
    """The part both attention kinds share: from q, k, v (heads first) to the output."""

    def _init_core(self, cfg: ModelConfig, index: int, kind: str, d_qk: int) -> None:
        if kind not in ("eager", "flash"):
            raise ValueError(f"attention must be 'eager' or 'flash', got {kind!r}")
        if cfg.position == "relative":  # a learned bias needs its gradient: no fused kernel
            kind = "eager"
        self.index, self.kind, self.h = index, kind, cfg.n_heads
        self.selective = False  # selective recomputation: eager's core checkpointed (model.py)
        self.cap = cfg.attn_logit_softcap
        if cfg.attention_sinks:
            self.sinks = nn.Parameter(torch.zeros(cfg.n_heads))
        scale = 1.0 / math.sqrt(d_qk)
        if kind == "eager":
            self.scores, self.values = Scores(scale), Values()
        else:
            self.sdpa = SDPA(scale, self.cap)

    def attend(self, q, k, v, bias: torch.Tensor | None) -> torch.Tensor:
        """q (B, h, S, d_qk), k (B, g, S_kv, d_qk), v (B, g, S_kv, d_v) -> (B, h, S, d_v)."""
        if self.kind == "flash":
            return self.sdpa(q, k, v, bias, getattr(self, "sinks", None))
        if self.selective:  # keeps q, k, v and the bias; backward reruns the core (no early stop)
            with set_checkpoint_early_stop(False):
                return checkpoint(self.eager, q, k, v, bias, use_reentrant=False, preserve_rng_state=False)
        return self.eager(q, k, v, bias)

    def eager(self, q, k, v, bias: torch.Tensor | None) -> torch.Tensor:
        """Scores, (soft-cap, bias, sink,) softmax, values: the core selective recomputation reruns."""
        sinks = getattr(self, "sinks", None)
        B, h, S, _ = q.shape
        scores = softcap(self.scores(q, repeat_kv(k, h // k.shape[1])), self.cap)  # (B, h, S, S_kv)
        if bias is not None:
            scores = scores + bias
        if sinks is None:
            probs = scores.softmax(dim=-1)
        else:  # as transformers' GPT-OSS eager: a sink column joins the softmax, then dropped
            sink = sinks.view(1, h, 1, 1).expand(B, h, S, 1).to(scores.dtype)
            probs = torch.cat([scores, sink], dim=-1).softmax(dim=-1)[..., :-1]
        return self.values(probs, repeat_kv(v, h // v.shape[1]))  # (B, h, S, d_v)


class Attention(_Attention):
    """Multi-head attention (MHA, GQA, MQA): ``q``, ``k``, ``v``, ``o``; qk-norm per head
    (``head``: over ``hd``) or over the whole projection (``full``: ``h*hd`` and ``g*hd``,
    OLMo 2), after the projection and before RoPE; with ``attention_gate`` a ``gate`` linear
    (d -> h*hd, no bias) of the input whose sigmoid multiplies the merged heads before ``o``, as
    transformers' AfmoeAttention; with ``sub_norms`` a norm ``sub_norm`` over the merged heads (after
    the gate) before ``o``, as transformers' BitNetAttention. A layer reusing K/V (``spec.kv_reuse``,
    ``kv_shared_layers``) has no ``k``, ``v``, ``k_norm`` or ``v_norm``: it reads the K and V layer ``source``
    attended to (after its cache), as transformers' Gemma3nTextAttention on a "reuse" layer."""

    def __init__(self, cfg: ModelConfig, index: int, spec: LayerSpec, kind: str = "eager"):
        super().__init__()
        d = cfg.d_model
        self.g, self.hd, self.qk_norm = cfg.kv_heads, cfg.head_size, cfg.qk_norm
        self.q = nn.Linear(d, cfg.q_width, bias=cfg.qkv_bias)
        self.reuse, self.source, self.store = spec.kv_reuse, None, False  # model.Block sets source and store
        if not spec.kv_reuse:
            self.k = nn.Linear(d, cfg.kv_width, bias=cfg.qkv_bias)
        if not (cfg.k_eq_v or spec.kv_reuse):  # k_eq_v (Gemma 4): the values are k's projection output
            self.v = nn.Linear(d, cfg.kv_width, bias=cfg.qkv_bias)
        self.o = nn.Linear(cfg.q_width, d, bias=cfg.out_bias)
        if cfg.v_norm and not spec.kv_reuse:  # Gemma 4: a weightless norm over each value head
            self.v_norm = RMSNorm(self.hd, weight=False) if cfg.norm == "rmsnorm" else LayerNorm(self.hd, False, False)
        if cfg.attention_gate:  # AFMoE: the merged heads times sigmoid(gate(x)), elementwise
            self.gate = nn.Linear(d, cfg.q_width, bias=False)
        if cfg.sub_norms:  # BitNet: a norm over the merged heads, before o
            self.sub_norm = make_norm(cfg, cfg.q_width)
        if cfg.qk_norm == "head":
            self.q_norm = make_norm(cfg, self.hd)
            if not spec.kv_reuse:
                self.k_norm = make_norm(cfg, self.hd)
        elif cfg.qk_norm == "full":
            self.q_norm = make_norm(cfg, cfg.q_width)
            if not spec.kv_reuse:
                self.k_norm = make_norm(cfg, cfg.kv_width)
        elif cfg.qk_norm == "l2" and spec.rope:  # Llama 4: weightless, on the RoPE layers only
            self.qk_norm, self.q_norm, self.k_norm = "head", L2Norm(), L2Norm()
        # temperature tuning (Llama 4's NoPE layers): q times log1p(floor((p + 1) / 8192)) * 0.1 + 1
        self.temperature = cfg.attn_temperature_tuning and not spec.rope
        self._init_core(cfg, index, kind, self.hd)

    def forward(self, x: torch.Tensor, ctx: LayerContext) -> torch.Tensor:
        B, S, _ = x.shape
        q = self.q(x)  # (B, S, h*hd)
        if self.qk_norm == "full":
            q = self.q_norm(q)
        q = q.view(B, S, self.h, self.hd)
        if self.qk_norm == "head":
            q = self.q_norm(q)
        if self.temperature:  # one scale per position, as transformers' Llama4TextAttention
            pos = torch.arange(ctx.start_pos, ctx.start_pos + S, device=x.device, dtype=torch.float32)
            q = q * (torch.log1p(torch.floor((pos + 1.0) / 8192.0)) * 0.1 + 1.0).to(q.dtype).view(S, 1, 1)
        q = q.transpose(1, 2)  # (B, h, S, hd)
        if ctx.rope is not None:
            q = apply_rope(q, *ctx.rope)
        if self.reuse:  # the source layer's K and V, as it attended to them (kv_shared_layers)
            k, v = ctx.kv[self.source]
        else:
            k, v = self.keys_values(x, ctx)
        if self.store:  # read by the layers that reuse them
            ctx.kv[self.index] = k, v
        y = self.attend(q, k, v, ctx.bias)  # (B, h, S, hd)
        y = y.transpose(1, 2).reshape(B, S, self.h * self.hd)
        if hasattr(self, "gate"):
            y = y * torch.sigmoid(self.gate(x))  # (B, S, h*hd)
        if hasattr(self, "sub_norm"):
            y = self.sub_norm(y)
        return self.o(y)

    def keys_values(self, x: torch.Tensor, ctx: LayerContext) -> tuple[torch.Tensor, torch.Tensor]:
        """K and V, (B, g, S_kv, hd): projected, normed, rotated, and with the cache's past entries."""
        B, S, _ = x.shape
        k = self.k(x)  # (B, S, g*hd)
        v = self.v(x) if hasattr(self, "v") else k  # k_eq_v: k's output, before its norm
        if self.qk_norm == "full":
            k = self.k_norm(k)
        k, v = k.view(B, S, self.g, self.hd), v.view(B, S, self.g, self.hd)
        if self.qk_norm == "head":
            k = self.k_norm(k)
        if hasattr(self, "v_norm"):
            v = self.v_norm(v)
        k, v = k.transpose(1, 2), v.transpose(1, 2)
        if ctx.rope is not None:
            k = apply_rope(k, *ctx.rope)
        if ctx.cache is not None:
            k, v = ctx.cache.update(self.index, (k, v), ctx.start_pos)
        return k, v


class LatentAttention(_Attention):
    """Multi-head latent attention (DeepSeek-V2/V3), as transformers' DeepseekV2Attention.

    Query: ``q`` (d -> h*(nope+rope)), or low rank ``q_a`` (d -> q_lora_rank), ``q_a_norm``,
    ``q_b`` (-> h*(nope+rope)). Keys and values: ``kv_a`` (d -> kv_lora_rank + rope) gives the
    latent c, normed by ``kv_a_norm``, and one rope key k_pe shared by all heads; ``kv_b``
    (kv_lora_rank -> h*(nope+v)) decompresses per head k_nope and v. k = (k_nope, k_pe),
    q = (q_nope, q_pe); RoPE on q_pe and k_pe only. The KV cache keeps the normed latent and
    the rotated k_pe, and a forward decompresses all attended latents through ``kv_b``, but a decode step
    (one new token a sequence after cached ones) under flash attention, which runs absorbed (:meth:`absorbed`).
    With DSA the sparse core reads each query's top-k keys, from the layer's own indexer or, on a
    shared layer (``spec.shared_topk``), from the indexer of layer ``source``; with ``attention_gate``
    (Hy4) a ``gate`` linear (d -> h*v) of the input whose sigmoid multiplies the merged heads before o.
    """

    def __init__(self, cfg: ModelConfig, index: int, spec: LayerSpec, kind: str = "eager"):
        super().__init__()
        m, d, h = cfg.mla, cfg.d_model, cfg.n_heads
        self.nope, self.rope_dims, self.vd, self.rank = (m.qk_nope_head_dim, m.qk_rope_head_dim,
                                                        m.v_head_dim, m.kv_lora_rank)
        d_qk = self.nope + self.rope_dims
        if m.q_lora_rank is not None:
            self.q_a = nn.Linear(d, m.q_lora_rank, bias=cfg.qkv_bias)
            self.q_a_norm = make_norm(cfg, m.q_lora_rank)
            self.q_b = nn.Linear(m.q_lora_rank, h * d_qk, bias=False)
        else:
            self.q = nn.Linear(d, h * d_qk, bias=cfg.qkv_bias)
        self.kv_a = nn.Linear(d, self.rank + self.rope_dims, bias=cfg.qkv_bias)
        self.kv_a_norm = make_norm(cfg, self.rank)
        self.kv_b = LatentUp(self.rank, h, self.nope, self.vd)
        self.o = nn.Linear(h * self.vd, d, bias=cfg.out_bias)
        if cfg.attention_gate:  # Hy4: the merged heads times sigmoid(gate(x)), elementwise
            self.gate = nn.Linear(d, h * self.vd, bias=False)
        self._init_core(cfg, index, kind, d_qk)
        if spec.topk is not None:  # the sparse core stands where flash's kernel does, eager or flash
            self.sdpa = SparseSDPA()
        if cfg.dsa is not None:  # its own indexer (a shared layer reuses another's: source, set by the block)
            self.indexer = Indexer(cfg)
        self.source: int | None = None

    def forward(self, x: torch.Tensor, ctx: LayerContext) -> torch.Tensor:
        B, S, _ = x.shape
        h = self.h
        if hasattr(self, "q_a"):
            self._q_r = self.q_a_norm(self.q_a(x))
            q = self.q_b(self._q_r)
        else:
            q = self.q(x)
        q = q.view(B, S, h, self.nope + self.rope_dims).transpose(1, 2)  # (B, h, S, d_qk)
        q_nope, q_pe = q.split([self.nope, self.rope_dims], dim=-1)
        c, k_pe = self.kv_a(x).split([self.rank, self.rope_dims], dim=-1)  # (B, S, r), (B, S, rope)
        c = self.kv_a_norm(c)
        k_pe = k_pe.view(B, S, 1, self.rope_dims).transpose(1, 2)  # (B, 1, S, rope)
        if ctx.rope is not None:
            q_pe, k_pe = apply_rope(q_pe, *ctx.rope), apply_rope(k_pe, *ctx.rope)
        chosen = None  # DSA: (idx, valid), each query's top-k keys
        if hasattr(self, "indexer"):  # DSA: the indexer's key joins the cache, it picks each query's keys
            q_r = self._q_r
            with torch.no_grad():
                k_idx = self.indexer.key(x, ctx)
            if ctx.cache is not None:
                c, k_pe, k_idx = ctx.cache.update(self.index, (c, k_pe, k_idx), ctx.start_pos)
            with torch.no_grad():
                chosen = self.indexer(x, q_r, k_idx, ctx)
            if ctx.indices is not None:
                ctx.indices[self.index] = chosen
        elif ctx.cache is not None:
            c, k_pe = ctx.cache.update(self.index, (c, k_pe), ctx.start_pos)  # (B, S_kv, r), (B, 1, S_kv, rope)
        if self.source is not None:  # a shared layer: the top-k of the indexed layer before it
            chosen = ctx.indices[self.source]
        if self.kind == "flash" and S == 1 and ctx.start_pos > 0:  # a decode step under flash: absorbed
            y = self.absorbed(q_nope, q_pe, c, k_pe, chosen, ctx.bias)  # (B, h, S, v)
            return self._out(y, x)
        S_kv = c.shape[1]
        kv = self.kv_b(c).view(B, S_kv, h, self.nope + self.vd).transpose(1, 2)  # (B, h, S_kv, nope+v)
        k_nope, v = kv.split([self.nope, self.vd], dim=-1)
        k = torch.cat([k_nope, k_pe.expand(B, h, S_kv, self.rope_dims)], dim=-1)  # (B, h, S_kv, d_qk)
        q = torch.cat([q_nope, q_pe], dim=-1)
        if chosen is not None:
            y = self.sparse(q, k, v, *chosen, ctx.bias)
        else:
            y = self.attend(q, k, v, ctx.bias)  # (B, h, S, v)
        return self._out(y, x)

    def _out(self, y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """The heads' outputs y (B, h, S, v) merged, gated (``gate``), through ``o``."""
        B, _, S, _ = y.shape
        y = y.transpose(1, 2).reshape(B, S, self.h * self.vd)
        if hasattr(self, "gate"):
            y = y * torch.sigmoid(self.gate(x))  # (B, S, h*v)
        return self.o(y)

    def absorbed(self, q_nope, q_pe, c, k_pe, chosen, bias) -> torch.Tensor:
        """A decode step with weight absorption, as serving engines run MLA's decode (vLLM's MLA backend, SGLang,
        FlashMLA; DeepSeek-V2, section 2.1.2): ``kv_b``'s key half turns q_nope into a query over the latent,
        which with q_pe scores the cached latent and k_pe (one K/V head for all query heads, ``rank + rope``
        wide) at MLA's scale; the values are the latents (``rank`` wide); ``kv_b``'s value half turns each head's
        output into its values. q_nope (B, h, 1, nope), q_pe (B, h, 1, rope), c (B, S_kv, r), k_pe (B, 1, S_kv,
        rope) -> (B, h, 1, v)."""
        B, h = q_nope.shape[:2]
        q = torch.cat([self.kv_b(q_nope, "keys"), q_pe], dim=-1)  # (B, h, 1, r + rope)
        k = torch.cat([c[:, None], k_pe], dim=-1)  # (B, 1, S_kv, r + rope)
        v = c[:, None]  # (B, 1, S_kv, r): the keys' first columns
        if chosen is not None:  # the sparse core gathers each head's keys: the one latent head, expanded (a view)
            y = self.sparse(q, k.expand(B, h, -1, -1), v.expand(B, h, -1, -1), *chosen, bias)
        else:
            y = self.attend(q, k, v, bias)  # (B, h, 1, r)
        return self.kv_b(y, "values")

    def sparse(self, q, k, v, idx, valid, bias):
        """DSA's core over the selected keys, at MLA's scale ``1/sqrt(nope + rope)`` (an absorbed query is wider);
        selective recomputation checkpoints it (with the bias the layer is given, as the dense core)."""
        flash, sinks = self.kind == "flash", getattr(self, "sinks", None)
        scale = (self.nope + self.rope_dims) ** -0.5
        if self.selective and not flash:
            with set_checkpoint_early_stop(False):
                return checkpoint(lambda q, k, v, idx, valid, bias: self.sdpa(q, k, v, idx, valid, sinks, False,
                                                                              scale),
                                  q, k, v, idx, valid, bias, use_reentrant=False, preserve_rng_state=False)
        return self.sdpa(q, k, v, idx, valid, sinks, flash, scale)


class LatentUp(nn.Linear):
    """MLA's ``kv_b`` (rank -> h*(nope + v), no bias): a linear decompressing latents, or, in an absorbed decode
    step, one of its halves on a head's query or output (``half``), so that its FLOPs count under ``kv_b``:
    ``"keys"``: q_nope (B, h, S, nope) times W_UK -> (B, h, S, rank), since q . (W_UK c) = (W_UK^T q) . c;
    ``"values"``: a head's latent output (B, h, S, rank) times W_UV -> (B, h, S, v)."""

    def __init__(self, rank: int, h: int, nope: int, vd: int):
        super().__init__(rank, h * (nope + vd), bias=False)
        self.h, self.nope, self.vd = h, nope, vd

    def forward(self, x: torch.Tensor, half: str | None = None) -> torch.Tensor:
        if half is None:
            return super().forward(x)
        w = self.weight.view(self.h, self.nope + self.vd, self.in_features)  # per head: (nope + v, rank)
        if half == "keys":
            return x @ w[:, :self.nope]  # (B, h, S, nope) @ (h, nope, rank)
        return x @ w[:, self.nope:].transpose(1, 2)  # (B, h, S, rank) @ (h, rank, v)


class SparseSDPA(nn.Module):
    """DSA's sparse attention kernel (:class:`SparseCore`): the component ``attention/sdpa``."""

    def forward(self, q, k, v, idx, valid, sinks, flash: bool, scale: float):
        return SparseCore.apply(q, k, v, idx, valid, sinks, flash, scale)


class Indexer(nn.Module):
    """DSA's lightning indexer, as transformers' DeepseekV32Indexer (without gradient): ``wq_b``
    (q_lora_rank -> n*D) of the normed low-rank query, ``wk`` (d -> D) and its LayerNorm ``k_norm``,
    ``weights_proj`` (d -> n); rotate-half RoPE on the first rope dims of its heads and key. Scores
    ``sum_j w_j * relu(q_j . k) / sqrt(D)`` over every key; each query keeps its ``topk`` best keys
    that it may see (``valid``: False where fewer are visible)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        dsa, d = cfg.dsa, cfg.d_model
        self.n, self.D, self.topk = dsa.n_heads, dsa.head_dim, dsa.topk
        self.wq_b = nn.Linear(cfg.mla.q_lora_rank, self.n * self.D, bias=False)
        self.wk = nn.Linear(d, self.D, bias=False)
        self.k_norm = nn.LayerNorm(self.D)
        self.weights_proj = nn.Linear(d, self.n, bias=False)

    def key(self, x: torch.Tensor, ctx: LayerContext) -> torch.Tensor:
        k = self.k_norm(self.wk(x))  # (B, S, D)
        if ctx.rope is not None:
            k = apply_rope(k[:, None], *ctx.rope)[:, 0]
        return k

    def forward(self, x, q_r, k, ctx: LayerContext):
        B, S, _ = x.shape
        S_kv = k.shape[1]
        q = self.wq_b(q_r).view(B, S, self.n, self.D).transpose(1, 2)  # (B, n, S, D)
        if ctx.rope is not None:
            q = apply_rope(q, *ctx.rope)
        scores = (q @ k[:, None].transpose(-2, -1)).relu() * self.D ** -0.5  # (B, n, S, S_kv)
        w = self.weights_proj(x) * self.n ** -0.5  # (B, S, n)
        index = (w[:, :, None, :] @ scores.transpose(1, 2)).squeeze(-2)  # (B, S, S_kv)
        allowed = torch.ones(S, S_kv, dtype=torch.bool, device=x.device).tril(S_kv - S)
        if ctx.bias is not None:
            allowed = ctx.bias[0, 0] == 0
        index = index.masked_fill(~allowed, float("-inf"))
        # the top k, ties (relu's zeros) to the earliest key, so that a cached decode picks as the full forward
        order = index.sort(dim=-1, descending=True, stable=True).indices
        idx = order[..., :min(self.topk, S_kv)].contiguous()  # (B, S, K)
        return idx, allowed.expand(B, S, S_kv).gather(-1, idx)


class SparseCore(torch.autograd.Function):
    """Attention of each query to its selected keys only, as a sparse kernel computes it: q (B, h, S,
    d_qk), k (B, h, S_kv, d_qk), v (B, h, S_kv, d_v), idx and valid (B, S, K). Its two matmuls are
    ``scores`` (2*B*h*S*K*d_qk) and ``values``. Eager keeps q, k, v, idx and the probabilities;
    flash (``flash``) q, k, v, idx, its output and the fp32 log-sum-exp, and recomputes the scores
    in backward (2.5x the forward, as dense flash). With ``sinks`` (h) a sink logit per head joins each
    softmax (Hy4), as in the dense core; its probability is what the keys' leave."""

    @staticmethod
    def _gather(t, idx):  # (B, h, S_kv, e) -> (B, h, S, K, e)
        B, h, _, e = t.shape
        S, K = idx.shape[1:]
        return t.gather(2, idx.view(B, 1, S * K, 1).expand(B, h, S * K, e)).view(B, h, S, K, e)

    @staticmethod
    def _logits(q, ks, valid, scale):
        with matmul_family("scores"):
            s = (q[..., None, :] @ ks.transpose(-2, -1)).squeeze(-2)  # (B, h, S, K)
        s = s.to(torch.promote_types(s.dtype, torch.float32)) * scale
        return s.masked_fill(~valid[:, None], float("-inf"))

    @staticmethod
    def forward(ctx, q, k, v, idx, valid, sinks, flash: bool, scale: float):
        ks, vs = SparseCore._gather(k, idx), SparseCore._gather(v, idx)
        logits = SparseCore._logits(q, ks, valid, scale)
        full = logits
        if sinks is not None:
            B, h, S, _ = logits.shape
            full = torch.cat([logits, sinks.to(logits.dtype).view(1, h, 1, 1).expand(B, h, S, 1)], -1)
        lse = full.logsumexp(dim=-1)  # (B, h, S)
        probs = (logits - lse[..., None]).exp().to(v.dtype)
        with matmul_family("values"):
            out = (probs[..., None, :] @ vs).squeeze(-2)  # (B, h, S, d_v)
        if flash:
            ctx.save_for_backward(q, k, v, idx, out, lse, sinks)
        else:
            ctx.save_for_backward(q, k, v, idx, probs, sinks)
        ctx.flash, ctx.scale, ctx.valid = flash, scale, valid
        return out

    @staticmethod
    def backward(ctx, dout):
        if ctx.flash:
            q, k, v, idx, out, lse, sinks = ctx.saved_tensors
            ks = SparseCore._gather(k, idx)
            probs = (SparseCore._logits(q, ks, ctx.valid, ctx.scale) - lse[..., None]).exp().to(v.dtype)
        else:
            q, k, v, idx, probs, sinks = ctx.saved_tensors
            ks = SparseCore._gather(k, idx)
        vs = SparseCore._gather(v, idx)
        with matmul_family("values"):
            dvs = probs[..., :, None] @ dout[..., None, :]  # (B, h, S, K, d_v)
            dp = (dout[..., None, :] @ vs.transpose(-2, -1)).squeeze(-2)  # (B, h, S, K)
        delta = (dp * probs).sum(-1, keepdim=True)  # (B, h, S, 1); the sink's value is zero
        ds = probs * (dp - delta) * ctx.scale
        dsinks = None
        if sinks is not None:  # the sink's probability times (its zero value - delta)
            p_sink = 1 - probs.sum(-1) if not ctx.flash else (sinks.to(lse.dtype).view(1, -1, 1) - lse).exp()
            dsinks = -(p_sink * delta[..., 0]).sum(dim=(0, 2)).to(sinks.dtype)
        with matmul_family("scores"):
            dq = (ds[..., None, :] @ ks).squeeze(-2)  # (B, h, S, d_qk)
            dks = ds[..., :, None] @ q[..., None, :]  # (B, h, S, K, d_qk)
        B, h, S, K = ds.shape
        where = idx.view(B, 1, S * K, 1)
        dk = torch.zeros_like(k).scatter_add(2, where.expand(B, h, S * K, k.shape[-1]), dks.flatten(2, 3))
        dv = torch.zeros_like(v).scatter_add(2, where.expand(B, h, S * K, v.shape[-1]), dvs.flatten(2, 3))
        return dq, dk, dv, None, None, dsinks, None, None


def make_attention(cfg: ModelConfig, index: int, spec: LayerSpec, kind: str) -> nn.Module:
    cls = LatentAttention if spec.attention == "mla" else Attention
    return cls(cfg, index, spec, kind)
