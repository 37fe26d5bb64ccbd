"""Feed-forward layers: a dense MLP, or a mixture of experts.

Conventions:
- gated activations (``swiglu``, ``geglu``, ``reglu``) compute ``act(gate(x)) * up(x)``;
  ``gelu`` and ``geglu`` use the tanh approximation (GPT-2's ``gelu_new``, Gemma);
  ``sqrelu`` is ``relu(x)**2``;
- a dense MLP has width ``d_ff`` and biases iff ``mlp_bias``;
- MoE (Mixtral style): ``router`` (bias iff ``moe.router_bias``), softmax over the router
  logits, top-k, the k weights renormalized to sum to 1; each expert gathers its tokens and
  multiplies them by its own slice of the stacked weights (width ``expert_width``, biases iff
  ``moe.expert_bias``, not ``mlp_bias``), so one expert matrix costs ``2*n_e*d*f`` FLOPs and
  all experts together ``2*T*k*d*f``; shared experts (width ``shared_expert_width``) see
  every token with weight 1, times ``sigmoid(shared_expert_gate(x))`` with the gate
  (Qwen2-MoE: ``d -> 1``, no bias).

Routing modes. ``topk`` is the true, data-dependent routing. ``balanced`` assigns token
slot ``s`` (token ``s // k``, choice ``s % k``) to expert ``s % E``: every token gets k
distinct experts and expert ``e`` receives ``n_e = T*k//E + (e < T*k % E)`` slots. The meta
device has no data, so it cannot route; ``auto`` uses ``balanced`` there and ``topk`` on
real tensors. This is honest for counting: with no tokens dropped every expert matmul is
linear in its row count, so expert FLOPs and parameters touched depend only on the number
of token slots ``T*k``, not on which expert receives them; the balanced split also gives
the same tensor shapes per expert that a perfectly balanced router would.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import nn

from ..config import ModelConfig

ACTIVATIONS = {
    "relu": F.relu, "reglu": F.relu,
    "gelu": functools.partial(F.gelu, approximate="tanh"),
    "geglu": functools.partial(F.gelu, approximate="tanh"),
    "silu": F.silu, "swiglu": F.silu,
    "sqrelu": lambda x: F.relu(x).square(),
}


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        d, f, b = cfg.d_model, cfg.d_ff, cfg.mlp_bias
        self.act = ACTIVATIONS[cfg.activation]
        self.up = nn.Linear(d, f, bias=b)
        if cfg.gated:
            self.gate = nn.Linear(d, f, bias=b)
        self.down = nn.Linear(f, d, bias=b)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.up(x)  # (B, S, f)
        h = self.act(self.gate(x)) * h if hasattr(self, "gate") else self.act(h)
        return self.down(h)  # (B, S, d)


def _matmul(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    return x @ w if b is None else torch.addmm(b, x, w)


class Experts(nn.Module):
    """``n`` MLPs of width ``f`` as stacked parameters: ``up``/``gate``
    (n, d, f), ``down`` (n, f, d), biases ``up_bias``/``gate_bias`` (n, f), ``down_bias`` (n, d)."""

    def __init__(self, cfg: ModelConfig, n: int, f: int, biased: bool):
        super().__init__()
        d = cfg.d_model
        self.act = ACTIVATIONS[cfg.activation]
        for name, w_shape, b_shape in (("up", (n, d, f), (n, f)), ("gate", (n, d, f), (n, f)),
                                       ("down", (n, f, d), (n, d))):
            used = name != "gate" or cfg.gated
            weight = nn.Parameter(torch.empty(w_shape).normal_(std=w_shape[1] ** -0.5)) if used else None
            self.register_parameter(name, weight)
            bias = nn.Parameter(torch.zeros(b_shape)) if used and biased else None
            self.register_parameter(name + "_bias", bias)

    def _expert(self, x: torch.Tensor, e: int) -> torch.Tensor:
        def bias(name):
            b = getattr(self, name + "_bias")
            return None if b is None else b[e]

        h = _matmul(x, self.up[e], bias("up"))  # (n_e, f)
        if self.gate is not None:
            h = self.act(_matmul(x, self.gate[e], bias("gate"))) * h
        else:
            h = self.act(h)
        return _matmul(h, self.down[e], bias("down"))  # (n_e, d)

    def forward(self, x: torch.Tensor, routes: list) -> torch.Tensor:
        """x (T, d); ``routes[e]`` is (rows (n_e,), weights (n_e,)), or None for every token
        with weight 1 (shared experts)."""
        y = torch.zeros_like(x)
        for e, route in enumerate(routes):
            if route is None:
                y = y + self._expert(x, e)
            else:
                rows, weights = route
                y = y.index_add(0, rows, self._expert(x[rows], e) * weights[:, None])
        return y  # (T, d)


class MoE(nn.Module):
    def __init__(self, cfg: ModelConfig, routing: str = "auto"):
        super().__init__()
        if routing not in ("auto", "topk", "balanced"):
            raise ValueError(f"routing must be 'auto', 'topk' or 'balanced', got {routing!r}")
        moe = cfg.moe
        self.routing, self.E, self.k = routing, moe.num_experts, moe.experts_per_token
        self.router = nn.Linear(cfg.d_model, self.E, bias=moe.router_bias)
        self.experts = Experts(cfg, self.E, cfg.expert_width, moe.expert_bias)
        self.n_shared = moe.shared_experts
        if self.n_shared:
            self.shared_experts = Experts(cfg, self.n_shared, cfg.shared_expert_width, moe.expert_bias)
        if moe.shared_expert_gate:
            self.shared_expert_gate = nn.Linear(cfg.d_model, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, S, d = x.shape
        x = x.reshape(B * S, d)
        T, E, k = B * S, self.E, self.k
        probs = self.router(x).softmax(dim=-1)  # (T, E)
        balanced = self.routing == "balanced" or (self.routing == "auto" and x.device.type == "meta")
        if balanced:
            ids = (torch.arange(T * k, device=x.device) % E).view(T, k)  # (T, k)
        else:
            ids = probs.topk(k, dim=-1).indices  # (T, k)
        weights = probs.gather(1, ids)
        weights = weights / weights.sum(dim=-1, keepdim=True)  # (T, k), renormalized
        routes = []
        for e in range(E):
            if balanced:
                slot = torch.arange(T * k, device=x.device)[e::E]
                token, choice = slot // k, slot % k
            else:
                token, choice = (ids == e).nonzero(as_tuple=True)
            routes.append((token, weights[token, choice]))
        y = self.experts(x, routes)
        if self.n_shared:
            shared = self.shared_experts(x, [None] * self.n_shared)  # (T, d)
            if hasattr(self, "shared_expert_gate"):
                shared = shared * torch.sigmoid(self.shared_expert_gate(x))  # (T, 1) gate
            y = y + shared
        return y.view(B, S, d)
