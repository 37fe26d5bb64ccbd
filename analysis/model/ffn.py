"""FFN kinds: one descriptor each (a dense MLP, a mixture of experts, the two in one layer).

A descriptor lists its matrices and gives the hidden elements its activation runs over per
token and its own elementwise work. Gated activations (``swiglu``, ``geglu``, ``reglu``, ``sqreglu``) have
three matrices (up, gate, down) of the hidden width, the others two.

``dense``: ``mlp/up``, ``mlp/gate``, ``mlp/down`` of width ``d_ff``, biases ``mlp_bias``.
``moe``: ``moe/router`` (d -> E, bias ``moe.router_bias``); ``moe/experts``, E experts of width
``expert_d_ff`` of which ``experts_per_token`` serve each token; ``moe/shared_experts``, always
active, of width ``shared_expert_d_ff``; both with biases iff ``moe.expert_bias``; and
``moe/shared_expert_gate`` (d -> 1, Qwen2-MoE), whose sigmoid scales the shared output.
Routing: softmax over the router logits, top-k, the k weights renormalized (Mixtral).
Identity experts (``moe.zero_experts`` Z, LongCat-Flash): the router scores ``E + Z`` experts, and
a token routed to an identity expert gets its input back, times the weight: no parameters, no
matmul. How many of a token's k choices reach real experts depends on the data; llmcalc counts the
share routing balanced over all ``E + Z`` experts gives them, ``k*E/(E+Z)`` (a whole number, a
rule: LongCat-Flash's 8 of 12, the average its router is trained to), the identity choices as one
multiply of the input by their summed weight.
Two kinds hold a dense MLP and the experts in one layer (:class:`Pair`): ``dense+moe``
(``moe.beside_mlp``, Gemma 4 26B-A4B: side by side, :class:`DenseMoE`) and ``dense+shortcut_moe``
(``moe.shortcut``, LongCat-Flash: the MoE's output joins after the next layer, :class:`ShortcutMoE`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Protocol

from .parts import Linear, Norm, Vector, make_norm
from .tape import FFN_RESIDUAL, INDEX, Tape, hidden
from .variants import ACTIVATIONS, SOFTMAX_COST, Op

if TYPE_CHECKING:  # see attention.py
    from .config import ModelConfig

SIGMOID_COST = 3  # exp, add, divide
ROUTED_EXPERTS = "moe/experts"  # the routed experts' key: expert parallelism deals them over its GPUs


def mlp(cfg: ModelConfig, key: str, width: int, bias: bool, copies: int = 1, active: int = 1,
        names: tuple[str, str, str] | None = None) -> list[Linear]:
    """up (and gate, for gated activations) d -> width, then down width -> d."""
    up, gate, down = names or (key, key, key)
    mats = [Linear(up, cfg.d_model, width, bias, copies, active)]
    if cfg.gated:
        mats.append(Linear(gate, cfg.d_model, width, bias, copies, active))
    return mats + [Linear(down, width, cfg.d_model, bias, copies, active)]


def activation(cfg: ModelConfig, elements: int) -> Op:
    """The activation over ``elements`` hidden elements: gated ones read gate and up, and write one."""
    return Op("activation", elements, ACTIVATIONS[cfg.activation].cost, 3 if cfg.gated else 2)


def inputs(tape: Tape, cfg: ModelConfig, key: str, nbytes: int, rows: int, x: str | None) -> None:
    """The input ``x`` of stacked experts' up and gate matrices (one storage), over ``rows`` rows
    summed over the experts (an adapter per expert and matrix keeps its A's output)."""
    for _ in range(2 if cfg.gated else 1):
        tape.linear(key, nbytes, rows, x)


class FFNKind(Protocol):
    """What every FFN descriptor gives."""

    @property
    def hidden_per_token(self) -> int: ...  # hidden elements the activation runs over per token

    def linears(self) -> list[Linear]: ...

    def ops(self, tokens: int) -> list[Op]: ...  # its elementwise ops over ``tokens`` tokens

    def norms(self) -> list[Norm]: ...  # norms of its own, beside the block's around it

    def saves(self, tape: Tape, T: int, x: str) -> None: ...

    def vectors(self) -> list[Vector]: ...


class _FFN:
    """A descriptor holds its config and computes everything from it."""

    __slots__ = ("cfg",)

    def __init__(self, cfg: ModelConfig) -> None:
        self.cfg = cfg

    def vectors(self) -> list[Vector]:
        """The activation's learned scalars (xIELU, dense MLPs only: rules.py), one tensor each."""
        return [Vector("mlp/act", 1)] * ACTIVATIONS[self.cfg.activation].scalars

    def norms(self) -> list[Norm]:
        return []


class Dense(_FFN):
    """One MLP for every token: up (and gate) to d_ff, the activation, down."""

    def linears(self) -> list[Linear]:
        return mlp(self.cfg, "mlp", self.cfg.d_ff, self.cfg.mlp_bias,
                   names=("mlp/up", "mlp/gate", "mlp/down"))

    @property
    def hidden_per_token(self) -> int:
        return self.cfg.d_ff

    def ops(self, tokens: int) -> list[Op]:
        return [activation(self.cfg, tokens * self.hidden_per_token)]

    def saves(self, tape: Tape, T: int, x: str) -> None:
        """What the MLP keeps for backward over ``T`` tokens; ``x`` names its input."""
        cfg = self.cfg
        d, b = cfg.d_model, tape.b
        tape.linear("mlp/up", T * d * b, T, x)
        if cfg.gated:
            tape.linear("mlp/gate", T * d * b, T, x)
        # an activation with learned scalars is a module of its own, mlp/act, which keeps what it saves
        act = "mlp/act" if ACTIVATIONS[cfg.activation].scalars else "mlp"
        hidden(tape, cfg, act, "mlp/down", "mlp ", T, cfg.d_ff, "mlp/sub_norm" if cfg.sub_norms else None)


class MoE(_FFN):
    """A router and experts, top-k of them per token, and optional shared experts."""

    def linears(self) -> list[Linear]:
        c, moe = self.cfg, self.cfg.moe
        mats = [Linear("moe/router", c.d_model, moe.num_experts + moe.zero_experts, moe.router_bias)]
        mats += mlp(c, ROUTED_EXPERTS, c.expert_width, moe.expert_bias, moe.num_experts, moe.real_experts_per_token)
        if moe.shared_experts:
            mats += mlp(c, "moe/shared_experts", c.shared_expert_width, moe.expert_bias,
                        moe.shared_experts, moe.shared_experts)
        if moe.shared_expert_gate:
            mats.append(Linear("moe/shared_expert_gate", c.d_model, 1, False))
        return mats

    @property
    def hidden_per_token(self) -> int:
        c, moe = self.cfg, self.cfg.moe
        return moe.real_experts_per_token * c.expert_width + moe.shared_experts * c.shared_expert_width

    def ops(self, tokens: int) -> list[Op]:
        c, moe, T, d = self.cfg, self.cfg.moe, tokens, self.cfg.d_model
        # weight each routed expert's output and accumulate it; add the shared experts' output
        out = [activation(c, T * self.hidden_per_token),
               Op("moe/routing", T * (moe.num_experts + moe.zero_experts), SOFTMAX_COST, 2),
               Op("moe/combine", moe.real_experts_per_token * T * d, 2, 3)]
        identity = moe.experts_per_token - moe.real_experts_per_token
        if identity:  # the identity choices' weights summed, times the input, added
            out += [Op("moe/combine", (identity - 1) * T, 1, 2), Op("moe/combine", T * d, 2, 3)]
        if moe.shared_experts:
            out.append(Op("moe/combine", moe.shared_experts * T * d, 1, 3))
        if moe.shared_expert_gate:  # sigmoid of one logit, times the shared output
            out += [Op("moe/shared_expert_gate", T, SIGMOID_COST, 2), Op("moe/shared_expert_gate", T * d, 1, 3)]
        return out

    def saves(self, tape: Tape, T: int, x: str) -> None:
        """What the mixture keeps for backward over ``T`` tokens (routing as in the module
        docstring; per token slot the expert input, weight, output and weighted output)."""
        self.route(tape, T, x)
        self.run_experts(tape, T, x)

    def route(self, tape: Tape, T: int, x: str | None) -> None:
        """What the router keeps: its input ``x`` and the routing tensors."""
        cfg = self.cfg
        d, b, moe = cfg.d_model, tape.b, cfg.moe
        E, Z, k = moe.num_experts, moe.zero_experts, moe.experts_per_token
        slots = T * moe.real_experts_per_token
        tape.linear("moe/router", T * d * b, T, x)
        # probabilities, their sum after top-k, expert ids and renormalized weights (every choice), the token
        # and choice of each real slot
        tape.save("moe", T * (E + Z) * b + T * b + T * k * (INDEX + b) + slots * 2 * INDEX)
        if Z:  # identity experts: their summed weight times the input keeps both factors (the input is the
            tape.save("moe", T * b)  # router's, which a frozen router under LoRA does not keep)
            tape.save("moe", T * d * b, x)

    def run_experts(self, tape: Tape, T: int, x: str) -> None:
        """What the experts keep over their input ``x``."""
        cfg = self.cfg
        d, b, moe = cfg.d_model, tape.b, cfg.moe
        slots = T * moe.real_experts_per_token  # token slots of real experts, summed over the experts
        inputs(tape, cfg, "moe/experts", slots * d * b, slots, "experts input")  # gathered per slot
        # per slot: its weight, the expert output and the weighted output
        tape.save("moe/experts", slots * (2 * d + 1) * b)
        hidden(tape, cfg, "moe/experts", "moe/experts", "experts ", slots, cfg.expert_width)
        if moe.shared_experts:
            n = T * moe.shared_experts  # every token, through each shared expert: the router's input
            inputs(tape, cfg, "moe/shared_experts", T * d * b, n, x)
            hidden(tape, cfg, "moe/shared_experts", "moe/shared_experts", "shared ", n, cfg.shared_expert_width)
        if moe.shared_expert_gate:
            tape.linear("moe/shared_expert_gate", T * d * b, T, x)
            tape.save("moe", T * b + T * d * b)  # the sigmoid's output and the shared output it scales


class Pair(_FFN):
    """A dense MLP and the experts in one layer (:attr:`parts`): the matrices and hidden widths of both. How
    the two read the layer and join the residual stream is each kind's own (:class:`DenseMoE`,
    :class:`ShortcutMoE`)."""

    __slots__ = ()

    @property
    def parts(self) -> tuple[Dense, MoE]:
        return Dense(self.cfg), MoE(self.cfg)

    def linears(self) -> list[Linear]:
        return [m for f in self.parts for m in f.linears()]

    @property
    def hidden_per_token(self) -> int:
        return sum(f.hidden_per_token for f in self.parts)


class DenseMoE(Pair):
    """Gemma 4 26B-A4B's FFN (``dense+moe``, ``moe.beside_mlp``): a dense MLP and a mixture of experts
    side by side, their outputs each normed (``norm/dense_post``, ``norm/moe_post``) and added. The MLP
    reads the FFN's normed input as a dense layer's does; the experts read the residual stream through
    their own norm (``norm/moe``), and the router reads it through ``moe/router_norm`` (the model's
    norm, its weight the router's scale, no bias), times ``1/sqrt(d)``; each chosen expert's
    renormalized weight is multiplied by its own learned scale (``moe/expert_scale``, one per expert)."""

    __slots__ = ()

    def norms(self) -> list[Norm]:
        c, d = self.cfg, self.cfg.d_model
        return ([make_norm(c, key, d) for key in ("norm/moe", "norm/dense_post", "norm/moe_post")]
                + [Norm("moe/router_norm", d, True, False)])

    def vectors(self) -> list[Vector]:
        return [Vector("moe/expert_scale", self.cfg.moe.num_experts)]

    def ops(self, tokens: int) -> list[Op]:
        # the router's input times 1/sqrt(d), each choice's weight times its expert's scale, the two FFNs' sum
        T, d, k = tokens, self.cfg.d_model, self.cfg.moe.experts_per_token
        return [op for f in self.parts for op in f.ops(T)] + [
            Op("moe/routing", T * d, 1, 2), Op("moe/routing", T * k, 1, 3), Op("moe/combine", T * d, 1, 3)]

    def saves(self, tape: Tape, T: int, x: str) -> None:
        """``x`` names the MLP's input (the FFN's normed input); the block names the residual stream
        before that norm :data:`~analysis.model.tape.FFN_RESIDUAL`, which the two norms here read too."""
        d, b, k = self.cfg.d_model, tape.b, self.cfg.moe.experts_per_token
        dense, moe = self.parts
        dense.saves(tape, T, x)
        tape.norm("norm/dense_post", None, T, d)
        experts = tape.norm("norm/moe", FFN_RESIDUAL, T, d)
        tape.norm("moe/router_norm", FFN_RESIDUAL, T, d)
        moe.route(tape, T, None)  # the router's own input: its norm's output, scaled
        # the product of the renormalized weights and the scales the choices gather keeps both factors;
        # frozen scales (LoRA) need no gradient, so only the scales are kept
        tape.save("moe", (1 + (tape.adapted is None)) * T * k * b)
        moe.run_experts(tape, T, experts)
        tape.norm("norm/moe_post", None, T, d)


class ShortcutMoE(Pair):
    """LongCat-Flash's shortcut layer (``dense+shortcut_moe``, ``moe.shortcut``, every even layer): its dense
    MLP and the MoE both read the FFN's normed input; the MLP's output joins the residual stream in this
    layer, the MoE's after the next layer's FFN (one residual add more, on that layer's stream)."""

    __slots__ = ()

    def vectors(self) -> list[Vector]:
        return [v for f in self.parts for v in f.vectors()]

    def ops(self, tokens: int) -> list[Op]:
        return [op for f in self.parts for op in f.ops(tokens)] + [Op("residual", tokens * self.cfg.d_model, 1, 3)]

    def saves(self, tape: Tape, T: int, x: str) -> None:
        """Both read ``x``, the FFN's normed input (one storage)."""
        for f in self.parts:
            f.saves(tape, T, x)


FFN: dict[str, Callable[[ModelConfig], FFNKind]] = {"dense": Dense, "moe": MoE, "dense+moe": DenseMoE,
                                                    "dense+shortcut_moe": ShortcutMoE}
