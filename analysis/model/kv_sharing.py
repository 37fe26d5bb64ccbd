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

from .attention import MHA
from .parts import Linear, Norm

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
