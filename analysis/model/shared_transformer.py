"""Zamba's shared transformer blocks (``shared_transformer``): one descriptor, everything the analytic
families need.

A few transformer blocks (``blocks``) hold their weights once; each layer listed in ``layers`` runs one
of them before its recurrent mixer, in turn: the j-th such layer block ``j % blocks``. A use, in a
layer ``x -> x + mixer(norm(x + proj(shared(x, e))))`` (``e`` the embeddings entering layer 0)::

    h = norm/shared_attention(concat(x, e))        # 2 d wide
    h = norm/shared_mlp(attention(h))              # q, k, v: 2d -> heads; o: heads -> d (no residual)
    shared(x, e) = mlp(h)                          # a dense MLP of shared_transformer.d_ff, no residual

The attention is the model's MHA (``n_heads``, ``n_kv_heads``, ``head_dim``, else ``2 * d_model /
n_heads``, biases, q/k norms, positions) over the ``2 d`` wide concatenation, full causal; the MLP is the
model's (``activation``, ``mlp_bias``) of width ``d_ff``. **Parameters once, work per use**: the block's
weights (``attention/*``, ``mlp/*``, ``norm/shared_attention``, ``norm/shared_mlp``) are the model's
(:attr:`analysis.model.architecture.Model.shared`, ``blocks`` copies); FLOPs, saved activations and the
KV cache (K and V of every token, per use: each using layer caches its own) are those of each use,
counted with the layer. A use's own parts are the layer's (breakdown keys under ``shared/``):
``shared/proj`` (d -> d, no bias: the block's output projected back, added to the mixer's input) and,
with ``adapter_rank`` r > 0, an adapter on the MLP (``shared/mlp/adapter/a``: d -> r, ``.../b``: r ->
the up and gate widths, no biases; its output added to up's and gate's), and with
``attention_adapters`` one on each of q, k and v (``shared/attention/q_adapter/a``: 2d -> r, ``/b``:
r -> q's width; likewise k and v): Zamba2's per-use LoRA-like adapters, part of the model.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import brief
from .attention import MHA, rope_norms
from .ffn import Dense
from .keys import Checker, boolean, checked, integer
from .layers import LayerSpec
from .parts import Linear, Norm, Vector, make_norm
from .sizes import MAX_LAYERS
from .tape import Tape
from .variants import Op

if TYPE_CHECKING:
    from .config import ModelConfig


def _indices(c: Checker, key: str, value: Any) -> tuple[int, ...]:
    """Layer indices, ascending, each once."""
    if not isinstance(value, list) or not value:
        c.fail(key, f"must be a non-empty list of layer indices, got {brief(value)}")
    out = tuple(integer(0, MAX_LAYERS)(c, key, v) for v in value)
    if list(out) != sorted(set(out)):
        c.fail(key, f"must list layer indices in ascending order, each once, got {brief(value)}")
    return out


@dataclass(frozen=True)
class SharedTransformerConfig:
    """Zamba's shared transformer blocks (module docstring)."""

    layers: tuple[int, ...] = checked(_indices)  # the layers that run a shared block before their mixer
    d_ff: int = checked(integer())  # the shared MLP's width
    blocks: int = checked(integer(), 1)  # distinct blocks, used in turn (Zamba2's num_mem_blocks)
    adapter_rank: int = checked(integer(0), 0)  # r of each use's adapter on the MLP; 0: none (Zamba)
    attention_adapters: bool = checked(boolean, False)  # adapters of rank r on q, k and v too


def shared_spec(cfg: ModelConfig) -> LayerSpec:
    """The shared attention's spec: full causal MHA, rotating q and k under RoPE."""
    return LayerSpec("mha", None, cfg.position == "rope", "dense")


class SharedTransformer:
    """One use of a shared transformer block by a layer (module docstring)."""

    __slots__ = ("cfg",)

    def __init__(self, cfg: ModelConfig) -> None:
        self.cfg = cfg

    @property
    def attention_cfg(self) -> ModelConfig:
        """The attention's config: the model's, over the ``2 d`` wide concatenation."""
        return dataclasses.replace(self.cfg, d_model=2 * self.cfg.d_model)

    @property
    def attention(self) -> MHA:
        return MHA(self.attention_cfg)

    @property
    def spec(self) -> LayerSpec:
        return shared_spec(self.cfg)

    @property
    def mlp(self) -> Dense:
        return Dense(dataclasses.replace(self.cfg, d_ff=self.cfg.shared_transformer.d_ff))

    def _adapted(self) -> list[Linear]:
        """The linears a use adapts: the MLP's up (and gate), and q, k, v with ``attention_adapters``."""
        s = self.cfg.shared_transformer
        if not s.adapter_rank:
            return []
        keys = ("attention/q", "attention/k", "attention/v") if s.attention_adapters else ()
        return [m for m in self.weights() if isinstance(m, Linear) and m.key in keys]

    def weights(self) -> list[Linear | Norm | Vector]:
        """The block's own parts, held once per block (Model.shared); o projects back to ``d_model``."""
        c, d = self.cfg, self.cfg.d_model
        attn = self.attention
        linears = [m._replace(d_out=d) if m.key == "attention/o" else m for m in attn.linears()]
        norms = [make_norm(c, "norm/shared_attention", 2 * d), make_norm(c, "norm/shared_mlp", d)]
        norms += attn.norms() + rope_norms(self.attention_cfg, self.spec)
        return [*linears, *self.mlp.linears(), *norms, *attn.vectors(), *self.mlp.vectors()]

    def own(self) -> list[Linear]:
        """A use's own linears, the layer's: its adapters and the projection back (module docstring)."""
        c, d = self.cfg, self.cfg.d_model
        r = c.shared_transformer.adapter_rank
        out = []
        for m in self._adapted():
            name = m.key.split("/")[1]
            out += [Linear(f"shared/attention/{name}_adapter/a", m.d_in, r, False),
                    Linear(f"shared/attention/{name}_adapter/b", r, m.d_out, False)]
        if r:  # up's and gate's outputs, one adapter
            width = (2 if c.gated else 1) * c.shared_transformer.d_ff
            out += [Linear("shared/mlp/adapter/a", d, r, False), Linear("shared/mlp/adapter/b", r, width, False)]
        return out + [Linear("shared/proj", d, d, False)]

    def linears(self) -> list[Linear]:
        """Every linear a use runs: the block's and its own."""
        return [m for m in self.weights() if isinstance(m, Linear)] + self.own()

    def norms(self) -> list[Norm]:
        return [n for n in self.weights() if isinstance(n, Norm)]

    def vectors(self) -> list[Vector]:
        return [v for v in self.weights() if isinstance(v, Vector)]

    def ops(self, tokens: int) -> list[Op]:
        """A use's elementwise ops beside the attention's (:mod:`analysis.count.flops`) and the norms' and
        biases' (the layer's): the MLP's activation, each adapter's output added to its linear's, and the
        projection's added to the mixer's input."""
        T, d = tokens, self.cfg.d_model
        adds = [Op("shared/adapter", T * m.d_out, 1, 3) for m in self.own() if m.key.endswith("/b")]
        return self.mlp.ops(T) + adds + [Op("residual", T * d, 1, 3)]

    def saves(self, tape: Tape, B: int, S: int, kind: str) -> None:
        """What a use keeps for backward over ``B x S`` tokens, as the reference
        (:mod:`analysis.verify.shared_transformer`) runs it: the first norm its input (the concatenation)
        and statistics; each adapter, run before the linear it joins, its input and A's output; the
        attention (eager, flash or selective ``kind``); the second norm o's output; the MLP; and the
        projection the MLP's output."""
        T, d, b = B * S, self.cfg.d_model, tape.b
        x = tape.norm("norm/shared_attention", None, T, 2 * d)
        own = self.own()

        def adapters(prefix: str, inp: str) -> None:
            for m in own:
                if m.key.startswith(prefix):  # A reads the shared input, B A's output
                    tape.linear(m.key, T * m.d_in * b, T, inp if m.key.endswith("/a") else None)

        adapters("shared/attention/", x)
        self.attention.saves(tape, self.spec, B, S, kind, x)
        h = tape.norm("norm/shared_mlp", None, T, d)
        adapters("shared/mlp/", h)
        self.mlp.saves(tape, T, h)
        tape.linear("shared/proj", T * d * b, T)
