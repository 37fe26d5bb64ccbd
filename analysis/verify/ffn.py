"""Feed-forward layers: a dense MLP, a mixture of experts, or the two in one layer.

Conventions:
- gated activations (``swiglu``, ``geglu``, ``reglu``) compute ``act(gate(x)) * up(x)``;
  ``gelu`` and ``geglu`` use the tanh approximation (GPT-2's ``gelu_new``, Gemma);
  ``sqrelu`` is ``relu(x)**2``, ``sqreglu`` ``relu(gate(x))**2 * up(x)`` (BitNet);
- a dense MLP has width ``d_ff`` and biases iff ``mlp_bias``; with ``sub_norms`` (BitNet) a norm
  ``sub_norm`` over its hidden product, before ``down``;
- ``xielu`` (Apertus, transformers' ``XIELUActivation``) is the module ``act`` of the MLP, with
  four learned scalars of shape (1,): ``alpha_p``, ``alpha_n`` (before softplus, as stored) and
  ``beta``, ``eps`` (buffers in transformers, stored in its checkpoint; trained here). It computes
  transformers' formula ``where(x > 0, a_p*x*x + beta*x, (expm1(min(x, eps)) - x)*a_n + beta*x)``,
  ``a_p = softplus(alpha_p)``, ``a_n = beta + softplus(alpha_n)``, as one autograd function that
  keeps its input and the scalars (as a fused kernel does) and differentiates it by hand;
- MoE (Mixtral style): ``router`` (bias iff ``moe.router_bias``), softmax over the router
  logits, top-k, the k weights renormalized to sum to 1; each expert gathers its tokens and
  multiplies them by its own slice of the stacked weights (width ``expert_width``, biases iff
  ``moe.expert_bias``, not ``mlp_bias``), so one expert matrix costs ``2*n_e*d*f`` FLOPs and
  all experts together ``2*T*k*d*f``; shared experts (width ``shared_expert_width``) see
  every token with weight 1, times ``sigmoid(shared_expert_gate(x))`` with the gate
  (Qwen2-MoE: ``d -> 1``, no bias);
- identity experts (``moe.zero_experts`` Z, LongCat-Flash): the router scores ``E + Z`` experts; a
  token's choices of identity experts return its input, so the layer adds the input times the sum
  of their weights (one multiply per token, as a fused kernel computes it), no matmul;
- beside the MLP (``moe.beside_mlp``, Gemma 4 26B-A4B, :func:`dense_and_moe`): the router reads the
  residual stream through ``router_norm`` (the model's norm with a weight, Gemma's router scale, no
  bias) times ``1/sqrt(d)``; after renormalization each choice's weight is multiplied by its expert's
  ``expert_scale`` (one learned scale per expert), as transformers' Gemma4TextRouter does;
- the shortcut-connected MoE (``moe.shortcut``, LongCat-Flash, :func:`dense_and_shortcut_moe`): the
  dense MLP and the experts read the same normed input; the experts' output is left for the next layer.

Routing modes. ``topk`` is the true, data-dependent routing. ``balanced`` assigns token
slot ``s`` (token ``s // k``, choice ``s % k``) to expert ``s % E``: every token gets k
distinct experts and expert ``e`` receives ``n_e = T*k//E + (e < T*k % E)`` slots. With identity
experts a token's first ``k_r = k*E/(E+Z)`` choices are dealt so over the E real experts and the
others go to identity experts: the share routing balanced over all ``E + Z`` experts sends to real
ones (llmcalc's convention, :class:`analysis.model.ffn.MoE`). The meta
device has no data, so it cannot route; ``auto`` uses ``balanced`` there and ``topk`` on
real tensors. This is honest for counting: with no tokens dropped every expert matmul is
linear in its row count, so expert FLOPs and parameters touched depend only on the number
of token slots ``T*k``, not on which expert receives them; the balanced split also gives
the same tensor shapes per expert that a perfectly balanced router would.

Balanced routing also lets the experts run as batched matmuls, which is what makes
``verify`` on a 256-expert model take seconds instead of minutes: experts ``0..r-1`` (``r =
T*k % E``) receive ``n + 1`` slots each and the rest ``n`` (``n = T*k // E``), so the experts
form at most two groups of equal row counts, each one ``bmm`` over a slice of the stacked
weights. Per expert, the FLOPs and the bytes saved for backward are those of the one-expert
loop (a ``bmm`` over ``g`` experts of ``m`` rows is ``g`` matmuls of ``m`` rows); true top-k
routing keeps the loop, since its row counts are data dependent.
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F
from torch import nn

from ..model.config import ModelConfig
from .norms import LayerNorm, RMSNorm, make_norm

ACTIVATIONS = {
    "relu": F.relu, "reglu": F.relu,
    "gelu": functools.partial(F.gelu, approximate="tanh"),
    "geglu": functools.partial(F.gelu, approximate="tanh"),
    "silu": F.silu, "swiglu": F.silu,
    "sqrelu": lambda x: F.relu(x).square(), "sqreglu": lambda x: F.relu(x).square(),
}


class XIELUFunction(torch.autograd.Function):
    """xIELU over ``x`` with its four raw scalars (module docstring); saves x and the scalars."""

    @staticmethod
    def forward(ctx, x, alpha_p, alpha_n, beta, eps):
        ctx.save_for_backward(x, alpha_p, alpha_n, beta, eps)
        a_p, a_n = F.softplus(alpha_p), beta + F.softplus(alpha_n)
        return torch.where(x > 0, a_p * x * x + beta * x, (torch.expm1(torch.minimum(x, eps)) - x) * a_n + beta * x)

    @staticmethod
    def backward(ctx, grad):
        x, alpha_p, alpha_n, beta, eps = ctx.saved_tensors
        a_p, a_n = F.softplus(alpha_p), beta + F.softplus(alpha_n)
        pos = x > 0
        m = torch.minimum(x, eps)
        tie = (x == eps).to(x.dtype) / 2  # minimum's gradient splits a tie, as torch's does
        d_min_x, d_min_eps = (x < eps).to(x.dtype) + tie, (x > eps).to(x.dtype) + tie
        neg = torch.expm1(m) - x  # d/d a_n on the negative side

        def total(t, like):
            return (grad * t).sum().reshape(like.shape)

        zero = torch.zeros_like(x)
        dx = grad * torch.where(pos, 2 * a_p * x + beta, (torch.exp(m) * d_min_x - 1) * a_n + beta)
        d_ap = total(torch.where(pos, x * x, zero), alpha_p) * torch.sigmoid(alpha_p)
        d_an_eff = total(torch.where(pos, zero, neg), alpha_n)  # a_n = beta + softplus(alpha_n)
        d_an = d_an_eff * torch.sigmoid(alpha_n)
        d_beta = total(x, beta) + d_an_eff.reshape(beta.shape)
        d_eps = total(torch.where(pos, zero, a_n * torch.exp(m) * d_min_eps), eps)
        grads = (dx, d_ap, d_an, d_beta, d_eps)
        return tuple(g if need else None for g, need in zip(grads, ctx.needs_input_grad))


class XIELU(nn.Module):
    """xIELU's scalars (transformers' initial values) and the function (module docstring)."""

    def __init__(self, alpha_p: float = 0.8, alpha_n: float = 0.8, beta: float = 0.5, eps: float = -1e-6):
        super().__init__()
        inverse_softplus = lambda v: math.log(math.expm1(v))  # noqa: E731
        self.alpha_p = nn.Parameter(torch.full((1,), inverse_softplus(alpha_p)))
        self.alpha_n = nn.Parameter(torch.full((1,), inverse_softplus(alpha_n - beta)))
        self.beta = nn.Parameter(torch.full((1,), beta))
        self.eps = nn.Parameter(torch.full((1,), eps))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return XIELUFunction.apply(x, self.alpha_p, self.alpha_n, self.beta, self.eps)


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        d, f, b = cfg.d_model, cfg.d_ff, cfg.mlp_bias
        self.act = XIELU() if cfg.activation == "xielu" else ACTIVATIONS[cfg.activation]
        self.up = nn.Linear(d, f, bias=b)
        if cfg.gated:
            self.gate = nn.Linear(d, f, bias=b)
        self.down = nn.Linear(f, d, bias=b)
        if cfg.sub_norms:  # BitNet: a norm over the hidden product, before down
            self.sub_norm = make_norm(cfg, f)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.up(x)  # (B, S, f)
        if hasattr(self, "gate"):  # a Gemma 3n sparse layer cuts the gate's output first (.gemma3n.Sparsity)
            g = self.gate(x)
            h = self.act(self.sparsity(g) if hasattr(self, "sparsity") else g) * h
        else:
            h = self.act(h)
        if hasattr(self, "sub_norm"):
            h = self.sub_norm(h)
        return self.down(h)  # (B, S, d)


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

    def _mlp(self, x: torch.Tensor, experts) -> torch.Tensor:
        """x (n_e, d) through expert ``experts`` (an int), or x (g, m, d) through the experts
        of the slice ``experts``, one bmm each; the result has x's leading shape."""
        def matmul(x, name):
            w, b = getattr(self, name)[experts], getattr(self, name + "_bias")
            if b is None:
                y = x @ w
            else:
                b = b[experts]
                y = torch.addmm(b, x, w) if x.dim() == 2 else torch.baddbmm(b[:, None], x, w)
            # LoRA (analysis.verify.lora): an adapter per expert on this matrix
            return y + self.lora(x, name, experts) if "lora" in self._modules else y

        h = matmul(x, "up")  # (n_e, f) or (g, m, f)
        h = self.act(matmul(x, "gate")) * h if self.gate is not None else self.act(h)
        return matmul(h, "down")  # (n_e, d) or (g, m, d)

    def forward(self, x: torch.Tensor, routes: list) -> torch.Tensor:
        """x (T, d); ``routes`` lists (experts, rows, weights): expert ``e`` (an int) with rows
        and weights (n_e,), or the experts of a slice with rows and weights (g, m) each; rows
        None for every token with weight 1 (shared experts)."""
        y = torch.zeros_like(x)
        for experts, rows, weights in routes:
            if rows is None:
                y = y + self._mlp(x, experts)
            else:
                out = self._mlp(x[rows], experts) * weights[..., None]  # (n_e, d) or (g, m, d)
                y = y.index_add(0, rows.flatten(), out.flatten(0, -2))
        return y  # (T, d)


class MoE(nn.Module):
    def __init__(self, cfg: ModelConfig, routing: str = "auto"):
        super().__init__()
        if routing not in ("auto", "topk", "balanced"):
            raise ValueError(f"routing must be 'auto', 'topk' or 'balanced', got {routing!r}")
        moe = cfg.moe
        self.routing, self.E, self.k = routing, moe.num_experts, moe.experts_per_token
        self.Z, self.k_real = moe.zero_experts, moe.real_experts_per_token  # identity experts (LongCat-Flash)
        if moe.beside_mlp:  # Gemma 4's router (module docstring): a norm whose weight is its scale, per-expert scales
            self.router_norm = RMSNorm(cfg.d_model) if cfg.norm == "rmsnorm" else LayerNorm(cfg.d_model, bias=False)
            self.expert_scale = nn.Parameter(torch.ones(self.E))
        self.router = nn.Linear(cfg.d_model, self.E + self.Z, bias=moe.router_bias)
        self.experts = Experts(cfg, self.E, cfg.expert_width, moe.expert_bias)
        self.n_shared = moe.shared_experts
        if self.n_shared:
            self.shared_experts = Experts(cfg, self.n_shared, cfg.shared_expert_width, moe.expert_bias)
        if moe.shared_expert_gate:
            self.shared_expert_gate = nn.Linear(cfg.d_model, 1, bias=False)

    def forward(self, x: torch.Tensor, residual: torch.Tensor | None = None) -> torch.Tensor:
        """x (B, S, d) the experts' input; ``residual`` the router's (``beside_mlp``), else x."""
        B, S, d = x.shape
        x = x.reshape(B * S, d)
        T, E, k, kr = B * S, self.E, self.k, self.k_real
        if hasattr(self, "router_norm"):
            logits = self.router(self.router_norm(residual.reshape(T, d)) * d ** -0.5)
        else:
            logits = self.router(x)
        probs = logits.softmax(dim=-1)  # (T, E + Z)
        balanced = self.routing == "balanced" or (self.routing == "auto" and x.device.type == "meta")
        if balanced:  # a token's first kr choices real experts, the others identity ones (module docstring)
            ids = (torch.arange(T * kr, device=x.device) % E).view(T, kr)  # (T, kr)
            if self.Z:
                ids = torch.cat([ids, E + (torch.arange(T * (k - kr), device=x.device) % self.Z).view(T, -1)], 1)
        else:
            ids = probs.topk(k, dim=-1).indices  # (T, k)
        weights = probs.gather(1, ids)
        weights = weights / weights.sum(dim=-1, keepdim=True)  # (T, k), renormalized
        if hasattr(self, "expert_scale"):  # each choice's weight times its expert's scale
            weights = weights * self.expert_scale[ids]
        routes = []
        if balanced:  # expert e's j-th slot is e + E*j: experts 0..r-1 get n + 1, the rest n
            n, r = divmod(T * kr, E)
            for lo, hi, m in ((0, r, n + 1), (r, E, n)):
                if hi > lo and m:
                    slot = torch.arange(lo, hi, device=x.device)[:, None] + E * torch.arange(m, device=x.device)
                    token, choice = slot // kr, slot % kr  # (hi - lo, m)
                    routes.append((slice(lo, hi), token, weights[token, choice]))
        else:
            for e in range(E):
                token, choice = (ids == e).nonzero(as_tuple=True)
                routes.append((e, token, weights[token, choice]))
        y = self.experts(x, routes)
        if self.Z:  # identity experts: the input times the sum of their weights
            identity = weights[:, kr:] if balanced else weights * (ids >= E)
            y = y + x * identity.sum(dim=-1, keepdim=True)
        if self.n_shared:
            shared = self.shared_experts(x, [(e, None, None) for e in range(self.n_shared)])  # (T, d)
            if hasattr(self, "shared_expert_gate"):
                shared = shared * torch.sigmoid(self.shared_expert_gate(x))  # (T, 1) gate
            y = y + shared
        return y.view(B, S, d)


def dense_and_moe(mlp: MLP, moe: MoE, norm: nn.ModuleDict, h: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """A ``dense+moe`` layer's FFN (Gemma 4 26B-A4B): the dense MLP over ``h`` (the FFN's normed
    input) through ``norm.dense_post``, plus the experts over ``norm.moe(x)`` routed from ``x`` (the
    residual stream) through ``norm.moe_post``."""
    return norm["dense_post"](mlp(h)) + norm["moe_post"](moe(norm["moe"](x), x))


def dense_and_shortcut_moe(mlp: MLP, moe: MoE, h: torch.Tensor, carry: list) -> torch.Tensor:
    """A ``dense+shortcut_moe`` layer's FFN (LongCat-Flash): the dense MLP over ``h`` (the FFN's normed
    input), returned; the experts over the same ``h``, their output appended to ``carry``, which the next
    layer adds to its output."""
    y = mlp(h)
    carry.append(moe(h))
    return y
