"""The inventory of one layer: which matrices, norms and vectors it holds.

Parameters, FLOPs and memory are all computed from this one inventory, so they can never
disagree about what a layer contains. The attention and FFN parts come from their kind's
descriptor (:mod:`analysis.attention`, :mod:`analysis.ffn`); this module adds the block's
norms, which depend on the placement. Keys are the stable breakdown paths (``attention/q``,
``mlp/up``, ``moe/experts``, ``norm/attention``) that the reference modules of
``analysis.verify`` use as their submodule names.

Block structure (``x`` is the residual stream; ``n_a``/``n_m`` the attention/MLP norms):

- sequential, ``pre``:         ``x += attn(n_a(x)); x += mlp(n_m(x))``
- sequential, ``post``:        ``x = n_a(x + attn(x)); x = n_m(x + mlp(x))``
- sequential, ``sandwich``:    ``x += n_a_post(attn(n_a(x))); x += n_m_post(mlp(n_m(x)))`` (Gemma 2/3)
- sequential, ``post_branch``: ``x += n_a_post(attn(x)); x += n_m_post(mlp(x))`` (OLMo 2)
- parallel, ``pre``:           ``x += attn(n_a(x)) + mlp(n_m(x))``, with ``n_m = n_a`` when
  ``parallel_norms`` is 1 (GPT-J, PaLM) and a separate norm when it is 2 (GPT-NeoX)
- parallel, ``sandwich``:      as parallel ``pre`` with a post norm on each branch output
"""

from __future__ import annotations

from dataclasses import dataclass

from .attention import ATTENTION
from .config import ModelConfig
from .ffn import FFN
from .inventory import Linear, Norm, Vector, make_norm
from .plan import LayerSpec


def block_norms(cfg: ModelConfig) -> list[Norm]:
    """The norms around the attention and FFN branches (module docstring)."""
    keys = {"pre": ["attention", "mlp"], "post": ["attention", "mlp"],
            "sandwich": ["attention", "mlp", "attention_post", "mlp_post"],
            "post_branch": ["attention_post", "mlp_post"]}[cfg.norm_placement]
    if cfg.parallel_block and cfg.parallel_norms == 1:
        keys.remove("mlp")
    return [make_norm(cfg, "norm/" + k, cfg.d_model) for k in keys]


def final_norm(cfg: ModelConfig) -> Norm | None:
    """The norm before the LM head (not part of any layer)."""
    return make_norm(cfg, "norm/final", cfg.d_model) if cfg.final_norm else None


@dataclass(frozen=True)
class Layer:
    """One layer of a spec: its attention and FFN descriptors and its inventory."""

    cfg: ModelConfig
    spec: LayerSpec

    @property
    def attention(self):
        return ATTENTION[self.spec.attention](self.cfg)

    @property
    def ffn(self):
        return FFN[self.spec.ffn](self.cfg)

    def linears(self) -> list[Linear]:
        return self.attention.linears() + self.ffn.linears()

    def norms(self) -> list[Norm]:
        return block_norms(self.cfg) + self.attention.norms()

    def vectors(self) -> list[Vector]:
        return self.attention.vectors()
