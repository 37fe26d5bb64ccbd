"""KV sharing (``kv_shared_layers``, Gemma 3n): the last k layers attend to the K and V of the last layer
before them with their span (:func:`.layers.kv_source`), as transformers' Gemma3nTextAttention on its
"reuse" layers. Imported when a model has such a layer (:class:`.architecture.Block`).

A reusing layer is MHA (:class:`.attention.MHA`) without the k and v projections, their norms (``k_norm``,
``v_norm``) and their RoPE, and with nothing in the KV cache; its scores and values read the source's K/V
heads as the source's do (the same keys seen, windows and chunks unchanged), and a decode step reads the
source's cache again.

Saved for backward: q's side as MHA's. The K and V it reads are the source's storages, which the source's
own attention saved already (flash, and eager's when one K/V head of one sequence stays a view), so they
count there; eager attention's K/V heads expanded to ``h`` are copies of its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .attention import MHA, _output, temperature
from .parts import Linear, Norm
from .tape import STAT, Tape, eager_core

if TYPE_CHECKING:
    from .layers import LayerSpec

_KV = ("attention/k", "attention/v", "attention/k_norm", "attention/v_norm")  # what a reusing layer lacks


class Reuser(MHA):
    """An attention layer that reads an earlier layer's K and V (module docstring)."""

    @property
    def kv_values_per_token(self) -> int:
        return 0

    @property
    def rope_elements_per_token(self) -> int:
        return self.cfg.n_heads * self.cfg.rotary_dims  # q alone

    def linears(self) -> list[Linear]:
        return [m for m in super().linears() if m.key not in _KV]

    def norms(self) -> list[Norm]:
        return [n for n in super().norms() if n.key not in _KV]

    def saves(self, tape: Tape, spec: LayerSpec, B: int, S: int, kind: str, x: str) -> None:
        cfg = self.cfg
        T, h, g, b, hd, qw = B * S, cfg.n_heads, cfg.kv_heads, tape.b, cfg.head_size, cfg.q_width
        tape.linear("attention/q", T * cfg.d_model * b, T, x)
        if cfg.attention_gate:
            tape.linear("attention/gate", T * cfg.d_model * b, T, x)
        if cfg.qk_norm == "full":
            tape.norm("attention/q_norm", None, T, qw)
        elif cfg.qk_norm == "head":
            tape.norm("attention/q_norm", None, T * h, hd)
        if temperature(cfg, spec):  # q times a scale per position: the multiply keeps the scale
            tape.save("attention", S * b)
        if kind == "flash":  # q; K and V are the source's
            tape.save("attention/sdpa", T * qw * b)
            tape.save("attention/sdpa", T * qw * b, "attention output")
            tape.save("attention/sdpa", B * h * S * STAT)
            heads_first = (B, S, h, hd) if spec.rope and cfg.rotary_dims < cfg.head_size else None
            _output(tape, cfg, T, "attention output", heads_first=heads_first)
            return
        if kind == "selective":  # the checkpointed core keeps q (K and V: the source's)
            tape.save("attention", T * qw * b)
            _output(tape, cfg, T)
            return
        k, v = (T * qw if copy else 0 for copy in _eager_copies(B, S, h, g, spec.rope and cfg.rotary_dims < hd))
        eager_core(tape, cfg, B, S, hd, k, v)
        _output(tape, cfg, T)


def _eager_copies(B: int, S: int, h: int, g: int, contiguous_k: bool) -> tuple[bool, bool]:
    """Whether the batched matmuls of eager attention read copies of K and of V rather than the source's storages
    (which the source's matmuls saved): K/V heads expanded to ``h`` are copied unless one head of one sequence; not
    expanded, a tensor laid out (B, S, g, hd) and read (B, g, S, hd) is copied to merge B and g when all three
    exceed 1. K is so laid out unless partial RoPE concatenated it (``contiguous_k``), V always."""
    if h != g:
        return (not (B == 1 and g == 1),) * 2
    merge = B > 1 and g > 1 and S > 1
    return merge and not contiguous_k, merge
