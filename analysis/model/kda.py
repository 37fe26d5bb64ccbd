"""The KDA mixer (Kimi Delta Attention, ``kda`` layers; Kimi Linear): one descriptor, everything the
analytic families need.

KDA is the gated delta rule (:mod:`.gated_deltanet`) with a decay per key channel instead of per head.
Sizes: ``H`` heads of ``dk = dv = d`` (``linear_num_heads``, ``linear_head_dim``: q, k and v share the
head size), ``E = H*d``, ``C = 3E`` conv channels, ``K = linear_conv_kernel_dim`` taps, ``Q =
chunk_size``. Parts (breakdown keys, transformers' names): ``kda/q_proj``, ``kda/k_proj``,
``kda/v_proj`` (d_model -> E each), ``kda/conv1d`` (a depthwise causal conv of K taps over q, k and v,
no bias: ``C*K``), the forget gate's low-rank ``kda/f_a_proj`` (d_model -> d) and ``kda/f_b_proj``
(d -> E) with ``kda/dt_bias`` (E) and ``kda/A_log`` (H), ``kda/b_proj`` (d_model -> H: beta), the
output gate's ``kda/g_a_proj`` (d_model -> d) and ``kda/g_b_proj`` (d -> E), ``kda/o_norm`` (the gated
RMSNorm's weight, d, shared by the heads; the gate through a sigmoid) and ``kda/o_proj`` (E -> d_model).
No biases.

The rule is counted as transformers' torch path (``chunk_kimi_delta_attention``) and llmcalc's
reference run it: the **chunked form** for a pass over ``S`` tokens (training, prefill, a later prefill
chunk), ``c = ceil(S / Q)`` chunks of Q (padded). The per-channel decays make the chunk's pairwise
products elementwise: per sequence, head and chunk the decays ``exp(g_i - g_j)`` (``Q*Q*d``), ``(k*beta)
k^T`` and ``q k^T`` under them (multiplies and sums over ``Q*Q*d``, no matmul), the unitriangular
system inverted by forward substitution (elementwise: ``sum i*i`` multiply-adds over the rows ``i <
Q``); the matmuls are the inverse's products with ``v*beta`` and with the decayed ``k*beta``
(``2*Q*Q*dv`` and ``2*Q*Q*dk``), then from the chunk's starting state ``(q*exp(g)) S``, ``w S`` and the
update ``k'^T v'`` (``2*Q*dk*dv`` each) and ``(q k^T * decay) v'`` (``2*Q*Q*dv``). Backward is twice
that but for the state: the first chunk's state is zeros (no gradient: ``(q*exp(g)) S`` and ``w S`` one
product each) and the last chunk's new state feeds nothing (no backward), ``8*Q*dk*dv`` less per
sequence and head. The **recurrent step** for a decode step (one token continuing a cached sequence):
the state decayed per key channel, ``k^T S``, the rank-one update ``k delta^T`` and ``q^T S``, ``2*dk*dv``
each per head. The conv: as Mamba-1's (:mod:`.mamba`), ``S + K - 1`` outputs from the start of a
sequence, ``C + 1`` continuing one.

The cache (the layer's **state**, per sequence, constant in sequence length): the last ``K`` inputs of
the conv and the delta-rule state, ``C*K + H*dk*dv`` values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .gated_deltanet import L2NORM_COST, SIGMOID_COST, SILU_COST, SOFTPLUS_COST
from .keys import checked, integer
from .mixer import Mixer
from .parts import Linear, Norm, Vector, conv_vector
from .tape import Tape
from .variants import Op

if TYPE_CHECKING:
    from ..spec import RunSpec

GATED_NORM_COST = 8  # square-mean, rsqrt, scale (3), the weight (1), sigmoid(gate) (3), the product (1)


@dataclass(frozen=True)
class KDAConfig:
    """The KDA mixer of ``kda`` layers (transformers' KimiLinearDeltaAttention): q, k and v
    (linear_num_heads x linear_head_dim each) projected from d; a depthwise causal conv1d of
    linear_conv_kernel_dim taps over them; a forget gate per key channel (a low-rank projection through
    linear_head_dim, dt_bias per channel, A_log per head); beta per head; a gated RMSNorm (weight
    linear_head_dim, per head, its gate a low-rank projection) and o_proj; no biases. Names mirror
    transformers'."""

    linear_num_heads: int = checked(integer(), 32)  # H
    linear_head_dim: int = checked(integer(), 128)  # d: q, k and v heads, and the gates' low rank
    linear_conv_kernel_dim: int = checked(integer(), 4)  # K: the depthwise convolution's taps
    chunk_size: int = checked(integer(), 64)  # Q: the chunked rule's chunk (training and prefill)


class KDA(Mixer):
    """The KDA mixer of a layer (module docstring)."""

    core = ("kda/scan", "kda/conv1d")  # the conv and the chunked rule: one kernel

    @property
    def chunk(self) -> int:
        return self.sizes[3]

    @property
    def core_io(self) -> tuple[int, int]:
        """q, k and v into the conv (3E), the per-channel decays (E) and beta (H) in; the rule's output (E) out."""
        H, d, _, _ = self.sizes
        return self.channels + H * d + H, H * d

    @property
    def sizes(self) -> tuple[int, int, int, int]:
        """(H, d, K, Q)."""
        k = self.cfg.kda
        assert k is not None, "a kda layer without its mapping"
        return k.linear_num_heads, k.linear_head_dim, k.linear_conv_kernel_dim, k.chunk_size

    @property
    def channels(self) -> int:
        """C, the conv's channels: q, k and v."""
        H, d, _, _ = self.sizes
        return 3 * H * d

    def linears(self) -> list[Linear]:
        m, (H, d, _, _) = self.cfg.d_model, self.sizes
        E = H * d
        return [Linear("kda/q_proj", m, E, False), Linear("kda/k_proj", m, E, False),
                Linear("kda/v_proj", m, E, False), Linear("kda/f_a_proj", m, d, False),
                Linear("kda/f_b_proj", d, E, False), Linear("kda/b_proj", m, H, False),
                Linear("kda/g_a_proj", m, d, False), Linear("kda/g_b_proj", d, E, False),
                Linear("kda/o_proj", E, m, False)]

    def norms(self) -> list[Norm]:
        return []  # the gated norm's weight is a vector (its FLOPs: ops)

    def vectors(self) -> list[Vector]:
        H, d, K, _ = self.sizes
        return [conv_vector("kda/conv1d", self.channels, K, False), Vector("kda/dt_bias", H * d),
                Vector("kda/A_log", H), Vector("kda/o_norm", d)]

    @property
    def state_values(self) -> int:
        """Values the layer's state holds per sequence: K conv inputs of q, k and v, and H x d x d."""
        H, d, K, _ = self.sizes
        return self.channels * K + H * d * d

    @staticmethod
    def step(query_len: int, past: int) -> bool:
        """Whether a pass is a recurrent step: one token continuing a cached sequence."""
        return query_len == 1 and past > 0

    def matmul(self, batch: int, query_len: int, past: int) -> dict[str, int]:
        """The conv and the rule, forward (the linears are generic)."""
        H, d, K, Q = self.sizes
        conv = 2 * batch * self.conv_outputs(query_len, past, K) * K * self.channels
        if self.step(query_len, past):
            return {"kda/conv1d": conv, "kda/scan": 6 * batch * H * d * d}
        c = -(-query_len // Q)
        return {"kda/conv1d": conv, "kda/scan": 2 * batch * H * c * (3 * Q * Q * d + 3 * Q * d * d)}

    def backward_matmul(self, batch: int, seq: int) -> dict[str, int]:
        """Backward minus twice forward, over ``seq`` tokens from the start (module docstring): the
        first chunk's two state reads and the last chunk's state update, ``8*Q*d*d`` per sequence and
        head."""
        H, d, _, Q = self.sizes
        return {"kda/scan": -8 * batch * H * Q * d * d}

    def pass_ops(self, run: RunSpec) -> list[Op]:
        """Forward elementwise ops of a pass (costs: docs/conventions.md)."""
        H, d, _, Q = self.sizes
        B, S, past = run.batch, run.query_len, run.seq - run.query_len
        T, E = B * S, H * d
        out = [Op("kda/conv1d", T * self.channels, SILU_COST, 2),
               Op("kda/gates", T * E, 1 + SOFTPLUS_COST + 1, 2),  # + dt_bias, softplus, times -exp(A_log)
               Op("kda/gates", H, 2, 2),  # -exp(A_log)
               Op("kda/gates", T * H, SIGMOID_COST, 2),  # beta
               Op("kda/scan", 2 * T * E, L2NORM_COST, 3), Op("kda/scan", T * E, 1, 3)]  # q's scale
        if self.step(S, past):  # decay the state, v - k^T S, times beta, the update, + S
            out += [Op("kda/scan", T * E, 1, 2), Op("kda/scan", T * E * d, 2, 3), Op("kda/scan", T * E, 2, 3)]
        else:
            c = -(-S // Q)
            P = B * c * Q * H  # padded positions x heads
            rows = (Q - 1) * Q * (2 * Q - 1) // 3  # forward substitution: row i, i*i products and sums
            out += [Op("kda/scan", 2 * P * d, 1, 3),  # k*beta, v*beta
                    Op("kda/scan", P * d, 1, 2),  # the cumulated decays
                    Op("kda/scan", P * Q * d, 3, 2),  # the pairwise decays: difference, mask, exp
                    Op("kda/scan", 2 * P * Q * d, 3, 3),  # (k*beta) k^T and q k^T: two multiplies, a sum
                    Op("kda/scan", 4 * P * Q, 1, 2),  # their masks, the system's negation, + I
                    Op("kda/scan", B * H * c * rows, 1, 3),
                    Op("kda/scan", P * d, 6, 3),  # exp(G), k*beta*exp(G), q*exp(G), exp(G_last - G), k*it
                    Op("kda/scan", B * H * c * (d * d * 2 + Q * d * 2 + d), 1, 3)]  # exp(G_last); S decay, +; v', y
        out.append(Op("kda/o_norm", T * E, GATED_NORM_COST, 3))
        return out

    def saves(self, tape: Tape, B: int, S: int, x: str) -> None:
        """What the reference mixer (:mod:`analysis.verify.kda`) keeps for backward over ``B x S`` tokens
        (a training pass: the chunked rule), in its forward order: the projections from x their input (one
        storage), the conv its input (the concatenated q, k, v), f_b_proj and g_b_proj their low-rank
        input; at the mixer SiLU's input, softplus's input and output, exp(A_log) and its negation, beta;
        in the rule the SiLU output's storage (q and k), their l2 norms' rsqrt, the padded beta, v, k and
        q, the two causal masks (one byte per entry), the pairwise decays and the two pairwise products
        under them (``Q*Q*d`` per position), k*beta, the forward substitution's row and block clones (``i
        + i*i`` for the rows ``i < Q``), the inverse, v*beta, exp(G), k*beta*exp(G), the pairwise sums for
        the outputs, exp(G_last - G) and the chunk decays, then per chunk its starting state (zeros for the
        first, kept for the gradient of w), v' and the decayed k (and w and the decayed q, from the second
        chunk on: the first reads a state of zeros, which needs no gradient of its own); the gated norm the
        rule's padded output, one rsqrt per head, the normed output, the gate's sigmoid and the product;
        o_proj its input."""
        H, d, _, Q = self.sizes
        T, b, C, E = B * S, tape.b, self.channels, H * d
        c = -(-S // Q)
        P, M = B * H * c * Q, B * H * c * Q * Q  # padded positions and pairs within chunks, per head
        for key in ("q_proj", "k_proj", "v_proj", "f_a_proj", "b_proj", "g_a_proj"):
            tape.linear("kda/" + key, T * self.cfg.d_model * b, T, x)
        tape.save("kda/conv1d", T * C * b, "q, k, v")
        tape.linear("kda/f_b_proj", T * d * b, T)
        tape.save("kda", (T * C + 2 * T * E + T * H + 2 * H) * b)  # SiLU, softplus, exp, sigmoid
        rows = (Q - 1) * Q * (Q + 1) // 3  # the substitution's clones: sum of i + i*i over i < Q
        tape.save("kda/scan", (T * C + 2 * T * H + P + P * d * (12 if c > 1 else 10) + 3 * M * d + 2 * M
                               + B * H * c * (rows + d) + c * B * H * d * d) * b + 2 * Q * Q)
        tape.linear("kda/g_b_proj", T * d * b, T)
        tape.save("kda/o_norm", (P * d + T * H + 3 * T * E) * b)
        tape.linear("kda/o_proj", T * E * b, T)
