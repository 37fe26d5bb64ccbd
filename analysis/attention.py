"""Attention kinds: one descriptor each, everything the analytic families need to know.

A descriptor lists the kind's matrices, norms and learned vectors, and gives its head count,
the per-head sizes of the scores (q.k) and of the values, the values its KV cache holds per
token, and the q/k elements RoPE rotates per token. Masking, windows, soft-capping, sinks
and position biases act on the score matrix and are the same for every kind
(:mod:`analysis.flops`). The tensors each kind saves for backward are in
:mod:`analysis.activations`, next to the other saved-tensor rules.

``mha``: multi-head attention with ``g = n_kv_heads`` K/V heads (GQA; 1 is MQA).
``mla``: multi-head latent attention (DeepSeek-V2/V3): the query optionally through a
low-rank ``q_a -> norm -> q_b``; K and V compressed into one latent of ``kv_lora_rank`` per
token plus one RoPE key of ``qk_rope_head_dim`` shared by all heads (``kv_a``), decompressed
per head by ``kv_b``. The cache holds the normed latent and the rotated shared key, so every
forward decompresses all the keys it attends to (``kv_b`` runs over keys, not new tokens).
"""

from __future__ import annotations

from dataclasses import dataclass

from .config import ModelConfig
from .inventory import Linear, Norm, Vector, make_norm


@dataclass(frozen=True)
class _Attention:
    """What every kind shares: ``n_heads`` query heads, and optional sinks."""

    cfg: ModelConfig

    @property
    def heads(self) -> int:
        return self.cfg.n_heads

    def vectors(self) -> list[Vector]:
        """Attention sinks (GPT-OSS): one learned logit per head joins each softmax."""
        return [Vector("attention/sinks", self.cfg.n_heads)] if self.cfg.attention_sinks else []


@dataclass(frozen=True)
class MHA(_Attention):
    @property
    def score_dim(self) -> int:
        return self.cfg.head_size

    @property
    def value_dim(self) -> int:
        return self.cfg.head_size

    @property
    def kv_values_per_token(self) -> int:
        return 2 * self.cfg.kv_width  # K and V

    @property
    def rope_elements_per_token(self) -> int:
        return (self.cfg.n_heads + self.cfg.kv_heads) * self.cfg.rotary_dims

    def linears(self) -> list[Linear]:
        c, d, qb = self.cfg, self.cfg.d_model, self.cfg.qkv_bias
        return [Linear("attention/q", d, c.q_width, qb), Linear("attention/k", d, c.kv_width, qb),
                Linear("attention/v", d, c.kv_width, qb), Linear("attention/o", c.q_width, d, c.out_bias)]

    def norms(self) -> list[Norm]:
        c = self.cfg
        if c.qk_norm == "head":  # one norm of head_size applied to every head
            return [make_norm(c, "attention/q_norm", c.head_size, c.n_heads),
                    make_norm(c, "attention/k_norm", c.head_size, c.kv_heads)]
        if c.qk_norm == "full":  # over the whole projection output
            return [make_norm(c, "attention/q_norm", c.q_width), make_norm(c, "attention/k_norm", c.kv_width)]
        return []


@dataclass(frozen=True)
class MLA(_Attention):
    @property
    def score_dim(self) -> int:
        m = self.cfg.mla
        return m.qk_nope_head_dim + m.qk_rope_head_dim

    @property
    def value_dim(self) -> int:
        return self.cfg.mla.v_head_dim

    @property
    def kv_values_per_token(self) -> int:
        return self.cfg.mla.kv_lora_rank + self.cfg.mla.qk_rope_head_dim  # latent + shared rope key

    @property
    def rope_elements_per_token(self) -> int:
        return (self.cfg.n_heads + 1) * self.cfg.mla.qk_rope_head_dim  # every query head, one key

    def linears(self) -> list[Linear]:
        c, m, d, h = self.cfg, self.cfg.mla, self.cfg.d_model, self.cfg.n_heads
        q_out = h * self.score_dim
        if m.q_lora_rank is None:
            q = [Linear("attention/q", d, q_out, c.qkv_bias)]
        else:
            q = [Linear("attention/q_a", d, m.q_lora_rank, c.qkv_bias),
                 Linear("attention/q_b", m.q_lora_rank, q_out, False)]
        return q + [
            Linear("attention/kv_a", d, m.kv_lora_rank + m.qk_rope_head_dim, c.qkv_bias),
            Linear("attention/kv_b", m.kv_lora_rank, h * (m.qk_nope_head_dim + m.v_head_dim), False,
                   over_keys=True),
            Linear("attention/o", h * m.v_head_dim, d, c.out_bias),
        ]

    def norms(self) -> list[Norm]:
        c, m = self.cfg, self.cfg.mla
        q = [] if m.q_lora_rank is None else [make_norm(c, "attention/q_a_norm", m.q_lora_rank)]
        return q + [make_norm(c, "attention/kv_a_norm", m.kv_lora_rank)]


ATTENTION = {"mha": MHA, "mla": MLA}
