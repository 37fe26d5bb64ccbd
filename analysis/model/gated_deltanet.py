"""The Gated DeltaNet mixer (``gated_deltanet`` layers; Yang et al. 2024, Qwen3-Next): one descriptor,
everything the analytic families need.

Sizes: ``Hk`` query/key heads of ``dk`` (``linear_num_key_heads``, ``linear_key_head_dim``), ``Hv`` value
heads of ``dv`` (``linear_num_value_heads``, ``linear_value_head_dim``), ``C = 2*Hk*dk + Hv*dv`` conv
channels, ``K = linear_conv_kernel_dim`` taps, ``Q = chunk_size``. Parts (breakdown keys):
``gated_deltanet/in_proj_qkv`` (d -> C), ``gated_deltanet/in_proj_z`` (d -> Hv*dv, the output gate),
``gated_deltanet/in_proj_b`` and ``gated_deltanet/in_proj_a`` (d -> Hv each: beta and the decay's input;
Qwen3-Next fuses them as ``in_proj_qkvz`` and ``in_proj_ba``), ``gated_deltanet/conv1d`` (a depthwise
causal conv of K taps over q, k and v, no bias: ``C*K``), ``gated_deltanet/dt_bias`` and
``gated_deltanet/A_log`` (Hv each), ``gated_deltanet/norm`` (the gated RMSNorm's weight, dv, shared by the
heads), ``gated_deltanet/out_proj`` (Hv*dv -> d). No biases.

The rule is counted as transformers' torch path (``torch_chunk_gated_delta_rule``) and llmcalc's reference
run it, q and k repeated to the Hv value heads: the **chunked form** for a pass over ``S`` tokens
(training, prefill, a later prefill chunk): ``c = ceil(S / Q)`` chunks of Q (padded); per sequence, value
head and chunk ``(k*beta) k^T`` and ``q k^T`` (``2*Q*Q*dk`` each), two unitriangular solves
(``torch.linalg.solve_triangular``: FlopCounterMode counts none, and neither does llmcalc), then from the
chunk's starting state ``w S``, ``q S`` and ``k^T v'`` (``2*Q*dk*dv`` each) and ``(q k^T * decay) v'``
(``2*Q*Q*dv``). Backward is not twice that: the first chunk's state is zeros (no gradient: ``w S`` and
``q S`` compute one product each), the last chunk's new state feeds nothing (no backward), and each solve
adds one product for its matrix's gradient (``2*Q*Q*dk`` and ``2*Q*Q*dv``). The **recurrent step** for a
decode step (one token continuing a cached sequence): ``k^T S``, the rank-one update ``k delta^T`` and
``q^T S``, ``2*dk*dv`` each per value head. The conv: as Mamba-1's (:mod:`.mamba`), ``S + K - 1``
outputs from the start of a sequence, ``C + 1`` continuing one.

The cache (the layer's **state**, per sequence, constant in sequence length): the last ``K`` inputs of
the conv and the delta-rule state, ``C*K + Hv*dk*dv`` values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .keys import checked, integer
from .mixer import Mixer
from .parts import Linear, Norm, Vector, conv_vector
from .tape import Tape
from .variants import Op

if TYPE_CHECKING:
    from ..spec import RunSpec

SILU_COST = 4  # x * sigmoid(x): exp, add, divide, multiply
SIGMOID_COST = 3  # exp, add, divide
SOFTPLUS_COST = 3  # log(1 + exp(x))
L2NORM_COST = 4  # square, sum, rsqrt (per row: counted per element), multiply
GATED_NORM_COST = 9  # square-mean, rsqrt, scale (3), the weight (1), silu(z) (4), the product (1)


@dataclass(frozen=True)
class GatedDeltaNetConfig:
    """The Gated DeltaNet mixer of ``gated_deltanet`` layers (transformers' Qwen3NextGatedDeltaNet): q, k
    (linear_num_key_heads x linear_key_head_dim each), v and the gate z (linear_num_value_heads x
    linear_value_head_dim each), b and a (one per value head) projected from d; a depthwise causal conv1d
    of linear_conv_kernel_dim taps over q, k and v; dt_bias and A_log per value head; a gated RMSNorm
    (weight linear_value_head_dim, per head) and out_proj; no biases. Names mirror transformers'."""

    linear_num_key_heads: int = checked(integer(), 16)  # Hk: query and key heads; divides the value heads
    linear_num_value_heads: int = checked(integer(), 32)  # Hv: value heads (each keeps a dk x dv state)
    linear_key_head_dim: int = checked(integer(), 128)  # dk
    linear_value_head_dim: int = checked(integer(), 128)  # dv
    linear_conv_kernel_dim: int = checked(integer(), 4)  # K: the depthwise convolution's taps
    chunk_size: int = checked(integer(), 64)  # Q: the chunked delta rule's chunk (training and prefill)


class GatedDeltaNet(Mixer):
    """The Gated DeltaNet mixer of a layer (module docstring)."""

    core = ("gated_deltanet/scan", "gated_deltanet/conv1d")  # the conv and the chunked rule: one kernel

    @property
    def chunk(self) -> int:
        return self.sizes[5]

    @property
    def core_io(self) -> tuple[int, int]:
        """q, k and v into the conv (C), beta and the decay (Hv each) in; the rule's output (Hv*dv) out."""
        _, Hv, _, dv, _, _ = self.sizes
        return self.channels + 2 * Hv, Hv * dv

    @property
    def sizes(self) -> tuple[int, int, int, int, int, int]:
        """(Hk, Hv, dk, dv, K, Q)."""
        g = self.cfg.gated_deltanet
        assert g is not None, "a gated_deltanet layer without its mapping"
        return (g.linear_num_key_heads, g.linear_num_value_heads, g.linear_key_head_dim, g.linear_value_head_dim,
                g.linear_conv_kernel_dim, g.chunk_size)

    @property
    def channels(self) -> int:
        """C, the conv's channels: q, k and v."""
        Hk, Hv, dk, dv, _, _ = self.sizes
        return 2 * Hk * dk + Hv * dv

    def linears(self) -> list[Linear]:
        d, (_, Hv, _, dv, _, _) = self.cfg.d_model, self.sizes
        return [Linear("gated_deltanet/in_proj_qkv", d, self.channels, False),
                Linear("gated_deltanet/in_proj_z", d, Hv * dv, False),
                Linear("gated_deltanet/in_proj_b", d, Hv, False), Linear("gated_deltanet/in_proj_a", d, Hv, False),
                Linear("gated_deltanet/out_proj", Hv * dv, d, False)]

    def norms(self) -> list[Norm]:
        return []  # the gated norm's weight is a vector (its FLOPs: ops)

    def vectors(self) -> list[Vector]:
        _, Hv, _, dv, K, _ = self.sizes
        return [conv_vector("gated_deltanet/conv1d", self.channels, K, False), Vector("gated_deltanet/dt_bias", Hv),
                Vector("gated_deltanet/A_log", Hv), Vector("gated_deltanet/norm", dv)]

    @property
    def state_values(self) -> int:
        """Values the layer's state holds per sequence: K conv inputs of q, k and v, and Hv x dk x dv."""
        _, Hv, dk, dv, K, _ = self.sizes
        return self.channels * K + Hv * dk * dv

    @staticmethod
    def step(query_len: int, past: int) -> bool:
        """Whether a pass is a recurrent step: one token continuing a cached sequence."""
        return query_len == 1 and past > 0

    def matmul(self, batch: int, query_len: int, past: int) -> dict[str, int]:
        """The conv and the rule, forward (the linears are generic)."""
        _, Hv, dk, dv, K, Q = self.sizes
        conv = 2 * batch * self.conv_outputs(query_len, past, K) * K * self.channels
        if self.step(query_len, past):
            return {"gated_deltanet/conv1d": conv, "gated_deltanet/scan": 6 * batch * Hv * dk * dv}
        c = -(-query_len // Q)
        rule = 2 * batch * Hv * c * (2 * Q * Q * dk + Q * Q * dv + 3 * Q * dk * dv)
        return {"gated_deltanet/conv1d": conv, "gated_deltanet/scan": rule}

    def backward_matmul(self, batch: int, seq: int) -> dict[str, int]:
        """Backward minus twice forward, over ``seq`` tokens from the start (module docstring): the
        first chunk's two state reads and the last chunk's state update lose ``8*Q*dk*dv`` per sequence
        and head, each chunk's two solves add ``2*Q*Q*(dk + dv)``."""
        _, Hv, dk, dv, _, Q = self.sizes
        c = -(-seq // Q)
        return {"gated_deltanet/scan": batch * Hv * (2 * c * Q * Q * (dk + dv) - 8 * Q * dk * dv)}

    def pass_ops(self, run: RunSpec) -> list[Op]:
        """Forward elementwise ops of a pass (costs: docs/conventions.md)."""
        Hk, Hv, dk, dv, K, Q = self.sizes
        B, S, past = run.batch, run.query_len, run.seq - run.query_len
        T, Ck, E = B * S, Hv * dk, Hv * dv  # keys repeated to the value heads
        out = [Op("gated_deltanet/conv1d", T * self.channels, SILU_COST, 2),
               Op("gated_deltanet/gates", T * Hv, SIGMOID_COST + 1 + SOFTPLUS_COST + 1, 2),  # beta; g
               Op("gated_deltanet/gates", Hv, 2, 2),  # -exp(A_log)
               Op("gated_deltanet/scan", 2 * T * Ck, L2NORM_COST, 3), Op("gated_deltanet/scan", T * Ck, 1, 3)]
        if self.step(S, past):  # decay the state, v - k^T S, times beta, the update, + S
            out += [Op("gated_deltanet/scan", T * Hv, 1, 2), Op("gated_deltanet/scan", T * Hv * dk * dv, 2, 3),
                    Op("gated_deltanet/scan", T * E, 2, 3)]
        else:
            c = -(-S // Q)
            P = B * c * Q * Hv  # padded positions x heads
            out += [Op("gated_deltanet/scan", P * (dk + dv), 1, 3),  # k*beta, v*beta
                    Op("gated_deltanet/scan", P, 5, 2),  # cumsum, exp, total - cumsum, exp
                    Op("gated_deltanet/scan", P * Q, 4, 2),  # the pairwise decay: difference, mask, exp, twice times
                    Op("gated_deltanet/scan", P * dk, 3, 3),  # k*beta*exp, q*exp, k*exp
                    Op("gated_deltanet/scan", B * Hv * c * (dk * dv * 2 + Q * dv * 2), 1, 3)]  # S decay, +; v', y
        out.append(Op("gated_deltanet/norm", T * E, GATED_NORM_COST, 3))
        return out

    def saves(self, tape: Tape, B: int, S: int, x: str) -> None:
        """What the reference mixer (:mod:`analysis.verify.gated_deltanet`) keeps for backward over ``B x
        S`` tokens (a training pass: the chunked rule), in its forward order: in_proj_qkv its input; the conv
        its input (in_proj_qkv's output); at the mixer SiLU's input, sigmoid's output (beta), softplus's
        input and output and exp(A_log) negated; in the rule q and k (the SiLU output's storage, or their
        copies repeated to the value heads) and their l2 norms' rsqrt, the padded q, k, v and beta, k*beta,
        the causal mask (one byte per entry), the pairwise decays, ``(k*beta) k^T`` and ``q k^T`` before and
        after the decay, the solves' outputs u and w, three exps per position and one per chunk, then per
        chunk its starting state, v' and the decayed k (and q, from the second chunk on: the first reads a
        state of zeros, which needs no gradient); the gated norm the rule's padded output, one rsqrt per
        head, the normed output, z, the product and silu(z); out_proj its input."""
        Hk, Hv, dk, dv, _, Q = self.sizes
        T, b, C = B * S, tape.b, self.channels
        c = -(-S // Q)
        P, M = B * Hv * c * Q, B * Hv * c * Q * Q  # padded positions and pairs within chunks, per head
        tape.linear("gated_deltanet/in_proj_qkv", T * self.cfg.d_model * b, T, x)
        tape.save("gated_deltanet/conv1d", T * C * b, "in_proj_qkv output")
        tape.save("gated_deltanet", T * C * b + 3 * T * Hv * b + 2 * Hv * b)  # SiLU, sigmoid, softplus, exp
        qk = T * C * b if Hv == Hk else 2 * T * Hv * dk * b  # the SiLU output's storage, or the repeated copies
        tape.save("gated_deltanet/scan", qk + 2 * T * Hv * b + Q * Q)
        tape.save("gated_deltanet/scan", (P * (4 + 3 * dv + 5 * dk + (dk if c > 1 else 0)) + 5 * M + B * Hv * c
                                          + c * B * Hv * dk * dv) * b)
        tape.save("gated_deltanet/norm", (P * dv + T * Hv + 4 * T * Hv * dv) * b)
        tape.linear("gated_deltanet/out_proj", T * Hv * dv * b, T)
