"""KV sharing (``kv_shared_layers``, Gemma 3n): the last k layers attend to the K and V of the last layer
before them with their span (:func:`.layers.kv_source`), as transformers' Gemma3nTextAttention on its
"reuse" layers. Imported when a model has such a layer (:class:`.architecture.Block`).

A reusing layer is MHA (:class:`.attention.MHA`) without the k and v projections, their norms (``k_norm``,
``v_norm``) and their RoPE, and with nothing in the KV cache; its scores and values read the source's K/V
heads as the source's do (the same keys seen, windows and chunks unchanged), and a decode step reads the
source's cache again.

Saved for backward (:meth:`.attention.MHA.saves`, ``own_kv`` False): q's side. The K and V it reads are the
source's storages, which the source's own attention saved already (flash, and eager's when one K/V head of
one sequence stays a view), so they count there; eager attention's K/V heads expanded to ``h`` are copies of
its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .attention import MHA
from .parts import Linear, Norm

if TYPE_CHECKING:
    from .layers import LayerSpec

_KV = ("attention/k", "attention/v", "attention/k_norm", "attention/v_norm")  # what a reusing layer lacks


class Reuser(MHA):
    """An attention layer that reads an earlier layer's K and V (module docstring)."""

    own_kv = False  # MHA.saves keeps q's side; the K and V read are the source's storages

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

    def _eager_kv(self, spec: LayerSpec, B: int, S: int) -> tuple[int, int]:
        cfg = self.cfg
        k, v = _eager_copies(B, S, cfg.n_heads, cfg.kv_heads, spec.rope and cfg.rotary_dims < cfg.head_size)
        return B * S * cfg.q_width * k, B * S * cfg.q_width * v  # a copy of its own, else the source's storage


def _eager_copies(B: int, S: int, h: int, g: int, contiguous_k: bool) -> tuple[bool, bool]:
    """Whether the batched matmuls of eager attention read copies of K and of V rather than the source's storages
    (which the source's matmuls saved): K/V heads expanded to ``h`` are copied unless one head of one sequence; not
    expanded, a tensor laid out (B, S, g, hd) and read (B, g, S, hd) is copied to merge B and g when all three
    exceed 1. K is so laid out unless partial RoPE concatenated it (``contiguous_k``), V always."""
    if h != g:
        return (not (B == 1 and g == 1),) * 2
    merge = B > 1 and g > 1 and S > 1
    return merge and not contiguous_k, merge
