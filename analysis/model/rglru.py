"""Griffin's recurrent block with its RG-LRU (``rglru`` layers, RecurrentGemma): one descriptor,
everything the analytic families need.

Sizes: ``d = d_model``, ``E = rglru.width`` channels (default d), ``H = rglru.n_heads`` gate blocks of
``w = E / H`` (default the model's n_heads), ``K = rglru.d_conv`` taps. Parts (breakdown keys):
``rglru/linear_y`` and ``rglru/linear_x`` (d -> E each), ``rglru/conv1d`` (a depthwise causal conv of
K taps over x: ``E*K`` weights and E biases), ``rglru/input_gate`` and ``rglru/recurrent_gate``
(block-diagonal: H blocks of ``w x w`` and E biases each), ``rglru/recurrent_param`` (E) and
``rglru/linear_out`` (E -> d); every linear has a bias. Forward, for ``h`` over ``T = B*S`` tokens::

    y = gelu_tanh(linear_y(h));  x = conv1d(linear_x(h))
    i = sigmoid(input_gate(x));  r = sigmoid(recurrent_gate(x))      # per block: x_blk @ W_blk + b
    a = exp(-8 * r * softplus(recurrent_param))
    u = x * i * sqrt(1 - a^2)                  # at position 0: x * i (the state starts there)
    h_t = a_t * h_{t-1} + u_t                  # the recurrence, token by token
    linear_out(h * y)

FLOPs follow transformers' ``RecurrentGemmaRecurrentBlock``, which llmcalc's reference runs: the gates
are batched matmuls, ``2*T*E*w`` each; the conv is ``F.conv1d(padding=K-1)`` over a pass that starts
the sequence: ``S + K - 1`` outputs per sequence (``2*B*(S+K-1)*K*E``); a pass that continues a cached
sequence (a decode step, a later chunk) convolves the ``K - 1`` cached inputs and its ``C`` new ones
without padding: ``C`` outputs. The recurrence is the **linear-time scan** transformers runs: elementwise
only (one multiply and one add per channel per token, none for the first token of a sequence), no
matmul.

The cache (the layer's **state**, per sequence, constant in sequence length): the last ``K - 1``
inputs of the conv and the recurrence's state h, ``E*(K-1) + E`` values (transformers keeps the same
tensors: ``conv1d_state`` and ``recurrent_states``, the latter always in fp32).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .ffn import SIGMOID_COST
from .keys import checked, integer, optional
from .mixer import Mixer
from .parts import Linear, Norm, Vector, conv_vector
from .tape import Tape
from .variants import ACTIVATIONS, Op

if TYPE_CHECKING:
    from ..spec import RunSpec

SOFTPLUS_COST = 3  # log(1 + exp(x))


@dataclass(frozen=True)
class RGLRUConfig:
    """Griffin's recurrent block of ``rglru`` layers (transformers' RecurrentGemmaRecurrentBlock): linear_y and
    linear_x d -> E, a depthwise causal conv1d of d_conv taps over x, the RG-LRU (input and recurrence gates,
    block-diagonal with n_heads blocks of E / n_heads, and ``recurrent_param``), gelu(y) times its output,
    linear_out E -> d; biases on every linear and the conv."""

    width: int | None = checked(optional(integer()), None)  # E (transformers' lru_width); None: d_model
    d_conv: int = checked(integer(), 4)  # K: the conv's taps (transformers' conv1d_width)
    n_heads: int | None = checked(optional(integer()), None)  # the gates' blocks; None: the model's n_heads


class RGLRU(Mixer):
    """The recurrent block of an rglru layer (module docstring)."""

    # the conv, the gates' batched matmuls and the recurrence: one kernel
    core = ("rglru/scan", "rglru/conv1d", "rglru/input_gate", "rglru/recurrent_gate", "rglru/recurrent_param")

    @property
    def core_io(self) -> tuple[int, int]:
        """x into the conv (E) in; the recurrence's h (E) out."""
        E, _, _ = self.sizes
        return E, E

    @property
    def sizes(self) -> tuple[int, int, int]:
        """(E, H, K)."""
        return self.cfg.rglru_sizes

    def linears(self) -> list[Linear]:
        d, (E, _, _) = self.cfg.d_model, self.sizes
        return [Linear("rglru/linear_y", d, E, True), Linear("rglru/linear_x", d, E, True),
                Linear("rglru/linear_out", E, d, True)]

    def norms(self) -> list[Norm]:
        return []

    def vectors(self) -> list[Vector]:
        E, H, K = self.sizes
        w = E // H
        blocks = ((H, w, w), (H, w))  # block-diagonal: a (w, w) weight and a bias of w per block
        return [conv_vector("rglru/conv1d", E, K, True), Vector("rglru/input_gate", H * w * w + E, blocks),
                Vector("rglru/recurrent_gate", H * w * w + E, blocks), Vector("rglru/recurrent_param", E)]

    @property
    def state_values(self) -> int:
        """Values the layer's state holds per sequence: the last K - 1 conv inputs per channel and h."""
        E, _, K = self.sizes
        return E * (K - 1) + E

    def matmul(self, batch: int, query_len: int, past: int) -> dict[str, int]:
        """The conv and the gates, forward (the linears are generic; the scan is elementwise)."""
        E, H, K = self.sizes
        outputs = query_len + K - 1 if past == 0 else query_len
        gate = 2 * batch * query_len * E * (E // H)
        return {"rglru/conv1d": 2 * batch * outputs * K * E, "rglru/input_gate": gate, "rglru/recurrent_gate": gate}

    def pass_ops(self, run: RunSpec) -> list[Op]:
        """Forward elementwise ops of a pass (costs: docs/conventions.md)."""
        E, _, _ = self.sizes
        B, S, past = run.batch, run.query_len, run.seq - run.query_len
        n = B * S * E
        steps = B * (S - 1) * E if past == 0 else n  # h = a*h + u; the first token of a sequence: h = u
        return [Op("rglru/gate", n, ACTIVATIONS["gelu"].cost, 2),  # gelu (tanh) of y
                Op("rglru/conv1d", n, 1, 0),  # the conv's bias, inside the conv
                Op("rglru/input_gate", n, 1 + SIGMOID_COST, 2),  # bias (in the batched matmul), sigmoid
                Op("rglru/recurrent_gate", n, 1 + SIGMOID_COST, 2),
                Op("rglru/recurrent_param", E, SOFTPLUS_COST, 2),  # softplus, once per pass
                Op("rglru/scan", n, 4, 2),  # -8 * r * softplus (2), a = exp (1), a^2 = a * a (1)
                Op("rglru/scan", n, 3, 2),  # sqrt(1 - a^2 * keep): keep is 0 at position 0, else 1
                Op("rglru/scan", n, 2, 4),  # u = x * i * sqrt(...)
                Op("rglru/scan", steps, 2, 3),  # h = a * h + u
                Op("rglru/output", n, 1, 3)]  # h * gelu(y)

    def saves(self, tape: Tape, B: int, S: int, x: str) -> None:
        """What the reference block (:mod:`analysis.verify.rglru`) keeps for backward over ``B x S`` tokens
        (a pass from the start), in its forward order: linear_y its input; gelu its input; linear_x its
        input (the same); the conv its input; each gate the conv's output (once) and its sigmoid's
        output; ``-8 * r`` and softplus(recurrent_param); a (kept by exp and a * a); the position mask
        (S values); sqrt's output; ``x * i``; in the scan u (the first state is a view of it) and the
        states h_1 .. h_{S-2} each step multiplies; the stacked states and gelu's output; linear_out its
        input."""
        E, _, _ = self.sizes
        T, b, d = B * S, tape.b, self.cfg.d_model
        n = T * E * b
        tape.linear("rglru/linear_y", T * d * b, T, x)
        tape.save("rglru", n)  # gelu's input
        tape.linear("rglru/linear_x", T * d * b, T, x)
        tape.save("rglru/conv1d", n)
        for gate in ("rglru/input_gate", "rglru/recurrent_gate"):
            tape.save(gate, n, "rglru conv output")
            tape.save(gate, n)  # sigmoid's output
        tape.save("rglru", 2 * n + E * b)  # -8 * r and softplus, then a
        tape.save("rglru", S * b + 2 * n)  # the position mask, sqrt's output, x * i
        if S > 1:
            tape.save("rglru/scan", n + (S - 2) * B * E * b)
        tape.save("rglru", 2 * n)  # the states, gelu's output
        tape.linear("rglru/linear_out", n, T)
