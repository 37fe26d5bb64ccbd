"""The ``moe`` mapping's schema: imported when a config has one (:func:`.keys.nested`), so that a dense
model never creates its dataclass (start-up, DESIGN.md section 6). The MoE FFN's descriptor is
:class:`.ffn.MoE`."""

from __future__ import annotations

from dataclasses import dataclass

from .keys import boolean, checked, integer, optional


@dataclass(frozen=True)
class MoEConfig:
    """Mixture of experts in place of the MLP of layer ``i`` (beside it, ``beside_mlp``) when
    ``i >= first_dense_layers`` and ``(i + 1) % step == 0``; the other layers keep a dense MLP of width ``d_ff``.
    With ``shortcut`` (LongCat-Flash) the MoE sits beside the MLP of every even layer instead."""

    num_experts: int = checked(integer())
    experts_per_token: int = checked(integer())
    expert_d_ff: int | None = checked(optional(integer()), None)  # None: the model's d_ff
    shared_experts: int = checked(integer(0), 0)  # always-active experts
    shared_expert_d_ff: int | None = checked(optional(integer()), None)  # None: the expert width
    shared_expert_gate: bool = checked(boolean, False)  # sigmoid(x @ w), w: d -> 1 (Qwen2-MoE)
    first_dense_layers: int = checked(integer(0), 0)  # DeepSeek: the first 1 or 3 layers are dense
    step: int = checked(integer(), 1)  # every step-th layer is MoE (Qwen-MoE's decoder_sparse_step)
    router_bias: bool = checked(boolean, False)  # GPT-OSS
    expert_bias: bool = checked(boolean, False)  # biases on every expert matrix (GPT-OSS)
    # the experts beside the layer's dense MLP of width d_ff, the two outputs added (Gemma 4 26B-A4B: the
    # ``dense+moe`` FFN kind, :class:`analysis.model.ffn.DenseMoE`)
    beside_mlp: bool = checked(boolean, False)
    # identity experts the router also scores (LongCat-Flash): no parameters, no matmul; each token sends
    # experts_per_token * num_experts / (num_experts + zero_experts) of its choices to the real ones
    zero_experts: int = checked(integer(0), 0)
    # LongCat-Flash's shortcut-connected MoE: layers in pairs, the MoE beside the first one's dense MLP (reading
    # its input), its output joining the residual stream after the second one (the ``dense+shortcut_moe`` FFN
    # kind, :class:`analysis.model.ffn.ShortcutMoE`)
    shortcut: bool = checked(boolean, False)

    def is_moe_layer(self, i: int) -> bool:
        if self.shortcut:
            return i % 2 == 0
        return i >= self.first_dense_layers and (i + 1) % self.step == 0

    def layer_ffn(self, i: int) -> str:
        """Layer ``i``'s FFN kind (:data:`.ffn.FFN`): ``dense``, ``moe``, the experts beside the dense MLP
        (``dense+moe``, ``beside_mlp``) or the dense MLP with the shortcut-connected MoE (``dense+shortcut_moe``,
        ``shortcut``)."""
        if not self.is_moe_layer(i):
            return "dense"
        return "dense+shortcut_moe" if self.shortcut else "dense+moe" if self.beside_mlp else "moe"

    @property
    def real_experts_per_token(self) -> int:
        """The choices of a token that reach an expert with parameters (the rest: identity experts), under
        routing balanced over all ``num_experts + zero_experts`` (LongCat-Flash: 8 of 12); whole (a rule)."""
        return self.experts_per_token * self.num_experts // (self.num_experts + self.zero_experts)
