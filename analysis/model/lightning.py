"""MiniMax's lightning attention (``lightning`` layers): one descriptor, everything the analytic families need.

Sizes: ``h = n_heads`` heads of ``hd = head_dim`` (the model's, shared with its softmax-attention layers),
``E = h * hd``, ``Q = lightning.block_size``. Parts (breakdown keys): ``lightning/qkv_proj`` (d -> 3E,
then SiLU), ``lightning/norm`` (the RMSNorm over E, its weight), ``lightning/output_gate`` (d -> E, a
sigmoid gate on the normed output), ``lightning/out_proj`` (E -> d); no biases. The decay rates (one per
head, from the layer's index) and the decay tables transformers derives from them are buffers, not
parameters.

The attention (``lightning/attention``: no parameters) is counted as transformers' MiniMaxLightningAttention
runs it and llmcalc's reference does: the **blocked form** for a pass over ``S`` tokens (training, prefill,
a later prefill chunk): blocks of ``Q`` positions, the last one the remainder ``S - (c-1)*Q`` (no padding);
per sequence, block (``q`` positions) and head the scores ``Q K^T`` (``2*q*q*hd``), their decayed product
with V (``2*q*q*hd``), the queries against the state carried in (``2*q*hd*hd``) and the block's keys and
values into the state carried out (``2*q*hd*hd``): ``4*hd*(sum q^2 + S*hd)`` per sequence and head; the
**recurrent form** for a decode step (one token continuing a cached sequence): ``K^T V`` into the state
and the query against it, ``4*hd*hd`` per token and head.

The cache (the layer's **state**, per sequence, constant in sequence length): ``K^T V`` decayed, an
``hd x hd`` matrix per head, ``E*hd`` values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .keys import checked, integer
from .mixer import Mixer
from .parts import Linear, Norm, Vector
from .tape import Tape
from .variants import Op

if TYPE_CHECKING:
    from ..spec import RunSpec

SILU_COST = 4  # x * sigmoid(x): exp, add, divide, multiply
SIGMOID_COST = 3  # exp, add, divide
RMS_COST = 4  # square-mean, rsqrt, scale (3), the weight (1)


@dataclass(frozen=True)
class LightningConfig:
    """MiniMax's lightning attention of ``lightning`` layers (transformers' MiniMaxLightningAttention):
    qkv_proj d -> 3*h*hd (SiLU), linear attention with a fixed exponential decay per head, computed
    block by block for a pass over a prompt, an RMSNorm over h*hd, a sigmoid gate (output_gate d -> h*hd)
    and out_proj h*hd -> d; h and hd are the model's ``n_heads`` and ``head_dim``."""

    block_size: int = checked(integer(), 256)  # the blocked form's block (training and prefill)


def blocks(S: int, Q: int) -> list[int]:
    """The block sizes of a pass over ``S`` tokens: ``Q`` each, the last the remainder."""
    return [min(Q, S - i) for i in range(0, S, Q)]


class Lightning(Mixer):
    """The lightning attention of a layer (module docstring)."""

    core = ("lightning/attention",)  # the blocked attention and its decays: one kernel

    @property
    def chunk(self) -> int:
        return self.sizes[2]

    @property
    def core_io(self) -> tuple[int, int]:
        """q, k and v (3E) in; the attention's output (E) out."""
        h, hd, _ = self.sizes
        return 3 * h * hd, h * hd

    @property
    def sizes(self) -> tuple[int, int, int]:
        """(h, hd, Q)."""
        c = self.cfg
        assert c.lightning is not None, "a lightning layer without its mapping"
        return c.n_heads, c.head_size, c.lightning.block_size

    def linears(self) -> list[Linear]:
        h, hd, _ = self.sizes
        d, E = self.cfg.d_model, h * hd
        return [Linear("lightning/qkv_proj", d, 3 * E, False), Linear("lightning/output_gate", d, E, False),
                Linear("lightning/out_proj", E, d, False)]

    def norms(self) -> list[Norm]:
        return []  # the output norm's weight is a vector (its FLOPs: pass_ops)

    def vectors(self) -> list[Vector]:
        h, hd, _ = self.sizes
        return [Vector("lightning/norm", h * hd)]

    @property
    def state_values(self) -> int:
        """Values the layer's state holds per sequence: an hd x hd matrix per head."""
        h, hd, _ = self.sizes
        return h * hd * hd

    @staticmethod
    def step(query_len: int, past: int) -> bool:
        """Whether a pass is a recurrent step: one token continuing a cached sequence."""
        return query_len == 1 and past > 0

    def matmul(self, batch: int, query_len: int, past: int) -> dict[str, int]:
        """The attention, forward (the linears are generic)."""
        h, hd, Q = self.sizes
        if self.step(query_len, past):
            return {"lightning/attention": 4 * batch * h * hd * hd}
        squares = sum(q * q for q in blocks(query_len, Q))
        return {"lightning/attention": 4 * batch * h * hd * (squares + query_len * hd)}

    def backward_matmul(self, batch: int, seq: int) -> dict[str, int]:
        """A training pass (the blocked form from the start) spends less than twice its forward: the first
        block's queries meet a state of zeros, which needs no gradient (its product: the queries' gradient
        alone), and the last block's state update reaches no output (no gradient at all):
        ``-2*B*h*hd*hd*(q_first + 2*q_last)``."""
        h, hd, Q = self.sizes
        sizes = blocks(seq, Q)
        return {"lightning/attention": -2 * batch * h * hd * hd * (sizes[0] + 2 * sizes[-1])}

    def pass_ops(self, run: RunSpec) -> list[Op]:
        """Forward elementwise ops of a pass (costs: docs/conventions.md)."""
        h, hd, Q = self.sizes
        B, S, past = run.batch, run.query_len, run.seq - run.query_len
        T, E = B * S, h * hd
        out = [Op("lightning/qkv_proj", T * 3 * E, SILU_COST, 2)]  # SiLU
        if self.step(S, past):  # exp(-rate) per head; the state decayed and added to; nothing per block
            out += [Op("lightning/attention", h, 2, 2), Op("lightning/attention", B * h * hd * hd, 2, 3)]
        else:
            sizes = blocks(S, Q)
            out += [Op("lightning/attention", B * h * sum(q * q for q in sizes), 1, 3),  # scores * decay
                    Op("lightning/attention", 2 * T * E, 1, 3),  # queries and keys times their decay
                    Op("lightning/attention", T * E, 1, 3),  # intra + inter
                    Op("lightning/attention", len(sizes) * h, 3, 2),  # each block's decay exp(-rate * q)
                    Op("lightning/attention", len(sizes) * B * h * hd * hd, 2, 3)]  # the state decayed, added to
        return out + [Op("lightning/norm", T * E, RMS_COST, 2),
                      Op("lightning/output_gate", T * E, SIGMOID_COST + 1, 3)]  # sigmoid, times the normed

    def saves(self, tape: Tape, B: int, S: int, x: str) -> None:
        """What the reference mixer (:mod:`analysis.verify.lightning`) keeps for backward over ``B x S``
        tokens (a training pass: the blocked form), in its forward order: qkv_proj its input; SiLU its
        input; the matmuls q, k and v (views of one contiguous copy, heads first, whose whole storage
        counts); per block the decayed scores, the decayed queries (not in the first block, whose state
        is zeros: the state itself instead), the state carried in, the decayed keys and, after the first
        block, the block's decay factor (one per head; the decay tables are buffers); the norm its input,
        one rsqrt per row and the normed product; the gate's sigmoid and the normed output; out_proj its
        input (output_gate's input is the mixer's)."""
        h, hd, Q = self.sizes
        T, b, d, E = B * S, tape.b, self.cfg.d_model, h * hd
        sizes = blocks(S, Q)
        c = len(sizes)
        tape.linear("lightning/qkv_proj", T * d * b, T, x)
        tape.save("lightning", 3 * T * E * b)  # SiLU's input
        tape.save("lightning/attention", 3 * T * E * b)  # q, k and v
        per_block = B * h * (sum(q * q for q in sizes) + c * hd * hd + hd * (2 * S - sizes[0])) + (c - 1) * h
        tape.save("lightning/attention", per_block * b)
        tape.save("lightning/norm", (2 * T * E + T) * b)  # its input, rsqrt, the normed product
        tape.linear("lightning/output_gate", T * d * b, T, x)
        tape.save("lightning", 2 * T * E * b)  # sigmoid's output, the normed output
        tape.linear("lightning/out_proj", T * E * b, T)
