"""FFN kinds: one descriptor each (a dense MLP, a mixture of experts).

A descriptor lists its matrices and gives the hidden elements its activation runs over per
token and its own elementwise work. Gated activations (``swiglu``, ``geglu``, ``reglu``) have
three matrices (up, gate, down) of the hidden width, the others two.

``dense``: ``mlp/up``, ``mlp/gate``, ``mlp/down`` of width ``d_ff``, biases ``mlp_bias``.
``moe``: ``moe/router`` (d -> E, bias ``moe.router_bias``); ``moe/experts``, E experts of width
``expert_d_ff`` of which ``experts_per_token`` serve each token; ``moe/shared_experts``, always
active, of width ``shared_expert_d_ff``; both with biases iff ``moe.expert_bias``; and
``moe/shared_expert_gate`` (d -> 1, Qwen2-MoE), whose sigmoid scales the shared output.
Routing: softmax over the router logits, top-k, the k weights renormalized (Mixtral).
"""

from __future__ import annotations

from dataclasses import dataclass

from .config import ModelConfig
from .inventory import Linear
from .variants import ACTIVATIONS, SOFTMAX_COST

SIGMOID_COST = 3  # exp, add, divide


def mlp(cfg: ModelConfig, key: str, width: int, bias: bool, copies: int = 1, active: int = 1,
        names: tuple[str, str, str] | None = None) -> list[Linear]:
    """up (and gate, for gated activations) d -> width, then down width -> d."""
    up, gate, down = names or (key, key, key)
    mats = [Linear(up, cfg.d_model, width, bias, copies, active)]
    if cfg.gated:
        mats.append(Linear(gate, cfg.d_model, width, bias, copies, active))
    return mats + [Linear(down, width, cfg.d_model, bias, copies, active)]


@dataclass(frozen=True)
class Dense:
    cfg: ModelConfig

    def linears(self) -> list[Linear]:
        return mlp(self.cfg, "mlp", self.cfg.d_ff, self.cfg.mlp_bias,
                   names=("mlp/up", "mlp/gate", "mlp/down"))

    @property
    def hidden_per_token(self) -> int:
        return self.cfg.d_ff

    def elementwise(self, tokens: int) -> dict[str, int]:
        return {"activation": ACTIVATIONS[self.cfg.activation].cost * tokens * self.hidden_per_token}


@dataclass(frozen=True)
class MoE:
    cfg: ModelConfig

    def linears(self) -> list[Linear]:
        c, moe = self.cfg, self.cfg.moe
        mats = [Linear("moe/router", c.d_model, moe.num_experts, moe.router_bias)]
        mats += mlp(c, "moe/experts", c.expert_width, moe.expert_bias, moe.num_experts, moe.experts_per_token)
        if moe.shared_experts:
            mats += mlp(c, "moe/shared_experts", c.shared_expert_width, moe.expert_bias,
                        moe.shared_experts, moe.shared_experts)
        if moe.shared_expert_gate:
            mats.append(Linear("moe/shared_expert_gate", c.d_model, 1, False))
        return mats

    @property
    def hidden_per_token(self) -> int:
        c, moe = self.cfg, self.cfg.moe
        return moe.experts_per_token * c.expert_width + moe.shared_experts * c.shared_expert_width

    def elementwise(self, tokens: int) -> dict[str, int]:
        c, moe, T, d = self.cfg, self.cfg.moe, tokens, self.cfg.d_model
        out = {"activation": ACTIVATIONS[c.activation].cost * T * self.hidden_per_token,
               "moe/routing": SOFTMAX_COST * T * moe.num_experts,
               # weight each routed expert's output and accumulate; add the shared experts
               "moe/combine": 2 * moe.experts_per_token * T * d + moe.shared_experts * T * d}
        if moe.shared_expert_gate:  # sigmoid of one logit, times the shared output
            out["moe/shared_expert_gate"] = SIGMOID_COST * T + T * d
        return out


FFN = {"dense": Dense, "moe": MoE}
